"""Evaluation metrics (scikit-learn), named as in the paper.

Classification (one label column, ``y`` of shape (B,), ``prob`` class probabilities (B, C)):
``rocauc``, ``prauc`` (average precision) and ``accuracy``. Several binary label columns
(``multilabel``: ``y`` (B, T) of 0, 1 or NaN for a missing label, ``prob`` (B, T) per-task
probabilities) and regression (``y`` (B, T) targets with NaN missing, ``prob`` the predicted
values (B, T)) are scored per task over the labelled graphs and averaged over the tasks, as
OGB's ``Evaluator`` does for ogbg-molpcba / ogbg-moltox21 (``ogb/graphproppred/evaluate.py``:
``_eval_rocauc`` and ``_eval_ap`` skip a task without both classes; ``_eval_rmse``) and
chemprop averages its regression metrics over tasks. Which of them is better high or low:
:mod:`grprune.record.metricinfo`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from sklearn.metrics import (accuracy_score, average_precision_score, mean_absolute_error,
                             r2_score, roc_auc_score)

from grprune.record.metricinfo import HIGHER_IS_BETTER

METRICS = tuple(HIGHER_IS_BETTER)


def _per_task(y_true: np.ndarray, pred: np.ndarray, score: Callable[[np.ndarray, np.ndarray],
              float], two_classes: bool) -> float:
    """Mean of ``score`` over the columns of ``y_true`` (B, T), each on its non-NaN rows;
    with ``two_classes`` a task whose labelled rows hold one class is skipped (OGB). NaN when
    no task can be scored."""
    scores = []
    for t in range(y_true.shape[1]):
        seen = ~np.isnan(y_true[:, t])
        y, p = y_true[seen, t], pred[seen, t]
        if len(y) == 0 or (two_classes and len(np.unique(y)) < 2):
            continue
        scores.append(float(score(y, p)))
    return float(np.mean(scores)) if scores else math.nan


def _rmse(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.sqrt(np.mean((y - p) ** 2)))


def _multi(metric: str, y_true: np.ndarray, pred: np.ndarray) -> float:
    """A metric over (B, T) labels with NaN missing (multi-label or regression)."""
    if metric == "rocauc":
        return _per_task(y_true, pred, roc_auc_score, True)
    if metric == "prauc":
        return _per_task(y_true, pred, average_precision_score, True)
    if metric == "accuracy":
        seen = ~np.isnan(y_true)
        return float(np.mean((pred[seen] > 0.5) == (y_true[seen] > 0.5))) if seen.any() \
            else math.nan
    if metric == "rmse":
        return _per_task(y_true, pred, _rmse, False)
    if metric == "mae":
        return _per_task(y_true, pred, mean_absolute_error, False)
    if metric == "r2":
        return _per_task(y_true, pred, lambda y, p: r2_score(y, p) if len(y) > 1 else math.nan,
                         False)
    raise ValueError(f"unknown metric {metric!r}; choices: {', '.join(METRICS)}")


def evaluate(metric: str, y_true: np.ndarray, prob: np.ndarray) -> float:
    """Score predictions.

    Parameters
    ----------
    metric : {"rocauc", "accuracy", "prauc", "rmse", "mae", "r2"}
        ``rocauc``: ROC-AUC of the positive-class probability (binary tasks);
        ``prauc``: average precision of it (:func:`sklearn.metrics.average_precision_score`,
        the area under the precision-recall curve as a step function);
        ``accuracy``: fraction of argmax predictions equal to the label (multi-label:
        of thresholded probabilities, :math:`p > 0.5`, over the labelled entries);
        ``rmse`` :math:`\\sqrt{\\tfrac1n\\sum (y - \\hat y)^2}`, ``mae``
        :math:`\\tfrac1n\\sum |y - \\hat y|` and ``r2`` (:func:`sklearn.metrics.r2_score`),
        in the target's units, per task over its labelled graphs, averaged over tasks.
    y_true : ndarray of shape (B,), int; or of shape (B, T), float with NaN missing
        Class labels; or multi-label 0/1 labels or regression targets.
    prob : ndarray of shape (B, C) or (B, T)
        Class probabilities; per-task probabilities (multi-label); predicted values
        (regression).

    Returns
    -------
    float
        In [0, 1] for the classification metrics; NaN for ROC-AUC and PR-AUC when only
        one class is present (undefined; multi-label: in every task), and when ``prob``
        holds NaN or infinite values (a diverged model).

    Raises
    ------
    ValueError
        On an unknown metric.

    Examples
    --------
    >>> evaluate("prauc", np.array([0, 1, 1]), np.array([[.9, .1], [.2, .8], [.6, .4]]))
    1.0
    >>> evaluate("rmse", np.array([[1.0], [np.nan], [3.0]]), np.array([[2.0], [9.0], [3.0]]))
    0.7071067811865476
    """
    if len(y_true) == 0 or not np.isfinite(prob).all():
        return math.nan  # no graphs, or a model whose outputs are not numbers
    if np.ndim(y_true) == 2:
        return _multi(metric, np.asarray(y_true, dtype=np.float64), np.asarray(prob, np.float64))
    if metric == "rocauc":
        if len(np.unique(y_true)) < 2:
            return math.nan
        return float(roc_auc_score(y_true, prob[:, 1]))
    if metric == "prauc":
        if len(np.unique(y_true)) < 2:
            return math.nan
        return float(average_precision_score(y_true, prob[:, 1]))
    if metric == "accuracy":
        return float(accuracy_score(y_true, prob.argmax(1)))
    raise ValueError(f"unknown metric {metric!r}; choices: {', '.join(METRICS)}")
