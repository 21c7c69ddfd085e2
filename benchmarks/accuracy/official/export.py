"""Export grprune's ogbg-molbbbp (graphs and both splits) in OGB's raw layout, and its
GOOD-Motif (basis, size: graphs, ground-truth edges, environments and parts) as numpy
arrays, for the official PrunE code.

Run with grprune's venv::

    .venv/bin/python -m benchmarks.accuracy.official.export [ROOT] [--dataset NAME ...]
    # ROOT defaults to $OFFICIAL_DATA or /work/official-data; --dataset: ogbg-molbbbp,
    # good-motif (repeatable; default both)

It writes ``ROOT/ogbg_molbbbp/`` (``raw/*.csv.gz``, ``split/scaffold``, ``split/size``,
``RELEASE_v1.txt``) and ``ROOT/good_motif_{basis,size}/`` (``graphs.npz``, ``split.npz``:
:func:`common.write_graph_arrays`), each with ``grprune.json``: grprune's side of the check,
graph count, split sizes, the hash of the graphs (:func:`common.graphs_hash`), of each
split's indices (:func:`common.split_hash`) and, for GOOD-Motif, of the env ids
(:func:`common.array_hash`). ``check.py``, run with the official venv, prints the same
numbers as the official code's loader sees them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from benchmarks.accuracy.official import common

#: (grprune dataset, OGB name, splits exported)
DATASETS = [("ogbg-molbbbp", "ogbg-molbbbp", ("scaffold", "size"))]
#: GOOD datasets exported as numpy arrays, one folder per split: (grprune dataset, splits)
GOOD_DATASETS = [("good-motif", ("basis", "size"))]


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


def good_folder(name: str, split: str) -> str:
    """The export folder of one GOOD dataset split: ``good_motif_basis``."""
    return f"{name.replace('-', '_')}_{split}"


def motif_graphs(dataset) -> list[tuple]:
    """``(x, edge_index, edge_gt, y)`` per graph of grprune's GOOD-Motif, in order: ``x``
    float32 (N, 1) ones, ``edge_index`` int64 (2, E) both directions in grprune's order,
    ``edge_gt`` int64 (E,) 1 on motif edges, ``y`` int (the noisy label)."""
    out = []
    for k in range(len(dataset)):
        g = dataset.graphs[k]
        src, dst = g.edges()
        out.append((g.ndata["feat"].numpy(), np.stack([src.numpy(), dst.numpy()]),
                    g.edata["edge_gt"].numpy(), int(dataset.labels[k])))
    return out


def export_good(root: Path, name: str = "good-motif", splits=("basis", "size"),
                load=None) -> dict:
    """Write grprune's ``name`` (one folder per split, :func:`good_folder`) under ``root``;
    return grprune's side per split (also ``grprune.json`` in its folder).

    ``load(split)`` gives the ``GraphDataset`` of a split (default
    ``grprune.data.load_dataset(name, split=split)``; a test passes a small one)."""
    if load is None:
        from grprune.data import load_dataset

        def load(split):
            return load_dataset(name, split=split)
    report = {}
    for split in splits:
        ds = load(split)
        graphs = motif_graphs(ds)
        env_id = ds.envs.numpy()
        parts = {p: ds.splits[p] for p in common.GOOD_PARTS if p in ds.splits}
        out = common.write_graph_arrays(root / good_folder(name, split), graphs, env_id,
                                        parts)
        side = common.good_side(name, split, graphs, env_id, parts)
        tmp = out / "grprune.json.tmp"
        tmp.write_text(json.dumps(side, indent=1) + "\n")
        tmp.replace(out / "grprune.json")
        report[f"{name} {split}"] = side
    return report


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
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", nargs="?", type=Path,
                   default=Path(os.environ.get("OFFICIAL_DATA", "/work/official-data")),
                   help="export root (default $OFFICIAL_DATA or /work/official-data)")
    choices = [d[0] for d in DATASETS] + [d[0] for d in GOOD_DATASETS]
    p.add_argument("--dataset", action="append", choices=choices,
                   help="dataset to export (repeatable; default all)")
    a = p.parse_args(argv)
    wanted = a.dataset or choices
    problem = unwritable(a.root)
    if problem:  # before any dataset is loaded
        print(f"export.py: {problem}", file=sys.stderr)
        return 2
    try:
        if "ogbg-molbbbp" in wanted:
            for name, side in export(a.root).items():
                print(f"grprune   {name}: {side['n_graphs']} graphs, graphs "
                      f"{side['graphs_hash']}")
                for split, s in side["splits"].items():
                    print(f"grprune   {name} {split}: {s['sizes']} split {s['hash']}")
        for name, splits in GOOD_DATASETS:
            if name in wanted:
                for side in export_good(a.root, name, splits).values():
                    print(common.good_line("grprune ", side))
    except OSError as err:  # a full disk, a folder made read-only meanwhile
        print(f"export.py: cannot write {err.filename or a.root}: {err.strerror or err}",
              file=sys.stderr)
        return 2
    return 0


def unwritable(root: Path) -> str:
    """Why the export cannot be written under ``root`` (``""``: it can): a file in its
    place, or a folder that cannot be made or written to (tried with a temporary file)."""
    import tempfile
    if root.exists() and not root.is_dir():
        return f"{root} is not a folder; name a folder to export into"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as err:
        return (f"cannot write to {err.filename or root}: {err.strerror or err}; name a "
                f"folder you can write to")
    return ""


if __name__ == "__main__":
    raise SystemExit(main())
