"""The splits a run trains, selects and reports on, and the labels training needs there.

:data:`EVAL_SPLITS` are evaluated every epoch (``train`` only with ``train.eval_train``);
:data:`FINAL_SPLITS`, the in-distribution hold-outs, with the selected checkpoint.
:func:`run_splits` takes them from a dataset, cut to ``data.limit``; :func:`check_labels`
refuses splits that nothing could be learned or selected on, before anything trains.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Mapping

import numpy as np

from grprune.errors import GrpruneError
from grprune.record.runconfig import DataConfig

if TYPE_CHECKING:
    from grprune.data.dataset import GraphDataset

EVAL_SPLITS = ("train", "valid", "test", "id-valid")
#: in-distribution hold-outs, evaluated with the selected checkpoint (id-valid every epoch too)
FINAL_SPLITS = ("id-valid", "id-test")


def run_splits(dataset: GraphDataset, limit: int) -> dict[str, np.ndarray]:
    """The :data:`EVAL_SPLITS` and :data:`FINAL_SPLITS` that ``dataset`` has, each an array
    of graph indices cut to its first ``limit`` (``data.limit``; 0: all)."""
    out = {}
    for name in EVAL_SPLITS + FINAL_SPLITS:
        if name not in dataset.splits:
            continue
        idx = np.asarray(dataset.splits[name])
        out[name] = idx[:limit] if limit else idx
    return out


def check_labels(dataset: GraphDataset, splits: Mapping[str, np.ndarray],
                 data: DataConfig) -> None:
    """Refuse an empty training split, and training labels of one class (nothing to
    learn, every metric undefined); refuse validation labels of one class under
    ROC-AUC (nothing to select on); warn where another evaluated split's ROC-AUC is
    undefined (one class there: reported as undefined).

    Raises
    ------
    GrpruneError
        If the training split is empty or its labels are all one class, or, for
        ROC-AUC, the validation split's are (model selection would run on NaN).
    """
    labels = dataset.labels.numpy()
    if dataset.task != "classification":  # (G, T) with NaN missing
        labelled = ~np.isnan(labels[splits.get("train", [])])
        if not labelled.any():
            raise GrpruneError("the training split has no labelled graph; choose another "
                               "data.split or check the label columns")
        return
    found: np.ndarray = np.unique(labels[splits.get("train", [])])
    if len(found) == 0:
        sizes = ", ".join(f"{k} {len(v)}" for k, v in splits.items())
        raise GrpruneError(f"the training split is empty ({sizes} graphs); choose "
                           f"another data.split (a scaffold split of molecules that "
                           f"share one scaffold puts them all in one part)")
    if len(found) == 1:
        raise GrpruneError(f"every training label is {int(found[0])}: a classifier needs "
                           f"at least two classes (check the label column and the split)")
    for name, idx in splits.items():
        if name == "train" or dataset.metric != "rocauc" or len(np.unique(labels[idx])) != 1:
            continue
        if name == "valid":  # selection would run on NaN: no epoch could be chosen
            metric = ("; or -H data.metric=accuracy to select on accuracy"
                      if "metric" in data.params else "")
            raise GrpruneError(
                f"every valid label is {int(labels[idx][0])} ({len(idx)} graphs), so "
                f"its ROC-AUC is undefined and no epoch can be selected on it; choose "
                f"another split (--split, -H data.split_seed=N) or more data (data.limit)"
                f"{metric}")
        warnings.warn(f"grprune: every {name} label is {int(labels[idx][0])}, so its "
                      f"ROC-AUC is undefined (reported as undefined)", stacklevel=3)
