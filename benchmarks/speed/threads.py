"""A training epoch on 1 and on all threads, with OpenMP's wait policies, on an idle or a
busy machine, side by side in one run.

Usage::

    python -m benchmarks.speed.threads --rounds 3 --out benchmarks/speed/threads-cpu-2core.jsonl
    python -m benchmarks.speed.threads --rounds 3 --load 2 --out ...   # 2 busy processes

Settings (each one process, ``--epochs`` + 1 training passes, the first dropped, the median
reported; settings alternate inside every round, so drifts of the machine hit all alike):

* ``1 thread``: ``OMP_NUM_THREADS=1``;
* ``all``: torch's own thread count (one per core), GNU OpenMP's default wait (a waiting
  thread spins a while, then sleeps);
* ``all, active`` / ``all, passive``: the same with ``OMP_WAIT_POLICY=ACTIVE`` (waiting
  threads spin) or ``PASSIVE`` (they sleep at once);
* ``auto``: what ``grprune run`` does by default (``train.threads=0``): before each epoch
  1 thread or all, whichever :func:`grprune.determinism.faster_thread_count` finds faster,
  the probe's time included in the epoch's;
* ``--spincount N`` adds ``all, spin N`` (``GOMP_SPINCOUNT=N``).

``--load K`` starts K processes that keep a core busy (a Python loop, at niceness
``--nice``: 0 as another user's job or a CI run beside it, 19 as background jobs) before the
first measurement and stops them after the last. The model is the README's job: ogbg-molbbbp scaffold, ``--preset
official``; ``--method prune`` times PrunE epochs (the warm-up switched off:
``train.warmup_epochs=0``), ``erm`` the same model without a selector.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"1 thread": {"OMP_NUM_THREADS": "1"},
            "all": {},
            "all, active": {"OMP_WAIT_POLICY": "ACTIVE"},
            "all, passive": {"OMP_WAIT_POLICY": "PASSIVE"},
            "auto": {}}
METHODS = {"prune": "size,eps-align", "erm": "none"}

WORKER = """
import json, statistics, time
from pathlib import Path
import grprune
import torch
from grprune import determinism
from grprune.resolve import resolve_config
from grprune.run import load_config_dataset
from grprune.trainer import Trainer
cfg = resolve_config(data="ogbg-molbbbp", reg={reg!r}, preset="official",
                     flags={{"train.device": "cpu", "train.progress": "none"}},
                     overrides=["train.warmup_epochs=0"])
trainer = Trainer(cfg, load_config_dataset(cfg), Path("/nonexistent"))
times, most = [], torch.get_num_threads()
for e in range({epochs} + 1):
    t = time.perf_counter()
    if {probe}:
        determinism.faster_thread_count(most)
    trainer.train_epoch(e)
    times.append(time.perf_counter() - t)
print(json.dumps({{"epoch_s": times[1:], "median_s": statistics.median(times[1:]),
                  "threads": torch.get_num_threads(), "torch": torch.__version__}}))
"""


def measure(setting: str, method: str, epochs: int, settings: dict = SETTINGS) -> dict:
    """One worker process under ``setting``'s environment: its record. Raises
    ``subprocess.CalledProcessError`` if the worker fails."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(settings[setting])
    code = WORKER.format(reg=METHODS[method], epochs=epochs, probe=setting == "auto")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4, help="timed passes (one more is dropped)")
    ap.add_argument("--method", choices=sorted(METHODS), action="append",
                    help="repeatable [prune]")
    ap.add_argument("--load", type=int, default=0, help="busy processes beside [0]")
    ap.add_argument("--nice", type=int, default=0,
                    help="their niceness (19: background jobs that yield to others) [0]")
    ap.add_argument("--spincount", type=int, action="append", default=[],
                    help="also all threads with GOMP_SPINCOUNT=N (repeatable)")
    ap.add_argument("--note", default="", help="what else the machine runs (recorded)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    settings = {**SETTINGS, **{f"all, spin {n}": {"GOMP_SPINCOUNT": str(n)}
                               for n in args.spincount}}
    methods = args.method or ["prune"]
    from grprune.provenance import cpu_model, git_commit
    busy = [subprocess.Popen(["nice", "-n", str(args.nice), sys.executable, "-c",
                              "while True: pass"]) for _ in range(args.load)]
    records = []
    try:
        for rnd in range(args.rounds):
            for method in methods:
                for setting in settings:
                    rec = {"setting": setting, "method": method, "load": args.load,
                           "load_nice": args.nice, "note": args.note,
                           "round": rnd, **measure(setting, method, args.epochs, settings),
                           "cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)),
                           "commit": git_commit()}
                    records.append(rec)
                    with open(args.out, "a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                    print(f"round {rnd} {method:5s} {setting:13s} load {args.load} "
                          f"{rec['median_s']:.3f} s/epoch ({rec['threads']} threads)",
                          flush=True)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    for method in methods:
        med = {s: statistics.median(r["median_s"] for r in records
                                    if r["setting"] == s and r["method"] == method)
               for s in settings}
        one = med["1 thread"]
        print(f"\n{method}, load {args.load}: " + ", ".join(
            f"{s} {m:.3f} s ({m / one:.2f}x one thread)" for s, m in med.items()))


if __name__ == "__main__":
    main()
