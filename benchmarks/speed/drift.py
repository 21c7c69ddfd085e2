"""How far two runs of one seed drift apart with ``train.deterministic`` off.

Usage::

    python -m benchmarks.speed.drift --device cuda --budget 200 --out "$OUT/drift.jsonl"
    python -m benchmarks.speed.drift --device cpu --quick --out /tmp/d/drift.jsonl  # a try

Without deterministic kernels a GPU sums in whatever order its atomics land, so two runs of
one configuration and seed part in the last bits from the first step on, and training can
amplify that. The script runs the same ogbg-molbbbp PrunE configuration (the dataset's
default preset, scaffold split, ``--no-deterministic``, ``train.fast_path`` on unless
``--no-fast``) twice, each as ``grprune run`` in a process of its own, and compares their
``results.jsonl`` epoch by epoch:

* ``max_abs_delta_test`` / ``max_abs_delta_valid``: the largest |difference| of a split's
  score (ROC-AUC) at the same epoch;
* ``best_epoch``: each run's best-validation epoch over the epochs both finished (the first
  of equal scores), and ``best_epoch_moved``; ``test_at_best``: the test score there;
* ``identical``: whether every loss and score is the same bit for bit.

Each run may take half of ``--budget`` seconds; a run stopped there keeps the epochs it wrote,
and only the epochs both runs finished are compared (``epochs_compared``). One JSON object
is appended to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_command(device: str, epochs: int, limit: int, fast: bool, out: Path) -> list[str]:
    """The ``grprune run`` command of one of the two runs."""
    cmd = [sys.executable, "-m", "grprune", "run", "--data", "ogbg-molbbbp", "--split",
           "scaffold", "--selector", "gumbel-gin", "--reg", "size,eps-align", "--epochs",
           str(epochs), "--device", device, "--progress", "none", "--force", "--out", str(out),
           "--no-deterministic", "-H", f"train.fast_path={str(fast).lower()}"]
    return cmd + (["-H", f"data.limit={limit}"] if limit else [])


def scores(run_dir: Path) -> list[dict[str, Any]]:
    """Per finished epoch: ``loss`` and the ``valid`` and ``test`` scores (None if NaN)."""
    from grprune.record import files as R
    from grprune.record.epoch import EpochRecord

    out = []
    for line in R.read_records(run_dir / R.RESULTS):
        rec = EpochRecord.from_dict(line)
        metric = rec.metric or ""
        out.append({"loss": dict(rec.loss), "valid": rec.score("valid", metric),
                    "test": rec.score("test", metric)})
    return out


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """The drift between two runs' epochs (:func:`scores`), over the epochs both finished."""
    n = min(len(a), len(b))

    def largest(split: str) -> float | None:
        diffs = [abs(x[split] - y[split]) for x, y in zip(a[:n], b[:n])
                 if x[split] is not None and y[split] is not None]
        return max(diffs) if diffs else None

    def best(run: list[dict[str, Any]]) -> int:
        valid = [r["valid"] if r["valid"] is not None else -math.inf for r in run[:n]]
        return valid.index(max(valid)) if valid else -1

    best_a, best_b = best(a), best(b)
    return {"epochs_compared": n, "epochs_finished": [len(a), len(b)],
            "max_abs_delta_test": largest("test"), "max_abs_delta_valid": largest("valid"),
            "best_epoch": [best_a, best_b], "best_epoch_moved": best_a != best_b,
            "test_at_best": [a[best_a]["test"] if n else None, b[best_b]["test"] if n else None],
            "identical": a[:n] == b[:n]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--epochs", type=int, default=100, help="epochs per run (default 100)")
    ap.add_argument("--quick", action="store_true", help="3 epochs of 200 graphs: a try")
    ap.add_argument("--fast", action=argparse.BooleanOptionalAction, default=True,
                    help="train.fast_path (default on)")
    ap.add_argument("--budget", type=float, default=240.0,
                    help="seconds for both runs; each may take half")
    ap.add_argument("--out", type=Path, required=True, help="JSON-lines file to append to")
    ap.add_argument("--commit", default=None, help="commit to record (default: "
                    "$GRPRUNE_COMMIT, else git's, else unknown)")
    args = ap.parse_args(argv)
    from grprune.provenance import environment, git_commit

    epochs, limit = (3, 200) if args.quick else (args.epochs, 0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    runs = []
    with tempfile.TemporaryDirectory(prefix="grprune-drift-") as tmp:
        for name in ("a", "b"):
            run_dir = Path(tmp) / name
            cmd = run_command(args.device, epochs, limit, args.fast, run_dir)
            try:
                done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                      timeout=args.budget / 2, stdin=subprocess.DEVNULL)
                if done.returncode != 0:
                    print(f"drift: run {name} failed (exit {done.returncode}):\n"
                          f"{done.stderr[-2000:]}", flush=True)
            except subprocess.TimeoutExpired:
                print(f"drift: run {name} stopped at {args.budget / 2:.0f} s", flush=True)
            runs.append(scores(run_dir))
    info = environment(args.device)
    row = {"what": "molbbbp-prune-drift", "device": info.get("gpu") or info.get("cpu"),
           "commit": args.commit or os.environ.get("GRPRUNE_COMMIT") or git_commit()
           or "unknown", "deterministic": False, "fast_path": args.fast, "epochs": epochs,
           "limit": limit, **compare(*runs)}
    print(f"drift: {row['epochs_compared']} epochs compared ({row['epochs_finished']} "
          f"finished): max |delta test| {row['max_abs_delta_test']}, max |delta valid| "
          f"{row['max_abs_delta_valid']}, best epoch {row['best_epoch']} (moved: "
          f"{row['best_epoch_moved']}), identical: {row['identical']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as fh:
        fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
