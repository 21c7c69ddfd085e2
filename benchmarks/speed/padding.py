"""Padding overhead of ``train.pad_buckets``: how much larger the padded training batches are.

Usage::

    python -m benchmarks.speed.padding                      # ogbg-molbbbp and GOOD-Motif basis
    python -m benchmarks.speed.padding --data ogbg-molbbbp --epochs 3

For each dataset the script builds the run's :class:`~grprune.trainer.Trainer` with
``train.pad_buckets=true`` (default batch size 64, the whole training split), prints the
buckets :func:`grprune.batch.choose_buckets` chose, then forms ``--epochs`` epochs of training
batches (:meth:`~grprune.trainer.Trainer.prepare_batch`, no step is taken) and reports padded
over real nodes, edges and graphs summed over them, and how often each bucket was used. It
counts sizes, not time.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter

from grprune.data import load_dataset
from grprune.resolve import resolve_config
from grprune.trainer import Trainer

DATASETS = {"ogbg-molbbbp": {}, "good-motif": {"split": "basis"}}


def overhead(name: str, epochs: int, batch_size: int) -> dict:
    """Buckets and padded/real sizes of ``epochs`` epochs of ``name``'s training batches."""
    flags = {"train.pad_buckets": True, "train.device": "cpu", "train.progress": "none",
             "train.batch_size": batch_size, "train.warmup_epochs": 0}
    cfg = resolve_config(data=name, reg="none", selector="none", flags=flags)
    data = load_dataset(name, **DATASETS[name])
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, data, tmp)
        real, padded, used = Counter(), Counter(), Counter()
        for _ in range(epochs):
            for batch in trainer._batches("train", train=True):
                n_real = int(batch.node_mask.sum())
                real.update(nodes=n_real, edges=batch.num_real_edges,
                            graphs=batch.num_real_graphs)
                padded.update(nodes=int(batch.node_graph.shape[0]),
                              edges=int(batch.src.shape[0]), graphs=batch.num_graphs)
                used[(int(batch.node_graph.shape[0]), int(batch.src.shape[0]))] += 1
    return {"data": name, "buckets": trainer.buckets, "used": used,
            "ratio": {k: padded[k] / real[k] for k in real}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=",".join(DATASETS), help="comma list of datasets")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of batches to form")
    parser.add_argument("--batch-size", type=int, default=64, help="graphs per batch")
    args = parser.parse_args()
    for name in args.data.split(","):
        out = overhead(name, args.epochs, args.batch_size)
        print(f"{name}: {len(out['buckets'])} buckets (nodes, edges, bonds, graphs):")
        for b in out["buckets"]:
            print(f"  {b.nodes:6d} {b.edges:6d} {b.bonds:6d} {b.graphs:4d}  used "
                  f"{out['used'][(b.nodes, b.edges)]} times")
        print("  padded / real: " + ", ".join(f"{k} {v:.3f}" for k, v in out["ratio"].items()))


if __name__ == "__main__":
    main()
