"""Typed views of a run's files: :class:`RunConfig` (``config.json``) with its
:class:`FeatureSpec`, :class:`RunSummary` (``summary.json``) and :class:`EpochRecord`
(a line of ``results.jsonl``).

A resolved configuration (:func:`grprune.config.resolve_config`) is what ``config.json``
holds: six sections of settings and three records::

    {"version": 2,
     "data": {...}, "selector": {...}, "encoder": {...}, "model": {...},
     "reg": {NAME: {...}}, "train": {...},
     "preset": {...}, "hash": "...", "features": {...}}

:class:`RunConfig` is that mapping (it stays a ``dict``, so it is written as JSON as it
is) with typed accessors for what the workflow asks of it: part names, seed, epochs,
the method's label, the :class:`FeatureSpec`. :func:`upgrade` reads configurations of
older versions: version 1 kept the classifier's ``readout`` and ``head_layers`` in the
``encoder`` section; they are moved to ``model``, and the run keeps its hash
(:func:`grprune.record.settings.config_hash` is computed on the version-1 layout).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from grprune.errors import GrpruneError
from grprune.record.settings import ModelSettings

#: the current layout of ``config.json``
VERSION = 2
#: keys that moved between sections: old key -> new key (version 1 -> 2)
MOVED_KEYS = {"encoder.readout": "model.readout", "encoder.head_layers": "model.head_layers"}


@dataclass(frozen=True)
class FeatureSpec:
    """What a model must know of its data to be built: the ``features`` record of
    ``config.json``, written once the training data is loaded, so that ``predict``,
    ``explain`` and :func:`grprune.load_run` rebuild a checkpoint without the dataset.

    Attributes
    ----------
    kind : str
        ``"ogb"`` (integer atom/bond features, OGB's embeddings) or ``"linear"`` (dense
        float features through a linear input layer).
    node_dim : int
        Width of ``ndata["feat"]`` (1 for a vector of ids).
    edge_dim : int
        Width of ``edata["feat"]``; 0 without edge features.
    classes : int
        Number of classes ``C`` of the classifier's output.
    """

    kind: str
    node_dim: int
    edge_dim: int
    classes: int

    @classmethod
    def of(cls, dataset) -> "FeatureSpec":
        """The spec of a :class:`~grprune.data.base.GraphDataset` (its first graph's
        feature widths, its ``atom_encoder`` kind and ``num_classes``)."""
        g0 = dataset.graphs[0]
        nfeat = g0.ndata["feat"]
        return cls(kind=str(getattr(dataset, "atom_encoder", "ogb")),
                   node_dim=int(nfeat.shape[1]) if nfeat.dim() > 1 else 1,
                   edge_dim=int(g0.edata["feat"].shape[1]) if "feat" in g0.edata else 0,
                   classes=int(dataset.num_classes))

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "FeatureSpec":
        """From a ``features`` record, or from a ``summary.json`` ``"model"`` record of
        runs made before ``features`` existed (``feature_kind``, ``num_classes``).

        Raises
        ------
        GrpruneError
            If a field is missing.
        """
        try:
            return cls(kind=str(record.get("kind", record.get("feature_kind"))),
                       node_dim=int(record["node_dim"]), edge_dim=int(record["edge_dim"]),
                       classes=int(record.get("classes", record.get("num_classes"))))
        except (KeyError, TypeError, ValueError) as exc:
            raise GrpruneError(f"bad features record {dict(record)!r}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary_record(self) -> dict[str, Any]:
        """The form of ``summary.json``'s older ``"model"`` record: :meth:`model_kwargs`
        and ``num_classes``."""
        return {**self.model_kwargs(), "num_classes": self.classes}

    def model_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of encoders and selectors: ``feature_kind``,
        ``node_dim``, ``edge_dim``."""
        return {"feature_kind": self.kind, "node_dim": self.node_dim,
                "edge_dim": self.edge_dim}


class RunConfig(dict):
    """A resolved run configuration (a ``dict``, as in ``config.json``) with typed access.

    Build one with :func:`grprune.config.resolve_config`, or from a stored
    ``config.json`` with :meth:`from_dict` (which upgrades older layouts).
    """

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any]) -> "RunConfig":
        """A stored configuration in the current layout (:func:`upgrade`)."""
        return cfg if isinstance(cfg, RunConfig) else cls(upgrade(cfg))

    @property
    def dataset(self) -> str:
        """``data.name``."""
        return str(self["data"]["name"])

    @property
    def split(self) -> str | None:
        """``data.split`` (None for datasets without one)."""
        return self["data"].get("split")

    @property
    def selector_name(self) -> str:
        """``selector.name``; ``"none"`` for ERM."""
        return str(self["selector"]["name"])

    @property
    def regularizers(self) -> list[str]:
        """Regularizer names in ``--reg`` order; empty for none."""
        return list(self["reg"])

    @property
    def seed(self) -> int:
        return int(self["train"]["seed"])

    @property
    def epochs(self) -> int:
        return int(self["train"]["epochs"])

    @property
    def preset(self) -> str:
        """The preset the run was resolved with (``paper`` for runs without a record)."""
        return str((self.get("preset") or {}).get("name", "paper"))

    @property
    def features(self) -> FeatureSpec | None:
        """The training data's :class:`FeatureSpec`; None until the data was loaded."""
        record = self.get("features")
        return FeatureSpec.from_dict(record) if isinstance(record, Mapping) else None

    def with_features(self, spec: FeatureSpec) -> "RunConfig":
        """A copy with the ``features`` record set."""
        return RunConfig({**self, "features": spec.to_dict()})


def upgrade(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration of any earlier version in the current layout (a new dict).

    Version 1 (no ``version`` or ``version: 1``): ``encoder.readout`` and
    ``encoder.head_layers`` move to a ``model`` section, which gets the defaults
    for what it lacks.
    """
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in cfg.items()}
    if "model" not in out and isinstance(out.get("encoder"), dict):
        moved = {key.split(".")[1]: out["encoder"].pop(key.split(".")[1])
                 for key in MOVED_KEYS if key.split(".")[1] in out["encoder"]}
        out["model"] = ModelSettings.resolve_hparams(moved, prefix="model.")
    out["version"] = VERSION
    return out


def move_keys(items: list[tuple[str, Any]], encoder_keys: Mapping[str, Any]
              ) -> list[tuple[str, Any]]:
    """``[("encoder.readout", v)]`` -> ``[("model.readout", v)]``, with a one-line note
    per moved key; an encoder that declares such a key itself keeps it.

    Parameters
    ----------
    items : list of (key, value)
        Namespaced settings in resolution order.
    encoder_keys : mapping
        The run's encoder's declared hyperparameters (its ``defaults``).
    """
    out, noted = [], set()
    for key, value in items:
        new = MOVED_KEYS.get(key)
        if new is not None and key.split(".", 1)[1] not in encoder_keys:
            if key not in noted:
                warnings.warn(f"grprune: {key} is now {new}; it was moved", stacklevel=3)
                noted.add(key)
            key = new
        out.append((key, value))
    return out


class RunSummary(dict):
    """``summary.json`` (a ``dict``, as written by :class:`grprune.trainer.Trainer`) with
    typed access to what the workflow reads of it."""

    @property
    def metric(self) -> str:
        """``rocauc`` or ``accuracy``."""
        return str(self["metric"])

    def score(self, split: str) -> float | None:
        """The selected model's score on ``split`` (``test``, ``valid``, ``id_valid``,
        ``id_test``); None when the run has no such split."""
        value = self.get(split.replace("-", "_"))
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def best_epoch(self) -> int:
        return int(self["best_epoch"])

    @property
    def selected(self) -> str:
        """The trainer's checkpoint rule: ``best-valid`` or ``last-epoch``."""
        return str(self.get("selected", "best-valid"))

    @property
    def use_selector(self) -> bool | None:
        """Whether evaluation used the selector; None for runs written before it was
        recorded (:func:`grprune.inference.evaluation_uses_selector` decides then)."""
        value = self.get("use_selector")
        return value if isinstance(value, bool) else None


class EpochRecord(dict):
    """One epoch of ``results.jsonl``: ``epoch``, ``phase`` (``warmup`` or ``train``),
    ``loss`` (``{"total": ..., "ce": ..., "reg/term": ...}``), per split its scores
    (``{"valid": {"rocauc": ...}}``), ``lr`` and timings."""

    @property
    def epoch(self) -> int:
        return int(self["epoch"])

    @property
    def warmup(self) -> bool:
        """Whether this was an ERM warm-up epoch (selector and regularizers off)."""
        return self.get("phase") == "warmup"

    def score(self, split: str, metric: str) -> float | None:
        """``record[split][metric]``; None when the split was not evaluated."""
        value = (self.get(split) or {}).get(metric)
        return float(value) if isinstance(value, (int, float)) else None
