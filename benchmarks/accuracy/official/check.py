"""The official code's side of the data check: load the exported datasets the way its
``run.py`` does (OGB's ``PygGraphPropPredDataset`` for ogbg-molbbbp, ``good_export.load_good``
for GOOD-Motif, which the patched ``run.py`` calls instead of ``GOODMotif.load``) and print
the counts and hashes that ``export.py`` printed for grprune.

Run with the official code's venv::

    /work/official-venv/bin/python -m benchmarks.accuracy.official.check [ROOT] [--dataset NAME ...]

``--dataset``: ``ogbg-molbbbp``, ``good-motif`` (repeatable; default every dataset
exported under ROOT). Exit code 1 when a number differs from grprune's (``grprune.json`` in
each export folder), 2 when an export is missing. For ogbg-molbbbp it also prints the
official code's own size split for seeds 0-3 (``modelNew.utils.size_split_idx``) when
``OFFICIAL_SRC`` is set, to show how it differs from grprune's.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from benchmarks.accuracy.official import common

#: the repository root, which the child of :func:`official_size_splits` imports from
ROOT = Path(__file__).resolve().parents[3]


def official_side(root: Path, name: str = "ogbg-molbbbp", splits=("scaffold", "size")) -> dict:
    """Counts and hashes of the exported dataset as OGB's PyG loader reads it."""
    from ogb.graphproppred import PygGraphPropPredDataset
    ds = PygGraphPropPredDataset(name=name, root=str(root))
    graphs = [(d.x.numpy(), d.edge_index.numpy(), d.edge_attr.numpy(), int(d.y.view(-1)[0]))
              for d in ds]
    parts = {}
    for split in splits:
        idx = {p: v.numpy() for p, v in ds.get_idx_split(split).items()}
        parts[split] = {"sizes": {p: len(idx[p]) for p in common.PARTS},
                        "hash": common.split_hash(idx)}
    return {"dataset": name, "n_graphs": len(graphs), "graphs_hash": common.graphs_hash(graphs),
            "splits": parts}


def official_size_splits(root: Path, src: Path, seeds=range(4)) -> list[dict]:
    """The size split the official code draws itself, per training seed: computed by
    :func:`own_size_splits` in a child of this interpreter whose ``PYTHONPATH`` holds the
    official checkout ``src`` (its ``modelNew``) and this repository."""
    import subprocess
    path = os.pathsep.join(p for p in (str(src), str(ROOT), os.environ.get("PYTHONPATH", ""))
                           if p)
    done = subprocess.run([sys.executable, "-m", "benchmarks.accuracy.official.check",
                           str(root), "--own-size-splits", ",".join(map(str, seeds))],
                          env={**os.environ, "PYTHONPATH": path}, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the official code's size split failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def own_size_splits(root: Path, seeds=range(4)) -> list[dict]:
    """:func:`official_size_splits` inside the child, where ``modelNew`` is importable."""
    import random

    import numpy as np
    import torch
    from ogb.graphproppred import PygGraphPropPredDataset
    from modelNew.utils import size_split_idx
    ds = PygGraphPropPredDataset(name="ogbg-molbbbp", root=str(root))
    nodes = np.asarray([d.num_nodes for d in ds])
    out = []
    for seed in seeds:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        idx = size_split_idx(ds)
        out.append({"seed": seed, "sizes": {p: len(v) for p, v in idx.items()},
                    "hash": common.split_hash({p: v.numpy() for p, v in idx.items()}),
                    "train_atoms_min": int(nodes[idx["train"].numpy()].min()),
                    "valid_test_atoms_max": int(max(nodes[idx["valid"].numpy()].max(),
                                                    nodes[idx["test"].numpy()].max()))})
    return out


def check_molbbbp(root: Path) -> int | bool:
    """Print ogbg-molbbbp's check; True when identical, 2 when the export is missing."""
    mine = root / "ogbg_molbbbp" / "grprune.json"
    if not mine.is_file():
        print(f"check.py: {mine} is missing; run export.py first", file=sys.stderr)
        return 2
    theirs = json.loads(mine.read_text())
    side = official_side(root)
    print(f"official  {side['dataset']}: {side['n_graphs']} graphs, graphs {side['graphs_hash']}")
    for split, s in side["splits"].items():
        print(f"official  {side['dataset']} {split}: {s['sizes']} split {s['hash']}")
    if os.environ.get("OFFICIAL_SRC"):
        for s in official_size_splits(root, Path(os.environ["OFFICIAL_SRC"])):
            print(f"official  own size split, seed {s['seed']}: {s['sizes']} split {s['hash']}, "
                  f"train >= {s['train_atoms_min']} atoms, valid/test <= "
                  f"{s['valid_test_atoms_max']}")
    same = side == theirs
    if not same:
        print("DIFFERENT from grprune's export: " + json.dumps(theirs))
    return same


def check_good(root: Path, name: str = "good-motif", splits=("basis", "size")) -> int | bool:
    """Print a GOOD dataset's check per split (through ``good_export.load_good``); True when
    every split is identical, 2 when an export is missing."""
    from benchmarks.accuracy.official.good_export import official_side as good_official_side
    same = True
    for split in splits:
        mine = root / f"{name.replace('-', '_')}_{split}" / "grprune.json"
        if not mine.is_file():
            print(f"check.py: {mine} is missing; run export.py --dataset {name} first",
                  file=sys.stderr)
            return 2
        theirs = json.loads(mine.read_text())
        side = good_official_side(root, name, split)
        print(common.good_line("official", side))
        if side != theirs:
            print("DIFFERENT from grprune's export: " + json.dumps(theirs))
            same = False
    return same


def main(argv: list[str] | None = None) -> int:
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", nargs="?", type=Path,
                   default=Path(os.environ.get("OFFICIAL_DATA", "/work/official-data")))
    p.add_argument("--dataset", action="append", choices=["ogbg-molbbbp", "good-motif"],
                   help="dataset to check (repeatable; default every one exported)")
    p.add_argument("--own-size-splits", metavar="SEEDS", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.own_size_splits:  # the child of official_size_splits
        print(json.dumps(own_size_splits(a.root, [int(s) for s in a.own_size_splits.split(",")])))
        return 0
    wanted = a.dataset or [n for n, folder in (("ogbg-molbbbp", "ogbg_molbbbp"),
                                               ("good-motif", "good_motif_basis"))
                           if (a.root / folder).is_dir()] or ["ogbg-molbbbp"]
    same = True
    for name in wanted:
        got = check_molbbbp(a.root) if name == "ogbg-molbbbp" else check_good(a.root, name)
        if got == 2:
            return 2
        same = same and bool(got)
    print("identical: graphs, counts and split indices" if same else
          "DIFFERENT: see above")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
