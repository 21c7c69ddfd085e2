"""The summary of a finished run, typed: :class:`RunSummary`, what ``summary.json`` holds.

The trainer builds it once, at the end of a run (:meth:`grprune.trainer.Trainer.fit`), and
:class:`grprune.record.rundir.RunDir` readers get it back from the file
(:meth:`RunSummary.from_dict`). :meth:`RunSummary.to_dict` gives the file's keys in the
file's order, so ``summary.json`` is the same, byte for byte, as the dict literal that
built it before this class existed; a summary read from an older run keeps the keys it
had (a key it lacks is left out again, one this version does not know is kept, after the
known ones), so :meth:`~RunSummary.from_dict` then :meth:`~RunSummary.to_dict` gives the
file back.

Scores are fractions in [0, 1] (``metric`` says which: ``rocauc`` or ``accuracy``); a
score that was not computed or is undefined is NaN in memory and ``null`` in the file
(:func:`grprune.record.files.to_json`, which adds the ``non_finite`` key). Times are in
seconds, memory in MiB.

What the selected model is, in words, has its one owner here: :meth:`RunSummary.model_notes`
(an ERM warm-up model, early stopping), which ``run``, ``collect``, ``explain`` and
``predict`` print.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from grprune.errors import GrpruneError
from grprune.record.runconfig import FeatureSpec

#: the scores of the selected model, by split (``id_valid`` and ``id_test`` where the
#: dataset has in-distribution hold-outs)
SCORES = ("train", "valid", "test", "id_valid", "id_test")
#: a field whose key in ``summary.json`` is another name (kept for the file's bytes)
ON_DISK = {"features": "model"}
IN_MEMORY = {v: k for k, v in ON_DISK.items()}


@dataclass(frozen=True)
class EarlyStop:
    """How early stopping ended a run: ``summary.json``'s ``early_stop`` record.

    Attributes
    ----------
    epoch : int
        The last epoch trained, counted from 0 (as ``best_epoch``).
    patience : int
        ``train.patience``: the epochs after warm-up without a better validation score
        that end a run.
    epochs : int
        ``train.epochs``: the epochs the run would have had.

    Examples
    --------
    >>> stop = EarlyStop(epoch=59, patience=50, epochs=100)
    >>> EarlyStop.from_dict(stop.to_dict()) == stop
    True
    >>> stop.text()[:57]
    'early stopping ended the run at epoch 59 (60 of 100 epoch'
    """

    epoch: int
    patience: int
    epochs: int

    @classmethod
    def of(cls, epochs_run: int, patience: int, epochs: int) -> "EarlyStop | None":
        """The record of a run that trained ``epochs_run`` of its ``epochs`` epochs under
        ``patience`` (0: no early stopping); None when it trained them all.

        >>> EarlyStop.of(60, 50, 100), EarlyStop.of(100, 50, 100)
        (EarlyStop(epoch=59, patience=50, epochs=100), None)
        """
        if not patience or not 0 < epochs_run < epochs:
            return None
        return cls(epoch=epochs_run - 1, patience=int(patience), epochs=int(epochs))

    def to_dict(self) -> dict[str, int]:
        """``{"epoch": 59, "patience": 50, "epochs": 100}``."""
        return {"epoch": self.epoch, "patience": self.patience, "epochs": self.epochs}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "EarlyStop":
        """The record read back.

        Raises
        ------
        GrpruneError
            If ``record`` is not a mapping of the three integers.
        """
        try:
            values = {k: record[k] for k in ("epoch", "patience", "epochs")}
        except (KeyError, TypeError):
            raise GrpruneError(f"not an early_stop record: {record!r}") from None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values.values()):
            raise GrpruneError(f"not an early_stop record: {record!r}")
        return cls(**values)

    def text(self) -> str:
        """The record in words, for a user."""
        return (f"early stopping ended the run at epoch {self.epoch} ({self.epoch + 1} of "
                f"{self.epochs} epochs): no better validation score for {self.patience} "
                f"epochs (train.patience)")


def warmup_model_text(epoch: int, selected: str = "best-valid") -> str:
    """The words for a run with a selector whose reported model is an ERM warm-up
    epoch's, which is evaluated without the selector.

    Parameters
    ----------
    epoch : int
        The reported epoch, counted from 0 (``best_epoch``).
    selected : str
        ``best-valid`` (the epoch was selected on validation, ``train.select_warmup``)
        or ``last-epoch`` (the run had no epoch after warm-up).

    >>> warmup_model_text(7)[:60]
    'the selected epoch 7 is an ERM warm-up epoch: this model doe'
    """
    if selected == "last-epoch":
        return (f"the reported epoch {epoch} is an ERM warm-up epoch (no epoch after the "
                f"warm-up was trained): this model does not use the selector; every bond is "
                f"kept (raise --epochs above train.warmup_epochs)")
    return (f"the selected epoch {epoch} is an ERM warm-up epoch: this model does not use "
            f"the selector; every bond is kept (-H train.select_warmup=false selects among "
            f"the epochs after warm-up)")


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """``summary.json``: what ran, how the selected model scored, and what it cost.

    Attributes
    ----------
    dataset, split, selector, preset : str
        ``data.name``, ``data.split`` (None without splits), ``selector.name`` (``none``
        for ERM) and the preset's name.
    reg : tuple of str
        Regularizer names in ``--reg`` order.
    seed : int
    metric : str
        ``rocauc`` or ``accuracy``.
    best_epoch : int
        The selected epoch, counted from 0; -1 when none was (``selected`` says why).
    valid, test, train, id_valid, id_test : float or None
        The selected model's scores (``valid`` None when no epoch was selected on it;
        ``id_*`` where the dataset has in-distribution splits).
    kept_edge_fraction : float
        Fraction of the test split's edges the selector kept (1.0 without one).
    selected : str
        ``best-valid`` or ``last-epoch`` (no post-warm-up epoch, or validation always NaN).
    use_selector : bool or None
        Whether evaluation used the selector (None: not recorded, read as True).
    epochs_run : int
    early_stop : EarlyStop or None
        How early stopping ended the run; None when it trained every epoch (and in a
        summary written before this field, which marks it :attr:`absent`).
    last : mapping
        Split -> the last epoch's score.
    train_time_s, epoch_time_s_median, data_load_s, wall_time_s : float
        Seconds: training (the epoch loop), the median epoch, loading the data, and the
        whole run (loading, training, the final evaluation).
    selected_phase : str
        ``train``, or ``warmup`` when an ERM warm-up epoch was selected.
    motif_edge_rocauc, motif_edge_rocauc_correct, spurious_precision_at_50 : float or None
        The selector's test diagnostics where the graphs have ground-truth edges.
    selector_diagnostics : mapping
        Split -> the selector's diagnostics (:class:`grprune.evaluation.Evaluation`).
    peak_mem_mib, peak_rss_mib : float
        Peak device memory (the RSS on the CPU) and peak resident memory, MiB.
    device, config_hash : str
    environment, determinism, dataset_info : mapping
        Software and hardware (:func:`grprune.provenance.environment`), the determinism
        settings in force, and the dataset's own record (sizes, skipped rows).
    features : FeatureSpec or None
        The data's feature and class sizes, written under the key ``model`` in the
        ``feature_kind`` / ``num_classes`` form (:meth:`FeatureSpec.summary_record`;
        ``config.json``'s ``features`` is the record readers rebuild a model from).
    extra : mapping
        Keys of a summary read from a file that this version does not know (the file's
        ``non_finite`` among them), written back after the known ones.
    absent : frozenset of str
        Known keys the summary lacks (``id_valid`` and ``id_test`` without such splits; any
        that an older version did not write): :meth:`to_dict` leaves them out.
    """

    dataset: str = ""
    split: str | None = None
    selector: str = "none"
    reg: tuple[str, ...] = ()
    preset: str = "paper"
    seed: Any = 0
    metric: str = ""
    best_epoch: int = -1
    valid: float | None = None
    test: float | None = None
    train: float | None = None
    id_valid: float | None = None
    id_test: float | None = None
    kept_edge_fraction: float | None = None
    selected: str = "best-valid"
    use_selector: bool | None = None
    epochs_run: int = 0
    early_stop: EarlyStop | None = None
    last: Mapping[str, Any] = field(default_factory=dict)
    train_time_s: float | None = None
    epoch_time_s_median: float | None = None
    selected_phase: str | None = None
    motif_edge_rocauc: float | None = None
    motif_edge_rocauc_correct: float | None = None
    spurious_precision_at_50: float | None = None
    selector_diagnostics: Mapping[str, Any] = field(default_factory=dict)
    peak_mem_mib: float | None = None
    peak_rss_mib: float | None = None
    device: str | None = None
    config_hash: str | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)
    determinism: Mapping[str, Any] = field(default_factory=dict)
    features: FeatureSpec | None = None
    data_load_s: float | None = None
    wall_time_s: float | None = None
    dataset_info: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()

    @classmethod
    def keys_written(cls) -> tuple[str, ...]:
        """The known keys of ``summary.json``, in the file's order."""
        return tuple(ON_DISK.get(f.name, f.name) for f in fields(cls)
                     if f.name not in ("extra", "absent"))

    def to_dict(self) -> dict[str, Any]:
        """The ``summary.json`` record (a new dict, nothing shared with the summary)."""
        out: dict[str, Any] = {}
        for name in self.keys_written():
            if name in self.absent:
                continue
            value = getattr(self, IN_MEMORY.get(name, name))
            if name == "reg":
                value = list(value)
            elif name == "model":
                value = value.summary_record() if value is not None else None
            elif name == "early_stop":
                value = value.to_dict() if value is not None else None
            out[name] = copy.deepcopy(value)
        out.update(copy.deepcopy(dict(self.extra)))
        return out

    @classmethod
    def from_dict(cls, record: "Mapping[str, Any] | RunSummary") -> "RunSummary":
        """A summary read from ``summary.json`` (of this version or an older one).

        Missing keys take the defaults and are marked :attr:`absent` (a summary written
        before ``early_stop`` existed reads with None there); unknown keys, and a ``reg``,
        ``model`` or ``early_stop`` record of an unexpected form, are kept in :attr:`extra`.
        """
        if isinstance(record, RunSummary):
            return record
        names = cls.keys_written()
        values = {k: record[k] for k in names if k in record}
        extra = {k: v for k, v in record.items() if k not in values}
        if "reg" in values:
            if isinstance(values["reg"], (list, tuple)):
                values["reg"] = tuple(values["reg"])
            else:
                extra["reg"] = values.pop("reg")
        if values.get("model") is not None:
            try:
                values["model"] = FeatureSpec.from_dict(values["model"])
            except (GrpruneError, AttributeError):
                extra["model"] = values.pop("model")
        if values.get("early_stop") is not None:
            try:
                values["early_stop"] = EarlyStop.from_dict(values["early_stop"])
            except GrpruneError:
                extra["early_stop"] = values.pop("early_stop")
        absent = frozenset(k for k in names if k not in values)
        return cls(**{IN_MEMORY.get(k, k): v for k, v in values.items()}, extra=extra,
                   absent=absent)

    def score(self, split: str) -> float | None:
        """The selected model's score on ``split`` (``test``, ``valid``, ``train``,
        ``id_valid`` or ``id-valid``, ``id_test``); None when the run has no such score."""
        name = split.replace("-", "_")
        value = getattr(self, name) if name in SCORES else None
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def warmup_model(self) -> bool:
        """Whether a run with a selector reports an ERM warm-up epoch's model, which is
        evaluated without the selector (every bond kept): ``use_selector`` false."""
        return self.selector != "none" and self.use_selector is False

    def model_notes(self) -> list[str]:
        """What the reported model is, in words, where a user could take it for another:
        an ERM warm-up model of a run with a selector (:func:`warmup_model_text`), and
        early stopping (:meth:`EarlyStop.text`); empty for neither.

        >>> RunSummary(selector="gumbel-gin", best_epoch=7, use_selector=False,
        ...            selected_phase="warmup").model_notes()[0][:40]
        'the selected epoch 7 is an ERM warm-up e'
        """
        notes = [warmup_model_text(self.best_epoch, self.selected)] if self.warmup_model else []
        if self.early_stop is not None:
            notes.append(self.early_stop.text())
        return notes

    @property
    def in_distribution(self) -> bool:
        """Whether the run has in-distribution hold-out scores (``id_valid``, ``id_test``:
        GOOD's ID splits), beside the OOD ones (``valid``, ``test``)."""
        return not {"id_valid", "id_test"} <= self.absent


def check_summary(summary: Any, cfg: Mapping[str, Any]) -> str | None:
    """Why ``summary`` (parsed ``summary.json``) is not a sound summary of the run of
    ``cfg`` (its ``config.json``), or None."""
    if not isinstance(summary, dict):
        return "summary.json is not a JSON object"
    if summary.get("metric") is None:
        return "summary.json has no 'metric'"
    if "test" not in summary:
        return "summary.json has no 'test' value"
    for key in ("test", "valid", "id_valid", "id_test"):
        value = summary.get(key)
        if value is not None and not isinstance(value, (int, float)):
            return f"summary.json: {key!r} is not a number ({value!r})"
    hashes = summary.get("config_hash"), cfg.get("hash")
    if None not in hashes and hashes[0] != hashes[1]:
        return (f"summary.json belongs to another configuration (config hash {hashes[0]}, "
                f"config.json has {hashes[1]})")
    if summary.get("dataset") not in (None, cfg["data"]["name"]):
        return (f"summary.json is for dataset {summary['dataset']!r} but config.json "
                f"for {cfg['data']['name']!r}")
    return None
