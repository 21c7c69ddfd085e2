"""Sweep grids: the alternatives of each option, from the command line or a YAML spec.

A grid maps each *axis* (``data``, ``split``, ``shift``, ``encoder``, ``preset``, ``selector``,
``reg``, ``epochs``, ``seed`` and every ``-H`` key) to a list of alternatives; its
configurations are the cartesian product (:meth:`Grid.points`). The same grid comes from
the command line (comma lists, ``--seeds 1-4``, repeated ``--reg``) or from a YAML spec (a
mapping, or a list of mappings whose configurations are unioned). Option values are
parsed by :mod:`grprune.sweep.parsing`; the grid points are resolved into configurations
by :mod:`grprune.sweep.expansion`.

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
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from grprune.errors import GrpruneError, did_you_mean
from grprune.messages import short_repr
from grprune.sweep.parsing import (parse_hparams, parse_ints, parse_reg, parse_seeds,
                                   split_list)

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
