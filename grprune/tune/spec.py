"""What a ``grprune tune`` study is: its :class:`TuneSpec`, the configuration of a trial's
values, and the Optuna study with its sampler, pruner and recorded base configuration
(:mod:`grprune.tune.study` runs its trials)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grprune.errors import GrpruneError
from grprune.record.settings import stable_config
from grprune.sweep.expansion import Configuration, expand
from grprune.sweep.grid import Grid
from grprune.tune.space import Space
from grprune.tune.trial import make_pruner

SAMPLERS = ("tpe", "random", "grid")
#: the study's default name and the storage file in ``--out``
DEFAULT_STUDY, STORAGE_FILE = "tune", "study.db"


@dataclass
class TuneSpec:
    """What ``grprune tune`` was asked (see its ``--help``).

    Attributes
    ----------
    base : Grid
        The fixed part: one value per axis and ``-H`` key.
    space : Space
    trials : int or None
        Finished or pruned trials to end with (None with ``grid``: the grid's size).
    root : Path
        ``--out`` (absolute).
    storage : str or None
        Optuna storage URL (None: ``sqlite:///<root>/study.db``).
    child_args : list of str
        Extra arguments of every child (``--log ...``).
    env : dict
        Extra environment variables of every child.
    launcher : str
        ``local`` (child processes) or ``ray`` (one Ray task per trial,
        :func:`grprune.sweep.launchers.make_launcher`).
    address : str or None
        Ray cluster address (None: a local Ray instance of ``workers`` CPUs).
    cpus_per_run : float
        Ray: ``num_cpus`` of each trial's task.
    prune_after : int or None
        No trial is pruned before this epoch (None:
        :func:`~grprune.tune.trial.prune_after_default` of the runs' schedule).
    """

    base: Grid
    space: Space
    root: Path
    trials: int | None = None
    sampler: str = "tpe"
    pruner: str = "median"
    storage: str | None = None
    study: str = DEFAULT_STUDY
    workers: int = 1
    seed: int = 0
    command: list[str] = field(default_factory=list)
    child_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    launcher: str = "local"
    address: str | None = None
    cpus_per_run: float = 1.0
    prune_after: int | None = None

    @property
    def storage_url(self) -> str:
        """The storage URL (the default SQLite file made absolute)."""
        return self.storage or f"sqlite:///{self.root / STORAGE_FILE}"


def configuration(spec: TuneSpec, params: dict[str, str]) -> Configuration:
    """The resolved configuration of one trial's values (as ``grprune sweep`` resolves
    a grid point).

    Raises
    ------
    GrpruneError
        If the values do not resolve (an unknown key, a bad value).
    """
    b = spec.base
    grid = Grid(dict(b.axes), {**b.hparams, **{k: [v] for k, v in params.items()}},
                dict(b.fixed), b.origin)
    return expand([grid]).configs[0]


def metric_of(conf: Configuration) -> str:
    """The validation metric the run will select on (``data.metric``, else the dataset's)."""
    metric = conf.cfg.setting("data.metric")
    if metric:
        return str(metric)
    from grprune.data.registry import DATASETS
    return str(DATASETS.get(conf.cfg.data.name).metric)


def make_study(spec: TuneSpec, direction: str, epochs: int, after: int = 0) -> Any:
    """Create or load the study (``load_if_exists``), with the sampler and pruner.

    Raises
    ------
    GrpruneError
        If the storage cannot be opened, or the study exists with another direction.
    """
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = make_sampler(spec, spec.seed)
    pruner = make_pruner(spec.pruner, epochs, after)
    spec.root.mkdir(parents=True, exist_ok=True)  # the default storage's and the runs' home
    try:
        study = optuna.create_study(storage=spec.storage_url, study_name=spec.study,
                                    direction=optuna.study.StudyDirection[direction.upper()],
                                    sampler=sampler, pruner=pruner,
                                    load_if_exists=True)
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server
        text = str(exc).strip().splitlines()
        raise GrpruneError(f"--storage {spec.storage_url}: {text[0] if text else exc}") \
            from None
    if study.direction.name.lower() != direction:
        raise GrpruneError(f"study {spec.study!r} in {spec.storage_url} is to "
                           f"{study.direction.name.lower()}, but this metric is to "
                           f"{direction}; choose another --study")
    if had := len(study.get_trials(deepcopy=False)):  # resumed: a fresh random stream
        study.sampler = make_sampler(spec, spec.seed + had)
    return study


def make_sampler(spec: TuneSpec, seed: int) -> Any:
    """The Optuna sampler of ``--sampler`` (``GridSampler`` over the space's grid,
    ``RandomSampler`` or ``TPESampler``), seeded with ``seed``.

    Raises
    ------
    GrpruneError
        For ``grid`` when the space has a float range.
    """
    import optuna
    if spec.sampler == "grid":
        grid = spec.space.grid()
        if grid is None:
            raise GrpruneError("--sampler grid needs choices or integer ranges; the space "
                               "has a float range")
        return optuna.samplers.GridSampler(grid, seed=seed)
    if spec.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def flat_config(conf: Configuration, skip: set[str]) -> dict[str, Any]:
    """The result-relevant part of ``conf``'s configuration
    (:func:`grprune.record.settings.stable_config`) as ``{dotted key: JSON value}``,
    without the keys in ``skip`` (the searched ones)."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif prefix not in skip:
            out[prefix] = value

    walk("", json.loads(json.dumps(stable_config(conf.cfg.to_dict()), default=str)))
    return out


def check_base(study: Any, spec: TuneSpec, first: Configuration) -> None:
    """Record the study's base configuration (``grprune.base``: :func:`flat_config` of the
    first trial point's, without the searched keys), or refuse a command whose base
    differs from the recorded one.

    Raises
    ------
    GrpruneError
        Naming up to 5 differing keys with both values.
    """
    base = flat_config(first, set(spec.space.axes))
    had = study.user_attrs.get("grprune.base")
    if had is None:
        study.set_user_attr("grprune.base", base)
        return
    diff = sorted(k for k in set(had) | set(base) if had.get(k) != base.get(k))
    if not diff:
        return
    shown = "; ".join(f"{k}: study {had.get(k, '(absent)')!r}, now {base.get(k, '(absent)')!r}"
                      for k in diff[:5])
    more = f" (and {len(diff) - 5} more)" if len(diff) > 5 else ""
    raise GrpruneError(f"study {spec.study!r} in {spec.storage_url} was made with another "
                       f"configuration: {shown}{more}; its trials would not compare with "
                       f"this command's: run it as it was, or choose another --study or "
                       f"--out")
