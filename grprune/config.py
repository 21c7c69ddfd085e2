"""The configuration of a run below the registries: config files, ``-H`` overrides, the
flattened ``section.key`` view, and (re-exported from :mod:`grprune.record`) the settings
sections, parsers and the config hash.

A run's configuration is a nested dict with six sections::

    {"data":     {"name": "ogbg-molbbbp", "split": "scaffold", ...},
     "selector": {"name": "gumbel-gin", "tau": 1.0, ...},      # {"name": "none"} for ERM
     "encoder":  {"name": "gin", "layers": 4, "hidden": 64, ...},
     "model":    {"readout": "sum", "head_layers": 2},          # the classifier around it
     "reg":      {"size": {"weight": 10.0, "eta": 0.85, ...}, "eps-align": {...}},
     "train":    {"epochs": 100, "batch_size": 64, "lr": 0.001, ...}}

:func:`grprune.resolve.resolve_config` builds it from parts, presets, a file and flags:
that is the layer above the registries; this module imports none of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from grprune.errors import GrpruneError
# the settings sections, parsers and the config hash live in the leaf record layer; they are
# re-exported here, where older code and plugins import them from
from grprune.record.settings import (  # noqa: F401  (re-exported)
    RECORDS,
    SECTIONS,
    VOLATILE_KEYS,
    DataSettings,
    ModelSettings,
    TrainSettings,
    config_hash,
    flat_items,
    parse_device,
    parse_milestones,
    same_run,
)

def _flatten(cfg: Mapping[str, Any], origin: str) -> list[tuple[str, Any]]:
    """A config file's settings as ``[("section.key", value)]`` (``reg.NAME.key`` for reg;
    :func:`~grprune.record.settings.flat_items`), once its layout is checked.

    Raises
    ------
    GrpruneError
        On an unknown section, or a section or regularizer that is not a mapping.
    """
    for section, body in cfg.items():
        if section in RECORDS:
            continue
        if section not in SECTIONS:
            raise GrpruneError(f"unknown section {section!r} in {origin}. "
                               f"Sections: {', '.join(SECTIONS)}")
        if not isinstance(body, Mapping):
            raise GrpruneError(f"section {section!r} in {origin} must be a mapping")
        bad = [key for key, value in body.items() if not isinstance(value, Mapping)]
        if section == "reg" and bad:
            raise GrpruneError(f"reg.{bad[0]} in {origin} must be a mapping")
    return list(flat_items(cfg))


def parse_override(text: str) -> tuple[str, str]:
    """``"reg.size.eta=0.75"`` -> ``("reg.size.eta", "0.75")``.

    Raises
    ------
    GrpruneError
        If there is no ``=`` or no section.
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or "." not in key:
        raise GrpruneError(f"bad override {text!r}: expected section.key=value, "
                           f"e.g. reg.size.eta=0.75 or selector.tau=0.5")
    section = key.split(".", 1)[0]
    if section not in SECTIONS:
        raise GrpruneError(f"bad override {text!r}: unknown section {section!r}. "
                           f"Sections: {', '.join(SECTIONS)}")
    return key, value.strip()


def load_config_file(path: str | Path) -> dict:
    """Read a JSON or YAML config file.

    Raises
    ------
    GrpruneError
        If the file is missing or not a mapping.
    """
    from grprune.record.userfiles import expand_user, load_yaml, read_config_text
    p = expand_user(path, "--config")
    if not p.is_file():
        raise GrpruneError(f"config file not found: {p}")
    text = read_config_text(p, "config file")  # UTF-8, bounded size
    if p.suffix in (".yaml", ".yml"):
        data = load_yaml(text, f"config file {p}")  # aliases refused
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise GrpruneError(f"cannot parse config file {p}: {exc}") from None
    if not isinstance(data, dict):
        raise GrpruneError(f"config file {p} must hold a mapping of sections")
    return data
