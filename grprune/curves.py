"""``grprune curves``: metrics and selector diagnostics of runs over epochs, as one picture.

Reads ``results.jsonl`` of finished and unfinished runs (:func:`grprune.collect.scan_runs`
finds the finished ones; unfinished ones are read as far as they got), groups them like
``grprune collect`` (dataset column, method, preset, setting) and draws, per group, the
mean over seeds of each epoch:

* validation and test metric;
* the fraction of test edges the evaluation mask keeps;
* quantiles of the keep probability :math:`p` on the test split (median, 10 % - 90 % band);
* the fractions of test bonds with :math:`p < 0.1` and :math:`p > 0.9`;
* on data with ground-truth motif edges: motif-edge ROC-AUC on OOD-test and ID-valid, and
  Precision@50 (the share of spurious bonds among each graph's lowest 50 %).

Warm-up epochs have no selector diagnostics; their panels start after them. A panel
without a value in any group (the motif panels on molecule data, the selector panels of
ERM runs) is left out (:func:`drawn_panels`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from grprune.record.files import atomic_write_bytes
from grprune.record.epoch import EpochRecord
from grprune.record.rundir import RunDir
from grprune.errors import GrpruneError

#: a panel's value of one epoch: (record, the metric's name) -> a number or None
Value = Callable[[EpochRecord, str], Any]

#: (panel title, function of one record -> value or None, y range)
PANELS: list[tuple[str, Value, tuple[float, float] | None]] = [
    ("OOD-valid metric", lambda r, m: r.value("valid", m), None),
    ("OOD-test metric", lambda r, m: r.value("test", m), None),
    ("test edges kept (evaluation mask)",
     lambda r, m: r.value("test", "kept_edge_fraction"), (0, 1.02)),
    ("median p (test); band: 10-90 %", lambda r, m: _quantile(r, "0.5"), (0, 1.02)),
    ("test bonds with p < 0.1 (solid), p > 0.9 (dashed)",
     lambda r, m: _sel(r, "test", "p_below_0.1"), (0, 1.02)),
    ("motif ROC-AUC: OOD-test (solid), ID-valid (dashed)",
     lambda r, m: _sel(r, "test", "motif_rocauc"), (0, 1.02)),
    ("Precision@50 (test)", lambda r, m: _sel(r, "test", "precision@50"), (0, 1.02)),
    ("G_c bonds (test): mean p (solid), mean rank from the top (dashed)",
     lambda r, m: _sel(r, "test", "gc_p_mean"), (0, 1.02)),
]
#: second lines drawn dashed in a panel: panel index -> function
DASHED: dict[int, Value] = {4: lambda r, m: _sel(r, "test", "p_above_0.9"),
                            5: lambda r, m: _sel(r, "id-valid", "motif_rocauc"),
                            7: lambda r, m: _sel(r, "test", "gc_rank_mean")}


def _sel(record: EpochRecord, split: str, key: str) -> Any:
    """``split``'s selector diagnostic ``key`` in ``record``; None without one."""
    selector = record.value(split, "selector")
    return selector.get(key) if isinstance(selector, dict) else None


def _quantile(record: EpochRecord, q: str) -> Any:
    """The ``q`` quantile (``"0.5"``) of the test split's keep probability p."""
    quantiles = _sel(record, "test", "p_quantiles")
    return quantiles.get(q) if isinstance(quantiles, dict) else None


@dataclass(frozen=True)
class Series:
    """One group of runs (:func:`series`): its ``label``, the dataset's ``metric``, its
    run directories ``runs`` and, per run, its epochs' ``records`` (``results.jsonl``,
    typed; runs of a group may have different lengths)."""

    label: str
    metric: str
    runs: tuple[str, ...]
    records: tuple[tuple[EpochRecord, ...], ...]

    @property
    def epochs(self) -> int:
        """The most epochs of any of its runs."""
        return max((len(r) for r in self.records), default=0)

    def curve(self, fn: Value) -> list[float]:
        """``fn`` of each epoch, averaged over the runs that reached it (NaN where
        none has a value)."""
        return [_mean([fn(rs[e], self.metric) if e < len(rs) else None
                       for rs in self.records]) for e in range(self.epochs)]


def _mean(values: Sequence[Any]) -> float:
    v = [x for x in values if isinstance(x, (int, float)) and not math.isnan(x)]
    return sum(v) / len(v) if v else math.nan


def series(dirs: Sequence[str | Path]) -> list[Series]:
    """One :class:`Series` per group of runs: ``label``, ``metric``, ``runs`` and
    ``records`` (a tuple of typed epoch records per run).

    Raises
    ------
    GrpruneError
        If no run with records is found.
    """
    from grprune.collect.selection import _column_labels, _group_key
    from grprune.naming import method_label
    from grprune.collect.reading import scan_runs
    scan = scan_runs(dirs)
    runs = list(scan.runs)
    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault((_group_key(run), run.setting_id), []).append(run)
    labels = _column_labels(runs)
    settings_per_group: dict[tuple, set] = {}
    for (gkey, sid) in groups:
        settings_per_group.setdefault(gkey, set()).add(sid)
    out = []
    for (gkey, sid), members in sorted(groups.items(), key=lambda kv: str(kv[0])):
        ckey, reg, selector, preset = gkey
        label = f"{labels[ckey]} {method_label(reg, selector, preset)}"
        if len(settings_per_group[gkey]) > 1:
            label += f" [{sid[:6]}]"
        records = tuple(tuple(RunDir(r.path).records()) for r in members)
        out.append(Series(label=label, metric=members[0].metric,
                          runs=tuple(str(r.path) for r in members), records=records))
    if not out:
        raise GrpruneError(f"no finished runs under {', '.join(map(str, dirs))}")
    return out


def _has_value(groups: Sequence[Series], fn: Value) -> bool:
    """Whether ``fn`` gives a number for some epoch of some run of ``groups``."""
    return any(isinstance(v, (int, float)) and not math.isnan(v)
               for g in groups for rs in g.records for v in (fn(r, g.metric) for r in rs))


def drawn_panels(groups: Sequence[Series]) -> list[int]:
    """The indices into :data:`PANELS` that :func:`plot` draws: those with a value (of
    the solid or the dashed line) in some group, in order.

    Parameters
    ----------
    groups : sequence of Series
        From :func:`series`.
    """
    return [i for i, (_, fn, _) in enumerate(PANELS)
            if _has_value(groups, fn) or (i in DASHED and _has_value(groups, DASHED[i]))]


def plot(groups: Sequence[Series], path: str | Path) -> Path:
    """Draw the panels of :data:`PANELS` that have data (:func:`drawn_panels`) for every
    group into a PNG at ``path``, four panels a row (three for five or fewer) and the
    legend in the last slot; returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = drawn_panels(groups) or [0]  # an empty run still gets its metric panel
    n = len(panels)
    cols = 4 if n > 5 else 3
    rows = math.ceil((n + 1) / cols)  # one free slot at the end holds the legend
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for gi, g in enumerate(groups):
        color = colors[gi % len(colors)]
        xs = list(range(g.epochs))
        curve = g.curve

        for slot, i in enumerate(panels):
            title, fn, ylim = PANELS[i]
            ax = axes[slot // cols][slot % cols]
            ax.plot(xs, curve(fn), color=color, label=g.label if slot == 0 else None, lw=1.4)
            if i in DASHED:
                ax.plot(xs, curve(DASHED[i]), color=color, ls="--", lw=1.2)
            if i == 3:
                lo = curve(lambda r, m: _quantile(r, "0.1"))
                hi = curve(lambda r, m: _quantile(r, "0.9"))
                ax.fill_between(xs, lo, hi, color=color, alpha=0.15, lw=0)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("epoch", fontsize=8)
            if ylim:
                ax.set_ylim(*ylim)
            ax.grid(alpha=0.3)
    for j in range(n, rows * cols):
        axes[j // cols][j % cols].axis("off")
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower right", fontsize=8, frameon=False,
               bbox_to_anchor=(0.98, 0.04))
    fig.tight_layout()
    path = Path(path)
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path
