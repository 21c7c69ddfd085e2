"""What ``train.deterministic`` costs: training epochs with it off and on, side by side.

Usage::

    python -m benchmarks.speed.determinism --out benchmarks/speed/determinism-cpu-2core.jsonl

Each measurement is one ``bench.py`` worker process (molbbbp by default, the paper's
model; see ``bench.py``) started with ``--threads`` torch threads (default: every core).
``off`` trains on all of them; ``on`` (grprune's default) trains on one
(``grprune.determinism``). The settings are interleaved round by round, so slow drifts of
the machine hit both alike, and every round is measured twice: on an idle machine, and
while a busy-loop process keeps one core busy (``busy``), as a laptop, CI or a sweep does.
Printed: the median training epoch per (load, method, setting) over rounds, and
``on / off``.

With ``--isa`` it compares torch's CPU kernels instead, both with ``train.deterministic``
on: ``avx512`` (what an AVX-512 CPU ran before grprune pinned the kernels) against
``avx2`` (grprune's pin, ``ATEN_CPU_CAPABILITY``), printed as ``avx2 / avx512``::

    python -m benchmarks.speed.determinism --isa --rounds 3 --out benchmarks/speed/isa-cpu-2core.jsonl
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


def measure(data: str, method: str, threads: int, deterministic: bool, epochs: int,
            isa: str | None = None) -> dict:
    """One ``bench.py`` worker's record; ``isa`` sets ``ATEN_CPU_CAPABILITY`` for it."""
    cmd = [sys.executable, str(BENCH), "--worker", data, method, "--device", "cpu",
           "--epochs", str(epochs), "--threads", str(threads), "--out", os.devnull,
           "--deterministic" if deterministic else "--no-deterministic"]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if isa:
        env["ATEN_CPU_CAPABILITY"] = isa
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    if isa:
        rec["isa"] = isa
    return rec


def _table(records: list[dict], methods: list[str], key: str, settings: tuple,
           names: tuple[str, str]) -> None:
    """Median train s/epoch per (load, method) for the two ``settings`` of ``key``."""
    print(f"| load | method | {names[0]} (s/epoch) | {names[1]} (s/epoch) | "
          f"{names[1]} / {names[0]} |")
    print("|---|---|---|---|---|")
    for busy in (False, True):
        for method in methods:
            med = [statistics.median(r["train_epoch_s"] for r in records
                                     if r["busy"] == busy and r["method"] == method
                                     and r[key] == v) for v in settings]
            print(f"| {'one core busy' if busy else 'idle'} | {method} | {med[0]:.3f} | "
                  f"{med[1]:.3f} | {med[1] / med[0]:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="ogbg-molbbbp")
    ap.add_argument("--methods", default="erm,prune")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs per measurement")
    ap.add_argument("--out", type=Path, required=True, help="JSON-lines file (appended)")
    ap.add_argument("--isa", action="store_true",
                    help="compare torch's AVX-512 and AVX2 CPU kernels instead (both on)")
    args = ap.parse_args()
    methods = args.methods.split(",")
    # (record key, its two settings, their names): deterministic off/on, or the kernels
    key, settings, names = (("isa", ("avx512", "avx2"), ("avx512", "avx2")) if args.isa else
                            ("deterministic", (False, True), ("off", "on")))
    records = []
    for rnd in range(args.rounds):
        for busy in (False, True):
            loop = (subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                     stdin=subprocess.DEVNULL) if busy else None)
            try:
                for setting, name in zip(settings, names):
                    for method in methods:
                        deterministic, isa = (True, setting) if args.isa else (setting, None)
                        rec = measure(args.data, method, args.threads, deterministic,
                                      args.epochs, isa=isa)
                        rec.update(round=rnd, busy=busy, threads_available=args.threads)
                        records.append(rec)
                        with open(args.out, "a") as fh:
                            fh.write(json.dumps(rec) + "\n")
                        print(f"round {rnd} {'busy' if busy else 'idle'} {name:6s} "
                              f"{method:6s} {rec['threads']} thread(s) "
                              f"{rec['train_epoch_s']:.3f} s/epoch", flush=True)
            finally:
                if loop is not None:
                    loop.kill()
                    loop.wait()
    print(f"\n{args.data}, {args.threads} cores available, median train s/epoch over "
          f"{args.rounds} rounds\n")
    _table(records, methods, key, settings, names)


if __name__ == "__main__":
    main()
