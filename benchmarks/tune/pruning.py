"""How many training epochs ``grprune tune``'s pruner saves, and what it costs in the best
validation score: the same trials run once pruned and once not.

Both studies draw their configurations from the same seeded random sampler, one trial at a
time, so trial *i* has the same values in both; only the pruner differs (``median``:
Optuna's ``MedianPruner(n_startup_trials=2)``, checked on each epoch's validation ROC-AUC;
``none``). The measure is the number of epochs trained (each trial's records, a pruned
trial's up to its pruning epoch), and the best validation ROC-AUC of each study. "Within
noise" means within one seed standard deviation of the validation score of one
configuration, taken from ``benchmarks/accuracy/prune/molbbbp-n10/molbbbp-n10.runs.csv`` (the same
dataset, split and method at 10 seeds).

    python -m benchmarks.tune.pruning --out runs/tune-pruning \
        --write benchmarks/tune/pruning-molbbbp
    python -m benchmarks.tune.pruning --out runs/tune-pruning --prune-after 0 \
        --write benchmarks/tune/pruning-molbbbp-after0

writes ``pruning-molbbbp.json`` (both studies' trials) and ``pruning-molbbbp.md``. A re-run
continues both studies (each is an ordinary ``grprune tune`` directory).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SEEDS_TABLE = REPO / "benchmarks/accuracy/prune/molbbbp-n10/molbbbp-n10.runs.csv"
#: the studies' shared settings: molbbbp scaffold PrunE (its default preset), the declared
#: search space, a shortened schedule
SETTINGS = ["--data", "ogbg-molbbbp", "--split", "scaffold", "--reg", "size,eps-align",
            "--sampler", "random", "--sampler-seed", "0", "--workers", "1"]


def run_study(out: Path, pruner: str, trials: int, epochs: int,
              after: int | None = None) -> list[dict]:
    """Run (or continue) one study; its ``trials.csv`` rows."""
    cmd = [sys.executable, "-m", "grprune", "tune", *SETTINGS, "--pruner", pruner,
           "--trials", str(trials), "--epochs", str(epochs), "--out", str(out),
           "--progress", "plain"]
    if after is not None:
        cmd += ["--prune-after", str(after)]
    print("+", " ".join(cmd[1:]), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"pruning.py: the {pruner} study failed (exit {done.returncode})")
    with open(out / "trials.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def seed_sd() -> float:
    """The standard deviation over seeds of one configuration's validation ROC-AUC (PrunE,
    molbbbp scaffold, its default preset)."""
    with open(SEEDS_TABLE, newline="") as fh:
        rows = [r for r in csv.DictReader(fh)
                if (r["split"], r["method"], r["preset"]) == ("scaffold", "PrunE", "paper")]
    return statistics.stdev(float(r["valid"]) for r in rows)


def _params(row: dict) -> dict:
    skip = {"trial", "state", "value", "epochs", "run_dir", "repeat_of"}
    return {k: v for k, v in row.items() if k not in skip}


def summarize(pruned: list[dict], full: list[dict], sd: float, epochs: int,
              after: int) -> dict:
    """The comparison (see the module docstring)."""
    same = [_params(a) == _params(b) for a, b in zip(pruned, full)]
    n_pruned = sum(int(r["epochs"]) for r in pruned)
    n_full = sum(int(r["epochs"]) for r in full)

    def best(rows: list[dict]) -> dict:
        done = [r for r in rows if r["state"] == "COMPLETE" and r["value"] not in ("", "-")]
        return max(done, key=lambda r: float(r["value"]))

    bp, bf = best(pruned), best(full)
    gap = float(bf["value"]) - float(bp["value"])
    return {"trials": len(full), "epochs_per_trial": epochs, "prune_after": after,
            "same_values": all(same),
            "epochs_pruned": n_pruned, "epochs_unpruned": n_full,
            "epochs_saved": 1 - n_pruned / n_full,
            "trials_pruned": sum(r["state"] == "PRUNED" for r in pruned),
            "best_valid_pruned": float(bp["value"]), "best_trial_pruned": int(bp["trial"]),
            "best_valid_unpruned": float(bf["value"]), "best_trial_unpruned": int(bf["trial"]),
            "best_valid_gap": gap, "seed_sd_valid": sd, "within_noise": abs(gap) <= sd}


def markdown(result: dict, pruned: list[dict], full: list[dict], commit: str,
             hardware: str) -> str:
    r = result
    lines = [
        "# Pruning in `grprune tune`: epochs saved and the best validation score",
        "",
        f"Made by `python -m benchmarks.tune.pruning` at `{commit}` on {hardware}: "
        f"ogbg-molbbbp scaffold, PrunE (its default preset), the declared search space, "
        f"{r['trials']} trials of {r['epochs_per_trial']} epochs from the same seeded random "
        f"sampler, once with the median pruner (no trial pruned before epoch "
        f"{r['prune_after']}: `--prune-after {r['prune_after']}`) and once without (the "
        f"same values trial for trial: {'yes' if r['same_values'] else 'NO'}).",
        "",
        "| | pruned (median) | unpruned |",
        "|---|---|---|",
        f"| epochs trained | {r['epochs_pruned']} | {r['epochs_unpruned']} |",
        f"| trials pruned | {r['trials_pruned']} | 0 |",
        f"| best valid ROC-AUC | {100 * r['best_valid_pruned']:.2f} (trial "
        f"{r['best_trial_pruned']}) | {100 * r['best_valid_unpruned']:.2f} (trial "
        f"{r['best_trial_unpruned']}) |",
        "",
        f"Pruning saved **{100 * r['epochs_saved']:.0f} %** of the training epochs. The best "
        f"validation score differs by {100 * r['best_valid_gap']:+.2f} points, against a "
        f"seed standard deviation of {100 * r['seed_sd_valid']:.2f} for one configuration "
        f"(molbbbp-n10.runs.csv): "
        f"{'within noise' if r['within_noise'] else 'more than noise'}."
        + (f" The unpruned study's best trial ({r['best_trial_unpruned']}) was pruned at "
           f"epoch {int(pruned[r['best_trial_unpruned']]['epochs']) - 1}: the pruner saves "
           f"epochs by betting on early scores, and here it lost that bet within noise."
           if pruned[r["best_trial_unpruned"]]["state"] == "PRUNED" else ""),
        "",
        "| trial | state (pruned study) | epochs | valid | state (unpruned) | epochs | valid |",
        "|---|---|---|---|---|---|---|",
    ]
    for a, b in zip(pruned, full):
        def v(row: dict) -> str:
            return f"{100 * float(row['value']):.2f}" if row["value"] not in ("", "-") else "-"
        lines.append(f"| {a['trial']} | {a['state'].lower()} | {a['epochs']} | {v(a)} | "
                     f"{b['state'].lower()} | {b['epochs']} | {v(b)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/tune-pruning"))
    ap.add_argument("--write", type=Path, default=HERE / "pruning-molbbbp",
                    help="output stem: STEM.json and STEM.md")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--prune-after", type=int, default=None,
                    help="grprune tune --prune-after [default: tune's own]")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from grprune.tune.trial import prune_after_default
    after = (args.prune_after if args.prune_after is not None
             else prune_after_default(args.epochs, 0))  # molbbbp scaffold: no warm-up
    pruned = run_study(args.out / f"median-after{after}", "median", args.trials, args.epochs,
                       after)
    full = run_study(args.out / "none", "none", args.trials, args.epochs)
    result = summarize(pruned, full, seed_sd(), args.epochs, after)
    from grprune.provenance import cpu_model, git_commit
    commit = git_commit() or "unknown"
    hardware = f"{len(os.sched_getaffinity(0))} cores of an {cpu_model()} (CPU), one thread a trial"
    args.write.parent.mkdir(parents=True, exist_ok=True)
    args.write.with_suffix(".json").write_text(json.dumps(
        {**result, "commit": commit, "hardware": hardware, "python": platform.python_version(),
         "pruned": pruned, "unpruned": full}, indent=1) + "\n")
    args.write.with_suffix(".md").write_text(markdown(result, pruned, full, commit, hardware))
    print(args.write.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
