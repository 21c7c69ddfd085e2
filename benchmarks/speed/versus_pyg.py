"""grprune against a plain PyTorch Geometric implementation of the same model, side by side.

Usage::

    pip install torch_geometric        # the reference only; grprune does not need it
    python -m benchmarks.speed.versus_pyg --out benchmarks/speed/versus-pyg-cpu-2core.jsonl

ogbg-molbbbp scaffold (1631 training graphs), the model of ``pyg_reference.py``: 4-layer
GIN, hidden 64, no virtual node, dropout 0.5, batch 64, Adam 1e-3; PrunE with a 2-layer
GIN selector, tau 1, eta 0.85, K 50, lambda 10 / 0.01, the paper's L_e and L_s. grprune
runs it as ``-H selector.symmetrize=sum-input -H selector.sample_per=edge`` (the edge logit
and sampling of the reference); ``prune-paper`` is grprune's default PrunE (mean of the
MLP on both orders, one sample per bond) for comparison.

``--paired METHOD`` instead times grprune's METHOD and PyG's model in one process, epoch
by epoch alternating, one process a round: separate processes of the same code run up to
20 % apart here, a pair in one process shares that state.

Each measurement is one process (``--worker``): data and model built, ``--epochs`` + 1
training passes, the first dropped, the median reported. Implementations and methods
alternate inside every round, so drifts of the machine hit all alike. Threads:
``--threads N`` sets ``OMP_NUM_THREADS`` and torch's count in every process; ``--threads 0``
(the default) sets neither, so each runs as a user runs it by default (torch: one thread
per core), and the records name the count each used.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

GRPRUNE_METHODS = {
    "erm": ("none", []),
    "prune": ("size,eps-align", ["selector.symmetrize=sum-input", "selector.sample_per=edge"]),
    "prune-paper": ("size,eps-align", []),
}
MODEL = ["encoder.layers=4", "encoder.hidden=64", "encoder.virtual_node=false",
         "train.batch_size=64"]


def timed(train, epochs: int) -> list[float]:
    """Seconds of ``epochs`` + 1 calls of ``train`` (one epoch each)."""
    out = []
    for _ in range(epochs + 1):
        t = time.perf_counter()
        train()
        out.append(time.perf_counter() - t)
    return out


def time_grprune(method: str, epochs: int) -> list[float]:
    return timed(grprune_epochs(method), epochs)


def grprune_epochs(method: str):
    """A callable that trains one grprune epoch per call (the model of ``MODEL``)."""
    from grprune.resolve import resolve_config
    from grprune.run import load_config_dataset
    from grprune.trainer import Trainer
    reg, extra = GRPRUNE_METHODS[method]
    cfg = resolve_config(data="ogbg-molbbbp", reg=reg, preset="paper",
                         flags={"train.device": "cpu", "train.progress": "none"},
                         overrides=MODEL + extra)
    trainer = Trainer(cfg, load_config_dataset(cfg), Path("/nonexistent"))
    epoch = iter(range(10**9))
    return lambda: trainer.train_epoch(next(epoch))


def pyg_epochs(method: str):
    """A callable that trains one epoch of ``pyg_reference.py``'s model per call."""
    import torch
    from torch_geometric.loader import DataLoader

    from grprune.data import load_dataset
    from benchmarks.speed import pyg_reference as P
    torch.manual_seed(0)
    ds = load_dataset("ogbg-molbbbp")
    data = P.pyg_data(ds)
    loader = DataLoader([data[i] for i in ds.splits["train"]], batch_size=64, shuffle=True)
    model = P.Model(prune=method != "erm")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return lambda: P.train_epoch(model, loader, optimizer)


def time_pyg(method: str, epochs: int) -> list[float]:
    return timed(pyg_epochs(method), epochs)


def time_paired(method: str, epochs: int) -> tuple[list[float], list[float]]:
    """grprune's and PyG's epochs alternating in one process (``--paired``): each pair of
    epochs shares the process's state (its threads, its memory), so their ratio does not
    carry the ±6–20 % by which separate processes of the same code differ here
    (benchmarks/speed/README.md, "Why the runs disagree")."""
    ours, theirs = grprune_epochs(method), pyg_epochs("erm" if method == "erm" else "prune")
    g: list[float] = []
    p: list[float] = []
    for _ in range(epochs + 1):
        for train, out in ((ours, g), (theirs, p)):
            t = time.perf_counter()
            train()
            out.append(time.perf_counter() - t)
    return g, p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=6, help="timed passes (one more is dropped)")
    ap.add_argument("--threads", type=int, default=0,
                    help="intra-op threads of every process; 0: torch's default [0]")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--paired", metavar="METHOD", choices=sorted(GRPRUNE_METHODS),
                    help="one process a round, grprune's METHOD and PyG's alternating epoch by "
                         "epoch in it; reports the ratio per round")
    ap.add_argument("--worker", nargs=2, metavar=("IMPL", "METHOD"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        import torch
        if args.threads:
            torch.set_num_threads(args.threads)
        impl, method = args.worker
        from grprune.provenance import cpu_model, git_commit
        host = {"threads": torch.get_num_threads(), "torch": torch.__version__,
                "cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)),
                "commit": git_commit()}
        if impl == "paired":
            g, p = time_paired(method, args.epochs)
            print(json.dumps({"impl": "paired", "method": method, "grprune_epoch_s": g[1:],
                              "pyg_epoch_s": p[1:], "grprune_median_s": statistics.median(g[1:]),
                              "pyg_median_s": statistics.median(p[1:]),
                              "ratio": statistics.median(g[1:]) / statistics.median(p[1:]),
                              **host}))
            return
        times = (time_grprune if impl == "grprune" else time_pyg)(method, args.epochs)
        print(json.dumps({"impl": impl, "method": method, "epoch_s": times[1:],
                          "median_s": statistics.median(times[1:]), **host}))
        return
    if args.paired:
        paired(args)
        return
    jobs = [("grprune", m) for m in GRPRUNE_METHODS] + [("pyg", "erm"), ("pyg", "prune")]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    records = []
    for rnd in range(args.rounds):
        for impl, method in jobs:
            cmd = [sys.executable, "-m", "benchmarks.speed.versus_pyg", "--worker", impl,
                   method, "--epochs", str(args.epochs), "--threads", str(args.threads),
                   "--out", os.devnull]
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True,
                                 cwd=Path(__file__).resolve().parents[2])
            rec = {**json.loads(out.stdout.strip().splitlines()[-1]), "round": rnd}
            records.append(rec)
            with open(args.out, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(f"round {rnd} {impl:8s} {method:12s} {rec['median_s']:.3f} s/epoch "
                  f"({rec['threads']} thread(s))", flush=True)
    med = {(i, m): statistics.median(r["median_s"] for r in records
                                     if r["impl"] == i and r["method"] == m) for i, m in jobs}
    print("\n| implementation | ERM s/epoch | PrunE s/epoch | PrunE / ERM |")
    print("|---|---|---|---|")
    for impl, prune in (("pyg", "prune"), ("grprune", "prune"), ("grprune", "prune-paper")):
        e, p = med[(impl, "erm")], med[(impl, prune)]
        print(f"| {impl} {prune} | {e:.3f} | {p:.3f} | {p / e:.2f} |")
    print(f"\ngrprune PrunE / PyG PrunE: {med[('grprune', 'prune')] / med[('pyg', 'prune')]:.2f}; "
          f"grprune ERM / PyG ERM: {med[('grprune', 'erm')] / med[('pyg', 'erm')]:.2f}")


def paired(args) -> None:
    """``--paired METHOD``: ``--rounds`` processes, each timing grprune and PyG alternately
    (:func:`time_paired`); the ratio's median and range over the rounds."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    ratios = []
    for rnd in range(args.rounds):
        cmd = [sys.executable, "-m", "benchmarks.speed.versus_pyg", "--worker", "paired",
               args.paired, "--epochs", str(args.epochs), "--threads", str(args.threads),
               "--out", os.devnull]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[2])
        rec = {**json.loads(out.stdout.strip().splitlines()[-1]), "round": rnd}
        ratios.append(rec["ratio"])
        with open(args.out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(f"round {rnd}: grprune {rec['grprune_median_s']:.3f} s/epoch, PyG "
              f"{rec['pyg_median_s']:.3f}, ratio {rec['ratio']:.3f} ({rec['threads']} "
              f"thread(s))", flush=True)
    print(f"\ngrprune {args.paired} / PyG, paired in one process: median "
          f"{statistics.median(ratios):.3f} over {len(ratios)} rounds "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
