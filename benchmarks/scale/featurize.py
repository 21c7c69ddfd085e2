"""Featurizing a large molecule CSV: molecules/s, peak memory and the cached second load.

::

    python -m benchmarks.scale.featurize --rows 10000,100000 --out benchmarks/scale/cpu-2core.jsonl
    python -m benchmarks.scale.featurize --rows 1000000 --methods grprune,grprune-cached,dataset \\
        --out benchmarks/scale/cpu-2core.jsonl                                # the 10^6 rows
    python -m benchmarks.scale.featurize --table benchmarks/scale/cpu-2core.jsonl

**Rows.** Unique molecules made offline by :func:`make_molecules`: the BRICS fragments
(``rdkit.Chem.BRICS.BRICSDecompose``) of the first :data:`SOURCE_ROWS` molecules of each
bundled MoleculeNet file (BACE, BBBP, HIV), joined over BRICS-compatible pairs of
attachment points picked by a seeded ``random.Random`` (other attachment points become
hydrogens), sanitized, written as canonical SMILES and kept if new. Two recipes
(``--recipe``): ``pairs`` joins two fragments (the first recipe; its stream runs dry near
350,000 distinct molecules, too few for 10^6), ``chains`` (the default) joins two or, half
the time, three fragments in a chain. A stream is deterministic, so the 10^4-row file is
the first 10^4 rows of the 10^5-row one. (RDKit's own ``BRICS.BRICSBuild`` gives the same
kind of molecules at ~8 ms each here, too slow for 10^6.) Files are cached under
``benchmarks/scale/data/`` (git-ignored).

**Methods**, each timed in its own process on the same CSV (``smiles``, ``label``):

* ``grprune``: :func:`grprune.data.molecule_rows.cached_rows` with the ``ogb`` featurizer
  into an empty data root: read the CSV, featurize (chunks, 2 worker processes), write
  the graph cache;
* ``grprune-cached``: the same call again (the cache hit: the second load);
* ``grprune-old``: the path before (one ``smiles_to_graph`` ``DGLGraph`` per molecule,
  then packed and written as the cache);
* ``ogb``: a loop of :func:`ogb.utils.smiles2graph` keeping every result, as OGB's
  datasets build their graphs;
* ``dgllife``: ``dgllife.data.MoleculeCSVDataset`` with ``smiles_to_bigraph`` and the
  canonical atom/bond featurizers, ``n_jobs=2`` (both cores; joblib's
  ``multiprocessing`` backend), writing its cache;
* ``dataset``: ``load_dataset("molecule-csv")`` (featurize, cache, and the Murcko
  scaffolds for the split and environments), then once more from the caches with the
  first dataset released (``first_peak_rss_mib``: the process's peak before that).

Reported: seconds of the call itself (imports excluded), molecules/s (rows / seconds),
CPU seconds of the process and its workers (``os.wait4``; imports included), peak RSS
(``os.wait4``'s ``ru_maxrss``: on Linux the largest of the process and the workers it
waited for) and of its largest worker process alone (``RUSAGE_CHILDREN`` inside it;
loky/joblib workers that are not waited for are not seen). Forked workers share the
parent's pages until written, so the two peaks are not additive. On a busy machine the
wall-clock rate understates what 2 free cores give; CPU seconds do not.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
#: molecules of each bundled file that are cut into fragments
SOURCE_ROWS = 400
SOURCES = (("moleculenet/bace.csv.gz", "mol", "Class"),
           ("ogbg_molbbbp/bbbp.csv.gz", "smiles", "p_np"),
           ("moleculenet/hiv.csv.gz", "smiles", "HIV_active"))
METHODS = ("grprune", "grprune-cached", "grprune-old", "ogb", "dgllife", "dataset")


# -- the rows ---------------------------------------------------------------------------
def brics_fragments() -> list[str]:
    """Sorted BRICS fragment SMILES (1 to 3 attachment points, at most 25 heavy atoms)
    of the first :data:`SOURCE_ROWS` molecules of each bundled MoleculeNet file."""
    from rdkit import Chem, rdBase
    from rdkit.Chem import BRICS

    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES

    frags: set[str] = set()
    with rdBase.BlockLogs():
        for name, smiles_col, label_col in SOURCES:
            smiles, _ = read_molecule_csv(FILES / name, smiles_col, label_col)
            for s in smiles[:SOURCE_ROWS]:
                mol = Chem.MolFromSmiles(s)
                if mol is not None:
                    frags |= BRICS.BRICSDecompose(mol)
    keep = []
    for f in sorted(frags):
        mol = Chem.MolFromSmiles(f)
        if mol is None:
            continue
        dummies = sum(a.GetAtomicNum() == 0 for a in mol.GetAtoms())
        if 1 <= dummies <= 3 and mol.GetNumAtoms() - dummies <= 25:
            keep.append(f)
    return keep


_FRAGS: list = []  # fragment molecules, set before the pool forks


def _compatible() -> dict[tuple[str, str], str]:
    """BRICS label pair -> bond type symbol, both orders."""
    from rdkit.Chem import BRICS

    pairs = {}
    for group in BRICS.reactionDefs:
        for a, b, bond in group:
            pairs[(a, b)] = pairs[(b, a)] = bond
    return pairs


def _join(spec: tuple) -> str | None:
    """Canonical SMILES of fragments joined at pairs of attachment dummies, other dummies
    made hydrogens; None if RDKit rejects it.

    ``spec`` is ``(fragments, joins)``: fragment indices, and per join ``(x, dx, y, dy,
    bond)``: the ``x``-th fragment's dummy atom ``dx`` bonded to the ``y``-th's ``dy``.
    """
    from rdkit import Chem

    frags, joins = spec
    mols = [_FRAGS[i] for i in frags]
    combined, starts = mols[0], [0]
    for m in mols[1:]:
        starts.append(combined.GetNumAtoms())
        combined = Chem.CombineMols(combined, m)
    rw = Chem.RWMol(combined)
    used = set()
    for x, dx, y, dy, bond in joins:
        gx, gy = starts[x] + dx, starts[y] + dy
        ux = rw.GetAtomWithIdx(gx).GetNeighbors()[0].GetIdx()
        uy = rw.GetAtomWithIdx(gy).GetNeighbors()[0].GetIdx()
        if ux == uy or rw.GetBondBetweenAtoms(ux, uy) is not None:
            return None
        rw.AddBond(ux, uy, Chem.BondType.DOUBLE if bond == "=" else Chem.BondType.SINGLE)
        used |= {gx, gy}
    for atom in rw.GetAtoms():
        if atom.GetAtomicNum() == 0 and atom.GetIdx() not in used:
            atom.SetAtomicNum(1)
            atom.SetIsotope(0)
    for idx in sorted(used, reverse=True):
        rw.RemoveAtom(idx)
    try:
        mol = rw.GetMol()
        Chem.SanitizeMol(mol)
        return Chem.MolToSmiles(Chem.RemoveHs(mol))
    except Exception:
        return None


def _join_many(specs: list) -> list:
    from rdkit import rdBase

    with rdBase.BlockLogs():
        return [_join(s) for s in specs]


#: the recipes: ``pairs`` (two fragments; about 350,000 distinct molecules from these
#: fragments, too few for 10^6) and ``chains`` (two or, half the time, three fragments)
RECIPES = ("pairs", "chains")


def _spec(rng: random.Random, recipe: str, labels: list, partners: dict, slots: dict,
          pairs: dict, dummies: list) -> tuple:
    """One draw of the stream: fragments and joins (:func:`_join`)."""
    la = rng.choice(labels)
    lb = rng.choice(partners[la])
    (ia, da), (ib, db) = rng.choice(slots[la]), rng.choice(slots[lb])
    if recipe == "pairs":  # the first recipe's stream, draw for draw
        return (ia, ib), ((0, da, 1, db, pairs[(la, lb)]),)
    joins = [(0, da, 1, db, pairs[(la, lb)])]
    frags = [ia, ib]
    if rng.random() < 0.5:
        others = [(d, lab) for d, lab in dummies[ib] if d != db and partners.get(lab)]
        if others:
            db2, lb2 = rng.choice(others)
            lc = rng.choice(partners[lb2])
            ic, dc = rng.choice(slots[lc])
            frags.append(ic)
            joins.append((1, db2, 2, dc, pairs[(lb2, lc)]))
    return tuple(frags), tuple(joins)


def make_molecules(n: int, seed: int = 0, workers: int = 2, recipe: str = "chains"
                   ) -> list[str]:
    """The first ``n`` unique molecules of a BRICS recombination stream (module docstring).

    Deterministic for a given ``seed``, ``recipe`` and RDKit version, whatever ``workers``.
    """
    import multiprocessing

    from rdkit import Chem

    frags = brics_fragments()
    _FRAGS[:] = [Chem.MolFromSmiles(f) for f in frags]
    slots: dict[str, list[tuple[int, int]]] = {}  # BRICS label -> (fragment, dummy atom)
    dummies: list[list[tuple[int, str]]] = []  # fragment -> (dummy atom, label)
    for i, mol in enumerate(_FRAGS):
        dummies.append([])
        for atom in mol.GetAtoms():
            if atom.GetAtomicNum() == 0:
                slots.setdefault(str(atom.GetIsotope()), []).append((i, atom.GetIdx()))
                dummies[i].append((atom.GetIdx(), str(atom.GetIsotope())))
    pairs = _compatible()
    labels = sorted(slots)
    partners = {la: [lb for lb in labels if (la, lb) in pairs] for la in labels}
    labels = [la for la in labels if partners[la]]
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    pool = multiprocessing.get_context("fork").Pool(workers) if workers > 1 else None
    try:
        while len(out) < n:
            specs = [_spec(rng, recipe, labels, partners, slots, pairs, dummies)
                     for _ in range(20000)]
            chunks = [specs[i:i + 1000] for i in range(0, len(specs), 1000)]
            results = pool.imap(_join_many, chunks) if pool else map(_join_many, chunks)
            for chunk in results:
                for s in chunk:
                    if s and s not in seen and len(out) < n:
                        seen.add(s)
                        out.append(s)
            print(f"made {len(out):,}/{n:,} molecules", file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.terminate()
    return out


def rows_csv(n: int, seed: int = 0, recipe: str = "chains") -> Path:
    """``benchmarks/scale/data/brics-[chains-]<n>-seed<seed>.csv`` (``smiles,label``; the
    label is the parity of the SMILES' CRC-32), made once, or cut from a larger file of the
    same seed and recipe (``pairs`` files have no recipe in their name)."""
    DATA.mkdir(exist_ok=True)
    (DATA / ".gitignore").write_text("*\n")
    stem = "brics-" if recipe == "pairs" else f"brics-{recipe}-"
    path = DATA / f"{stem}{n}-seed{seed}.csv"
    if path.is_file():
        return path
    larger = sorted((p for p in DATA.glob(f"{stem}*-seed{seed}.csv")
                     if p.name[len(stem):].split("-")[0].isdigit()
                     and int(p.name[len(stem):].split("-")[0]) > n),
                    key=lambda p: int(p.name[len(stem):].split("-")[0]))
    if larger:
        with larger[0].open() as fh:
            lines = [next(fh) for _ in range(n + 1)]
        body = "".join(lines)
    else:
        mols = make_molecules(n, seed, recipe=recipe)
        body = "smiles,label\n" + "".join(f"{s},{zlib.crc32(s.encode()) % 2}\n" for s in mols)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(body)
    os.replace(tmp, path)
    return path


# -- one method in a child process ----------------------------------------------------
def _child(method: str, csv: Path, root: Path) -> dict:
    """Run one method; returns what it measured (seconds exclude imports)."""
    import grprune.compat  # noqa: F401  (DGL import workaround)
    import numpy as np
    import pandas as pd

    out: dict = {}
    if method in ("grprune", "grprune-cached"):
        from grprune.data.molecule_rows import cached_rows
        t = time.perf_counter()
        data = cached_rows(csv, "smiles", "label", "ogb", root)
        out.update(seconds=time.perf_counter() - t, graphs=len(data["graphs"]),
                   cache=data["cache"])
    elif method == "grprune-old":
        import torch

        from grprune.data.cache import write_graph_cache
        from grprune.data.molecules import smiles_to_graph
        from grprune.data.packed import PackedGraphs
        from grprune.errors import DataError
        t = time.perf_counter()
        df = pd.read_csv(csv, dtype=str, keep_default_na=False)
        graphs = []
        for s in df["smiles"]:
            try:
                graphs.append(smiles_to_graph(s))
            except DataError:
                pass
        packed = PackedGraphs.from_graphs(graphs)
        write_graph_cache(root / "old", {"k": 1}, packed,
                          {"labels": torch.zeros(len(graphs), dtype=torch.long)})
        out.update(seconds=time.perf_counter() - t, graphs=len(graphs))
    elif method == "ogb":
        from ogb.utils import smiles2graph
        from rdkit import rdBase
        t = time.perf_counter()
        df = pd.read_csv(csv, dtype=str, keep_default_na=False)
        graphs = []
        with rdBase.BlockLogs():
            for s in df["smiles"]:
                try:
                    graphs.append(smiles2graph(s))
                except Exception:
                    pass
        out.update(seconds=time.perf_counter() - t, graphs=len(graphs))
    elif method == "dgllife":
        import contextlib
        import io

        import joblib
        from dgllife.data import MoleculeCSVDataset
        from dgllife.utils import (CanonicalAtomFeaturizer, CanonicalBondFeaturizer,
                                   smiles_to_bigraph)
        from rdkit import rdBase
        t = time.perf_counter()
        df = pd.read_csv(csv)
        # fork, not loky's fresh interpreters: workers keep grprune.compat's DGL workaround
        with rdBase.BlockLogs(), contextlib.redirect_stdout(io.StringIO()), \
                joblib.parallel_backend("multiprocessing"):
            ds = MoleculeCSVDataset(df, smiles_to_bigraph, CanonicalAtomFeaturizer(),
                                    CanonicalBondFeaturizer(), "smiles",
                                    str(root / "dgllife.bin"), ["label"], n_jobs=2)
        out.update(seconds=time.perf_counter() - t, graphs=len(ds))
    elif method == "dataset":
        from grprune.data import load_dataset
        t = time.perf_counter()
        ds = load_dataset("molecule-csv", root=root, path=str(csv), smiles_column="smiles",
                          label_column="label")
        first, graphs = time.perf_counter() - t, len(ds)
        # the first load's own peak, then the second load without the first in memory
        out["first_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        del ds
        import gc
        gc.collect()
        t = time.perf_counter()
        again = load_dataset("molecule-csv", root=root, path=str(csv), smiles_column="smiles",
                             label_column="label")
        out.update(seconds=first, second_load_s=time.perf_counter() - t, graphs=graphs,
                   cache=again.info["cache"])
    else:
        raise SystemExit(f"unknown method {method!r}; choices: {', '.join(METHODS)}")
    del np
    out["worker_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def measure(method: str, csv: Path, root: Path, timeout: float) -> dict:
    """Run :func:`_child` in a fresh process (which forks the measured one, see
    :func:`_run_child_and_report`); adds the wall time with imports."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", method, str(csv), str(root)],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "GRPRUNE_FEATURIZE_PROGRESS": "plain"})
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}"}
    res = json.loads(stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t
    return res


def _run_child_and_report(method: str, csv: str, root: str) -> None:
    """``--child``: fork the measured work into a grandchild so that its own peak RSS
    can be read exactly (``os.wait4``), then print one JSON line."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            res = _child(method, Path(csv), Path(root))
            os.write(write, json.dumps(res).encode())
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            os._exit(0)
    os.close(write)
    _, status, usage = os.wait4(pid, 0)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    if status != 0 or not data:
        raise SystemExit(f"{method} failed (status {status})")
    res = json.loads(data)
    res["peak_rss_mib"] = usage.ru_maxrss / 1024  # Linux: max over it and its waited workers
    res["cpu_s"] = usage.ru_utime + usage.ru_stime  # it and its waited workers, imports included
    print(json.dumps(res))


def table(paths: list[Path]) -> str:
    """A Markdown table of result records."""
    lines = ["| rows | recipe | method | graphs | seconds | molecules/s | CPU s | peak RSS MiB | "
             "largest worker RSS MiB | second load s | cache |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for path in paths:
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if "error" in r:
                lines.append(f"| {r['rows']:,} | {r.get('recipe', 'pairs')} | {r['method']} | | "
                             f"{r['error']} | | | | | | |")
                continue
            rate = r["rows"] / r["seconds"] if r["seconds"] else float("nan")
            second = f"{r['second_load_s']:.1f}" if "second_load_s" in r else ""
            worker = r["worker_peak_rss_mib"]
            cpu = f"{r['cpu_s']:.0f}" if "cpu_s" in r else ""
            lines.append(f"| {r['rows']:,} | {r.get('recipe', 'pairs')} | {r['method']} | "
                         f"{r['graphs']:,} | "
                         f"{r['seconds']:.1f} | {rate:,.0f} | {cpu} | {r['peak_rss_mib']:,.0f} | "
                         f"{worker:,.0f} | {second} | {r.get('cache', '')} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="10000,100000", help="comma-separated row counts")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    ap.add_argument("--seed", type=int, default=0, help="seed of the molecule recipe")
    ap.add_argument("--recipe", choices=RECIPES, default="chains",
                    help="the molecules: two fragments (pairs) or two or three (chains)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per method")
    ap.add_argument("--out", type=Path, default=None, help="append JSON lines here")
    ap.add_argument("--table", nargs="*", type=Path, help="print the table of these files")
    ap.add_argument("--child", nargs=3, metavar=("METHOD", "CSV", "ROOT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _run_child_and_report(*args.child)
        return
    if args.table:
        print(table(args.table))
        return
    methods = [m for m in args.methods.split(",") if m]
    for n in (int(x) for x in args.rows.split(",")):
        csv = rows_csv(n, args.seed, args.recipe)
        with tempfile.TemporaryDirectory(prefix="grprune-scale-") as tmp:
            for method in methods:
                root = Path(tmp) / ("grprune" if method.startswith("grprune-c") else method)
                root.mkdir(exist_ok=True)
                res = {"rows": n, "recipe": args.recipe, "method": method,
                       **measure(method, csv, root, args.timeout)}
                print(json.dumps(res), flush=True)
                if args.out:
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
