"""Test metric against one hyperparameter: table, CSV and plot."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

from grprune.collect.common import (
    _MISSING,
    METRIC_NAMES,
    PAPER_SYMBOLS,
    SELECT_RULES,
    _value_text,
    hparams_text,
    pm,
)
from grprune.collect.reading import Run
from grprune.collect.selection import (
    SELECTION_METHODS,
    SelectionMethod,
    Setting,
    ValidationSelection,
    _column_labels,
    _groups,
    varying_keys,
)
from grprune.errors import GrpruneError, did_you_mean
from grprune.naming import method_label, method_rank
from grprune.record.files import atomic_write_bytes

# ---------------------------------------------------------------------------
# Sensitivity
# ---------------------------------------------------------------------------

def _sort_values(values: Iterable[Any]) -> list[Any]:
    vals = list(values)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return sorted(vals)
    return sorted(vals, key=lambda v: json.dumps(v, sort_keys=True, default=str))


def sensitivity(runs: Sequence[Run], key: str, select: str = "valid") -> list[dict]:
    """Test metric against the values of one hyperparameter (paper Figure 3b).

    For every dataset column and method in which ``key`` varies, the settings
    that differ only in ``key`` are compared: the other varying hyperparameters
    are held at the values of the validation-selected setting (``select=
    "oracle"``: the test-selected one) when those cover at least two values of
    ``key``; otherwise at the values that cover the most values of ``key`` (ties:
    the best mean validation score), and ``fixed_note`` says so.

    Parameters
    ----------
    runs : sequence of Run
        Finished runs (:func:`scan_runs`).
    key : str
        A namespaced hyperparameter, e.g. ``reg.size.eta`` (η), ``reg.size.weight``
        (λ1), ``reg.eps-align.k`` (K), ``reg.eps-align.weight`` (λ2), ``data.bias``.
    select : {"valid", "oracle", "all"}
        Which setting fixes the other hyperparameters (``"all"`` acts as ``"valid"``).

    Returns
    -------
    list of dict
        One point per group and value of ``key``, ordered by group and value:
        ``column``, ``method``, ``key``, ``value``, ``n``, ``seeds``, ``test_mean``,
        ``test_std``, ``valid_mean``, ``valid_std``, ``metric``, ``fixed`` (the
        other varying hyperparameters and their held values), ``fixed_note``,
        ``selection``.

    Raises
    ------
    GrpruneError
        If no run has ``key`` (the message suggests the nearest key and lists the
        keys that vary) or ``key`` does not vary within any group.
    """
    if select not in SELECT_RULES:
        raise GrpruneError(f"unknown selection rule {select!r}. Choices: "
                           f"{', '.join(SELECT_RULES)}")
    by = SELECTION_METHODS.get(select, ValidationSelection)
    free = key if key.startswith("data.") else None
    groups = _groups(runs, free)
    all_varying = sorted({k for settings in _groups(runs).values()
                          for k in varying_keys(settings)}
                         | {k for settings in groups.values() for k in varying_keys(settings)
                            if k.startswith("data.")})
    known = sorted({k for r in runs for k in r.hparams})
    if key not in known:
        hint = did_you_mean(key, known, cutoff=0.6)
        raise GrpruneError(f"no run has hyperparameter {key!r}.{hint} Keys that vary: "
                           f"{', '.join(all_varying) or 'none'}")
    labels = _column_labels(runs, free)
    points: list[dict] = []
    entangled: list[str] = []
    for (ckey, reg, selector, preset), settings in groups.items():
        varying = varying_keys(settings)
        if key not in varying:
            continue
        curve = _held_curve(settings, varying, key, by)
        if curve is None:
            entangled.append(f"{labels[ckey]} {method_label(reg, selector, preset)}")
            continue  # key changes only together with other hyperparameters
        for value, s in curve.points:
            test_m, test_s, n = s.stat("test")
            valid_m, valid_s, _ = s.stat("valid")
            points.append({"column": labels[ckey], "method": method_label(reg, selector, preset),
                           "reg": ",".join(reg), "selector": selector, "key": key,
                           "value": value, "n": n, "seeds": [r.seed for r in s.runs],
                           "test_mean": test_m, "test_std": test_s,
                           "valid_mean": valid_m, "valid_std": valid_s,
                           "metric": curve.metric, "fixed": curve.fixed,
                           "fixed_note": curve.note,
                           "selection": by.name})
    if not points:
        raise _no_curve_error(runs, key, entangled, all_varying)
    points.sort(key=lambda p: (p["column"], method_rank(p["method"])))
    return points


class _Curve(NamedTuple):
    """The settings of one group that trace the test metric against one key."""

    points: list[tuple[Any, Setting]]  # (value of the key, its setting), by value
    fixed: dict                        # the other varying hyperparameters, held values
    note: str                          # how the held values were chosen
    metric: str


def _held_curve(settings: Sequence[Setting], varying: Sequence[str], key: str,
                by: type[SelectionMethod]) -> _Curve | None:
    """The settings of a group that differ only in ``key`` (see :func:`sensitivity`).

    The other varying keys are held at the values of the setting the selection method
    ``by`` chooses when those cover at least two values of ``key``, else at the values
    covering the most (ties: best :meth:`SelectionMethod.score`, then the values'
    JSON). ``None`` when no two settings differ in ``key`` alone.
    """
    settings = [s for s in settings if key in s.hparams]
    others = [k for k in varying if k != key]

    def context(s: Setting) -> str:
        return json.dumps({k: s.hparams.get(k, _MISSING) for k in others},
                          sort_keys=True, default=str)

    contexts: dict[str, list[Setting]] = {}
    for s in settings:
        contexts.setdefault(context(s), []).append(s)
    if max(len(c) for c in contexts.values()) < 2:
        return None
    chosen = by.choose(settings)
    ctx = context(chosen)
    rule = by.label
    if len(contexts[ctx]) >= 2:
        note = (f"held at the {rule}-selected values" if others
                else "no other hyperparameter varies")
    else:
        ctx = min(contexts, key=lambda c: (-len(contexts[c]),
                                           -max(by.score(s) for s in contexts[c]), c))
        note = (f"held at the values covering the most {key} values; the {rule}-selected "
                f"setting has only {key}={_value_text(chosen.hparams[key])}")
    fixed = {k: contexts[ctx][0].hparams.get(k, _MISSING) for k in others}
    ordered = _sort_values([s.hparams[key] for s in contexts[ctx]])
    by_value = {json.dumps(s.hparams[key], sort_keys=True, default=str): s
                for s in contexts[ctx]}
    return _Curve([(value, by_value[json.dumps(value, sort_keys=True, default=str)])
                   for value in ordered], fixed, note, settings[0].runs[0].metric)


def _no_curve_error(runs: Sequence[Run], key: str, entangled: Sequence[str],
                    all_varying: Sequence[str]) -> GrpruneError:
    """The error when ``key`` gives no curve: it never varies alone (``entangled``
    lists the groups where it varies only with other keys) or it never varies."""
    if entangled:
        return GrpruneError(f"{key} never varies alone: in {'; '.join(entangled)} every "
                            f"change of {key} comes with changes of other hyperparameters, "
                            f"so no curve can hold them fixed")
    values = sorted({json.dumps(r.hparams.get(key), default=str) for r in runs
                     if key in r.hparams})
    return GrpruneError(f"{key} does not vary within any dataset and method (values "
                        f"seen: {', '.join(values)}). Keys that vary: "
                        f"{', '.join(all_varying) or 'none'}")


def plot_sensitivity(points: Sequence[dict], path: str | Path) -> Path:
    """Write a PNG: test metric (%) against the key, one line with error bars per group.

    Uses matplotlib's Agg canvas directly (no display, no global backend change)
    and writes the file atomically.

    Parameters
    ----------
    points : sequence of dict
        The result of :func:`sensitivity`.
    path : path
        The PNG file.

    Returns
    -------
    Path
        ``path``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    key = points[0]["key"]
    lines: dict[str, list[dict]] = {}
    for p in points:
        lines.setdefault(f"{p['column']} · {p['method']}", []).append(p)
    values = [p["value"] for p in points]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    cats = _sort_values({json.dumps(v, sort_keys=True, default=str): v
                         for v in values}.values()) if not numeric else []
    fig = Figure(figsize=(6.4, 4.2), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for label, pts in lines.items():
        xs = [p["value"] if numeric else cats.index(p["value"]) for p in pts]
        ys = [100 * p["test_mean"] for p in pts]
        es = [100 * (p["test_std"] if not math.isnan(p["test_std"]) else 0) for p in pts]
        ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=label)
    if numeric:
        pos = [v for v in values if v > 0]
        if len(pos) == len(values) and max(pos) / min(pos) >= 100:
            ax.set_xscale("log")
    else:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels([_value_text(c) for c in cats])
    metrics = sorted({METRIC_NAMES.get(p["metric"], p["metric"]) for p in points})
    ax.set_xlabel(f"{key} ({PAPER_SYMBOLS[key]})" if key in PAPER_SYMBOLS else key)
    ax.set_ylabel(f"test {' / '.join(metrics)} (%)")
    oracle = points[0]["selection"] == "oracle"
    ax.set_title(f"Sensitivity to {key}" + (" (ORACLE selection)" if oracle else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def sensitivity_csv(points: Sequence[dict]) -> str:
    """The points of :func:`sensitivity` as CSV (fractions, as in ``summary.json``)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    cols = ["selection", "column", "method", "reg", "selector", "metric", "key", "value", "n",
            "seeds", "test_mean", "test_std", "valid_mean", "valid_std", "fixed", "fixed_note"]
    writer.writerow(cols)
    for p in points:
        writer.writerow([json.dumps(p[c], sort_keys=True) if c in ("fixed", "value")
                         else ";".join(map(str, p[c])) if c == "seeds"
                         else ("" if isinstance(p[c], float) and math.isnan(p[c]) else p[c])
                         for c in cols])
    return buf.getvalue()


def sensitivity_table(points: Sequence[dict]):
    """The points of :func:`sensitivity` as a :class:`rich.table.Table`."""
    from rich.markup import escape
    from rich.table import Table

    key = points[0]["key"]
    oracle = points[0]["selection"] == "oracle"
    table = Table(title=f"Sensitivity to {key}: test (%)"
                  + (" (ORACLE selection by test)" if oracle else ""))
    for col in ("dataset", "method", key, "n", "test", "valid", "held fixed"):
        table.add_column(col, justify="right" if col in (key, "n", "test", "valid")
                         else "left")
    previous = None
    for p in points:
        group = (p["column"], p["method"])
        held = (hparams_text(p["fixed"]) or "–") + f" ({p['fixed_note']})"
        table.add_row(*map(escape, (*(group if group != previous else ("", "")),
                                    _value_text(p["value"]), str(p["n"]),
                                    pm(p["test_mean"], p["test_std"], n=p["n"],
                                       metric=p["metric"]),
                                    pm(p["valid_mean"], p["valid_std"], n=p["n"],
                                       metric=p["metric"]),
                                    held if group != previous else "")))
        previous = group
    return table
