"""One training epoch of grprune at several commits, side by side in one run.

Usage::

    python -m benchmarks.speed.commits 8ffd624 HEAD --rounds 3 \\
        --out benchmarks/speed/commits-cpu-2core.jsonl

Each commit is checked out into a detached ``git worktree`` under a temporary folder, and
each measurement is one process that imports grprune from that worktree (``PYTHONPATH``
ahead of the installed package; the process prints the path it imported, which is
checked). The model is ``versus_pyg.py``'s (ogbg-molbbbp scaffold, 4-layer GIN, hidden 64,
batch 64; ``--method prune``: PrunE with the reference's edge logit and sampling,
``erm``: the same GIN without a selector), built by ``resolve_config`` and
``Trainer.train_epoch``, an API both ends of the measured range share. ``--epochs`` + 1
passes, the first dropped, the median reported; commits alternate inside every round, so
drifts of the machine hit all alike. ``--threads`` (default 1) sets ``OMP_NUM_THREADS``
and torch's count in every process.

Writes one JSON line per (round, commit, method) to ``--out`` and prints each commit's
median over rounds and its ratio to the first commit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
METHODS = {
    "erm": ("none", []),
    "prune": ("size,eps-align", ["selector.symmetrize=sum-input", "selector.sample_per=edge"]),
}
MODEL = ["encoder.layers=4", "encoder.hidden=64", "encoder.virtual_node=false",
         "train.batch_size=64"]

WORKER = """
import json, statistics, sys, time
from pathlib import Path
import torch
torch.set_num_threads({threads})
import grprune
from grprune.resolve import resolve_config
from grprune.run import load_config_dataset
from grprune.trainer import Trainer
cfg = resolve_config(data="ogbg-molbbbp", reg={reg!r}, preset="paper",
                     flags={{"train.device": "cpu", "train.progress": "none"}},
                     overrides={overrides!r})
trainer = Trainer(cfg, load_config_dataset(cfg), Path("/nonexistent"))
times = []
for e in range({epochs} + 1):
    t = time.perf_counter()
    trainer.train_epoch(e)
    times.append(time.perf_counter() - t)
print(json.dumps({{"imported": grprune.__file__, "epoch_s": times[1:],
                  "median_s": statistics.median(times[1:]),
                  "threads": torch.get_num_threads(), "torch": torch.__version__}}))
"""


def resolve(commit: str) -> str:
    """``commit``'s full hash. Raises ``subprocess.CalledProcessError`` if git does not
    know it."""
    return subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout.strip()


def measure(tree: Path, method: str, epochs: int, threads: int) -> dict:
    """One worker process on ``tree``: its record (``epoch_s``, ``median_s``, ...).
    Raises ``RuntimeError`` if the worker imported grprune from anywhere else."""
    reg, extra = METHODS[method]
    code = WORKER.format(threads=threads, reg=reg, overrides=MODEL + extra, epochs=epochs)
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, check=True,
                         capture_output=True, text=True)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(rec["imported"]).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"the worker for {tree} imported {rec['imported']}")
    return rec


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("commits", nargs="+", help="the first is the reference of the ratios")
    ap.add_argument("--method", choices=sorted(METHODS), action="append",
                    help="repeatable [prune]")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=6, help="timed passes (one more is dropped)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    methods = args.method or ["prune"]
    from grprune.provenance import cpu_model
    shas = [resolve(c) for c in args.commits]
    records = []
    with tempfile.TemporaryDirectory(prefix="grprune-commits-") as tmp:
        trees = {}
        for sha in dict.fromkeys(shas):
            trees[sha] = Path(tmp) / sha[:12]
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(trees[sha]), sha],
                           cwd=ROOT, check=True)
        try:
            for rnd in range(args.rounds):
                for method in methods:
                    for commit, sha in zip(args.commits, shas):
                        rec = {"commit": sha[:7], "asked": commit, "method": method,
                               "round": rnd, **measure(trees[sha], method, args.epochs,
                                                       args.threads),
                               "cpu": cpu_model(), "cores": len(os.sched_getaffinity(0))}
                        rec.pop("imported")
                        records.append(rec)
                        with open(args.out, "a") as fh:
                            fh.write(json.dumps(rec) + "\n")
                        print(f"round {rnd} {method:6s} {sha[:7]} {rec['median_s']:.3f} "
                              f"s/epoch", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
    for method in methods:
        med = {sha: statistics.median(r["median_s"] for r in records
                                      if r["commit"] == sha[:7] and r["method"] == method)
               for sha in shas}
        first = med[shas[0]]
        print(f"\n{method}: " + ", ".join(f"{sha[:7]} {m:.3f} s ({m / first:.3f}x)"
                                         for sha, m in med.items()))


if __name__ == "__main__":
    main()
