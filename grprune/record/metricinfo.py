"""What a metric name means to model selection: its direction and the tasks it scores.

One table, read wherever a best score is chosen: the trainer's selected epoch
(:meth:`grprune.record.trainstate.Best.update`, hence early stopping), ``grprune collect``'s
validation and oracle selection (:mod:`grprune.collect.selection`) and the order of its rows.
The metrics themselves are computed by :func:`grprune.metrics.evaluate`.

>>> higher_is_better("rocauc"), higher_is_better("rmse")
(True, False)
"""

from __future__ import annotations

from typing import Any

from grprune.errors import GrpruneError

#: metric -> whether a higher value is better
HIGHER_IS_BETTER: dict[str, bool] = {
    "rocauc": True, "accuracy": True, "prauc": True,
    "rmse": False, "mae": False, "r2": True,
}
#: the metrics of each task kind of :class:`grprune.data.dataset.GraphDataset`
TASK_METRICS: dict[str, tuple[str, ...]] = {
    "classification": ("rocauc", "accuracy", "prauc"),
    "multilabel": ("rocauc", "prauc", "accuracy"),
    "regression": ("rmse", "mae", "r2"),
}
#: metrics that are fractions in [0, 1], shown x100 in tables
FRACTION_METRICS = frozenset({"rocauc", "accuracy", "prauc"})


def higher_is_better(metric: str | None) -> bool:
    """Whether a higher value of ``metric`` is better (an unknown or empty name: True, the
    rule of the classification metrics every run before regression used).

    Parameters
    ----------
    metric : str or None
        A key of :data:`HIGHER_IS_BETTER`.
    """
    return HIGHER_IS_BETTER.get(str(metric or ""), True)


def oriented(metric: str | None, value: Any) -> Any:
    """``value`` (a float, or None) signed so that higher is better (``-value`` for
    ``rmse``, ``mae``; None stays None)."""
    return value if value is None or higher_is_better(metric) else -value


def check_task_metric(task: str, metric: str, where: str = "data.metric") -> str:
    """``metric`` if it scores ``task``.

    Raises
    ------
    GrpruneError
        One line naming the metric, the task and the metrics that score it.
    """
    allowed = TASK_METRICS.get(task, ())
    if metric not in allowed:
        raise GrpruneError(f"{where}={metric} does not score a {task} task; choose one of "
                           f"{', '.join(allowed)}")
    return metric
