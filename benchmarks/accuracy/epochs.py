"""How well the validation score tracks the test score, epoch by epoch, in a sweep.

A diagnostic for model selection, not a selection rule: it reads every finished run's
per-epoch ``results.jsonl`` (the valid and test scores after each epoch) and reports, per
dataset column and method, averaged over seeds and over the epochs after ERM warm-up:

- ``rho``: Spearman rank correlation between the valid and the test score across epochs
  (1: the best-valid epoch is also the best-test epoch; about 0: valid says nothing);
- ``valid jump``: standard deviation of the valid score's change from one epoch to the next;
- ``test median`` and ``test max``: the test score over those epochs. ``test max`` is an
  oracle (it looks at the test split) and is shown only to tell a selection problem from
  a training problem; never choose a configuration by it;
- ``selected``: the test score at the best-valid epoch, what the tables report.

Scores are ×100. Rows pool the runs of a method whatever their hyperparameters: run it on a
sweep with one setting per method (as the benchmark specs are). Usage::

    python -m benchmarks.accuracy.epochs runs/acc-motif [--out FILE.md]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from scipy.stats import spearmanr

from grprune.collect import method_label, scan_runs
from grprune.record.rundir import RunDir


def run_stats(run) -> dict | None:
    """Per-run statistics over the epochs after warm-up; None without two such epochs."""
    warmup = run.config.train.warmup_epochs
    epochs = RunDir(run.path).record_lines()
    metric = run.metric
    pairs = [(e["valid"][metric], e["test"][metric]) for e in epochs
             if e["epoch"] >= warmup and metric in e.get("valid", {}) and metric in e.get("test", {})]
    if len(pairs) < 3:
        return None
    valid, test = [p[0] for p in pairs], [p[1] for p in pairs]
    rho = spearmanr(valid, test).statistic
    jumps = [b - a for a, b in zip(valid, valid[1:])]
    return {"rho": rho, "jump": statistics.pstdev(jumps), "median": statistics.median(test),
            "max": max(test), "selected": run.summary.test}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", help="sweep root (folder of run directories)")
    parser.add_argument("--out", help="also write the markdown table to this file")
    args = parser.parse_args(argv)
    if not Path(args.root).is_dir():
        print(f"epochs.py: not a directory: {args.root}", file=sys.stderr)
        return 2
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for run in scan_runs(args.root).runs:
        stats = run_stats(run)
        if stats is not None:
            column = run.dataset + (f"/{run.split}" if run.split else "")
            groups[(column, method_label(run.reg, run.selector))].append(stats)
    lines = ["| dataset | method | runs | rho (valid, test) | valid jump | test median "
             "| test max (oracle) | selected |", "|---|---|---|---|---|---|---|---|"]
    for (column, method), rows in sorted(groups.items()):
        def avg(key, scale=100.0):
            return statistics.mean(r[key] for r in rows) * scale
        lines.append(f"| {column} | {method} | {len(rows)} | {avg('rho', 1.0):+.2f} | "
                     f"{avg('jump'):.1f} | {avg('median'):.1f} | {avg('max'):.1f} | "
                     f"{avg('selected'):.1f} |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
