"""Evaluation metrics (scikit-learn), named as in the paper."""

from __future__ import annotations

import math

import numpy as np
from sklearn.metrics import accuracy_score, roc_auc_score

METRICS = ("rocauc", "accuracy")


def evaluate(metric: str, y_true: np.ndarray, prob: np.ndarray) -> float:
    """Score class probabilities.

    Parameters
    ----------
    metric : {"rocauc", "accuracy"}
        ``rocauc``: ROC-AUC of the positive-class probability (binary tasks);
        ``accuracy``: fraction of argmax predictions equal to the label.
    y_true : ndarray of shape (B,), int
    prob : ndarray of shape (B, C)
        Class probabilities.

    Returns
    -------
    float
        In [0, 1]; NaN for ROC-AUC when only one class is present (undefined), and
        when ``prob`` holds NaN or infinite values (a diverged model).
    """
    if len(y_true) == 0 or not np.isfinite(prob).all():
        return math.nan  # no graphs, or a model whose outputs are not numbers
    if metric == "rocauc":
        if len(np.unique(y_true)) < 2:
            return math.nan
        return float(roc_auc_score(y_true, prob[:, 1]))
    if metric == "accuracy":
        return float(accuracy_score(y_true, prob.argmax(1)))
    raise ValueError(f"unknown metric {metric!r}; choices: {', '.join(METRICS)}")
