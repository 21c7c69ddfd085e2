"""The expansion of sweep grids (:mod:`grprune.sweep.grid`) into configurations.

Each grid point is resolved with :func:`grprune.resolve.resolve_config`, exactly as
``grprune run`` would resolve it (:func:`expand`); an ``-H`` override that names a part a
point lacks is dropped for that point; points with the same config hash are one
:class:`Configuration`. :func:`run_command` gives a configuration's ``grprune run``
command line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from grprune.errors import GrpruneError
from grprune.record.runconfig import RunConfig
from grprune.record.settings import OPTION_KEYS, PART_KEYS, lookup
from grprune.sweep.grid import AXES, Grid


@dataclass
class Configuration:
    """One configuration of a sweep: a resolved config and how it came about.

    Attributes
    ----------
    cfg : RunConfig
        The fully resolved configuration (with its ``hash``).
    point : dict
        The grid point, ``{axis or -H key: value}``, as given.
    overrides : list of str
        The ``-H key=value`` overrides applied.
    dropped : list of str
        ``-H`` overrides (``key=value``) left out because they name a part this
        configuration lacks, from every grid point that gave this configuration.
    fixed : dict
        Settings shared by the grid (device, root, download, config).
    grid : int
        Index of the grid it came from.
    """

    cfg: RunConfig
    point: dict
    overrides: list[str]
    dropped: list[str]
    fixed: dict
    grid: int = 0

    @property
    def hash(self) -> str:
        """The config hash (12 hex digits)."""
        return str(self.cfg.hash)


def _resolve(point: Mapping[str, Any], fixed: Mapping[str, Any],
             overrides: Sequence[str]) -> RunConfig:
    """A grid point's configuration, resolved as ``grprune run`` resolves its options
    (:data:`~grprune.record.settings.OPTION_KEYS`: ``--epochs`` is ``train.epochs``)."""
    from grprune.resolve import resolve_config
    options = {**{a: point.get(a) for a in ("split", "shift", "epochs", "seed")},
               **{k: fixed.get(k) for k in ("device", "root")},
               "download": True if fixed.get("download") else None}
    flags = {OPTION_KEYS[k]: v for k, v in options.items() if v is not None}
    return resolve_config(data=point.get("data"), selector=point.get("selector"),
                          reg=point.get("reg"), encoder=point.get("encoder"), flags=flags,
                          overrides=overrides, file=fixed.get("config"),
                          preset=point.get("preset"))


_MISSING = object()


def _lookup(key: str, cfg: Mapping[str, Any]) -> Any:
    """The value of a ``-H`` key (``reg.size.eta``, ``selector.tau``) in ``cfg``: the record
    layer's dotted lookup (:func:`~grprune.record.settings.lookup`), with the regularizer's
    name read as ``-H`` reads it (``eps_align`` is ``eps-align``).

    ``_MISSING`` when the configuration lacks it: an unknown regularizer, one not
    in ``cfg``, a key its part does not declare, or a ``name``.
    """
    section, _, rest = key.partition(".")
    if rest == "name" or (section == "reg" and "." not in rest):
        return _MISSING
    if section == "reg":
        from grprune.regularizers.base import REGULARIZERS
        name, _, hp = rest.partition(".")
        try:
            key = f"reg.{REGULARIZERS.canonical(name)}.{hp}"
        except GrpruneError:
            return _MISSING
    return lookup(cfg, key, _MISSING)


def applies(key: str, cfg: RunConfig) -> bool:
    """Whether the ``-H`` key names a hyperparameter of a part of ``cfg``.

    ``reg.size.eta`` applies when ``size`` is one of the regularizers and declares
    ``eta``; ``selector.tau`` when there is a selector that declares ``tau``.
    """
    if key.startswith("selector.") and cfg.selector.name == "none":
        return False
    return _lookup(key, cfg) is not _MISSING


def value_of(axis: str, conf: Configuration) -> Any:
    """The resolved value of an axis (or ``-H`` key) in a configuration.

    ``None`` when the configuration lacks it (a dropped override, a dataset
    without that setting).
    """
    cfg = conf.cfg
    if axis in PART_KEYS or axis in OPTION_KEYS:  # --data is data.name, --epochs train.epochs
        return cfg.setting(PART_KEYS.get(axis) or OPTION_KEYS[axis])
    if axis == "reg":
        return ",".join(cfg.reg) or "none"
    if any(d.split("=", 1)[0] == axis for d in conf.dropped):
        return None
    value = _lookup(axis, cfg)
    return None if value is _MISSING else value


def dropped_text(dropped: Sequence[str]) -> str:
    """Dropped overrides with one entry per key: ``reg.size.eta=0.5,0.75``."""
    by_key: dict[str, list[str]] = {}
    for d in dropped:
        key, _, value = d.partition("=")
        by_key.setdefault(key, []).append(value)
    return " ".join(f"{k}={','.join(v)}" for k, v in by_key.items())


def _describe(point: Mapping[str, Any], grid: Grid, n_grids: int) -> str:
    text = ", ".join(f"{k}={v}" for k, v in point.items()) or "(defaults)"
    return f"{text} [{grid.origin}]" if n_grids > 1 else text


@dataclass
class Expansion:
    """The configurations of a sweep and how the grid reduced to them.

    Attributes
    ----------
    configs : list of Configuration
        One per distinct config hash, in grid order.
    points : int
        Grid points before removing duplicates.
    duplicates : int
        Grid points whose configuration equals an earlier one.
    varying : list of str
        Axes and ``-H`` keys whose resolved values differ between configurations.
    """

    configs: list[Configuration]
    points: int
    duplicates: int
    varying: list[str]

    def values(self, conf: Configuration) -> dict[str, Any]:
        """The varying axes' resolved values of one configuration."""
        return {axis: value_of(axis, conf) for axis in self.varying}


def expand(grids: Sequence[Grid]) -> Expansion:
    """Resolve every grid point; drop inapplicable overrides; remove duplicates.

    An ``-H`` override is dropped for a grid point when it names a part that the
    point's configuration lacks (``reg.size.eta`` with ``--reg none``,
    ``selector.tau`` without a selector, ``data.bias`` on a dataset without it) but
    applies to another point of the sweep; an override that applies to no point is
    kept, so that its error is reported.

    Parameters
    ----------
    grids : sequence of Grid
        The grids; their configurations are unioned.

    Returns
    -------
    Expansion

    Raises
    ------
    GrpruneError
        If any grid point does not resolve; the message names the point(s) and the
        error(s), before anything has run.
    """
    todo = []  # (grid index, point, overrides)
    for gi, grid in enumerate(grids):
        for point in grid.points():
            overrides = [f"{k}={point[k]}" for k in grid.hparams]
            todo.append((gi, point, overrides))
    resolved, bases, applicable = _resolve_points(todo, grids)
    _drop_inapplicable(todo, grids, resolved, bases, applicable)
    _raise_unresolved(todo, resolved, grids)
    configs = _distinct(todo, resolved, grids)
    return Expansion(configs, len(todo), len(todo) - len(configs), _varying(grids, configs))


def _resolve_points(todo: Sequence[tuple], grids: Sequence[Grid]) -> tuple[list, dict, set]:
    """Resolve every grid point of ``todo`` (``(grid index, point, overrides)``) as given.

    Returns
    -------
    resolved : list of (cfg or None, dropped, GrpruneError or None)
        Per point: its config, or the error it raised; ``dropped`` is empty.
    bases : dict of int to dict or None
        For each point that failed, its config without any ``-H`` override (``None``
        if even that fails).
    applicable : set of str
        ``-H`` keys that apply to some point: they resolved, or they name a part of
        a failed point's base config.
    """
    resolved: list[tuple[RunConfig | None, list[str], GrpruneError | None]] = []
    applicable: set[str] = set()
    bases: dict[int, RunConfig | None] = {}
    from grprune.data.featurize import Progress
    bar = Progress(len(todo), "the sweep's grid points", verb="resolving",
                   unit="configurations")  # from 5,000 points: plain lines without a terminal
    try:
        for i, (gi, point, overrides) in enumerate(todo):
            _resolve_point(i, gi, point, overrides, grids, resolved, bases, applicable)
            bar.advance(1)
    finally:
        bar.close()
    return resolved, bases, applicable


def _resolve_point(i: int, gi: int, point: dict, overrides: list[str], grids: Sequence[Grid],
                   resolved: list, bases: dict, applicable: set) -> None:
    """:func:`_resolve_points` for grid point ``i``: appends to ``resolved`` and fills
    ``bases`` and ``applicable``."""
    try:
        cfg = _resolve(point, grids[gi].fixed, overrides)
        resolved.append((cfg, [], None))
        applicable.update(o.split("=", 1)[0] for o in overrides)
    except GrpruneError as exc:
        resolved.append((None, [], exc))
        try:
            bases[i] = _resolve(point, grids[gi].fixed, [])
        except GrpruneError:
            bases[i] = None
        base = bases[i]
        if base is not None:
            applicable.update(k for k in (o.split("=", 1)[0] for o in overrides)
                              if applies(k, base))


def _drop_inapplicable(todo: Sequence[tuple], grids: Sequence[Grid], resolved: list,
                       bases: dict, applicable: set) -> None:
    """Resolve each failed point again without the overrides that name a part it lacks
    but apply elsewhere in the sweep; updates ``resolved`` (see :func:`_resolve_points`)."""
    for i, base in bases.items():
        gi, point, overrides = todo[i]
        if base is None:
            continue
        dropped = [o for o in overrides if not applies(o.split("=", 1)[0], base)
                   and o.split("=", 1)[0] in applicable]
        if not dropped:
            continue
        kept = [o for o in overrides if o not in dropped]
        try:
            resolved[i] = (_resolve(point, grids[gi].fixed, kept), dropped, None)
        except GrpruneError as exc:
            resolved[i] = (None, dropped, exc)


def _raise_unresolved(todo: Sequence[tuple], resolved: Sequence[tuple],
                      grids: Sequence[Grid]) -> None:
    """Raise one GrpruneError naming every point that still fails, one line per message."""
    errors: dict[str, list[str]] = {}
    for (gi, point, _), (cfg, _, exc) in zip(todo, resolved):
        if exc is not None:
            errors.setdefault(str(exc), []).append(_describe(point, grids[gi], len(grids)))
    if errors:
        lines = []
        for message, where in errors.items():
            more = f" (and {len(where) - 1} more grid points)" if len(where) > 1 else ""
            lines.append(f"grid point {where[0]}{more}: {message}")
        raise GrpruneError("cannot resolve the configurations:\n  "
                           + "\n  ".join(lines))


def _distinct(todo: Sequence[tuple], resolved: Sequence[tuple],
              grids: Sequence[Grid]) -> list[Configuration]:
    """One Configuration per config hash, in grid order; a duplicate point adds its
    dropped overrides to the first one's."""
    by_hash: dict[str, Configuration] = {}
    for (gi, point, overrides), (cfg, dropped, _) in zip(todo, resolved):
        if cfg.hash in by_hash:  # a duplicate: its dropped overrides are the first's too
            first = by_hash[cfg.hash]
            first.dropped += [d for d in dropped if d not in first.dropped]
            continue
        kept = [o for o in overrides if o not in dropped]
        by_hash[cfg.hash] = Configuration(cfg, point, kept, list(dropped),
                                             dict(grids[gi].fixed), gi)
    return list(by_hash.values())


def _varying(grids: Sequence[Grid], configs: Sequence[Configuration]) -> list[str]:
    """The grids' axes and ``-H`` keys whose resolved values differ between configurations."""
    axes = [a for a in AXES if any(a in g.axes for g in grids)]
    axes += list(dict.fromkeys(k for g in grids for k in g.hparams))
    varying = []
    for axis in axes:
        seen = {json.dumps(value_of(axis, c), sort_keys=True, default=str) for c in configs}
        if len(seen) > 1:
            varying.append(axis)
    return varying


def run_command(conf: Configuration, out: str | Path | None = None) -> list[str]:
    """The ``grprune run`` command line of one configuration (without ``grprune``).

    Parameters
    ----------
    conf : Configuration
    out : path, optional
        Its run directory, added as ``--out``.

    Returns
    -------
    list of str
        ``["run", "--data", ..., "-H", "key=value", ...]``: resolves to the same hash.
    """
    args = ["run"]
    p = conf.point
    for axis in ("selector", "reg", "data", "split", "shift", "encoder", "preset", "epochs",
                 "seed"):
        if axis in p:
            args += [f"--{axis}", str(p[axis])]
    for key in ("device", "root", "config"):
        if conf.fixed.get(key) is not None:
            args += [f"--{key}", str(conf.fixed[key])]
    if conf.fixed.get("download"):
        args.append("--download")
    for o in conf.overrides:
        args += ["-H", o]
    if out is not None:
        args += ["--out", str(out)]
    return args
