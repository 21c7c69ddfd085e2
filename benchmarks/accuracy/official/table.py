"""The comparison table of ``README.md`` beside this file: the official PrunE code against
grprune on the same exported data, one row per Table-1 column.

Run with grprune's venv::

    .venv/bin/python -m benchmarks.accuracy.official.table            # print it
    .venv/bin/python -m benchmarks.accuracy.official.table --readme benchmarks/accuracy/official/README.md

The official code's runs come from ``results.jsonl`` (``runs.py``); grprune's from its
committed runs (:data:`GRPRUNE`: ``../prune/molbbbp/molbbbp.csv``, 4 seeds per preset at
``2820ba7``; GOOD-Motif's ``../prune/motif-paper/motif-full*.runs.csv``, the cells ``../table1.py``
takes). A column the official code has no run of says ``not run``.
Welch's t compares the official code with grprune's ``official`` preset (the same recipe):

.. math::
    t = \\frac{\\bar x_1 - \\bar x_2}{\\sqrt{s_1^2/n_1 + s_2^2/n_2}}, \\qquad
    \\nu = \\frac{(s_1^2/n_1 + s_2^2/n_2)^2}{\\frac{(s_1^2/n_1)^2}{n_1 - 1}
           + \\frac{(s_2^2/n_2)^2}{n_2 - 1}}

with the two-sided p from Student's t with ν degrees of freedom (Welch, 1947).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from benchmarks.accuracy.mdtable import TEXT_COLUMNS, header, mean_std, row, splice
from benchmarks.accuracy.official import common

HERE = Path(__file__).resolve().parent

#: (dataset, split, Table-1 column name) with official-code runs
COLUMNS = [("good-motif", "basis", "GOOD-Motif basis (accuracy)"),
           ("good-motif", "size", "GOOD-Motif size (accuracy)"),
           ("ogbg-molbbbp", "scaffold", "ogbg-molbbbp scaffold (ROC-AUC)"),
           ("ogbg-molbbbp", "size", "ogbg-molbbbp size (ROC-AUC)")]
EPYC = "2 cores of an AMD EPYC (CPU)"
#: grprune's committed runs per dataset, oldest first (a later file's cell replaces an
#: earlier one's, as in ``../table1.py``): (table under benchmarks/accuracy, kind, commit,
#: hardware); kind ``collect`` is a ``grprune collect`` table, ``runs`` a per-run table
#: (``table1.RUN_FIELDS``: ``table1.py runs`` or ``prune/ablation.py table``; one row per
#: run, with its commit and hardware; only the seeds the official code ran are compared; a
#: file not there yet is skipped)
GRPRUNE = {"ogbg-molbbbp": [("prune/molbbbp/molbbbp.csv", "collect", "2820ba7", EPYC),
                            ("prune/molbbbp-n10/molbbbp-n10.runs.csv", "runs", "", ""),
                            ("prune/molbbbp/molbbbp-official.runs.csv", "runs", "", "")],
           "good-motif": [("prune/motif-paper/motif-full.runs.csv", "runs", "", ""),
                          ("prune/motif-paper/motif-full-rerun.runs.csv", "runs", "", ""),
                          ("prune/motif-paper/motif-official.runs.csv", "runs", "", "")]}
#: the paper's PrunE (mean, std), Table 1
PAPER = {("good-motif", "basis"): (91.48, 0.40), ("good-motif", "size"): (66.53, 8.55),
         ("ogbg-molbbbp", "scaffold"): (70.32, 1.73), ("ogbg-molbbbp", "size"): (81.59, 5.35)}
BEGIN = "<!-- official-table: written by official/table.py --readme; edit that, not this -->"
#: the keys (and types) of a record the table reads
TABLE_KEYS = {**common.CORE_KEYS, "best_epoch": int, "official_commit": str,
              "grprune_commit": str, "hardware": str}
END = "<!-- /official-table -->"


def welch(m1: float, s1: float, n1: int, m2: float, s2: float, n2: int
          ) -> tuple[float, float, float]:
    """Welch's t, its degrees of freedom and the two-sided p (the module's equation).

    Returns ``(nan, nan, nan)`` when a side has fewer than 2 runs or both stds are 0.

    Examples
    --------
    >>> [round(x, 3) for x in welch(1.0, 1.0, 4, 0.0, 1.0, 4)]
    [1.414, 6.0, 0.207]
    """
    if n1 < 2 or n2 < 2:
        return math.nan, math.nan, math.nan
    v1, v2 = s1 * s1 / n1, s2 * s2 / n2
    if v1 + v2 == 0:
        return math.nan, math.nan, math.nan
    t = (m1 - m2) / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1))
    from scipy import stats
    return t, df, float(2 * stats.t.sf(abs(t), df))


def grprune_cells(path: Path, kind: str = "collect", commit: str = "", hardware: str = "",
                  seeds: set[int] | None = None
                  ) -> dict[tuple[str, str, str, str], tuple[float, float, int, str, str]]:
    """``(dataset, split, method, preset) -> (mean, std, n, commit, hardware)``, test ×100,
    from a collect table or (``kind="runs"``) a per-run table over ``seeds`` (all when None)."""
    import pandas as pd
    df = pd.read_csv(path, dtype=TEXT_COLUMNS)
    out = {}
    if kind == "runs":
        if seeds is not None:
            df = df[df["seed"].isin(sorted(seeds))]
        for key, g in df.groupby(["dataset", "split", "method", "preset"]):
            v = 100 * g["test"].astype(float)
            out[key] = (float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0, len(v),
                        "+".join(sorted(set(map(str, g["commit"])))),
                        "; ".join(sorted(set(map(str, g["hardware"])))))
        return out
    for r in df.itertuples():
        out[(r.dataset, r.split, r.method.split(" (")[0], r.preset)] = (
            100 * r.test_mean, 100 * r.test_std, int(r.n), commit, hardware)
    return out


def rows(results: Path = common.RESULTS, root: Path = HERE.parent) -> list[dict]:
    """One dict per column: the official code, grprune's presets, ERM, the paper, Welch."""
    from grprune.presets import default_for
    runs = common.read_results(results, TABLE_KEYS)
    none = (math.nan, math.nan, 0, "", "")
    out = []
    for dataset, split, name in COLUMNS:
        cells: dict = {}
        mine = [r for r in runs if (r["dataset"], r["split"]) == (dataset, split)]
        for rel, kind, commit, hardware in GRPRUNE[dataset]:
            if kind == "runs" and not (root / rel).is_file():
                continue
            cells.update(grprune_cells(root / rel, kind, commit, hardware,
                                       seeds={int(r["seed"]) for r in mine} or None))
        off = common.summarize(mine, dataset, split)
        default = default_for(dataset, split)
        g_off = cells.get((dataset, split, "PrunE", "official"), none)
        used = [(c, who) for c, who in (
            (g_off, "PrunE"), (cells.get((dataset, split, "PrunE", default), none), "PrunE"),
            (cells.get((dataset, split, "ERM", default), none), "ERM")) if c[2]]
        out.append({
            "column": name, "official": off,
            "official_warmup": sum(int(r["best_epoch"]) < 10 for r in mine),
            "official_commit": "; ".join(sorted({f"{r['official_commit'][:7]} (official "
                                                 f"code), harness at grprune "
                                                 f"{r['grprune_commit']}" for r in mine})),
            "official_hardware": "; ".join(sorted({r["hardware"] for r in mine})),
            "grprune_official": g_off[:3], "default_preset": default,
            "grprune_default": cells.get((dataset, split, "PrunE", default), none)[:3],
            "erm": cells.get((dataset, split, "ERM", default), none)[:3],
            "paper": PAPER[(dataset, split)],
            "welch": welch(off[0], off[1], off[2], g_off[0], g_off[1], g_off[2]),
            "grprune_commit": _joined(used, 3), "grprune_hardware": _joined(used, 4)})
    return out


def _joined(used: list[tuple[tuple, str]], field: int) -> str:
    """The commits (``field`` 3) or hardware (4) of the cells used; when they differ, each
    with its method: ``d9fd056 (PrunE); a2bbff1 (ERM)``."""
    by_value: dict[str, list[str]] = {}
    for cell, who in used:
        by_value.setdefault(cell[field], [])
        if who not in by_value[cell[field]]:
            by_value[cell[field]].append(who)
    if len(by_value) < 2:
        return next(iter(by_value), "–")
    return "; ".join(f"{v} ({', '.join(w)})" for v, w in by_value.items())


def markdown(table: list[dict]) -> str:
    """The README's comparison table and the commit/hardware of each side."""
    lines = header(["column", "official code", "grprune `official`", "grprune default",
                    "ERM (default preset)", "paper: PrunE",
                    "Welch's t (official code − grprune `official`)"])
    for r in table:
        t, df, p = r["welch"]
        welch_text = "–" if math.isnan(t) else f"t = {t:+.2f}, ν = {df:.1f}, p = {p:.3f}"
        warm = f" (warm-up {r['official_warmup']}/{r['official'][2]})" \
            if r["official_warmup"] else ""
        lines.append(row([r["column"], mean_std(*r["official"]) + warm,
                          mean_std(*r["grprune_official"]),
                          f"{mean_std(*r['grprune_default'])} (`{r['default_preset']}`)",
                          mean_std(*r["erm"]), mean_std(*r["paper"]), welch_text]))
    lines += ["", *header(["column", "side", "commit", "hardware"])]
    for r in table:
        lines.append(row([r["column"], "official code", r["official_commit"] or "–",
                          r["official_hardware"] or "–"]))
        lines.append(row([r["column"], "grprune", r["grprune_commit"], r["grprune_hardware"]]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", type=Path, help="a README whose official-table block is "
                    "rewritten")
    ap.add_argument("--results", type=Path, default=common.RESULTS)
    a = ap.parse_args(argv)
    if not a.results.is_file():
        print(f"table.py: no results file {a.results}; run runs.py first, or name one with "
              f"--results FILE", file=sys.stderr)
        return 2
    try:
        table = markdown(rows(a.results))
    except (OSError, ValueError) as err:
        print(f"table.py: {err}", file=sys.stderr)
        return 2
    if a.readme is None:
        print(table, end="")
        return 0
    try:
        new = splice(a.readme.read_text(encoding="utf-8"), BEGIN, END, table)
    except (OSError, ValueError) as err:
        print(f"table.py: {a.readme}: {err}", file=sys.stderr)
        return 2
    tmp = a.readme.with_name(a.readme.name + ".tmp")
    try:
        tmp.write_text(new, encoding="utf-8")
        tmp.replace(a.readme)
    except OSError as err:
        try:
            tmp.unlink(missing_ok=True)  # what a failed write left
        except OSError:
            pass
        print(f"table.py: cannot write {err.filename or a.readme}: {err.strerror or err}",
              file=sys.stderr)
        return 2
    print(f"wrote {a.readme}'s comparison table")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
