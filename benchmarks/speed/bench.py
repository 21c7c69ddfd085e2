"""Epoch time, throughput and peak memory of ERM, PrunE, GSAT, CIGA, IRM and VREx on the same
data.

Usage::

    python -m benchmarks.speed.bench --device cpu  --out benchmarks/speed/cpu.jsonl
    python -m benchmarks.speed.bench --device cuda --out benchmarks/speed/cuda.jsonl
    python -m benchmarks.speed.table benchmarks/speed/cpu.jsonl benchmarks/speed/cuda.jsonl

Each (dataset, method) is measured in its own process, so peak memory belongs to one
method. In that process the dataset is loaded from grprune's cache (timed), the model is
built from the method's resolved configuration (the paper's per-dataset settings; no
warm-up, so the selector and the regularizers are on in every measured epoch), one
untimed epoch warms up allocators and caches, then ``--epochs`` training passes are
timed. Reported per method:

* ``train_epoch_s``: median wall time of one pass over the training split (forward,
  backward, Adam), CUDA synchronised; ``graphs_per_s`` = training graphs / that;
* ``eval_s``: median time to evaluate the valid and test splits once;
* ``collate_s``: median time to form the training batches alone (gathered from the
  dataset's tensors, :class:`grprune.data.store.GraphStore`); ``copy_s``: the same plus
  moving every batch to the device (nothing to move when the store lives there);
* ``peak_mem_mib``: on CUDA the peak memory allocated by torch during training; on the
  CPU the peak resident memory above the resident memory after loading (a 5 ms sampler),
  so imported libraries (~600 MiB) are not counted;
* ``load_s``: the cached dataset load.

Large datasets can be cut with ``--limit DATASET=N`` (the first N graphs of each split;
per-graph throughput is what compares methods).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

METHODS = {"erm": {"reg": "none"}, "prune": {"reg": "size,eps-align"},
           "gsat": {"reg": "gsat"}, "ciga": {"reg": "ciga"}, "irm": {"reg": "irm"},
           "vrex": {"reg": "vrex"}}
DATASETS = {"ogbg-molbbbp": {}, "good-motif": {"data.split": "basis"}}


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class PeakRSS:
    """Peak resident memory (MiB) of this process, sampled every 5 ms in a thread."""

    def __init__(self) -> None:
        self.peak = _rss_mib()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss_mib())

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mib())


def measure(data: str, method: str, device: str, epochs: int, limit: int, threads: int,
            deterministic: bool = True) -> dict:
    """Measure one (dataset, method) in this process; returns one JSON record.

    ``threads`` is torch's thread count before training; ``train.deterministic`` (on by
    default, as in grprune) then trains the CPU on one of them (``grprune.determinism``).
    """
    import torch
    torch.set_num_threads(threads)
    from grprune.resolve import resolve_config
    from grprune.run import load_config_dataset
    from grprune.trainer import Trainer

    flags = {"train.device": device, "train.warmup_epochs": 0, "train.eval_train": False,
             "train.progress": "none", "data.limit": limit,
             "train.deterministic": deterministic, **DATASETS[data]}
    cfg = resolve_config(data=data, reg=METHODS[method]["reg"], flags=flags)
    t0 = time.perf_counter()
    dataset = load_config_dataset(cfg)
    load_s = time.perf_counter() - t0
    trainer = Trainer(cfg, dataset, Path(tempfile.mkdtemp()))  # fit() is not called
    dev = trainer.device
    cuda = dev.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    def timed(fn) -> float:
        sync()
        t = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t

    def iterate(move: bool) -> None:
        idx = trainer.splits["train"][trainer.train_order()]
        size = cfg.train.batch_size
        for k in range(0, len(idx), size):
            batch = trainer.store.batch(idx[k:k + size])
            if move:
                batch.to(dev, non_blocking=True)

    trainer.train_epoch(0)  # warm-up: allocator, kernels, lazily built graphs
    base_rss = _rss_mib()
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    train, evals = [], []
    with PeakRSS() as rss:
        for epoch in range(1, epochs + 1):
            train.append(timed(lambda: trainer.train_epoch(epoch)))
            evals.append(timed(lambda: [trainer.evaluate(s) for s in ("valid", "test")]))
    collate = [timed(lambda: iterate(False)) for _ in range(3)]
    copy = [timed(lambda: iterate(True)) for _ in range(3)]
    n_train = len(trainer.splits["train"])
    med = statistics.median
    return {
        "dataset": data, "method": method, "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev) if cuda else "cpu",
        "threads": torch.get_num_threads(), "deterministic": deterministic,
        "train_graphs": n_train, "epochs": epochs,
        "batch_size": cfg.train.batch_size, "load_s": round(load_s, 3),
        "train_epoch_s": med(train), "graphs_per_s": n_train / med(train),
        "eval_s": med(evals), "collate_s": med(collate), "copy_s": med(copy),
        "peak_mem_mib": (torch.cuda.max_memory_allocated(dev) / 2**20 if cuda
                         else rss.peak - base_rss),
        "peak_mem_kind": "cuda allocated" if cuda else "RSS above post-load",
        "torch": torch.__version__, "config_hash": cfg.hash,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=",".join(DATASETS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--epochs", type=int, default=5, help="timed epochs per method")
    ap.add_argument("--limit", action="append", default=[], metavar="DATASET=N",
                    help="first N graphs of each split of DATASET (repeatable)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--deterministic", action=argparse.BooleanOptionalAction, default=True,
                    help="train.deterministic (on: the CPU trains on one thread)")
    ap.add_argument("--out", type=Path, required=True, help="JSON-lines file (appended)")
    ap.add_argument("--worker", nargs=2, metavar=("DATA", "METHOD"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    limits = {k: int(v) for k, _, v in (s.partition("=") for s in args.limit)}
    if args.worker:
        data, method = args.worker
        rec = measure(data, method, args.device, args.epochs, limits.get(data, 0), args.threads,
                      args.deterministic)
        print(json.dumps(rec))
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    for data in args.data.split(","):
        for method in args.methods.split(","):
            cmd = [sys.executable, __file__, "--worker", data, method, "--device", args.device,
                   "--epochs", str(args.epochs), "--threads", str(args.threads),
                   "--deterministic" if args.deterministic else "--no-deterministic",
                   "--out", str(args.out), *[f"--limit={s}" for s in args.limit]]
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            rec = json.loads(out.stdout.strip().splitlines()[-1])
            with open(args.out, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(f"{data:14s} {method:6s} {rec['device']:6s} train {rec['train_epoch_s']:.3f} s"
                  f"/epoch  {rec['graphs_per_s']:.0f} graphs/s  collate {rec['collate_s']:.3f} s"
                  f"  copy {rec['copy_s']:.3f} s  eval {rec['eval_s']:.3f} s"
                  f"  peak {rec['peak_mem_mib']:.1f} MiB", flush=True)


if __name__ == "__main__":
    main()
