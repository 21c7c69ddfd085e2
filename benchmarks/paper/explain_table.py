"""The paper's explanation numbers from GOOD-Motif run directories: Recall@K and Precision@K
(appendix table ``table:recall_precision``), the G_c and G_s bonds among each graph's top
bonds (Fig. 2, ``fig:motivation``), the edge ROC-AUC (Fig. 4b, ``fig:sub2``), and pictures
of the first 8 OOD-test graphs of each split and method (Figs. 4a, 6 and 7).

Every finished run with a selector under the given folders is explained by grprune's own
``explain`` (:meth:`grprune.inference.Run.explain`, the code of ``grprune explain``) on each
``--part``; its ``metrics.json`` holds the metrics over every graph of the part and over the
correctly predicted ones (grprune/explain_metrics.py: bonds ranked per graph by the selector's
logit, ties to the lower bond id). This script only gathers them: mean ± sample std over the
seeds of each dataset split, method and setting, beside the paper's numbers, with the commit
and hardware of the runs (their ``summary.json``) and of this explanation. Runs whose
reported model is an ERM warm-up epoch, and runs without ground truth, are listed as skipped.

Writes ``PREFIX.md`` (the tables), ``PREFIX.csv`` (one row per group, part, graphs and
metric), ``PREFIX.runs.csv`` (one row per run, part and graphs) and ``PREFIX-pictures/``
(the lowest seed of each group: its first ``--pictures`` graphs of the OOD-test part, in
dataset order; motif bonds blue, kept bonds solid, pruned ones dashed). Each run's own
explanation stays in ``RUN_DIR/explain-<part>/``.

    python -m benchmarks.paper.explain_table runs/paper-explanations --out benchmarks/paper/explanations/explanations-cpu

``--fidelity`` adds, per run and part, its own score (the metric at its selected epoch) and
``fidelity.json``'s fidelity+, fidelity−, characterization and sparsity, as a table beside the
edge ROC-AUC (``benchmarks/paper/molsub/``: the same on real molecules, ``mol-substructure``).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import shlex
import shutil
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.paper.provenance import hardware, provenance_lines

#: the appendix table (table:recall_precision), PrunE on OOD-test:
#: split -> K (% lowest bonds) -> (recall, precision)
PAPER_RECALL_PRECISION = {
    "basis": {10: (0.1467, 1.0000), 20: (0.3076, 0.9831), 30: (0.4556, 0.9465),
              40: (0.6056, 0.9374), 50: (0.7356, 0.9017)},
    "size": {10: (0.0963, 0.9199), 20: (0.2023, 0.9602), 30: (0.3093, 0.9735),
             40: (0.4153, 0.9801), 50: (0.5243, 0.9841)},
}
#: Fig. 2 (GOOD-Motif basis): mean G_c and G_s bonds among the top ceil(f |G_c|), read off the
#: bar chart (the official repository's case_study.jpg, tianyao-aka/PrunE-GraphOOD@7b41dae;
#: about +-0.05): method -> factor -> (G_c, G_s). The oracle keeps the motif first: 5.87, 2.72
#: at 1.5; AIA (not in grprune) 3.97, 4.61 at 1.5.
PAPER_TOPK = {
    "PrunE": {"1.5": (5.44, 3.15), "3": (5.83, 5.72), "4": (5.86, 9.07), "5": (5.87, 9.86)},
    "GSAT": {"1.5": (3.76, 4.82)},
    "CIGA": {"1.5": (4.25, 4.34)},
}
#: Fig. 2's test accuracies (annotations on the chart; Table 1 has them to 2 decimals)
PAPER_TOPK_ACCURACY = {"PrunE": 0.914, "GSAT": 0.604, "CIGA": 0.687}
PART_NAMES = {"test": "OOD-test", "valid": "OOD-valid", "id-test": "ID-test",
              "id-valid": "ID-valid", "train": "train"}


# -- explaining the runs --------------------------------------------------------------
def group_labels(runs: Sequence) -> dict[Path, tuple[str, str, str]]:
    """``(column, method, setting)`` of each run: ``good-motif/basis``, ``PrunE (official)``
    and the hyperparameters that differ between the runs of one column and method (empty
    when they share one setting)."""
    from grprune.naming import method_label

    def column(r) -> str:
        return f"{r.dataset}/{r.split}" + (f"/{r.shift}" if r.shift not in (None, "covariate")
                                           else "")

    by_method: dict[tuple[str, str], list] = defaultdict(list)
    for r in runs:
        by_method[(column(r), method_label(r.reg, r.selector, r.preset))].append(r)
    out = {}
    for (col, method), members in by_method.items():
        keys = sorted({k for r in members for k in r.hparams})
        varying = [k for k in keys if len({repr(r.hparams.get(k)) for r in members}) > 1]
        for r in members:
            setting = ", ".join(f"{k}={r.hparams.get(k)}" for k in varying)
            out[r.path] = (col, method, setting)
    return out


def _graphs_to_draw(run, part: str, n: int) -> list[int]:
    """The first ``n`` graphs of the part as the run used it (dataset order)."""
    dataset = run.load_dataset()
    return [int(i) for i in run.part_indices(dataset, part)[:max(n, 1)]]


def _copy_pictures(res, dest: Path) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    names = [f for f in res.files if f.endswith((".png", ".svg"))]
    for name in names:
        shutil.copyfile(res.out_dir / name, dest / name)
    return len(names)


def _slug(text: str) -> str:
    """``PrunE (official)`` -> ``prune-official``: a folder name."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def metric_values(metrics: dict, subset: str) -> dict[str, float | None]:
    """Flat metrics of one subset (``all`` or ``correct``) of ``metrics.json``."""
    m = metrics[subset]
    out: dict[str, float | None] = {"graphs": m.get("graphs"), "rocauc": m.get("rocauc")}
    if subset == "all":
        out["accuracy"] = metrics.get("accuracy")
    for k, v in m.get("at_k", {}).items():
        out[f"recall@{k}"], out[f"precision@{k}"] = v.get("recall"), v.get("precision")
    for f, v in m.get("top_k", {}).items():
        for key in ("gc", "gs", "gc_oracle", "gs_oracle"):
            out[f"top{f}_{key}"] = v.get(key)
    return out


def explain_runs(dirs: Sequence[Path], parts: Sequence[str], pictures: int,
                 pictures_dir: Path | None, device: str,
                 log: Callable[[str], None], fidelity: bool = False
                 ) -> tuple[list[dict], list[str], list]:
    """Explain every finished run with a selector under ``dirs`` (``fidelity``: its
    ``fidelity.json`` too, :func:`fidelity_values`).

    Returns
    -------
    records : list of dict
        One per run, part and subset: ``column``, ``method``, ``setting``, ``seed``,
        ``part``, ``subset``, ``run_dir``, ``commit``, ``hardware`` and the flat metrics
        (:func:`metric_values`).
    notes : list of str
        Runs skipped, and why.
    runs : list of grprune.collect.reading.Run
        The runs explained.
    """
    from grprune.collect import scan_runs
    from grprune.errors import GrpruneError
    from grprune.inference import load_run

    scan = scan_runs(dirs)
    notes = [f"{p.path}: {p.kind} ({p.reason})" for p in scan.problems]
    runs = [r for r in scan.runs if r.selector != "none"]
    notes += [f"{r.path}: no selector (ERM), nothing to explain" for r in scan.runs
              if r.selector == "none"]
    labels = group_labels(runs)
    first_seed: dict[tuple[str, str, str], Path] = {}
    for r in sorted(runs, key=lambda r: r.seed):
        first_seed.setdefault(labels[r.path], r.path)
    records, explained = [], []
    for r in runs:
        col, method, setting = labels[r.path]
        draw = pictures > 0 and first_seed[labels[r.path]] == r.path
        try:
            run = load_run(r.path, device=device)
            for part in parts:
                # fidelity.json costs two more passes of the model over the whole part
                res = run.explain(part=part, out=r.path / f"explain-{part}",
                                  graphs=_graphs_to_draw(run, part, pictures if draw else 1),
                                  fidelity=fidelity)
                if res.metrics is None:
                    notes.append(f"{r.path} ({part}): {'; '.join(res.notes)}")
                    break
                if draw and part == "test" and pictures_dir is not None:
                    dest = pictures_dir / _slug(col) / f"{_slug(method)}-seed{r.seed}"
                    if setting:
                        dest = dest.with_name(dest.name + "-" + r.setting_id[:8])
                    log(f"{_copy_pictures(res, dest)} pictures -> {dest}")
                for subset in ("all", "correct"):
                    records.append({"column": col, "method": method, "setting": setting,
                                    "seed": r.seed, "part": part, "subset": subset,
                                    "run_dir": str(r.path),
                                    "commit": (r.summary.environment or {}).get("commit"),
                                    "hardware": hardware(r.summary),
                                    **metric_values(res.metrics, subset),
                                    **(fidelity_values(res.fidelity, r.summary, part)
                                       if subset == "all" else {})})
            else:
                explained.append(r)
        except GrpruneError as exc:
            notes.append(f"{r.path}: {exc}")
        log(f"explained {r.path}")
    return records, notes, explained


#: fidelity.json's scores, in the order of the table (grprune/explain_fidelity.py)
FIDELITY_KEYS = ("fid_plus", "fid_minus", "fid_plus_prob", "fid_minus_prob",
                 "characterization", "sparsity")


def fidelity_values(fid: dict | None, summary, part: str) -> dict[str, float | None]:
    """The run's own score on ``part`` (``score``: its metric at the selected epoch, the
    number Table 1 reports) and, with ``fid`` (``fidelity.json``), each score of
    :data:`FIDELITY_KEYS` against the phenomenon (the true label) and the model (its own
    prediction): ``phenomenon_fid_plus`` and so on."""
    out: dict[str, float | None] = {"score": getattr(summary, part, None)}
    for kind in ("phenomenon", "model"):
        for key in FIDELITY_KEYS:
            out[f"{kind}_{key}"] = (fid or {}).get(kind, {}).get(key)
    return out


# -- aggregating ------------------------------------------------------------------------
GROUP = ("column", "method", "setting", "part", "subset")
NOT_METRICS = set(GROUP) | {"seed", "run_dir", "commit", "hardware"}


def aggregate(records: Sequence[dict]) -> list[dict]:
    """Mean, sample std and n over seeds per group and metric (None values left out).

    Returns
    -------
    list of dict
        ``column``, ``method``, ``setting``, ``part``, ``graphs`` (all / correct),
        ``metric``, ``mean``, ``std`` (NaN for one seed), ``n``, ``seeds``.
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        groups[tuple(rec[k] for k in GROUP)].append(rec)
    rows = []
    for key, recs in groups.items():
        metrics = [k for k in recs[0] if k not in NOT_METRICS]
        for metric in metrics:
            pairs = [(r["seed"], float(r[metric])) for r in recs
                     if r.get(metric) is not None and not _isnan(r[metric])]
            if not pairs:
                continue
            values = [v for _, v in pairs]
            rows.append({"column": key[0], "method": key[1], "setting": key[2],
                         "part": key[3], "graphs": key[4], "metric": metric,
                         "mean": statistics.fmean(values),
                         "std": statistics.stdev(values) if len(values) > 1 else math.nan,
                         "n": len(values), "seeds": ";".join(str(s) for s, _ in sorted(pairs))})
    return rows


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def paper_value(row: dict | None) -> float | None:
    """The paper's number for an aggregated row, where it gives one (OOD-test, all graphs)."""
    if row is None or row["part"] != "test" or row["graphs"] != "all":
        return None
    split = row["column"].split("/")[1] if "/" in row["column"] else ""
    base = row["method"].split(" ")[0]
    metric = row["metric"]
    if (base == "PrunE" and metric.startswith(("recall@", "precision@"))
            and split in PAPER_RECALL_PRECISION):
        k = int(float(metric.split("@")[1]))
        pair = PAPER_RECALL_PRECISION[split].get(k)
        return None if pair is None else pair[0 if metric.startswith("recall") else 1]
    if split == "basis" and metric.startswith("top") and metric.endswith(("_gc", "_gs")):
        factor, which = metric[3:].rsplit("_", 1)
        pair = PAPER_TOPK.get(base, {}).get(factor)
        return None if pair is None else pair[0 if which == "gc" else 1]
    if split == "basis" and metric == "accuracy":
        return PAPER_TOPK_ACCURACY.get(base)
    return None


# -- writing ------------------------------------------------------------------------------
def _cell(row: dict | None, digits: int) -> str:
    if row is None:
        return "–"
    if row["n"] == 1:
        return f"{row['mean']:.{digits}f} (n=1)"
    return f"{row['mean']:.{digits}f} ± {row['std']:.{digits}f}"


def _num(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _mean(row: dict | None) -> float | None:
    return None if row is None else row["mean"]


def _n(*rows: dict | None) -> int:
    return max((r["n"] for r in rows if r is not None), default=0)


def _index(rows: Sequence[dict]) -> dict[tuple, dict]:
    return {(r["column"], r["method"], r["setting"], r["part"], r["graphs"], r["metric"]): r
            for r in rows}


def _groups(rows: Sequence[dict], part: str) -> list[tuple[str, str, str]]:
    return sorted({(r["column"], r["method"], r["setting"]) for r in rows if r["part"] == part})


def _name(method: str, setting: str) -> str:
    return f"{method} ({setting})" if setting else method


def recall_precision_table(rows: Sequence[dict]) -> list[str]:
    """Markdown: Recall@K and Precision@K on OOD-test, all graphs, beside the paper."""
    idx = _index(rows)
    ks = sorted({int(float(r["metric"].split("@")[1])) for r in rows
                 if r["metric"].startswith("recall@")})
    out = ["| dataset | method | K % | Recall | Precision | paper Recall | paper Precision | n |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for col, method, setting in _groups(rows, "test"):
        for k in ks:
            rec = idx.get((col, method, setting, "test", "all", f"recall@{k}"))
            prec = idx.get((col, method, setting, "test", "all", f"precision@{k}"))
            if rec is None and prec is None:
                continue
            out.append(f"| {col} | {_name(method, setting)} | {k} | {_cell(rec, 4)} | "
                       f"{_cell(prec, 4)} | {_num(paper_value(rec), 4)} | "
                       f"{_num(paper_value(prec), 4)} | {_n(rec, prec)} |")
    return out


def top_k_table(rows: Sequence[dict]) -> list[str]:
    """Markdown: G_c and G_s bonds among the top ceil(f |G_c|), OOD-test, all graphs (Fig. 2)."""
    idx = _index(rows)
    factors = sorted({r["metric"][3:].rsplit("_", 1)[0] for r in rows
                      if r["metric"].startswith("top") and r["metric"].endswith("_gc")},
                     key=float)
    out = ["| dataset | method | top-K | G_c bonds | G_s bonds | oracle G_c | oracle G_s | "
           "accuracy | paper G_c | paper G_s | paper accuracy | n |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for col, method, setting in _groups(rows, "test"):
        acc = idx.get((col, method, setting, "test", "all", "accuracy"))
        for f in factors:
            get = {key: idx.get((col, method, setting, "test", "all", f"top{f}_{key}"))
                   for key in ("gc", "gs", "gc_oracle", "gs_oracle")}
            if get["gc"] is None:
                continue
            out.append(f"| {col} | {_name(method, setting)} | ⌈{f}·\\|G_c\\|⌉ | "
                       f"{_cell(get['gc'], 2)} | {_cell(get['gs'], 2)} | "
                       f"{_num(_mean(get['gc_oracle']), 2)} | {_num(_mean(get['gs_oracle']), 2)} | "
                       f"{_cell(acc, 4)} | {_num(paper_value(get['gc']), 2)} | "
                       f"{_num(paper_value(get['gs']), 2)} | {_num(paper_value(acc), 3)} | "
                       f"{_n(get['gc'])} |")
    return out


def rocauc_table(rows: Sequence[dict]) -> list[str]:
    """Markdown: edge ROC-AUC against the motif bonds per part, all and correct graphs (Fig. 4b)."""
    idx = _index(rows)
    out = ["| dataset | method | part | all graphs | correctly predicted graphs | n |",
           "|---|---|---|---:|---:|---:|"]
    for part in sorted({r["part"] for r in rows}, key=lambda p: (p != "test", p)):
        for col, method, setting in _groups(rows, part):
            a = idx.get((col, method, setting, part, "all", "rocauc"))
            c = idx.get((col, method, setting, part, "correct", "rocauc"))
            if a is None and c is None:
                continue
            out.append(f"| {col} | {_name(method, setting)} | {PART_NAMES.get(part, part)} | "
                       f"{_cell(a, 4)} | {_cell(c, 4)} | {_n(a, c)} |")
    return out


def fidelity_table(rows: Sequence[dict]) -> list[str]:
    """Markdown: per dataset, method and part, the run's own score, the explanation's edge
    ROC-AUC and its fidelity against the phenomenon (all graphs); empty without fidelity."""
    idx = _index(rows)
    out = ["| dataset | method | part | score | edge ROC-AUC | fid+ (acc) | fid- (acc) | "
           "fid+ (prob) | fid- (prob) | characterization | sparsity | n |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for part in ("test", "valid"):
        for col, method, setting in _groups(rows, part):
            cells = [idx.get((col, method, setting, part, "all", m)) for m in
                     ("score", "rocauc", *(f"phenomenon_{k}" for k in FIDELITY_KEYS))]
            if all(c is None for c in cells[2:]):
                continue
            out.append(f"| {col} | {_name(method, setting)} | {PART_NAMES.get(part, part)} | "
                       + " | ".join(_cell(c, 4) for c in cells) + f" | {_n(*cells)} |")
    return out if len(out) > 2 else []


def markdown(rows: Sequence[dict], runs: Sequence, notes: Sequence[str], argv: Sequence[str],
             pictures_dir: Path | None,
             title: str = "Explanations of GOOD-Motif runs: Recall@K / Precision@K, Fig. 2, "
                          "Fig. 4b") -> str:
    """The whole ``PREFIX.md``."""
    from grprune.provenance import cpu_model, git_commit

    lines = [f"# {title}", "",
             f"Written by `python -m benchmarks.paper.explain_table {shlex.join(argv)}`; "
             f"explained at commit `{git_commit() or 'unknown'}` on {cpu_model()} "
             f"({len(os.sched_getaffinity(0))} cores).", "",
             "Training of the runs explained:", "", *provenance_lines(runs), "",
             "Every bond is counted once (both directions share one logit) and ranked within "
             "its graph by the selector's logit, ties to the lower bond id "
             "(grprune/explain_metrics.py). "
             "Mean ± sample std over seeds; `paper` is the paper's number for PrunE (and Fig. 2's "
             "baselines) on Motif-base / Motif-size, where it gives one. Every value over the "
             "correctly predicted graphs too: the CSV files.", "",
             "## Recall@K and Precision@K of \"the K % lowest bonds are spurious\" "
             "(appendix, table:recall_precision), OOD-test", "",
             *recall_precision_table(rows), "",
             "## G_c and G_s bonds among each graph's top ⌈f·|G_c|⌉ bonds (Fig. 2), OOD-test",
             "",
             "The paper's Fig. 2 is an image: its values are read off the bar chart "
             "(about ±0.05). "
             "There the oracle has 5.87 G_c and 2.72 G_s bonds at 1.5·|G_c|, and AIA (not in "
             "grprune) 3.97 and 4.61. The factors are those `grprune explain` computes "
             "(grprune/explain_metrics.py, `TOPK_FACTORS`).", "",
             *top_k_table(rows), "",
             "## Edge ROC-AUC of the keep probability against the motif bonds (Fig. 4b)", "",
             "The paper plots the ROC curves (validation and test, correctly predicted graphs) "
             "and gives no number; its text calls both splits' AUC high.", "",
             *rocauc_table(rows), ""]
    fidelity = fidelity_table(rows)
    if fidelity:
        lines += ["## Fidelity, without ground truth (`--fidelity`)", "",
                  "`score`: the run's own metric on the part at its selected epoch (accuracy "
                  "or ROC-AUC, as Table 1). The explanation S is the bonds the evaluation "
                  "mask keeps; fidelity+ is the change when S is removed, fidelity− when only "
                  "S is kept, against the true label (GraphFramEx's phenomenon form; the "
                  "accuracy forms and characterization as `torch_geometric.explain.metric`; "
                  "docs/explain.md). The model form is in the CSV files.", "",
                  *fidelity, ""]
    if pictures_dir is not None:
        lines += ["## Pictures (Figs. 4a, 6, 7)", "",
                  f"`{pictures_dir}/`: for the lowest seed of each dataset and method, the first "
                  f"graphs of the OOD-test part in dataset order (a rule, not a choice), drawn by "
                  f"`grprune explain`: motif bonds blue, kept bonds solid, pruned bonds dashed "
                  f"(the paper highlights the top-|G_c| bonds instead).", ""]
    if notes:
        lines += ["## Not explained", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(lines)


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                    help="run directories or sweep folders (searched recursively)")
    ap.add_argument("--out", type=Path, required=True, metavar="PREFIX",
                    help="write PREFIX.md, PREFIX.csv, PREFIX.runs.csv and PREFIX-pictures/")
    ap.add_argument("--parts", default="test,valid",
                    help="split parts to explain, comma-separated [default: test,valid]")
    ap.add_argument("--pictures", type=int, default=8,
                    help="OOD-test graphs drawn per dataset and method (0: none) [default: 8]")
    ap.add_argument("--device", default="cpu", help="where the models score [default: cpu]")
    ap.add_argument("--fidelity", action="store_true",
                    help="also fidelity+/-, characterization and sparsity (two more passes of "
                         "each model over each part) and the runs' own scores")
    ap.add_argument("--title", default="Explanations of GOOD-Motif runs: Recall@K / "
                    "Precision@K, Fig. 2, Fig. 4b", help="the Markdown's heading")
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    pictures_dir = args.out.with_name(args.out.name + "-pictures") if args.pictures else None
    if pictures_dir is not None and pictures_dir.exists():
        shutil.rmtree(pictures_dir)  # pictures of runs no longer there would linger

    def log(msg: str) -> None:
        print(f"explain_table: {msg}", file=sys.stderr, flush=True)

    from grprune.errors import GrpruneError
    try:
        records, notes, runs = explain_runs(args.dirs, parts, args.pictures, pictures_dir,
                                            args.device, log, fidelity=args.fidelity)
    except GrpruneError as exc:
        log(str(exc))
        return 2
    if not records:
        log("no run could be explained" + "".join(f"\n  {n}" for n in notes))
        return 1
    rows = aggregate(records)
    for row in rows:
        row["paper"] = paper_value(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(args.out.with_name(args.out.name + ".csv"), rows)
    write_csv(args.out.with_name(args.out.name + ".runs.csv"), records)
    md = markdown(rows, runs, notes, argv, pictures_dir, args.title)
    args.out.with_name(args.out.name + ".md").write_text(md, encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
