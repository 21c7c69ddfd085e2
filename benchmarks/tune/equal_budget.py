"""The equal-budget comparison (issue 62), DomainBed's protocol on graphs: each method gets
the same sampler and the same number of ``grprune tune`` trials on validation; its chosen
configuration then runs at fresh seeds; the table shows, per split, each method's tuned
test score beside its default score and the paper's, and PrunE − ERM at both with its 95 %
confidence interval (Welch, :func:`benchmarks.accuracy.table1.difference`).

    python -m benchmarks.tune.equal_budget run --spec benchmarks/tune/equal-budget.yaml \
        --runs runs/equal-budget
    python -m benchmarks.tune.equal_budget table --spec benchmarks/tune/equal-budget.yaml

``run`` works in stages and commits each stage's result beside the spec, in
``equal-budget/`` (so that a later session, on another machine, goes on from there):

1. per split and method, the study (``grprune tune``): ``<split>-<method>.trials.csv`` and
   ``<split>-<method>.best.yaml`` once it has ended;
2. per split and method, the chosen configuration at the spec's seeds (``grprune sweep
   --config best.yaml``), and the defaults of methods without committed default rows
   (GSAT, CIGA): rows of ``runs.csv`` (kind ``tuned`` or ``default``);
3. ``table``: ``equal-budget.md``.

A stage whose output is committed is skipped; an interrupted study or sweep resumes from
its directory under ``--runs`` while that is there.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
#: the committed default runs of ERM and PrunE (their datasets' default presets, 10 seeds)
DEFAULTS = REPO / "benchmarks/accuracy/prune/molbbbp-n10/molbbbp-n10.runs.csv"
#: the paper's Table 1, mean and std of test ROC-AUC (ERM and PrunE as table1.py has them)
PAPER = {("ogbg-molbbbp", "scaffold"): {"ERM": (68.10, 1.68), "PrunE": (70.32, 1.73),
                                        "GSAT": (66.78, 1.45), "CIGA": (64.92, 2.09)},
         ("ogbg-molbbbp", "size"): {"ERM": (78.29, 3.76), "PrunE": (81.59, 5.35),
                                    "GSAT": (75.63, 3.83), "CIGA": (65.98, 3.31)}}
FIELDS = ["dataset", "split", "method", "kind", "seed", "valid", "test", "best_epoch",
          "selected_phase", "config_hash", "commit", "hardware"]


def load_spec(path: Path) -> dict:
    """The spec (``equal-budget.yaml``'s keys; ``preset``, ``epochs`` and ``hparams``, a
    mapping of ``-H`` values for every run, are optional, and so is a method's own
    ``hparams``, fixed in its study and so in its tuned runs, not in its default runs),
    with ``dir``: where results are committed. ``preset`` is written into every command,
    so that a later change of ``--preset auto``'s choice does not change a study half-way
    (``grprune tune`` refuses to go on with a study whose configuration changed)."""
    spec = yaml.safe_load(path.read_text())
    spec["dir"] = path.parent / path.stem
    spec["fixed"] = [a for k, v in (spec.get("hparams") or {}).items()
                     for a in ("-H", f"{k}={v}")]
    if spec.get("preset"):
        spec["fixed"] += ["--preset", str(spec["preset"])]
    if spec.get("epochs"):
        spec["fixed"] += ["--epochs", str(spec["epochs"])]
    return spec


def grprune(*args: str) -> None:
    cmd = [sys.executable, "-m", "grprune", *args]
    print("+ grprune", " ".join(args), file=sys.stderr, flush=True)
    if subprocess.run(cmd).returncode != 0:
        raise SystemExit(f"equal_budget.py: failed: grprune {' '.join(args)}")


def tune_stage(spec: dict, split: str, method: str, runs: Path) -> Path:
    """Run (or go on with) one study; its committed ``best.yaml``."""
    out, stem = spec["dir"], f"{split}-{method}"
    best = out / f"{stem}.best.yaml"
    if best.is_file():
        return best
    m, where = spec["methods"][method], runs / "tune" / stem
    extra = ["--space", str(args_path(spec, m["space"]))] if m.get("space") else []
    extra += [a for k, v in (m.get("hparams") or {}).items() for a in ("-H", f"{k}={v}")]
    grprune("tune", "--data", spec["data"], "--split", split, "--reg", m["reg"], *extra,
            "--trials", str(spec["trials"]), "--sampler", spec["sampler"],
            "--pruner", spec["pruner"], "--workers", str(spec["workers"]),
            "--study", stem, "--out", str(where), "--progress", "plain", *spec["fixed"])
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(where / "trials.csv", out / f"{stem}.trials.csv")
    shutil.copyfile(where / "best.yaml", best)
    return best


def args_path(spec: dict, name: str) -> Path:
    """A file the spec names, relative to the spec's folder."""
    return spec["dir"].parent / name


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def seed_stage(spec: dict, split: str, method: str, kind: str, runs: Path,
               best: Path | None) -> None:
    """The method's runs at the spec's seeds (``kind`` tuned: ``best``'s configuration;
    default: its defaults), appended to the committed ``runs.csv``."""
    from benchmarks.accuracy.table1 import hardware_of
    from grprune.collect import scan_runs
    table = spec["dir"] / "runs.csv"
    have = [r for r in read_rows(table) if (r["split"], r["method"], r["kind"])
            == (split, method, kind)]
    seeds = spec["seeds"]
    lo, _, hi = str(seeds).partition("-")
    if len(have) >= int(hi or lo) - int(lo) + 1:
        return
    where = runs / kind / f"{split}-{method}"
    config = ["--config", str(best)] if best else ["--data", spec["data"], "--split", split,
                                                   "--reg", spec["methods"][method]["reg"]]
    grprune("sweep", *config, "--seeds", str(seeds), "--workers", str(spec["workers"]),
            "--out", str(where), "--progress", "plain", *spec["fixed"])
    rows = [r for r in read_rows(table) if (r["split"], r["method"], r["kind"])
            != (split, method, kind)]
    for run in scan_runs(where).runs:
        s, env = run.summary, run.summary.environment or {}
        rows.append({"dataset": run.dataset, "split": run.split, "method": method,
                     "kind": kind, "seed": run.seed, "valid": s.valid, "test": s.test,
                     "best_epoch": s.best_epoch, "selected_phase": s.selected_phase,
                     "config_hash": s.config_hash,
                     "commit": env.get("commit", ""), "hardware": hardware_of(env)})
    rows.sort(key=lambda r: (r["split"], r["method"], r["kind"], int(r["seed"])))
    table.parent.mkdir(parents=True, exist_ok=True)
    tmp = table.with_suffix(".tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        w.writerows(rows)
    tmp.replace(table)


def run(spec: dict, runs: Path) -> None:
    """Every stage, breadth first: all studies, then the tuned seeds, then the defaults."""
    best = {(s, m): tune_stage(spec, s, m, runs) for s in spec["splits"]
            for m in spec["methods"]}
    for (split, method), path in best.items():
        seed_stage(spec, split, method, "tuned", runs, path)
    committed = {(r["split"], r["method"]) for r in read_rows(DEFAULTS)}
    for split in spec["splits"]:
        for method in spec["methods"]:
            if (split, method) not in committed:
                seed_stage(spec, split, method, "default", runs, None)


def cell(rows: list[dict]) -> dict | None:
    """mean, std (×100) and n of the test scores of ``rows``."""
    tests = [100 * float(r["test"]) for r in rows]
    if not tests:
        return None
    return {"test_mean": statistics.mean(tests), "n": len(tests),
            "test_std": statistics.stdev(tests) if len(tests) > 1 else float("nan")}


def default_rows(spec: dict, split: str, method: str) -> list[dict]:
    """The committed default runs: molbbbp-n10 for ERM and PrunE (the spec's preset, else
    the split's default one), else the spec's own ``default`` rows."""
    from grprune.presets import default_for
    preset = spec.get("preset") or default_for(spec["data"], split)
    rows = [r for r in read_rows(DEFAULTS) if (r["dataset"], r["split"], r["method"],
                                                r["preset"]) == (spec["data"], split,
                                                                 method, preset)]
    return rows or [r for r in read_rows(spec["dir"] / "runs.csv")
                    if (r["split"], r["method"], r["kind"]) == (split, method, "default")]


def table(spec: dict) -> str:
    from benchmarks.accuracy.table1 import difference
    runs = read_rows(spec["dir"] / "runs.csv")

    def fmt(c: dict | None) -> str:
        return ("not run" if c is None else
                f"{c['test_mean']:.2f} ± {c['test_std']:.2f} (n={c['n']})")

    commits = sorted({r["commit"] for r in runs}) or ["-"]
    hardware = sorted({r["hardware"] for r in runs}) or ["-"]
    lines = ["# The equal-budget comparison on ogbg-molbbbp", "",
             f"Each method: {spec['trials']} `grprune tune` trials ({spec['sampler']} sampler, "
             f"{spec['pruner']} pruner) on validation ROC-AUC, its declared search space "
             f"(ERM: `erm-space.yaml`), then the chosen configuration at seeds {spec['seeds']}. "
             f"Test ROC-AUC, mean ± sd. Commits {', '.join(commits)}; "
             f"{'; '.join(hardware)}. Made by `python -m benchmarks.tune.equal_budget`.", ""]
    for split in spec["splits"]:
        lines += [f"## {split}", "", "| method | tuned | default | paper | chosen (valid) "
                  "| tuned runs that selected an ERM warm-up epoch |", "|---|---|---|---|---|---|"]
        cells = {}
        for method in spec["methods"]:
            tuned_rows = [r for r in runs if (r["split"], r["method"], r["kind"])
                          == (split, method, "tuned")]
            tuned = cell(tuned_rows)
            warm = sum(r.get("selected_phase") == "warmup" for r in tuned_rows)
            default = cell(default_rows(spec, split, method))
            cells[method] = (tuned, default)
            paper = PAPER.get((spec["data"], split), {}).get(method)
            best = spec["dir"] / f"{split}-{method}.trials.csv"
            chosen = max((float(r["value"]) for r in read_rows(best)
                          if r["state"] == "COMPLETE" and r["value"] not in ("", "-")),
                         default=None)
            lines.append(f"| {method} | {fmt(tuned)} | {fmt(default)} | "
                         f"{'-' if paper is None else f'{paper[0]:.2f} ± {paper[1]:.2f}'} | "
                         f"{'-' if chosen is None else f'{100 * chosen:.2f}'} | "
                         f"{f'{warm} of {len(tuned_rows)}' if tuned_rows else '-'} |")
        lines.append("")
        for i, kind in enumerate(("tuned", "default")):
            p, e = cells.get("PrunE", (None, None))[i], cells.get("ERM", (None, None))[i]
            if p and e and p["n"] > 1 and e["n"] > 1:
                d, lo, hi = difference(p, e)
                lines.append(f"PrunE − ERM, {kind}: {d:+.2f} [{lo:+.2f}, {hi:+.2f}] "
                             f"(n = {p['n']}, {e['n']}).")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["run", "table"])
    ap.add_argument("--spec", type=Path, default=HERE / "equal-budget.yaml")
    ap.add_argument("--runs", type=Path, default=Path("runs/equal-budget"),
                    help="where studies and runs train (not committed)")
    args = ap.parse_args(argv)
    spec = load_spec(args.spec)
    if args.command == "run":
        run(spec, args.runs.absolute())
    text = table(spec)
    (spec["dir"].parent / f"{spec['dir'].name}.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
