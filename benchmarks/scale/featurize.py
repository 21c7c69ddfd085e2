"""Featurizing a large molecule CSV: molecules/s, peak memory and the cached second load.

::

    python benchmarks/scale/featurize.py --rows 10000,100000 --out benchmarks/scale/cpu-2core.jsonl
    python benchmarks/scale/featurize.py --rows 1000000 --methods grprune,grprune-cached \\
        --out benchmarks/scale/cpu-2core.jsonl                                # the 10^6 row
    python benchmarks/scale/featurize.py --table benchmarks/scale/cpu-2core.jsonl

**Rows.** Unique molecules made offline by :func:`make_molecules`: the BRICS fragments
(``rdkit.Chem.BRICS.BRICSDecompose``) of the first :data:`SOURCE_ROWS` molecules of each
bundled MoleculeNet file (BACE, BBBP, HIV), joined in pairs over a BRICS-compatible
pair of attachment points picked by a seeded ``random.Random`` (other attachment points
become hydrogens), sanitized, written as canonical SMILES and kept if new. The stream is
deterministic, so the 10^4-row file is the first 10^4 rows of the 10^5-row one. (RDKit's
own ``BRICS.BRICSBuild`` gives the same kind of molecules at ~8 ms each here, too slow for
10^6.) Files are cached under ``benchmarks/scale/data/`` (git-ignored).

**Methods**, each timed in its own process on the same CSV (``smiles``, ``label``):

* ``grprune``: :func:`grprune.data.molecule_csv.cached_rows` with the ``ogb`` featurizer
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
  scaffolds for the split and environments), then once more from the caches.

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

    from grprune.data.molecules import read_molecule_csv
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


def _join(spec: tuple[int, int, int, int, str]) -> str | None:
    """Canonical SMILES of fragment ``ia`` joined to ``ib`` at atoms ``da``/``db`` (their
    attachment dummies), other dummies made hydrogens; None if RDKit rejects it."""
    from rdkit import Chem

    ia, da, ib, db, bond = spec
    a, b = _FRAGS[ia], _FRAGS[ib]
    rw = Chem.RWMol(Chem.CombineMols(a, b))
    da_, db_ = da, a.GetNumAtoms() + db
    ua = rw.GetAtomWithIdx(da_).GetNeighbors()[0].GetIdx()
    ub = rw.GetAtomWithIdx(db_).GetNeighbors()[0].GetIdx()
    rw.AddBond(ua, ub, Chem.BondType.DOUBLE if bond == "=" else Chem.BondType.SINGLE)
    for atom in rw.GetAtoms():
        if atom.GetAtomicNum() == 0 and atom.GetIdx() not in (da_, db_):
            atom.SetAtomicNum(1)
            atom.SetIsotope(0)
    for idx in sorted((da_, db_), reverse=True):
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


def make_molecules(n: int, seed: int = 0, workers: int = 2) -> list[str]:
    """The first ``n`` unique molecules of the BRICS recombination stream (module docstring).

    Deterministic for a given ``seed`` and RDKit version, whatever ``workers``.
    """
    import multiprocessing

    from rdkit import Chem

    frags = brics_fragments()
    _FRAGS[:] = [Chem.MolFromSmiles(f) for f in frags]
    slots: dict[str, list[tuple[int, int]]] = {}  # BRICS label -> (fragment, dummy atom)
    for i, mol in enumerate(_FRAGS):
        for atom in mol.GetAtoms():
            if atom.GetAtomicNum() == 0:
                slots.setdefault(str(atom.GetIsotope()), []).append((i, atom.GetIdx()))
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
            specs = []
            for _ in range(20000):
                la = rng.choice(labels)
                lb = rng.choice(partners[la])
                (ia, da), (ib, db) = rng.choice(slots[la]), rng.choice(slots[lb])
                specs.append((ia, da, ib, db, pairs[(la, lb)]))
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


def rows_csv(n: int, seed: int = 0) -> Path:
    """``benchmarks/scale/data/brics-<n>-seed<seed>.csv`` (``smiles,label``; the label is the
    parity of the SMILES' CRC-32), made once, or cut from a larger file of the same seed."""
    DATA.mkdir(exist_ok=True)
    (DATA / ".gitignore").write_text("*\n")
    path = DATA / f"brics-{n}-seed{seed}.csv"
    if path.is_file():
        return path
    larger = sorted((p for p in DATA.glob(f"brics-*-seed{seed}.csv")
                     if int(p.name.split("-")[1]) > n), key=lambda p: int(p.name.split("-")[1]))
    if larger:
        with larger[0].open() as fh:
            lines = [next(fh) for _ in range(n + 1)]
        body = "".join(lines)
    else:
        mols = make_molecules(n, seed)
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
        from grprune.data.molecule_csv import cached_rows
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
        first = time.perf_counter() - t
        t = time.perf_counter()
        again = load_dataset("molecule-csv", root=root, path=str(csv), smiles_column="smiles",
                             label_column="label")
        out.update(seconds=first, second_load_s=time.perf_counter() - t, graphs=len(ds),
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
    lines = ["| rows | method | graphs | seconds | molecules/s | CPU s | peak RSS MiB | largest "
             "worker RSS MiB | second load s | cache |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for path in paths:
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if "error" in r:
                lines.append(f"| {r['rows']:,} | {r['method']} | | {r['error']} | | | | | | |")
                continue
            rate = r["rows"] / r["seconds"] if r["seconds"] else float("nan")
            second = f"{r['second_load_s']:.1f}" if "second_load_s" in r else ""
            worker = r["worker_peak_rss_mib"]
            cpu = f"{r['cpu_s']:.0f}" if "cpu_s" in r else ""
            lines.append(f"| {r['rows']:,} | {r['method']} | {r['graphs']:,} | "
                         f"{r['seconds']:.1f} | {rate:,.0f} | {cpu} | {r['peak_rss_mib']:,.0f} | "
                         f"{worker:,.0f} | {second} | {r.get('cache', '')} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="10000,100000", help="comma-separated row counts")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    ap.add_argument("--seed", type=int, default=0, help="seed of the molecule recipe")
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
        csv = rows_csv(n, args.seed)
        with tempfile.TemporaryDirectory(prefix="grprune-scale-") as tmp:
            for method in methods:
                root = Path(tmp) / ("grprune" if method.startswith("grprune-c") else method)
                root.mkdir(exist_ok=True)
                res = {"rows": n, "method": method, **measure(method, csv, root, args.timeout)}
                print(json.dumps(res), flush=True)
                if args.out:
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
