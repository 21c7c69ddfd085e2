"""One epoch of a run, typed: :class:`EpochRecord`, a line of ``results.jsonl``.

The trainer builds one per epoch and writes :meth:`EpochRecord.to_dict`, whose keys and
their order are the file's::

    {"epoch": 3, "phase": "train", "lr": 0.001,
     "loss": {"ce": 0.41, "size": 0.02, "size/size": 0.2, "total": 0.61,
              "kept_edge_fraction": 0.85},
     "train": {"rocauc": 0.93, "kept_edge_fraction": 0.86, "selector": {...}},
     "valid": {...}, "test": {...}, "id-valid": {...},
     "epoch_time_s": 1.9, "train_time_s": 1.2, "best_epoch": 3}

A split's record holds the metric (its name is the dataset's metric), the kept-edge
fraction and, for a learned selector in use, its diagnostics; a split that was not
evaluated (the training split with ``train.eval_train`` off) has none.

The trainer's ``on_epoch`` callback (:func:`grprune.train`, :func:`grprune.run.execute`)
gets the :class:`EpochRecord` itself, with two fields the file does not hold:
``improved`` (this epoch became the selected one) and ``epochs`` (the run's
``train.epochs``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping

#: the splits an epoch may be evaluated on, in the order they are written
SPLITS = ("train", "valid", "test", "id-valid", "id-test")
#: the keys of a line before and after its splits
HEAD, TAIL = ("epoch", "phase", "lr", "loss"), ("epoch_time_s", "train_time_s", "best_epoch")
#: the fields the ``on_epoch`` callback gets and the file does not hold
CALLBACK = ("improved", "epochs")


def split_scores(metric: str, value: float, kept: float,
                 selector: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A split's record in a line: ``{metric: value, "kept_edge_fraction": kept}``, and
    ``"selector"``: the selector's diagnostics where it has them.

    Examples
    --------
    >>> split_scores("rocauc", 0.75, 0.9)
    {'rocauc': 0.75, 'kept_edge_fraction': 0.9}
    """
    out = {metric: value, "kept_edge_fraction": kept}
    return {**out, "selector": selector} if selector is not None else out


@dataclass(frozen=True, kw_only=True)
class EpochRecord:
    """One epoch: ``epoch`` (from 0), ``phase`` (``warmup`` or ``train``), the learning rate
    ``lr``, the mean loss terms per graph ``loss`` (``total``, ``ce``, ``<reg>``,
    ``<reg>/<term>``, ``kept_edge_fraction``), per split its ``scores`` (``{"valid":
    {"rocauc": ..., "kept_edge_fraction": ...}}``), seconds ``epoch_time_s`` and
    ``train_time_s``, and ``best_epoch`` so far (-1 before any).

    ``extra`` keeps keys of a line this version does not know (``non_finite``), and
    ``absent`` the known ones it lacks, so :meth:`from_dict` then :meth:`to_dict` gives
    the line back.

    ``improved`` (this epoch became the selected one) and ``epochs`` (the run's
    ``train.epochs``; None when not known) are set by the trainer for its ``on_epoch``
    callback and never written: :meth:`to_dict` leaves them out, and a record read back
    from ``results.jsonl`` has ``improved`` False and ``epochs`` None.
    """

    epoch: int
    phase: str = "train"
    lr: float | None = None
    loss: Mapping[str, float] = field(default_factory=dict)
    scores: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    epoch_time_s: float | None = None
    train_time_s: float | None = None
    best_epoch: int = -1
    extra: Mapping[str, Any] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()
    improved: bool = False
    epochs: int | None = None

    @property
    def warmup(self) -> bool:
        """Whether this was an ERM warm-up epoch (selector and regularizers off)."""
        return self.phase == "warmup"

    @property
    def metric(self) -> str | None:
        """The dataset's metric (``rocauc``, ``accuracy``): the name the splits' scores are
        recorded under; None when no split was evaluated."""
        for scores in self.scores.values():
            for key in scores:
                if key not in ("kept_edge_fraction", "selector"):
                    return key
        return None

    @property
    def total_loss(self) -> float | None:
        """The epoch's mean total loss per graph (``loss.total``)."""
        return self.loss.get("total")

    @property
    def train_kept(self) -> float | None:
        """Fraction of edges the selector kept in training (``loss.kept_edge_fraction``)."""
        return self.loss.get("kept_edge_fraction")

    def value(self, split: str, metric: str, default: Any = None) -> Any:
        """``split``'s ``metric`` as recorded (NaN in memory, None once read back from the
        file where it was NaN); ``default`` when the split was not evaluated."""
        scores = self.scores.get(split)
        return scores.get(metric, default) if isinstance(scores, Mapping) else default

    def score(self, split: str, metric: str) -> float | None:
        """``split``'s ``metric`` as a float; None when the split was not evaluated."""
        value = self.value(split, metric)
        return float(value) if isinstance(value, (int, float)) else None

    def to_dict(self) -> dict[str, Any]:
        """The ``results.jsonl`` line (a new dict)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in HEAD if k not in self.absent}
        out.update(self.scores)
        out.update({k: getattr(self, k) for k in TAIL if k not in self.absent})
        out.update(self.extra)
        return copy.deepcopy(out)

    @classmethod
    def from_dict(cls, record: "Mapping[str, Any] | EpochRecord") -> "EpochRecord":
        """A line of ``results.jsonl``; a mapping that also holds :data:`CALLBACK`'s keys
        (the line with ``improved`` and ``epochs``) sets those fields."""
        if isinstance(record, EpochRecord):
            return record
        known = {k: record[k] for k in HEAD + TAIL if k in record}
        scores = {k: v for k, v in record.items() if k in SPLITS}
        extra = {k: v for k, v in record.items() if k not in known and k not in scores}
        absent = frozenset(k for k in HEAD + TAIL if k not in known)
        known.setdefault("epoch", -1)
        callback = {k: extra.pop(k) for k in CALLBACK if k in extra}
        return cls(**known, scores=scores, extra=extra, absent=absent,
                   improved=bool(callback.get("improved", False)),
                   epochs=callback.get("epochs"))
