"""What ``train.deterministic`` costs: training epochs with it off and on, side by side.

Usage::

    python benchmarks/speed/determinism.py --out benchmarks/speed/determinism-cpu-2core.jsonl

Each measurement is one ``bench.py`` worker process (molbbbp by default, the paper's
model; see ``bench.py``) started with ``--threads`` torch threads (default: every core).
``off`` trains on all of them; ``on`` (grprune's default) trains on one
(``grprune.determinism``). The settings are interleaved round by round, so slow drifts of
the machine hit both alike, and every round is measured twice: on an idle machine, and
while a busy-loop process keeps one core busy (``busy``), as a laptop, CI or a sweep does.
Printed: the median training epoch per (load, method, setting) over rounds, and
``on / off``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).with_name("bench.py")


def measure(data: str, method: str, threads: int, deterministic: bool, epochs: int) -> dict:
    cmd = [sys.executable, str(BENCH), "--worker", data, method, "--device", "cpu",
           "--epochs", str(epochs), "--threads", str(threads), "--out", os.devnull,
           "--deterministic" if deterministic else "--no-deterministic"]
    out = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": str(threads)},
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="ogbg-molbbbp")
    ap.add_argument("--methods", default="erm,prune")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs per measurement")
    ap.add_argument("--out", type=Path, required=True, help="JSON-lines file (appended)")
    args = ap.parse_args()
    records = []
    for rnd in range(args.rounds):
        for busy in (False, True):
            loop = (subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                     stdin=subprocess.DEVNULL) if busy else None)
            try:
                for deterministic in (False, True):
                    for method in args.methods.split(","):
                        rec = measure(args.data, method, args.threads, deterministic,
                                      args.epochs)
                        rec.update(round=rnd, busy=busy, threads_available=args.threads)
                        records.append(rec)
                        with open(args.out, "a") as fh:
                            fh.write(json.dumps(rec) + "\n")
                        print(f"round {rnd} {'busy' if busy else 'idle'} "
                              f"{'on ' if deterministic else 'off'} {method:6s} "
                              f"{rec['threads']} thread(s) {rec['train_epoch_s']:.3f} s/epoch",
                              flush=True)
            finally:
                if loop is not None:
                    loop.kill()
                    loop.wait()
    print(f"\n{args.data}, {args.threads} cores available, median train s/epoch over "
          f"{args.rounds} rounds\n")
    print("| load | method | off (s/epoch) | on (s/epoch) | on / off |")
    print("|---|---|---|---|---|")
    for busy in (False, True):
        for method in args.methods.split(","):
            med = {d: statistics.median(r["train_epoch_s"] for r in records
                                        if r["busy"] == busy and r["method"] == method
                                        and r["deterministic"] == d) for d in (False, True)}
            print(f"| {'one core busy' if busy else 'idle'} | {method} | {med[False]:.3f} | "
                  f"{med[True]:.3f} | {med[True] / med[False]:.2f} |")


if __name__ == "__main__":
    main()
