"""Export grprune's ogbg-molbbbp (graphs and both splits) in OGB's raw layout for the
official PrunE code.

Run with grprune's venv::

    .venv/bin/python benchmarks/accuracy/official/export.py [ROOT]   # default $OFFICIAL_DATA
                                                                      # or /work/official-data

It writes ``ROOT/ogbg_molbbbp/`` (``raw/*.csv.gz``, ``split/scaffold``, ``split/size``,
``RELEASE_v1.txt``) and ``ROOT/ogbg_molbbbp/grprune.json`` with grprune's side of the check:
graph count, split sizes, the hash of the graphs (:func:`common.graphs_hash`) and of each
split's indices (:func:`common.split_hash`). ``check.py``, run with the official venv,
prints the same numbers as the official code's loader sees them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import numpy as np  # noqa: E402

#: (grprune dataset, OGB name, splits exported)
DATASETS = [("ogbg-molbbbp", "ogbg-molbbbp", ("scaffold", "size"))]


def dataset_graphs(dataset) -> list[tuple]:
    """``(x, edge_index, edge_attr, y)`` per graph of a grprune ``GraphDataset``, in order:
    ``x`` int64 (N, 9) OGB atom features, ``edge_index`` int64 (2, E) both directions,
    ``edge_attr`` int64 (E, 3) OGB bond features, ``y`` int."""
    out = []
    for k in range(len(dataset)):
        g, y = dataset.graphs[k], int(dataset.labels[k])
        src, dst = g.edges()
        out.append((g.ndata["feat"].numpy(), np.stack([src.numpy(),
                    dst.numpy()]), g.edata["feat"].numpy(), y))
    return out


def export(root: Path) -> dict:
    """Write every dataset of :data:`DATASETS` under ``root``; return grprune's side of the
    check per dataset (also written as ``grprune.json`` in its folder)."""
    from grprune.data import load_dataset
    report = {}
    for name, ogb_name, split_names in DATASETS:
        splits, graphs = {}, None
        for split in split_names:
            ds = load_dataset(name, split=split)
            if graphs is None:
                graphs = dataset_graphs(ds)
            splits[split] = {p: ds.splits[p] for p in common.PARTS}
        assert graphs is not None
        out = common.write_ogb_raw(root, ogb_name, graphs, splits)
        side = {"dataset": name, "n_graphs": len(graphs), "graphs_hash":
                common.graphs_hash(graphs),
                "splits": {s: {"sizes": {p: len(v[p]) for p in common.PARTS},
                               "hash": common.split_hash(v)} for s, v in splits.items()}}
        tmp = out / "grprune.json.tmp"
        tmp.write_text(json.dumps(side, indent=1) + "\n")
        tmp.replace(out / "grprune.json")
        report[name] = side
    return report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else os.environ.get("OFFICIAL_DATA", "/work/official-data"))
    report = export(root)
    for name, side in report.items():
        print(f"grprune   {name}: {side['n_graphs']} graphs, graphs {side['graphs_hash']}")
        for split, s in side["splits"].items():
            print(f"grprune   {name} {split}: {s['sizes']} split {s['hash']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
