"""The score columns of ``grprune predict`` for each task kind of a run.

* classification (one label column): ``prob_1`` (binary; ``prob_0`` .. ``prob_{C-1}``
  otherwise), the class probabilities, and ``pred_label``, the argmax;
* several binary label columns (``multilabel``): ``prob_<column>``, one probability per
  task (the sigmoid of its logit), in ``data.label_column`` order; ``pred_label`` empty;
* regression: ``pred_<column>``, the predicted value per target in the target's units
  (the head's standardized output times the training split's sd plus its mean:
  :class:`grprune.model.GraphClassifier`); ``pred_label`` empty.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np


def task_names(run) -> list[str]:
    """The run's label columns (``data.label_column``, split at commas), or ``0 .. T-1``
    where the dataset names none."""
    text = run.cfg.setting("data.label_column")
    names = [c.strip() for c in str(text).split(",")] if text else []
    return names if len(names) == run.num_classes else [str(k) for k in range(run.num_classes)]


def score_columns(run) -> list[str]:
    """The names of the score columns of ``run``'s predictions (module docstring)."""
    task, c = run.features.task, run.num_classes
    if task == "classification":
        return ["prob_1"] if c == 2 else [f"prob_{k}" for k in range(c)]
    prefix = "pred_" if task == "regression" else "prob_"
    return [prefix + name for name in task_names(run)]


def score_values(run, prob: np.ndarray) -> np.ndarray:
    """The values of :func:`score_columns` from the model's outputs.

    Parameters
    ----------
    prob : np.ndarray of shape (G, C) or (G, T)
        :attr:`grprune.evaluation.Evaluation.prob`.

    Returns
    -------
    np.ndarray of shape (G, len(score_columns(run)))
    """
    prob = np.asarray(prob)
    if run.features.task == "classification" and run.num_classes == 2:
        return prob[:, 1:2]
    return prob


def has_label(run) -> bool:
    """Whether predictions have a ``pred_label`` (one class per molecule)."""
    return run.features.task == "classification"


def shown_score_columns(columns: Iterable[str]) -> list[str]:
    """The score columns among a written table's columns (``prob_*``, ``pred_*`` but
    ``pred_label``), in order."""
    return [c for c in columns if c.startswith("prob_")
            or (c.startswith("pred_") and c != "pred_label")]
