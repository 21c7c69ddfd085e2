"""The typed view of ``config.json``: :class:`RunConfig`, its sections
(:class:`TrainConfig`, :class:`DataConfig`, :class:`ModelConfig`, :class:`PartConfig`) and
its :class:`FeatureSpec` record. ``summary.json`` and ``results.jsonl`` have theirs in
:mod:`grprune.record.summary` and :mod:`grprune.record.epoch`.

A resolved configuration (:func:`grprune.resolve.resolve_config`) is what ``config.json``
holds: six sections of settings and three records::

    {"version": 2,
     "data": {...}, "selector": {...}, "encoder": {...}, "model": {...},
     "reg": {NAME: {...}}, "train": {...},
     "preset": {...}, "hash": "...", "features": {...}}

:class:`RunConfig` is that mapping, read-only at every depth
(:meth:`RunConfig.to_dict` gives the plain ``dict`` that is written), with typed
accessors for what the workflow asks of it: each section (``cfg.train.epochs``,
``cfg.data.limit``, ``cfg.selector.name``, ``cfg.reg``), the records (``cfg.hash``,
``cfg.preset``, ``cfg.features``) and any setting by its dotted key
(``cfg.setting("reg.size.eta")``). :func:`upgrade` reads configurations of
older versions: version 1 kept the classifier's ``readout`` and ``head_layers`` in the
``encoder`` section; they are moved to ``model``, and the run keeps its hash
(:func:`grprune.record.settings.config_hash` is computed on the version-1 layout). A run
directory is read from version :data:`MIN_VERSION` on (:func:`format_problem`); an older
one is re-made from its ``config.json``.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping

from grprune.errors import GrpruneError
from grprune.hparams import Param
from grprune.record.files import plain
from grprune.record.settings import DataSettings, ModelSettings, TrainSettings, lookup

#: the current layout of ``config.json``
VERSION = 2
#: the oldest run directory grprune reads (``load_run``, ``explain``, ``predict``, ``collect``,
#: resuming): one whose ``config.json`` is of this version or later. From version 2 on, a run
#: writes the ``features`` record that rebuilds its model without the data. An older run is
#: re-made from its own ``config.json`` (``grprune run --config`` reads version 1's layout),
#: not read (:func:`format_problem`)
MIN_VERSION = 2
#: keys that moved between sections: old key -> new key (version 1 -> 2)
MOVED_KEYS = {"encoder.readout": "model.readout", "encoder.head_layers": "model.head_layers"}
#: settings that are gone, and why: a configuration file that sets one is read without it
#: (:func:`move_keys`); a stored ``config.json`` keeps it, and nothing reads it
DROPPED_KEYS = {"train.loader_workers": "it had no effect"}


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
        Number of classes ``C`` of the classifier's output; the number of tasks ``T``
        (label columns) for ``multilabel`` and ``regression``.
    task : str
        ``"classification"`` (every run before regression), ``"multilabel"`` or
        ``"regression"`` (:attr:`grprune.data.dataset.GraphDataset.task`).
    target_mean, target_std : tuple of float (length T) or None
        Regression: the training split's mean and standard deviation of each target, by
        which the model's output is de-standardized (None: not standardized).
    """

    kind: str
    node_dim: int
    edge_dim: int
    classes: int
    task: str = "classification"
    target_mean: tuple[float, ...] | None = None
    target_std: tuple[float, ...] | None = None

    @classmethod
    def of(cls, dataset) -> "FeatureSpec":
        """The spec of a :class:`~grprune.data.dataset.GraphDataset` (its first graph's
        feature widths, its ``atom_encoder`` kind and ``num_classes``)."""
        g0 = dataset.graphs[0]
        nfeat = g0.ndata["feat"]
        scale = dataset.target_scale
        return cls(kind=str(dataset.atom_encoder),
                   node_dim=int(nfeat.shape[1]) if nfeat.dim() > 1 else 1,
                   edge_dim=int(g0.edata["feat"].shape[1]) if "feat" in g0.edata else 0,
                   classes=int(dataset.num_classes), task=dataset.task,
                   target_mean=None if scale is None else tuple(scale[0]),
                   target_std=None if scale is None else tuple(scale[1]))

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "FeatureSpec":
        """From a ``features`` record, or from ``summary.json``'s ``"model"`` record
        (:meth:`summary_record`: ``feature_kind``, ``num_classes``).

        Raises
        ------
        GrpruneError
            If a field is missing.
        """
        try:
            scale = [None if record.get(k) is None else tuple(float(v) for v in record[k])
                     for k in ("target_mean", "target_std")]
            return cls(kind=str(record.get("kind", record.get("feature_kind"))),
                       node_dim=int(record["node_dim"]), edge_dim=int(record["edge_dim"]),
                       classes=int(record.get("classes", record.get("num_classes"))),
                       task=str(record.get("task", "classification")),
                       target_mean=scale[0], target_std=scale[1])
        except (KeyError, TypeError, ValueError) as exc:
            raise GrpruneError(f"bad features record {dict(record)!r}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """The ``features`` record; the task fields only where they are not a
        classifier's defaults, so a classification run's record is as it always was."""
        out = asdict(self)
        for key, default in (("task", "classification"), ("target_mean", None),
                             ("target_std", None)):
            if out[key] == default:
                del out[key]
            elif isinstance(out[key], tuple):
                out[key] = list(out[key])
        return out

    def summary_record(self) -> dict[str, Any]:
        """The form of ``summary.json``'s ``"model"`` record: :meth:`model_kwargs`
        and ``num_classes`` (and the task fields of :meth:`to_dict`, where they are set)."""
        task = {k: v for k, v in self.to_dict().items()
                if k in ("task", "target_mean", "target_std")}
        return {**self.model_kwargs(), "num_classes": self.classes, **task}

    def model_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of encoders and selectors: ``feature_kind``,
        ``node_dim``, ``edge_dim``."""
        return {"feature_kind": self.kind, "node_dim": self.node_dim,
                "edge_dim": self.edge_dim}


def _with_defaults(cls: type, body: Mapping[str, Any], params: Mapping[str, Param]
                   ) -> dict[str, Any]:
    """The values of ``cls``'s fields in a section: as stored, else the declared default
    (a key that an older configuration lacks)."""
    return {f.name: body[f.name] if f.name in body else params[f.name].default
            for f in fields(cls)}


@dataclass(frozen=True)
class TrainConfig:
    """The ``train`` section (:class:`~grprune.record.settings.TrainSettings` declares each
    key, its default, domain and meaning)."""

    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup_epochs: int
    patience: int
    seed: int
    device: str
    eval_train: bool
    progress: str
    deterministic: bool
    select_warmup: bool
    lr_milestones: str
    lr_gamma: float
    save_last: bool
    fast_path: bool
    eval_batch_size: int
    pad_buckets: bool
    compile: str
    threads: int

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> "TrainConfig":
        return cls(**_with_defaults(cls, body, TrainSettings.params))


@dataclass(frozen=True)
class ModelConfig:
    """The ``model`` section: the classifier around the encoder
    (:class:`~grprune.record.settings.ModelSettings`)."""

    readout: str
    head_layers: int

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> "ModelConfig":
        return cls(**_with_defaults(cls, body, ModelSettings.params))


@dataclass(frozen=True)
class DataConfig:
    """The ``data`` section: the dataset's name, the settings every dataset has
    (:class:`~grprune.record.settings.DataSettings`) and the dataset's own ``params``
    (``split``, ``shift``, ``path``, ...: what its loader takes)."""

    name: str
    root: str
    download: bool
    limit: int
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> "DataConfig":
        own = {k: v for k, v in body.items() if k != "name" and k not in DataSettings.params}
        settings = {k: body.get(k, p.default) for k, p in DataSettings.params.items()}
        return cls(name=str(body["name"]), **settings, params=MappingProxyType(own))

    @property
    def split(self) -> str | None:
        """The split scheme (None for datasets without one)."""
        return self.params.get("split")

    @property
    def shift(self) -> str | None:
        """The distribution shift (GOOD datasets: ``covariate`` or ``concept``)."""
        return self.params.get("shift")

    @property
    def id_column(self) -> str:
        """``molecule-csv``'s column of compound IDs (``""``: none, or another dataset)."""
        return str(self.params.get("id_column") or "")

    @property
    def featurizer(self) -> str | None:
        """The SMILES featurizer of a molecule-file dataset (None for other data)."""
        return self.params.get("featurizer")


@dataclass(frozen=True)
class PartConfig:
    """A part's section (``selector``, ``encoder``): its registered ``name`` (``none`` for
    no selector) and its hyperparameters (read-only; the part's class declares them)."""

    name: str
    hparams: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> "PartConfig":
        return cls(str(body["name"]),
                   MappingProxyType({k: v for k, v in body.items() if k != "name"}))


def _frozen(obj: Any) -> Any:
    """``obj`` read-only all the way down: mappings as ``MappingProxyType`` of their
    frozen values, lists and tuples as tuples."""
    if isinstance(obj, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in obj.items()})
    if isinstance(obj, (list, tuple)):
        return tuple(_frozen(v) for v in obj)
    return obj


def _reg_section(body: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    """``reg``: regularizer name -> its hyperparameters, read-only."""
    return MappingProxyType({name: MappingProxyType(dict(hp)) for name, hp in body.items()})


class RunConfig(Mapping[str, Any]):
    """A resolved run configuration: ``config.json``, read-only, with typed access.

    It reads as the mapping of ``config.json`` (``cfg["train"]["epochs"]``; every
    section a read-only mapping, every list a tuple) and cannot be changed: a new
    configuration is a new object (:meth:`with_features`, or :meth:`from_dict` of an
    edited :meth:`to_dict`). :meth:`to_dict` gives the plain ``dict`` that is written,
    byte for byte what was read (``tests/test_record.py``).

    Build one with :func:`grprune.resolve.resolve_config`, or from a stored
    ``config.json`` with :meth:`from_dict` (which upgrades older layouts).

    Each value has one spelling, the path of ``config.json``: a section
    (``cfg.data.name``, ``cfg.data.split``, ``cfg.train.seed``, ``cfg.train.epochs``,
    ``cfg.selector.name``, ``list(cfg.reg)``), a record (``cfg.hash``, ``cfg.preset``,
    ``cfg.features``) or a setting by its dotted key (``cfg.setting("reg.size.eta")``);
    ``cfg.get(key)`` is the mapping's, of a top-level key (``cfg.get("hash")``).

    The typed sections (``data``, ``train``, ``model``, ``selector``, ``encoder``,
    ``reg``) are built once, here; a section the mapping lacks raises ``KeyError`` when
    it is asked for.

    Raises
    ------
    TypeError
        On any attempt to set, delete or update a key, at any depth.
    """

    __slots__ = ("_body", "_data", "_train", "_model", "_selector", "_encoder", "_reg")
    _body: Mapping[str, Any]
    _data: DataConfig | None
    _train: TrainConfig | None
    _model: ModelConfig | None
    _selector: PartConfig | None
    _encoder: PartConfig | None
    _reg: Mapping[str, Mapping[str, Any]] | None

    def __init__(self, body: Mapping[str, Any] = MappingProxyType({})) -> None:
        frozen = _frozen(body)
        sections = {"_data": ("data", DataConfig.from_dict),
                    "_train": ("train", TrainConfig.from_dict),
                    "_model": ("model", ModelConfig.from_dict),
                    "_selector": ("selector", PartConfig.from_dict),
                    "_encoder": ("encoder", PartConfig.from_dict),
                    "_reg": ("reg", _reg_section)}
        object.__setattr__(self, "_body", frozen)
        for slot, (key, build) in sections.items():
            object.__setattr__(self, slot, build(frozen[key]) if key in frozen else None)

    def __getitem__(self, key: str) -> Any:
        return self._body[key]

    def __iter__(self):
        return iter(self._body)

    def __len__(self) -> int:
        return len(self._body)

    def __repr__(self) -> str:
        return f"RunConfig({self.to_dict()!r})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("a RunConfig is read-only; build a new one (RunConfig.from_dict)")

    def __reduce__(self):  # pickled (Ray, process pools) as its plain dict
        return (RunConfig, (self.to_dict(),))

    def __copy__(self) -> "RunConfig":
        return self

    def __deepcopy__(self, memo: dict) -> "RunConfig":
        return self

    def to_dict(self) -> dict[str, Any]:
        """The plain ``dict`` of ``config.json`` (a new one: changing it changes nothing
        here)."""
        return plain(self._body)

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any]) -> "RunConfig":
        """A stored configuration in the current layout (:func:`upgrade`)."""
        return cfg if isinstance(cfg, RunConfig) else cls(upgrade(cfg))

    @property
    def data(self) -> DataConfig:
        """The ``data`` section, typed."""
        if self._data is None:
            raise KeyError("data")
        return self._data

    @property
    def train(self) -> TrainConfig:
        """The ``train`` section, typed."""
        if self._train is None:
            raise KeyError("train")
        return self._train

    @property
    def model(self) -> ModelConfig:
        """The ``model`` section, typed."""
        if self._model is None:
            raise KeyError("model")
        return self._model

    @property
    def selector(self) -> PartConfig:
        """The ``selector`` section (``name`` ``none`` for ERM)."""
        if self._selector is None:
            raise KeyError("selector")
        return self._selector

    @property
    def encoder(self) -> PartConfig:
        """The ``encoder`` section."""
        if self._encoder is None:
            raise KeyError("encoder")
        return self._encoder

    @property
    def reg(self) -> Mapping[str, Mapping[str, Any]]:
        """Regularizer name -> its hyperparameters, in ``--reg`` order (read-only)."""
        if self._reg is None:
            raise KeyError("reg")
        return self._reg

    @property
    def hash(self) -> str | None:
        """The config hash (:func:`~grprune.record.settings.config_hash`) it was resolved
        with; None before resolution ends."""
        value = self.get("hash")
        return None if value is None else str(value)

    @property
    def preset_values(self) -> Mapping[str, Any]:
        """The preset's values that applied to this run (``{"train.epochs": 200, ...}``;
        empty for runs without a preset record)."""
        return dict((self.get("preset") or {}).get("values") or {})

    def setting(self, key: str, default: Any = None) -> Any:
        """A setting or record field by its dotted key (``reg.size.eta``, ``train.lr``,
        ``preset.name``; :func:`~grprune.record.settings.lookup`); ``default`` when the
        configuration lacks it."""
        return lookup(self, key, default)

    @property
    def preset(self) -> str:
        """The preset the run was resolved with (``paper`` for runs without a record)."""
        return str((self.get("preset") or {}).get("name", "paper"))

    @property
    def features(self) -> FeatureSpec | None:
        """The training data's :class:`FeatureSpec`; None until the data was loaded."""
        record = self.get("features")
        return FeatureSpec.from_dict(record) if isinstance(record, Mapping) else None

    def with_features(self, features: FeatureSpec) -> "RunConfig":
        """A new configuration with the ``features`` record set."""
        return RunConfig({**self._body, "features": features.to_dict()})


def check_config(cfg: Any) -> str | None:
    """Why ``cfg`` is not a grprune run configuration, or None."""
    if not isinstance(cfg, dict):
        return "config.json is not a JSON object"
    for section in ("data", "selector", "train", "reg"):
        if not isinstance(cfg.get(section), dict):
            return f"config.json has no {section!r} section (not a grprune run config)"
    if "name" not in cfg["data"] or "name" not in cfg["selector"]:
        return "config.json lacks data.name or selector.name (not a grprune run config)"
    return None


def format_problem(cfg: Mapping[str, Any]) -> str | None:
    """Why a run directory whose ``config.json`` is ``cfg`` (parsed, before :func:`upgrade`)
    is older than grprune reads (:data:`MIN_VERSION`), or None.

    Examples
    --------
    >>> format_problem({"version": 2}) is None
    True
    >>> format_problem({})
    'its config.json is of version 1; grprune reads run directories of version 2 and later'
    """
    version = cfg.get("version", 1)
    if isinstance(version, int) and not isinstance(version, bool) and version >= MIN_VERSION:
        return None
    return (f"its config.json is of version {version!r}; grprune reads run directories of "
            f"version {MIN_VERSION} and later")


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
    per moved key; an encoder that declares such a key itself keeps it. A key of
    :data:`DROPPED_KEYS` is left out, with a one-line note.

    Parameters
    ----------
    items : list of (key, value)
        Namespaced settings in resolution order.
    encoder_keys : mapping
        The run's encoder's declared hyperparameters (its ``defaults``).
    """
    out, noted = [], set()
    for key, value in items:
        if key in DROPPED_KEYS:
            if key not in noted:
                warnings.warn(f"grprune: {key} is gone ({DROPPED_KEYS[key]}); it was left out",
                              stacklevel=3)
                noted.add(key)
            continue
        new = MOVED_KEYS.get(key)
        if new is not None and key.split(".", 1)[1] not in encoder_keys:
            if key not in noted:
                warnings.warn(f"grprune: {key} is now {new}; it was moved", stacklevel=3)
                noted.add(key)
            key = new
        out.append((key, value))
    return out
