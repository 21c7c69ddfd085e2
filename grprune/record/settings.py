"""The settings sections every run has, their parsers, and the configuration's hash.

Part of the leaf record layer (:mod:`grprune.record`): it imports only
:mod:`grprune.errors` and :mod:`grprune.hparams`. :class:`TrainSettings`,
:class:`ModelSettings` and :class:`DataSettings` declare the ``train.*``, ``model.*`` and
``data.*`` keys (:class:`grprune.hparams.Param`); :func:`config_hash` names a run by the
settings that change its results.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Iterator, Mapping

from grprune.errors import GrpruneError
from grprune.hparams import MAX_KEY_CHARS, Configurable, Param
from grprune.messages import short_repr
from grprune.record.files import plain

SECTIONS = ("data", "selector", "encoder", "model", "reg", "train")
#: top-level keys of a resolved config that are records, not settings
RECORDS = ("version", "hash", "preset", "features")
#: keys that do not change results and so are left out of the config hash
#: (``data.id_column`` only labels molecules in explain's outputs; ``train.fast_path`` and
#: ``train.eval_batch_size``, like ``train.device``, change how a run is computed, not which;
#: ``train.loader_workers``, gone, is still in the stored configurations that set it)
VOLATILE_KEYS = {("data", "root"), ("data", "download"), ("data", "id_column"),
                 ("train", "device"), ("train", "progress"), ("train", "loader_workers"),
                 ("train", "fast_path"), ("train", "eval_batch_size"), ("train", "pad_buckets"),
                 ("train", "compile"), ("train", "threads")}
#: the options of ``grprune run`` (and :func:`grprune.train`, and a sweep's axes and shared
#: settings) that set one setting: ``--epochs 5`` is ``train.epochs=5``
OPTION_KEYS = {"split": "data.split", "shift": "data.shift", "epochs": "train.epochs",
               "seed": "train.seed", "device": "train.device", "root": "data.root",
               "download": "data.download", "progress": "train.progress",
               "deterministic": "train.deterministic"}
#: the options that name a part (or the preset), and where a resolved config records it
PART_KEYS = {"data": "data.name", "encoder": "encoder.name", "selector": "selector.name",
             "preset": "preset.name"}


def flat_items(cfg: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The settings of a nested configuration as ``(dotted key, value)``, in its order:
    ``("train.lr", 0.001)``, ``("reg.size.eta", 0.85)`` (``reg.NAME.key`` for regularizers).

    The one reading of the dotted keys (:func:`lookup` is its inverse). Records (``hash``,
    ``preset``, ...), unknown sections, and a section or regularizer that is not a mapping
    are passed over: a reader that must refuse them (a config file) checks first.

    Examples
    --------
    >>> list(flat_items({"train": {"lr": 0.1}, "reg": {"size": {"eta": 0.5}}, "hash": "ab"}))
    [('train.lr', 0.1), ('reg.size.eta', 0.5)]
    """
    for section, body in cfg.items():
        if section not in SECTIONS or not isinstance(body, Mapping):
            continue
        for key, value in body.items():
            if section != "reg":
                yield f"{section}.{key}", value
            elif isinstance(value, Mapping):
                yield from ((f"reg.{key}.{k}", v) for k, v in value.items())


def lookup(cfg: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """The value of a dotted key in a nested configuration: ``train.lr``, ``reg.size.eta``,
    ``selector.name``, or a record's field (``preset.name``); ``default`` when it lacks it.

    Examples
    --------
    >>> cfg = {"reg": {"size": {"eta": 0.5}}, "preset": {"name": "paper"}}
    >>> lookup(cfg, "reg.size.eta"), lookup(cfg, "preset.name"), lookup(cfg, "reg.vrex.weight")
    (0.5, 'paper', None)
    """
    section, _, rest = key.partition(".")
    body = cfg.get(section)
    if section == "reg" and isinstance(body, Mapping):
        name, _, rest = rest.partition(".")
        body = body.get(name)
    return body.get(rest, default) if isinstance(body, Mapping) and rest else default


def parse_milestones(text: str) -> tuple[int, ...]:
    """Epochs of ``train.lr_milestones``: ``"30,60"`` -> ``(30, 60)``; ``""`` -> ``()``.

    Raises
    ------
    GrpruneError
        If an item is not a non-negative integer.
    """
    out = []
    for item in str(text).replace(" ", "").split(","):
        if not item:
            continue
        if not item.isdigit():
            raise GrpruneError(f"bad value {short_repr(text)} for train.lr_milestones: "
                               f"expected a comma "
                               f"list of epochs (integers >= 0), e.g. 30,60")
        out.append(int(item))
    return tuple(sorted(out))


#: the most epochs (and warm-up or patience epochs) a run may ask for
MAX_EPOCHS = 100_000
#: the most graphs in one training or evaluation batch
MAX_BATCH = 2**20


def parse_device(text: str) -> str:
    """Check a device name: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.

    Raises
    ------
    ValueError
        For anything else (``gpu``, ``cuda:x``), so that ``-H train.device=gpu`` and
        ``--device gpu`` exit 2 with one line before anything is loaded.
    """
    name = text.strip().lower()
    if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", name):
        raise ValueError("expected auto, cpu, cuda, cuda:N or mps")
    return name


class TrainSettings(Configurable):
    """Trainer hyperparameters (``train.*``); paper Appendix "Detailed experiment setting"."""

    params = {
        "epochs": Param(100, "training epochs (paper: 100)", low=1, high=MAX_EPOCHS),
        "batch_size": Param(64, "graphs per batch (paper: 64)", low=1, high=MAX_BATCH),
        "lr": Param(1e-3, "Adam learning rate (paper: 1e-3)", low=0.0, low_open=True),
        "weight_decay": Param(0.0, "Adam weight decay", low=0.0),
        "warmup_epochs": Param(0, "ERM epochs before the selector and regularizers switch on "
                                  "(paper: 10 for GOOD and DrugOOD, 0 for molbbbp)", low=0,
                               high=MAX_EPOCHS),
        "patience": Param(0, "early stopping: epochs without a better validation metric "
                             "after warm-up; 0 = off (paper: 10 for GOOD-Motif and DrugOOD)",
                          low=0, high=MAX_EPOCHS),
        "seed": Param(0, "random seed (same seed, same numbers)", low=0, high=2**63 - 1),
        "device": Param("auto", "auto (CUDA when present), cpu, cuda or cuda:N",
                        parser=parse_device),
        "eval_train": Param(True, "also evaluate the training split every epoch"),
        "progress": Param("auto", "auto (rich on a terminal, plain lines otherwise), rich, "
                                  "plain or none", choices=("auto", "rich", "plain", "none")),
        "deterministic": Param(True, "same seed, same numbers on a busy machine and on any "
                                     "CPU thread count, deterministic CUDA kernels; see "
                                     "grprune.determinism"),
        "select_warmup": Param(False, "let the best-validation rule pick an ERM warm-up "
                                      "epoch too (official code: yes; paper: the reported "
                                      "metric is after warm-up)"),
        "lr_milestones": Param("", "epochs (comma list) at which the learning rate is "
                                   "multiplied by lr_gamma; empty = constant (paper, and the "
                                   "official code, whose ReduceLROnPlateau has min_lr = lr)",
                               parser=lambda text: ",".join(map(str, parse_milestones(text)))),
        "lr_gamma": Param(0.1, "factor of the learning rate at each milestone",
                          low=0.0, low_open=True),
        "save_last": Param(False, "also save the last epoch's model as checkpoint-last.pt"),
        # how a run is computed, not which run it is: like train.device, not in the hash
        "fast_path": Param(False, "speed-ups that keep the method: the epoch's batches "
                                  "gathered before its first step, Adam's foreach (CPU) or "
                                  "fused (CUDA) kernels; on CUDA also the shuffle drawn on the "
                                  "GPU and evaluation in batches of 4096 graphs. CPU numbers "
                                  "stay the same bit for bit; CUDA ones differ (another "
                                  "shuffle stream)"),
        "eval_batch_size": Param(0, "graphs per evaluation batch; 0 = train.batch_size (4096 "
                                    "with train.fast_path on CUDA); a larger batch may round "
                                    "scores differently in the last bit", low=0,
                                 high=MAX_BATCH),
        "pad_buckets": Param(False, "pad each training batch to one of at most 8 static shapes "
                                    "chosen from the data (grprune.batch.pad_batch; for CUDA "
                                    "graphs); the padding is masked out, so a step computes the "
                                    "same within rounding (the dropout stream differs)"),
        "compile": Param("none", "run each training step's forward, loss and backward through "
                                 "torch.compile in this mode (grprune.step.TrainStep; one graph "
                                 "per batch shape; reduce-overhead = CUDA graphs on a GPU; "
                                 "the same method, another random stream: inductor draws the "
                                 "Gumbel noise and dropout), or cuda-graph: the whole step, "
                                 "Adam's included, captured as one CUDA graph per batch shape "
                                 "and phase after 3 eager steps and replayed "
                                 "(grprune.step.GraphedStep; on the CPU replayed eagerly, the "
                                 "eager numbers); needs train.pad_buckets",
                         choices=("none", "default", "reduce-overhead", "max-autotune",
                                  "cuda-graph")),
        "threads": Param(0, "CPU intra-op threads; 0 = auto: before each epoch torch's count "
                            "(one per core, or OMP_NUM_THREADS) or one, whichever a short "
                            "probe finds faster on the machine as it is (threads that wait "
                            "for a busy core cost more than they give); the numbers are the "
                            "same on any count", low=0, high=1024),
    }


class ModelSettings(Configurable):
    """The classifier around the encoder (``model.*``): readout and head
    (:class:`grprune.model.GraphClassifier`). Until configuration version 2 these were
    ``encoder.readout`` and ``encoder.head_layers``; those keys still load, with a note."""

    params = {
        "readout": Param("sum", "graph readout: sum of node embeddings (paper), mean, or "
                                "sum-l2, the sum divided by its L2 norm (official code)",
                         choices=("sum", "mean", "sum-l2")),
        "head_layers": Param(2, "layers of the MLP classifier on the readout (official "
                                "code: 3)", low=1, high=64),
    }


class DataSettings(Configurable):
    """Dataset-independent data settings (``data.*``)."""

    params = {
        "root": Param("", "data root for caches and OGB folders (default $GRPRUNE_DATA_ROOT "
                          "or ~/.cache/grprune/data)"),
        "download": Param(False, "use OGB's download route (needs network)"),
        "limit": Param(0, "keep only the first N graphs of each split (0 = all; for smoke "
                          "tests)", low=0),
    }


#: keys added after runs were made, left out of the hash at their default so that those
#: runs keep their identity: (section, key) -> (datasets it applies to, default)
LATER_KEYS = {("data", "max_atoms"): (("molecule-csv",), 500),
              ("data", "metric"): (("molecule-csv",), "rocauc"),
              ("data", "task"): (("molecule-csv",), "classification"),
              ("data", "standardize"): (("molecule-csv",), True)}


def _later_default(section: Mapping[str, Any], name: str, key: str, value: Any) -> bool:
    """Whether ``key`` of ``section`` is one of :data:`LATER_KEYS` at its default."""
    later = LATER_KEYS.get((name, key))
    return later is not None and section.get("name") in later[0] and value == later[1]


def stable_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The result-relevant part of a resolved config, what :func:`config_hash` hashes:
    the :data:`SECTIONS` without :data:`VOLATILE_KEYS` and later keys at their defaults,
    in the version-1 layout (the ``model`` section's keys inside ``encoder``)."""
    stable = {s: ({k: v for k, v in cfg[s].items() if (s, k) not in VOLATILE_KEYS
                   and not _later_default(cfg[s], s, k, v)}
                  if s != "reg" else cfg[s]) for s in SECTIONS if s in cfg and s != "model"}
    if isinstance(cfg.get("model"), Mapping) and "encoder" in stable:
        stable["encoder"] = {**stable["encoder"], **cfg["model"]}
    return plain(stable)


def config_hash(cfg: Mapping[str, Any]) -> str:
    """12-hex-digit hash of the result-relevant part of a resolved config
    (:func:`stable_config`), so runs made before the ``model`` section, or before a later
    key with its default, keep their identity."""
    text = json.dumps(stable_config(cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def same_run(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two resolved configs describe the same run (volatile keys ignored)."""
    return config_hash(a) == config_hash(b)


def parse_override(text: str) -> tuple[str, str]:
    """``"reg.size.eta=0.75"`` -> ``("reg.size.eta", "0.75")``.

    Raises
    ------
    GrpruneError
        If there is no ``=`` or no section, or the key is longer than
        :data:`~grprune.hparams.MAX_KEY_CHARS` characters (the message shows at most
        :data:`~grprune.messages.MAX_SHOWN` of the text).
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    shown = short_repr(text)
    if len(key) > MAX_KEY_CHARS:
        raise GrpruneError(f"bad override {short_repr(text, 80)}: its key has {len(key):,} "
                           f"characters; a key is at most {MAX_KEY_CHARS}")
    if not sep or "." not in key:
        raise GrpruneError(f"bad override {shown}: expected section.key=value, "
                           f"e.g. reg.size.eta=0.75 or selector.tau=0.5")
    section = key.split(".", 1)[0]
    if section not in SECTIONS:
        raise GrpruneError(f"bad override {shown}: unknown section {section!r}. "
                           f"Sections: {', '.join(SECTIONS)}")
    return key, value.strip()
