"""Presets: named bundles of settings per dataset, kept as data (YAML files).

A preset file holds ``description``, ``source``, ``all`` (dotted keys for every dataset,
``encoder.layers: 3``) and ``datasets`` (dataset name -> dotted keys for that dataset,
applied after ``all``). Built-in presets live beside this module:

* ``paper``: the paper text's settings, which are the parts' defaults and each dataset's
  ``recommended`` values, so it adds nothing;
* ``official``: the official code's choices and README commands;
* ``good``: GOOD's own ERM protocol (its benchmark configs: 3-layer GIN of width 300, mean
  readout, 200 epochs, batch 32), to set any method beside GOOD's leaderboard.

A user adds one by writing such a file into a preset directory (``$GRPRUNE_PRESET_PATH``,
directories separated by ``os.pathsep``; default ``~/.config/grprune/presets``), named
``NAME.yaml``, or passes a file path to ``--preset``. ``defaults.yaml`` maps a dataset, or
one split of it (``ogbg-molbbbp/size``), to the preset it uses when none is given
(``--preset auto``): the one chosen on validation evidence
(``benchmarks/accuracy/prune/defaults/defaults-evidence.md``); ``official``, the recipe of the code
behind the paper's published numbers, for everything it does not list.

Where a preset's keys go (:func:`grprune.resolve.resolve_config`): after the parts'
defaults and the dataset's ``recommended`` values, before ``--config``, the flags and
``-H``. Keys of a part the run does not have (``reg.size.*`` in an ERM run, ``selector.*``
without a selector) are left out, and so are selector keys that a regularizer of the run
sets itself (GSAT's soft samples) or that define the selector's method (DropEdge's full-graph
evaluation); ``config.json`` records the preset and the values it set.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from grprune.errors import GrpruneError, did_you_mean

BUILTIN_DIR = Path(__file__).parent
DEFAULTS_FILE = BUILTIN_DIR / "defaults.yaml"
#: the preset of a dataset that defaults.yaml does not list: the official code's recipe,
#: which produced the paper's published numbers
FALLBACK = "official"
AUTO = "auto"
_KEYS = ("description", "source", "all", "datasets")


@dataclass(frozen=True)
class Preset:
    """One preset file, parsed.

    Attributes
    ----------
    name : str
    description, source : str
    all : dict
        Dotted key -> value, for every dataset.
    datasets : dict
        Dataset name -> {dotted key -> value}.
    path : Path
    """

    name: str
    description: str = ""
    source: str = ""
    all: dict[str, Any] = field(default_factory=dict)
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: Path | None = None

    def values_for(self, dataset: str) -> dict[str, Any]:
        """The preset's keys for ``dataset``: ``all``, then the dataset's own."""
        return {**self.all, **self.datasets.get(dataset, {})}


def preset_dirs() -> list[Path]:
    """User preset directories: ``$GRPRUNE_PRESET_PATH`` or ``~/.config/grprune/presets``."""
    env = os.environ.get("GRPRUNE_PRESET_PATH", "").strip()
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()]
    return [Path("~/.config/grprune/presets").expanduser()]


def available() -> dict[str, Path]:
    """Preset name -> file: the built-in ones, then those of :func:`preset_dirs`.

    Raises
    ------
    GrpruneError
        If a user preset has the name of a built-in one.
    """
    found = {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.yaml")) if p.stem != "defaults"}
    builtin = set(found)
    for d in preset_dirs():
        if not d.is_dir():
            continue
        for p in sorted([*d.glob("*.yaml"), *d.glob("*.yml"), *d.glob("*.json")]):
            if p.stem in builtin:
                raise GrpruneError(f"preset file {p} has the name of the built-in preset "
                                   f"{p.stem!r}; rename it")
            found.setdefault(p.stem, p)
    return found


def _read(path: Path) -> Any:
    from grprune.record.userfiles import load_yaml, read_config_text
    text = read_config_text(path, "preset file")  # UTF-8, bounded size
    if path.suffix != ".json":
        return load_yaml(text, f"preset file {path}")  # aliases refused
    try:
        return json.loads(text)
    except Exception as exc:
        raise GrpruneError(f"cannot parse preset file {path}: "
                           f"{str(exc).splitlines()[0]}") from None


def _keys(section: Any, where: str) -> dict[str, Any]:
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise GrpruneError(f"{where} must be a mapping of dotted keys, e.g. encoder.layers: 3")
    for key in section:
        if not isinstance(key, str) or "." not in key:
            raise GrpruneError(f"{where}: bad key {key!r}; expected section.key, e.g. "
                               f"encoder.layers or reg.size.eta")
    return dict(section)


def parse(path: Path, name: str | None = None) -> Preset:
    """Read and check one preset file.

    Raises
    ------
    GrpruneError
        If the file is missing, not YAML/JSON, or not of the preset form.
    """
    path = Path(path)
    data = _read(path)
    if not isinstance(data, Mapping):
        raise GrpruneError(f"preset file {path} must hold a mapping with keys "
                           f"{', '.join(_KEYS)}")
    unknown = set(data) - set(_KEYS)
    if unknown:
        raise GrpruneError(f"preset file {path}: unknown key {sorted(unknown)[0]!r}. "
                           f"Keys: {', '.join(_KEYS)}")
    datasets = data.get("datasets") or {}
    if not isinstance(datasets, Mapping):
        raise GrpruneError(f"preset file {path}: datasets must map dataset names to keys")
    return Preset(name=name or path.stem, description=str(data.get("description") or ""),
                  source=str(data.get("source") or ""),
                  all=_keys(data.get("all"), f"preset file {path}, all"),
                  datasets={str(ds): _keys(v, f"preset file {path}, datasets.{ds}")
                            for ds, v in datasets.items()},
                  path=path)


def load(name: str) -> Preset:
    """A preset by name (built-in or user) or by file path (``*.yaml``, ``*.yml``, ``*.json``).

    Raises
    ------
    GrpruneError
        On an unknown name (listing the choices, with a "did you mean") or a bad file.
    """
    text = str(name).strip()
    if text.endswith((".yaml", ".yml", ".json")) or os.sep in text:
        path = Path(text).expanduser()
        if not path.is_file():
            raise GrpruneError(f"preset file not found: {path}")
        return parse(path)
    names = available()
    if text not in names:
        hint = did_you_mean(text, [*names, AUTO], cutoff=0.6)
        raise GrpruneError(f"unknown preset {text!r}.{hint} Choices: "
                           f"{', '.join([AUTO, *names])}, or a preset file")
    return parse(names[text], text)


def defaults() -> dict[str, str]:
    """``defaults.yaml``: ``"dataset"`` or ``"dataset/split"`` -> preset name.

    Raises
    ------
    GrpruneError
        If the file is not a mapping of names to preset names.
    """
    data = (_read(DEFAULTS_FILE) if DEFAULTS_FILE.is_file() else None) or {}
    if not isinstance(data, Mapping) or not all(isinstance(v, str) for v in data.values()):
        raise GrpruneError(f"{DEFAULTS_FILE} must map dataset or dataset/split names to "
                           f"preset names, e.g. ogbg-molbbbp/size: official")
    return {str(k): v for k, v in data.items()}


def default_for(dataset: str, split: str | None = None) -> str:
    """The preset ``--preset auto`` uses for ``dataset`` and ``split``.

    ``defaults.yaml``'s entry for ``"dataset/split"``, else for ``"dataset"``, else
    ``official`` (:data:`FALLBACK`).

    >>> default_for("no-such-dataset", "scaffold")
    'official'
    >>> default_for("drugood-ec50", "assay"), default_for("drugood-ec50", "size")
    ('paper', 'official')
    """
    table = defaults()
    if split is not None and f"{dataset}/{split}" in table:
        return table[f"{dataset}/{split}"]
    return table.get(dataset, FALLBACK)
