"""A tune's search space: the parts' declared one, or a YAML of ranges and choices.

The declared space is what ``grprune sweep --search default`` expands
(:func:`grprune.sweep.search.with_search`: each part's ``Param(..., search=...)``, for
PrunE the paper's grid), searched as categorical choices; a ``-H key=v1,v2`` on the
command line is a choice too, and a ``-H key=v`` fixes a key. ``--space FILE`` replaces the
declared space with a YAML mapping of ``-H`` keys to

* a list: categorical choices (``selector.layers: [2, 3]``);
* ``{low: 1e-4, high: 1e-2, log: true}``: a float range (``log`` optional);
* ``{low: 32, high: 256, step: 32, type: int}``: an integer range (``step`` optional).

>>> space = Space.from_mapping({"train.lr": {"low": 1e-4, "high": 1e-2, "log": True},
...                            "selector.layers": [2, 3]}, "space.yaml")
>>> sorted(space.axes), space.grid() is None
(['selector.layers', 'train.lr'], True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from grprune.errors import GrpruneError


@dataclass(frozen=True)
class Dim:
    """One searched key: ``choices`` (categorical, as text), or a ``float`` / ``int`` range
    ``[low, high]`` (``log`` scale, integer ``step``)."""

    kind: str
    choices: tuple[str, ...] = ()
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: float | None = None

    def suggest(self, trial: Any, key: str) -> str:
        """Ask an Optuna trial for this key's value; returns it as ``-H`` text."""
        if self.kind == "choice":
            return str(trial.suggest_categorical(key, list(self.choices)))
        if self.kind == "int":
            return str(trial.suggest_int(key, int(self.low), int(self.high),
                                         step=int(self.step or 1), log=self.log))
        return repr(trial.suggest_float(key, self.low, self.high, log=self.log,
                                        step=self.step))


@dataclass
class Space:
    """``{-H key: Dim}`` (:attr:`axes`) and where it came from (:attr:`origin`)."""

    axes: dict[str, Dim] = field(default_factory=dict)
    origin: str = "declared"

    @classmethod
    def from_choices(cls, hparams: Mapping[str, list[str]], origin: str) -> "Space":
        """The keys with more than one value of a grid's ``-H`` axes, as choices."""
        return cls({k: Dim("choice", tuple(str(x) for x in v))
                    for k, v in hparams.items() if len(v) > 1}, origin)

    @classmethod
    def from_mapping(cls, data: Any, origin: str) -> "Space":
        """A space from a parsed YAML mapping (module docstring).

        Raises
        ------
        GrpruneError
            One line naming the key and what is wrong with it.
        """
        if not isinstance(data, Mapping) or not data:
            raise GrpruneError(f"{origin}: a search space is a non-empty mapping of -H keys "
                               f"to a list of choices or {{low, high}}")
        dims = {}
        for key, spec in data.items():
            dims[str(key)] = _dim(str(key), spec, origin)
        return cls(dims, origin)

    @classmethod
    def from_file(cls, path: str | Path) -> "Space":
        """A space from a YAML file (``--space FILE``).

        Raises
        ------
        GrpruneError
            If the file is missing, not YAML, or not a space.
        """
        from grprune.record.userfiles import load_yaml, read_config_text
        p = Path(path)
        if not p.is_file():
            raise GrpruneError(f"--space {path}: no such file")
        what = f"--space {path}"
        return cls.from_mapping(load_yaml(read_config_text(p, what), what), what)

    def grid(self) -> dict[str, list[str]] | None:
        """The exhaustive grid (``--sampler grid``); None when a key is a float range."""
        out: dict[str, list[str]] = {}
        for key, dim in self.axes.items():
            if dim.kind == "choice":
                out[key] = list(dim.choices)
            elif dim.kind == "int" and not dim.log:
                out[key] = [str(v) for v in range(int(dim.low), int(dim.high) + 1,
                                                   int(dim.step or 1))]
            else:
                return None
        return out

    def size(self) -> int | None:
        """Points of :meth:`grid` (None for a continuous space)."""
        grid = self.grid()
        return None if grid is None else math.prod(len(v) for v in grid.values())

    def suggest(self, trial: Any) -> dict[str, str]:
        """One trial's values, ``{-H key: text}``."""
        return {key: dim.suggest(trial, key) for key, dim in self.axes.items()}


def _dim(key: str, spec: Any, origin: str) -> Dim:
    if isinstance(spec, list):
        if not spec:
            raise GrpruneError(f"{origin}: {key}: an empty list of choices")
        return Dim("choice", tuple(str(v) for v in spec))
    if not isinstance(spec, Mapping) or "low" not in spec or "high" not in spec:
        raise GrpruneError(f"{origin}: {key}: give a list of choices or a mapping with "
                           f"low and high")
    unknown = set(spec) - {"low", "high", "log", "step", "type"}
    if unknown:
        raise GrpruneError(f"{origin}: {key}: unknown keys {sorted(unknown)}; a range takes "
                           f"low, high, log, step, type")
    try:
        low, high = float(spec["low"]), float(spec["high"])
        step = None if spec.get("step") is None else float(spec["step"])
    except (TypeError, ValueError):
        raise GrpruneError(f"{origin}: {key}: low, high and step must be numbers") from None
    kind = str(spec.get("type") or ("int" if all(isinstance(spec.get(k), int)
                                                 for k in ("low", "high")) else "float"))
    if kind not in ("int", "float"):
        raise GrpruneError(f"{origin}: {key}: type must be int or float, not {kind}")
    log = bool(spec.get("log", False))
    if not low < high or (log and low <= 0) or (step is not None and step <= 0):
        raise GrpruneError(f"{origin}: {key}: need low < high (and low > 0 with log: true, "
                           f"step > 0)")
    if log and step is not None:
        raise GrpruneError(f"{origin}: {key}: log and step do not go together")
    return Dim(kind, low=low, high=high, log=log, step=step)
