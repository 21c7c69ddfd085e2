"""Label columns beyond one binary class: several tasks, regression targets, missing cells.

``molecule-csv`` reads its labels through here when ``data.label_column`` names several
columns (a comma list: a multi-task set such as Tox21) or ``data.task=regression`` (pIC50,
solubility). Labels are then a float array (S, T), NaN where a cell is empty or reads as
NaN (``nan``, ``NA``): a missing label, masked out of the loss
(:func:`grprune.losses.masked_target_loss`) and of the metrics (:func:`grprune.metrics.evaluate`),
as OGB's molpcba/tox21 and chemprop mask them. One binary label column keeps the
classification path (:func:`grprune.data.molecule_rows.read_rows`), unchanged.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from grprune.errors import GrpruneError
from grprune.messages import short_repr

#: ``data.task`` values
TASKS = ("classification", "regression")


def label_columns(text: str) -> list[str]:
    """The columns of a ``data.label_column`` value: one name, or a comma list.

    Raises
    ------
    GrpruneError
        On an empty name or a column named twice.

    >>> label_columns("NR-AR, SR-ARE")
    ['NR-AR', 'SR-ARE']
    """
    names = [c.strip() for c in str(text).split(",")]
    if not all(names):
        raise GrpruneError(f"data.label_column={short_repr(text)} holds an empty column name")
    if len(set(names)) != len(names):
        raise GrpruneError(f"data.label_column={short_repr(text)} names a column twice")
    return names


def dataset_task(task: str, n_columns: int) -> str:
    """The dataset's task kind: ``classification`` (one class column), ``multilabel``
    (several 0/1 columns) or ``regression``.

    Raises
    ------
    GrpruneError
        On an unknown ``data.task``.
    """
    if task not in TASKS:
        raise GrpruneError(f"data.task={short_repr(task)}: choose one of {', '.join(TASKS)}")
    if task == "regression":
        return "regression"
    return "classification" if n_columns == 1 else "multilabel"


def _cell(text: str, binary: bool) -> tuple[float, str | None]:
    """A label cell's value (NaN when missing) and why it is unusable (None when usable)."""
    text = str(text).strip()
    try:
        value = float(text) if text else math.nan
    except ValueError:
        return math.nan, f"label {text!r} is not a number"
    if math.isinf(value):
        return math.nan, f"label {text!r} is not finite"
    if binary and not math.isnan(value) and value not in (0.0, 1.0):
        return math.nan, f"label {text!r} is not 0 or 1"
    return value, None


def read_targets(columns: dict[str, Sequence[str]], smiles: Sequence[str], task: str
                 ) -> tuple[np.ndarray, dict[int, str]]:
    """Parse label cells of several columns (or regression targets) into a float array.

    A row is left out (with its reason) when its SMILES is missing, a cell is not a number
    (classification: not 0 or 1), or every label of the row is missing.

    Parameters
    ----------
    columns : dict of str to sequence of str
        Column name -> its S cells, in task order.
    smiles : sequence of str, length S
    task : {"multilabel", "regression"}

    Returns
    -------
    labels : np.ndarray of float32, shape (S, T)
        NaN where missing (and in left-out rows).
    bad : dict of int to str
        0-based data row -> reason.
    """
    names = list(columns)
    labels = np.full((len(smiles), len(names)), np.nan, dtype=np.float32)
    bad: dict[int, str] = {}
    for row, s in enumerate(smiles):
        problems = [] if s else ["missing SMILES"]
        for t, name in enumerate(names):
            value, why = _cell(columns[name][row], binary=task == "multilabel")
            if why:
                problems.append(f"{why} (column {name})" if len(names) > 1 else why)
            labels[row, t] = value
        if not problems and np.isnan(labels[row]).all():
            problems.append("missing label" if len(names) == 1 else "every label is missing")
        if problems:
            bad[row] = "; ".join(problems)
            labels[row] = np.nan
    return labels, bad


def target_scale(labels: np.ndarray, train: np.ndarray) -> tuple[list[float], list[float]]:
    """The training split's mean and standard deviation (``ddof=0``) of each target, over its
    labelled graphs; a task without two distinct training values gets sd 1 (and mean 0
    without any), so standardizing never divides by zero.

    Parameters
    ----------
    labels : np.ndarray of float, shape (G, T), NaN missing
    train : np.ndarray of int64
        The training split's graph indices.

    Returns
    -------
    (mean, std) : two lists of T floats

    >>> target_scale(np.array([[1.0], [3.0], [np.nan]]), np.array([0, 1, 2]))
    ([2.0], [1.0])
    """
    mean, std = [], []
    for column in np.asarray(labels, dtype=np.float64)[train].T:
        seen = column[~np.isnan(column)]
        mean.append(float(seen.mean()) if len(seen) else 0.0)
        sd = float(seen.std()) if len(seen) else 0.0
        std.append(sd if sd > 0 else 1.0)
    return mean, std
