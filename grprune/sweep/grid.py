"""Sweep grids: the alternatives of each option, and their expansion into configurations.

A grid maps each *axis* (``data``, ``split``, ``shift``, ``encoder``, ``preset``, ``selector``,
``reg``, ``epochs``, ``seed`` and every ``-H`` key) to a list of alternatives; its
configurations are the cartesian product. The same grid comes from the command line
(comma lists, ``--seeds 1-4``, repeated ``--reg``) or from a YAML spec (a mapping, or a
list of mappings whose configurations are unioned). Each grid point is resolved with
:func:`grprune.resolve.resolve_config`, exactly as ``grprune run`` would resolve it;
points with the same config hash are one configuration. Option values are parsed by
:mod:`grprune.sweep.parsing`, whose functions can be imported from here too.

Example
-------
>>> grid = grid_from_options(reg=["size,eps-align;none"], seeds="0-1")
>>> grid.axes
{'seed': [0, 1], 'reg': ['size,eps-align', 'none']}
>>> [tuple(p.values()) for p in grid.points()]
[('size,eps-align', 0), ('size,eps-align', 1), ('none', 0), ('none', 1)]
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from grprune.errors import GrpruneError, did_you_mean
from grprune.hparams import short_repr
from grprune.record.runconfig import RunConfig
from grprune.record.settings import OPTION_KEYS, PART_KEYS, lookup
from grprune.sweep.parsing import (parse_hparams, parse_ints, parse_reg, parse_seeds,
                                   split_list)
from grprune.sweep.parsing import parse_seeds_items  # noqa: F401  (importable from here too)

#: the most grid points one sweep expands (``--seeds`` alone takes at most
#: :data:`grprune.sweep.parsing.MAX_SEEDS`)
MAX_POINTS = 10_000
#: grid axes besides the ``-H`` keys, in expansion order (the seed varies fastest)
AXES = ("data", "split", "shift", "encoder", "preset", "selector", "reg", "epochs", "seed")
#: settings that are the same for every configuration of a grid
FIXED = ("device", "root", "download", "config")
#: keys of a YAML sweep spec
SPEC_KEYS = ("data", "split", "shift", "selector", "encoder", "preset", "epochs", "reg", "seeds",
             "seed", "device", "root", "download", "config", "hparams")


@dataclass
class Grid:
    """One grid of a sweep.

    Attributes
    ----------
    axes : dict
        Axis (one of :data:`AXES`) -> list of alternatives; an axis that is not
        given takes ``grprune run``'s default.
    hparams : dict
        ``-H`` key -> list of values (text, as on the command line).
    fixed : dict
        Settings shared by every configuration (:data:`FIXED`).
    origin : str
        Where the grid comes from, for messages.
    """

    axes: dict[str, list] = field(default_factory=dict)
    hparams: dict[str, list[str]] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)
    origin: str = "command line"

    def update(self, other: "Grid") -> "Grid":
        """A copy with ``other``'s axes, ``-H`` keys and settings winning."""
        return Grid({**self.axes, **other.axes}, {**self.hparams, **other.hparams},
                    {**self.fixed, **other.fixed}, self.origin)

    def points(self) -> list[dict[str, Any]]:
        """Every grid point: ``{axis or -H key: value}``, the seed varying fastest."""
        names = [a for a in AXES if a in self.axes and a != "seed"]
        names += list(self.hparams) + (["seed"] if "seed" in self.axes else [])
        lists = [self.hparams[n] if n in self.hparams else self.axes[n] for n in names]
        count = math.prod(len(v) for v in lists)
        if count > MAX_POINTS:  # counted before the product is built
            sizes = " x ".join(f"{len(v):,} {n}" for n, v in zip(names, lists) if len(v) > 1)
            raise GrpruneError(f"{self.origin}: the grid has {count:,} points ({sizes}); a "
                               f"sweep runs at most {MAX_POINTS:,} (split it into several "
                               f"sweeps)")
        return [dict(zip(names, combo)) for combo in itertools.product(*lists)]


def grid_from_options(*, data=None, split=None, shift=None, selector=None, encoder=None,
                      preset=None, epochs=None, seeds=None, reg=(), hparams=(), device=None, root=None,
                      download=False, config=None, origin="command line") -> Grid:
    """The grid of the command-line options (``None`` / empty = not given).

    Parameters
    ----------
    data, split, shift, selector, encoder, preset, epochs : str, optional
        Comma lists.
    seeds : str, optional
        ``"1-4"``, ``"0,2,5"``.
    reg : sequence of str
        Repeated ``--reg`` values (each one set; ``;`` separates sets).
    hparams : sequence of str
        ``-H key=v1,v2`` strings.
    device, root, download, config
        Settings shared by every configuration.

    Raises
    ------
    GrpruneError
        On a malformed value.
    """
    grid = Grid(origin=origin)
    for axis, value in (("data", data), ("split", split), ("shift", shift),
                        ("selector", selector), ("encoder", encoder), ("preset", preset)):
        if value is not None:
            grid.axes[axis] = _unique(split_list(value, f"--{axis}"))
    if epochs is not None:
        grid.axes["epochs"] = _unique(parse_ints(epochs, "--epochs"))
    if seeds is not None:
        grid.axes["seed"] = parse_seeds(seeds)
    if reg:
        grid.axes["reg"] = _unique(parse_reg(reg))
    grid.hparams = parse_hparams(hparams)
    for key, value in (("device", device), ("root", root), ("config", config)):
        if value is not None:
            grid.fixed[key] = str(value)
    if download:
        grid.fixed["download"] = True
    return grid


def _unique(values: Sequence) -> list:
    out: list = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _text(value: Any) -> str:
    """A YAML scalar as ``-H`` text (``True`` -> ``"true"``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or isinstance(value, (dict, list)):
        raise GrpruneError(f"expected a number or a string, got {short_repr(value)}")
    return str(value)


def _alternatives(value: Any, what: str) -> list[str]:
    """A spec value: a scalar is a comma list, a list gives its elements verbatim."""
    if isinstance(value, list):
        if not value:
            raise GrpruneError(f"{what} is an empty list")
        return _unique([_text(v) for v in value])
    return _unique(split_list(_text(value), what))


def grid_from_mapping(spec: Mapping[str, Any], origin: str) -> Grid:
    """One grid of a YAML spec.

    Parameters
    ----------
    spec : mapping
        Keys from :data:`SPEC_KEYS`. ``reg`` is a list of sets (each a comma string
        or a list of names); ``seeds`` is ``"1-4"`` or a list; ``hparams`` maps
        ``-H`` keys to a value or a list of values. A scalar string is a comma list,
        as on the command line; list elements are taken verbatim.
    origin : str
        File and grid, for messages.

    Raises
    ------
    GrpruneError
        On an unknown key or a malformed value; the message names ``origin``.
    """
    if not isinstance(spec, Mapping):
        raise GrpruneError(f"{origin} must be a mapping of options (data, reg, seeds, "
                           f"hparams, ...), got {type(spec).__name__}")
    for key in spec:
        if key not in SPEC_KEYS:
            hint = did_you_mean(key, SPEC_KEYS)
            raise GrpruneError(f"unknown key {short_repr(key)} in {origin}.{hint} "
                               f"Keys: {', '.join(k for k in SPEC_KEYS if k != 'seed')}")
    grid = Grid(origin=origin)
    try:
        for axis in ("data", "split", "shift", "selector", "encoder", "preset"):
            if spec.get(axis) is not None:
                grid.axes[axis] = _alternatives(spec[axis], axis)
        if spec.get("epochs") is not None:
            grid.axes["epochs"] = _unique(parse_ints(spec["epochs"], "epochs"))
        if "seeds" in spec and "seed" in spec:
            raise GrpruneError("give seeds or seed, not both")
        seeds = spec.get("seeds", spec.get("seed"))
        if seeds is not None:
            grid.axes["seed"] = parse_seeds(seeds)
        if spec.get("reg") is not None:
            grid.axes["reg"] = _unique(_spec_reg(spec["reg"]))
        hp = spec.get("hparams") or {}
        if not isinstance(hp, Mapping):
            raise GrpruneError("hparams must be a mapping of -H keys to a value or a list")
        from grprune.record.settings import parse_override
        for key, value in hp.items():
            parse_override(f"{key}=x")  # checks the key's form and section
            grid.hparams[str(key)] = _alternatives(value, f"hparams {key}")
        for key in ("device", "root", "config"):
            if spec.get(key) is not None:
                grid.fixed[key] = _text(spec[key])
        if spec.get("download"):
            grid.fixed["download"] = True
    except GrpruneError as exc:
        raise GrpruneError(f"{origin}: {exc}") from None
    return grid


def _spec_reg(value: Any) -> list[str]:
    if isinstance(value, str):
        return parse_reg([value])
    if not isinstance(value, list) or not value:
        raise GrpruneError("reg must be a list of regularizer sets, e.g. "
                           "[size,eps-align, none]")
    out = []
    for item in value:
        if isinstance(item, list):
            out.append(",".join(_text(v) for v in item) or "none")
        else:
            out += parse_reg([_text(item)])
    return out


def load_spec(path: str | Path) -> list[Grid]:
    """The grids of a YAML sweep spec file.

    Parameters
    ----------
    path : path
        A YAML file holding a mapping (one grid) or a list of mappings (grids whose
        configurations are unioned).

    Returns
    -------
    list of Grid

    Raises
    ------
    GrpruneError
        If the file is missing or unreadable, not YAML, empty, or holds anything but
        a mapping or a list of mappings, or a grid is malformed.
    """
    from grprune.record.userfiles import expand_user, load_yaml, read_config_text
    p = expand_user(path, "sweep spec")
    if not p.is_file():
        raise GrpruneError(f"sweep spec not found: {p}")
    data = load_yaml(read_config_text(p, "sweep spec"), f"sweep spec {p}")  # no aliases
    if isinstance(data, Mapping):
        return [grid_from_mapping(data, f"sweep spec {p}")]
    if isinstance(data, list) and data:
        return [grid_from_mapping(g, f"sweep spec {p}, grid {i + 1}")
                for i, g in enumerate(data)]
    raise GrpruneError(f"sweep spec {p} must hold a mapping of options (data, reg, seeds, "
                       f"hparams, ...) or a non-empty list of such mappings")


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

    def __post_init__(self) -> None:
        self.cfg = RunConfig.from_dict(self.cfg)

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
        raise GrpruneError("cannot resolve the sweep's configurations:\n  "
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
    axes += _unique([k for g in grids for k in g.hparams])
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
