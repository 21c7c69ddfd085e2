"""Result tables: Markdown, CSV and rich."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Sequence

from grprune.collect.common import (
    LAYOUTS,
    METRIC_NAMES,
    _fraction_text,
    _kept_text,
    hparams_text,
    pm,
)
from grprune.errors import GrpruneError
from grprune.record.metricinfo import FRACTION_METRICS, oriented
from grprune.naming import ablation_rank, method_rank
from grprune.record.files import atomic_write_bytes

# ---------------------------------------------------------------------------
# Output: Markdown, CSV, rich
# ---------------------------------------------------------------------------

SELECTION_TEXT = {
    "valid": "model selection: per method and dataset, the setting with the best mean "
             "validation score",
    "oracle": "ORACLE selection: per method and dataset, the setting with the best mean "
              "TEST score (optimistic; not a valid model selection)",
    "all": "every setting listed (no model selection)",
}


#: the mark of a cell whose selected model is, for some seed, an ERM warm-up epoch's
WARMUP_MARK = "†"


def _test_text(row: dict, show_n: bool = False) -> str:
    """The test cell: ``mean ± std`` (``mean (n=1)`` for one seed; `` (n=3)`` added with
    ``show_n``), then :data:`WARMUP_MARK` when a seed's reported model is an ERM warm-up
    model."""
    text = pm(row["test_mean"], row["test_std"], n=row["n"], metric=row["metric"])
    if show_n and row["n"] != 1:  # one seed says n=1 already
        text += f" (n={row['n']})"
    return f"{text} {WARMUP_MARK}" if row.get("warmup_seeds") else text


def warmup_legend(rows: Sequence[dict]) -> str:
    """What :data:`WARMUP_MARK` means and which cells carry it; ``""`` when none does.

    A run with a selector whose selected epoch is an ERM warm-up epoch
    (``train.select_warmup``, or no epoch after warm-up) reports a model that does not
    use the selector: every bond is kept, whatever the method's name says.
    """
    marked = [r for r in rows if r.get("warmup_seeds")]
    if not marked:
        return ""
    cells = "; ".join(f"{r['method']}, {r['column']}: {r['warmup_seeds']} of {r['n']} "
                      f"seed{'s' if r['n'] != 1 else ''}" for r in marked)
    return (f"{WARMUP_MARK} ERM warm-up model: the selected epoch is an ERM warm-up epoch, "
            f"so the model does not use the selector and keeps every bond ({cells}).")


def _seeds_text(ns: Sequence[int]) -> str:
    """How many seeds the cells aggregate, for a caption."""
    if ns == [1]:
        return "of 1 seed (n=1: no standard deviation)"
    if len(ns) == 1:
        return f"mean ± std (sample std) over {ns[0]} seeds"
    return ("mean ± std (sample std) over n seeds as marked (n=1: no standard deviation)"
            if 1 in ns else "mean ± std (sample std) over n seeds as marked")


def _row_label(row: dict, layout: str, select: str) -> str:
    base = row["ablation"] if layout == "ablation" else row["method"]
    if select == "all" and row["hparams"]:
        return f"{base} · {hparams_text(row['hparams'])}"
    return base


def _grid(rows: Sequence[dict], layout: str, select: str):
    """Row labels, column labels and ``{(row, column): row dict}`` for a wide layout."""
    columns = sorted({r["column"] for r in rows})
    rank = ablation_rank if layout == "ablation" else method_rank
    rlabels: dict[str, tuple] = {}
    cells: dict[tuple[str, str], dict] = {}
    for r in rows:
        label = _row_label(r, layout, select)
        rlabels.setdefault(label, (rank(r["ablation"] if layout == "ablation"
                                        else r["method"]), label))
        cells[(label, r["column"])] = r
    return sorted(rlabels, key=lambda label: rlabels[label]), columns, cells


def _metric_text(rows: Sequence[dict]) -> str:
    """The metrics' names, `` (%)`` after them when every one is a fraction (shown x100)."""
    names = sorted({METRIC_NAMES.get(r["metric"], r["metric"]) for r in rows})
    percent = all(r["metric"] in FRACTION_METRICS for r in rows)
    return " / ".join(names) + (" (%)" if percent else "")


def _title(select: str, layout: str) -> str:
    what = {"table": "Test performance", "ablation": "Ablation of the regularizers",
            "long": "All results"}[layout]
    return f"{what} (ORACLE selection by test score)" if select == "oracle" else what


def to_markdown(rows: Sequence[dict], layout: str = "table", select: str | None = None,
                notes: Sequence[str] = ()) -> str:
    """Paper-style Markdown: a caption, a table and the selected hyperparameters.

    Parameters
    ----------
    rows : sequence of dict
        Rows of :func:`aggregate`.
    layout : {"table", "ablation", "long"}
        ``"table"``: methods x dataset columns (paper Table 1); ``"ablation"``:
        regularizer sets (``size,eps-align``, ``size``, ``eps-align``, ``none``,
        then others) x dataset columns (paper Figure 3a); ``"long"``: one line
        per row with every number.
    select : str, optional
        The selection rule of the rows (default: read from the rows).
    notes : sequence of str
        Extra lines for a "Notes" section (missing, failed, unfinished runs).

    Returns
    -------
    str
        Markdown text. Cells show the test metric x100 as "mean ± std" (sample
        std over seeds; "mean (n=1)" for one seed, whose std is undefined), marked
        :data:`WARMUP_MARK` where a seed's model is an ERM warm-up model (explained under
        the table, :func:`warmup_legend`); the best mean of a column is bold.
    """
    if layout not in LAYOUTS:
        raise GrpruneError(f"unknown layout {layout!r}. Choices: {', '.join(LAYOUTS)}")
    select = select or (rows[0]["selection"] if rows else "valid")
    ns = sorted({r["n"] for r in rows})
    lines = [f"## {_title(select, layout)}", ""]
    caption = f"Test {_metric_text(rows)}, {_seeds_text(ns)}; {SELECTION_TEXT[select]}."
    if select == "oracle":
        caption = f"**{caption}**"
    lines += [caption, ""]
    wide = layout != "long"
    lines += _wide_lines(rows, layout, select, show_n=len(ns) > 1) if wide else _long_lines(rows)
    legend = warmup_legend(rows)
    lines += ["", legend] if legend else []
    lines += _selected_lines(rows, layout, select) if wide else []
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _long_lines(rows: Sequence[dict]) -> list[str]:
    """The ``"long"`` layout's Markdown table: one line per row, every number."""
    head = ["dataset", "method", "reg", "selector", "n", "test", "valid", "ID test",
            "test edges kept", "motif ROC-AUC", "Precision@50", "hyperparameters",
            "chosen by"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        chosen = ", ".join(k for k, flag in (("valid", r["valid_choice"]),
                                             ("oracle", r["oracle_choice"])) if flag)
        lines.append("| " + " | ".join([
            r["column"], r["method"], r["reg"] or "none", r["selector"], str(r["n"]),
            _test_text(r), pm(r["valid_mean"], r["valid_std"], n=r["n"], metric=r["metric"]),
            "–" if math.isnan(r["id_test_mean"])
            else pm(r["id_test_mean"], r["id_test_std"], n=r["n"], metric=r["metric"]),
            _kept_text(r), _fraction_text(r, "motif_edge_rocauc"),
            _fraction_text(r, "spurious_precision_at_50"),
            hparams_text(r["hparams"]) or "–", chosen or "–"]) + " |")
    return lines


def _wide_lines(rows: Sequence[dict], layout: str, select: str, show_n: bool) -> list[str]:
    """A wide layout's Markdown table: methods (or regularizer sets) x dataset columns.

    Cells are the test metric as "mean ± std" (:func:`_test_text`), ``(n=...)`` appended
    when ``show_n`` (the rows do not all have the same number of seeds); the best mean
    of a column is bold when the column has more than one number.
    """
    rlabels, columns, cells = _grid(rows, layout, select)
    best = {}
    for c in columns:
        means = [oriented(cells[(rl, c)]["metric"], cells[(rl, c)]["test_mean"])
                 for rl in rlabels if (rl, c) in cells]
        means = [m for m in means if not math.isnan(m)]
        best[c] = max(means) if len(means) > 1 else None
    head = "Method" if layout == "table" else "Regularizers"
    lines = ["| " + " | ".join([head, *columns]) + " |",
             "|" + "---|" + "---:|" * len(columns)]
    for rl in rlabels:
        out = [rl]
        for c in columns:
            r = cells.get((rl, c))
            if r is None:
                out.append("–")
                continue
            text = _test_text(r, show_n)
            if best[c] is not None and oriented(r["metric"], r["test_mean"]) == best[c]:
                text = f"**{text}**"
            out.append(text)
        lines.append("| " + " | ".join(out) + " |")
    return lines


def _selected_lines(rows: Sequence[dict], layout: str, select: str) -> list[str]:
    """The "Selected hyperparameters" list under a wide table (none for ``"all"``)."""
    chosen = [r for r in rows if r["varying"]] if select != "all" else []
    if not chosen:
        return []
    how = "ORACLE, by test score" if select == "oracle" else "by validation score"
    lines = ["", f"Selected hyperparameters ({how}; only keys that vary within a "
                 f"method and dataset):", ""]
    for r in chosen:
        name = r["ablation"] if layout == "ablation" else r["method"]
        tie = (f"; tied with {r['ties']} other setting{'s' if r['ties'] > 1 else ''}"
               f", broken by more seeds, then by setting id" if r["ties"] else "")
        lines.append(f"- {name}, {r['column']}: {hparams_text(r['hparams'])} "
                     f"(chosen from {r['n_settings']} settings; valid "
                     f"{pm(r['valid_mean'], r['valid_std'], n=r['n'], metric=r['metric'])}{tie})")
    return lines


CSV_COLUMNS = ["selection", "dataset", "split", "shift", "column", "method", "reg", "selector",
               "preset", "metric", "n", "seeds", "test_mean", "test_std", "valid_mean",
               "valid_std", "id_valid_mean", "id_valid_std", "id_test_mean", "id_test_std",
               "kept_edge_fraction_mean", "kept_edge_fraction_std", "motif_edge_rocauc_mean",
               "motif_edge_rocauc_std", "spurious_precision_at_50_mean",
               "spurious_precision_at_50_std", "wall_time_s_mean", "epoch_time_s_median_mean",
               "peak_mem_mib_max", "hparams", "varying", "n_settings", "ties", "valid_choice",
               "oracle_choice", "setting", "config_hash", "dirs", "trained_with", "warmup_seeds"]


def to_csv(rows: Sequence[dict]) -> str:
    """Long-format CSV: one line per row of :func:`aggregate`, every number.

    Metrics are fractions as in ``summary.json`` (not x100); empty cells are
    missing values. ``selection`` is ``valid``, ``oracle`` or ``all`` on every
    line; ``hparams`` is JSON (``{"reg.size.eta": 0.5}``); ``seeds`` and
    ``dirs`` are ``;``-separated.
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        out = []
        for col in CSV_COLUMNS:
            v = r.get(col)
            if col in ("seeds", "dirs", "varying"):
                v = ";".join(map(str, v or ()))
            elif col == "hparams":
                v = json.dumps(v, sort_keys=True)
            elif isinstance(v, float):
                v = "" if math.isnan(v) else repr(v)
            elif v is None:
                v = ""
            out.append(v)
        writer.writerow(out)
    return buf.getvalue()


def write_outputs(rows: Sequence[dict], prefix: str | Path, layout: str = "table",
                  select: str | None = None, notes: Sequence[str] = ()) -> tuple[Path, Path]:
    """Write ``PREFIX.md`` and ``PREFIX.csv`` atomically; returns both paths."""
    prefix = Path(prefix)
    md = prefix.with_name(prefix.name + ".md")
    cs = prefix.with_name(prefix.name + ".csv")
    atomic_write_bytes(md, to_markdown(rows, layout, select, notes).encode())
    atomic_write_bytes(cs, to_csv(rows).encode())
    return md, cs


def rich_table(rows: Sequence[dict], layout: str = "table", select: str | None = None):
    """The rows as a :class:`rich.table.Table` (test ×100, mean ± std; n and hparams dim).

    The selection rule is in the title only when it is the oracle; print
    ``SELECTION_TEXT[select]`` under the table to state it in full. One seed's cell has
    no std ("63.35 (n=1)"); print :func:`warmup_legend` under the table to explain a
    cell marked :data:`WARMUP_MARK`.
    """
    from rich.markup import escape
    from rich.table import Table

    select = select or (rows[0]["selection"] if rows else "valid")
    title = f"{_title(select, layout)}: test {_metric_text(rows)}"
    table = Table(title=title, show_lines=layout != "long")
    if layout == "long":
        for col in ("dataset", "method", "reg", "n", "test", "valid", "ID test", "kept",
                    "motif AUC", "P@50", "hyperparameters", "chosen"):
            table.add_column(col, justify="right" if col in ("n", "test", "valid", "ID test",
                                                             "kept", "motif AUC", "P@50")
                             else "left")
        for r in rows:
            chosen = "/".join(k for k, f in (("valid", r["valid_choice"]),
                                             ("oracle", r["oracle_choice"])) if f)
            idt = (pm(r["id_test_mean"], r["id_test_std"], n=r["n"], metric=r["metric"])
                   if not math.isnan(r["id_test_mean"]) else "–")
            table.add_row(*map(escape, (
                r["column"], r["method"], r["reg"] or "none", str(r["n"]),
                _test_text(r), pm(r["valid_mean"], r["valid_std"], n=r["n"], metric=r["metric"]), idt,
                _kept_text(r), _fraction_text(r, "motif_edge_rocauc"),
                _fraction_text(r, "spurious_precision_at_50"),
                hparams_text(r["hparams"]) or "–", chosen or "–")))
        return table
    rlabels, columns, cells = _grid(rows, layout, select)
    table.add_column("method" if layout == "table" else "regularizers")
    for c in columns:
        table.add_column(escape(c), justify="right")
    for rl in rlabels:
        out = [escape(rl)]
        for c in columns:
            r = cells.get((rl, c))
            if r is None:
                out.append("–")
                continue
            extra = [f"n={r['n']}"] if r["n"] != 1 else []  # one seed says n=1 already
            if r["hparams"] and select != "all":
                extra.append(hparams_text(r["hparams"], short=True))
            dim = f"\n[dim]{escape(' · '.join(extra))}[/dim]" if extra else ""
            out.append(escape(_test_text(r)) + dim)
        table.add_row(*out)
    return table
