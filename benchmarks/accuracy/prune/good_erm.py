"""Where GOOD-protocol ERM runs stand, finished or not (issue 39, item 3).

A 200-epoch run of ``--preset good`` on all 18,000 GOOD-Motif training graphs takes hours on
a CPU, so it runs in pieces across sessions (a sweep resumes from the last epoch). This
script reads every run directory under the given folders through ``grprune.record.rundir.RunDir``
(finished or still running) and writes one row per run: the epochs done, the epoch of the
best OOD-valid score so far (GOOD's selection: the first epoch with the best OOD-valid) and
the OOD-test score there, with the commit and hardware of the run. Rows of unfinished runs
are marked so; ``table1.py runs`` takes a run into Table 1 only once it has finished.

    python -m benchmarks.accuracy.prune.good_erm runs/motif-good-erm \\
        --commit 85e6955 --hardware "2 cores of an AMD EPYC (CPU)" \\
        --out benchmarks/accuracy/prune/motif-good-erm/motif-good-erm.runs.csv \\
        --curves benchmarks/accuracy/prune/motif-good-erm/motif-good-erm.epochs.csv

``--curves`` also writes every epoch of every run (OOD-valid, OOD-test and ID-valid ×100),
so the trajectories travel with the table while the runs are unfinished.

Scores are ×100 (accuracy on GOOD-Motif). Exit code 2 on bad input.
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

CURVE_FIELDS = ["dataset", "split", "seed", "epoch", "lr", "loss", "valid", "test", "id_valid"]
FIELDS = ["dataset", "split", "seed", "preset", "finished", "epochs_done", "epochs",
          "best_epoch", "valid", "test", "test_last", "test_max", "epoch_s_median",
          "commit", "hardware"]


def fail(message: str) -> None:
    print(f"good_erm.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def _pct(scores, metric: str):
    value = (scores or {}).get(metric)
    return "" if value is None else round(100 * value, 2)


def good_runs(dirs: list[Path]):
    """``(run directory, RunConfig, epoch records)`` of every ``--preset good`` run under
    ``dirs`` (recursively) with at least one epoch; exit code 2 on a missing folder."""
    from grprune.record.runconfig import RunConfig
    from grprune.record.rundir import RunDir

    for d in dirs:
        if not d.is_dir():
            fail(f"no such directory: {d}")
        for config in sorted(d.rglob("config.json")):
            rd = RunDir(config.parent)
            raw = rd.read_config()
            if not isinstance(raw, dict):
                continue
            cfg = RunConfig.from_dict(raw)
            records = rd.records() if cfg.preset == "good" else []
            if records:
                yield rd, cfg, records


def run_curve(cfg, records) -> list[dict]:
    """One row per epoch of a run (:data:`CURVE_FIELDS`): the learning rate, the mean
    training loss per graph and the scores ×100."""
    return [{"dataset": cfg.data.name, "split": cfg.data.split, "seed": cfg.train.seed, "epoch": r.epoch,
             "lr": r.lr, "loss": round(r.loss.get("total", 0.0), 5),
             "valid": _pct(r.scores.get("valid"), r.metric),
             "test": _pct(r.scores.get("test"), r.metric),
             "id_valid": _pct(r.scores.get("id-valid"), r.metric)} for r in records]


def run_row(rd, cfg, records, commit: str = "", hardware: str = "") -> dict:
    """The row of one run.

    The best epoch is the first with the highest OOD-valid score (``valid``), as GOOD
    selects; ``test`` is the OOD-test score there, ``test_last`` at the last epoch done and
    ``test_max`` the highest over the epochs done (for the record, never for selection).
    ``commit`` and ``hardware`` fill in what an unfinished run has not yet written
    (its ``summary.json`` records both).
    """
    metric = records[0].metric
    valid = [r.scores["valid"][metric] for r in records]
    test = [r.scores["test"][metric] for r in records]
    best = valid.index(max(valid))
    times = sorted(r.epoch_time_s for r in records if r.epoch_time_s is not None)
    summary = rd.summary()
    env = (summary.environment if summary is not None else None) or {}
    return {"dataset": cfg.data.name, "split": cfg.data.split, "seed": cfg.train.seed,
            "preset": "good", "finished": summary is not None,
            "epochs_done": len(records), "epochs": cfg.train.epochs, "best_epoch": best,
            "valid": round(100 * valid[best], 2), "test": round(100 * test[best], 2),
            "test_last": round(100 * test[-1], 2), "test_max": round(100 * max(test), 2),
            "epoch_s_median": round(times[len(times) // 2], 1) if times else "",
            "commit": env.get("commit") or commit,
            "hardware": env.get("gpu") or (f"{env['cpu_count']} cores of an {env['cpu']} (CPU)"
                                           if "cpu" in env else hardware)}


def to_csv(table: list[dict], fields: list[str] = FIELDS) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fields, lineterminator="\n")
    w.writeheader()
    w.writerows(table)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", type=Path, help="folders holding run directories")
    p.add_argument("--out", type=Path, help="CSV to write (atomically); stdout without it")
    p.add_argument("--curves", type=Path, help="CSV of every epoch of every run to write")
    p.add_argument("--commit", default="", help="commit of the tree an unfinished run runs from")
    p.add_argument("--hardware", default="", help="where an unfinished run runs")
    args = p.parse_args(argv)
    from grprune.record.files import atomic_write_bytes

    runs = list(good_runs(args.dirs))
    table = sorted((run_row(*run, args.commit, args.hardware) for run in runs),
                   key=lambda r: (r["dataset"], r["split"], r["seed"]))
    if not table:
        fail(f"no --preset good run with an epoch under {', '.join(map(str, args.dirs))}")
    text = to_csv(table)
    if args.out is None:
        sys.stdout.write(text)
    else:
        atomic_write_bytes(args.out, text.encode("utf-8"))
        print(f"good_erm.py: {len(table)} runs -> {args.out}")
    if args.curves is not None:
        curves = [row for _, cfg, records in runs for row in run_curve(cfg, records)]
        curves.sort(key=lambda r: (r["dataset"], r["split"], r["seed"], r["epoch"]))
        atomic_write_bytes(args.curves, to_csv(curves, CURVE_FIELDS).encode("utf-8"))
        print(f"good_erm.py: {len(curves)} epochs -> {args.curves}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
