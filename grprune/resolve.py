"""Resolving a run's configuration: presets, parts and their compatibility, above the
registries (:mod:`grprune.record` is the layer below).

:func:`resolve_config` returns a :class:`grprune.record.runconfig.RunConfig`. Values are
resolved in this order, later winning: each part's declared defaults; the dataset's
``recommended`` settings (the paper's per-dataset choices); the preset's; for a run with a
selector, the dataset's ``selector_rules`` (your own data selects among epochs that use
the selector: :class:`grprune.data.registry.FileDatasetSource`), unless the preset's own
section for the dataset sets the key; a config file (``--config``, JSON or YAML, same
nesting; a previous run's ``config.json`` works); the CLI flags; ``-H key=value``
overrides with namespaced keys (``reg.size.eta``, ``selector.tau``, ``train.lr``). Dataset names resolve through :data:`grprune.data.BUILTIN_DATASETS`, so
naming a dataset imports its module alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from grprune.errors import GrpruneError
from grprune.record.runconfig import VERSION, RunConfig, move_keys
from grprune.record.settings import (RECORDS, SECTIONS, DataSettings, ModelSettings,
                                     TrainSettings, config_hash, flat_items, parse_override)
from grprune.record.userfiles import load_config_file

if TYPE_CHECKING:
    from grprune.data.registry import DatasetSource
    from grprune.regularizers.base import Regularizer


def preset_items(preset: Any, data_name: str, source: type[DatasetSource], encoder_name: str,
                 selector_name: str, reg_classes: Mapping[str, type[Regularizer]]
                 ) -> dict[str, Any]:
    """The keys of ``preset`` (a :class:`grprune.presets.Preset`) that apply to this run.

    Keys of parts the run does not have are left out: ``reg.NAME.*`` without NAME in
    ``--reg``, ``selector.*`` without a selector or not declared by this selector,
    selector keys a regularizer of the run sets itself (``selector_defaults``, e.g. GSAT's
    soft samples) and those that define the selector's method (``Selector.method_keys``,
    e.g. DropEdge's full-graph evaluation); likewise ``encoder.*`` keys another encoder
    declares.

    Raises
    ------
    GrpruneError
        On a key that no registered part of its kind declares (a typo in the preset).
    """
    from grprune.encoders.base import ENCODERS
    from grprune.regularizers.base import REGULARIZERS
    from grprune.selectors.base import SELECTORS

    def known(registry, key):
        return any(key in registry.get(n).defaults for n in registry.names())

    method_selector = {k for c in reg_classes.values() for k in c.selector_defaults}
    data_keys = set(DataSettings.defaults) | set(source.defaults) | {"shift"}
    out = {}
    for key, value in preset.values_for(data_name).items():
        section, _, rest = key.partition(".")
        where = f"preset {preset.name!r} ({preset.path}): {key}"
        if section == "train":
            if rest not in TrainSettings.defaults:
                raise GrpruneError(f"{where}: unknown train setting")
        elif section == "data":
            if rest not in data_keys:
                raise GrpruneError(f"{where}: unknown for dataset {data_name!r}")
        elif section == "model":
            if rest not in ModelSettings.defaults:
                raise GrpruneError(f"{where}: unknown model setting")
        elif section == "encoder":
            if not known(ENCODERS, rest):
                raise GrpruneError(f"{where}: no encoder has this hyperparameter")
            if rest not in ENCODERS.get(encoder_name).defaults:
                continue
        elif section == "selector":
            if not known(SELECTORS, rest):
                raise GrpruneError(f"{where}: no selector has this hyperparameter")
            if selector_name == "none" or rest in method_selector:
                continue
            cls = SELECTORS.get(selector_name)
            if rest not in cls.defaults or rest in cls.method_keys:
                continue
        elif section == "reg":
            name, _, hp = rest.partition(".")
            canonical = REGULARIZERS.canonical(name)
            if hp not in REGULARIZERS.get(canonical).defaults:
                raise GrpruneError(f"{where}: regularizer {canonical!r} has no such "
                                   f"hyperparameter")
            if canonical not in reg_classes:
                continue
            key = f"reg.{canonical}.{hp}"
        else:
            raise GrpruneError(f"{where}: unknown section {section!r}. Sections: "
                               f"{', '.join(SECTIONS)}")
        out[key] = value
    return out


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


def resolve_config(*, data: str | None = None, selector: str | None = None,
                   reg: str | None = None, encoder: str | None = None,
                   flags: Mapping[str, Any] | None = None,
                   overrides: Iterable[str] = (), file: str | Path | None = None,
                   preset: str | None = None) -> RunConfig:
    """Resolve a run's configuration; see the module docstring for the order.

    Parameters
    ----------
    data, selector, reg, encoder : str, optional
        Part names from the CLI (``reg`` a comma list or ``none``; ``selector``
        may be ``auto``: ``gumbel-gin`` when a regularizer needs a selector,
        none otherwise).
    flags : mapping, optional
        CLI flags as namespaced keys (``{"train.epochs": 5}``).
    overrides : iterable of str
        ``key=value`` strings (``-H``).
    file : path, optional
        Config file.
    preset : str, optional
        Preset name or file (:mod:`grprune.presets`); ``None`` or ``"auto"``: the
        dataset's default preset (a config file's recorded preset, if it has one).

    Returns
    -------
    RunConfig
        The nested, fully resolved configuration (a dict).

    Raises
    ------
    GrpruneError
        On unknown names, sections, keys or bad values.
    """
    file_cfg = load_config_file(file) if file else {}
    data_file: list[tuple[str, Any]] = []
    if data is not None:
        from grprune.data.registry import file_dataset
        found = file_dataset(data)
        if found is not None:  # --data mols.csv: molecule-csv -H data.path=mols.csv
            data, path = found
            data_file = [("data.path", path)]
    parts = _pick_parts(file_cfg, data=data, selector=selector, reg=reg, encoder=encoder)
    recommended = list(parts.source.recommended.items())
    given_items = [*(_flatten(file_cfg, str(file)) if file else []), *data_file,
                   *(flags or {}).items(),
                   *(parse_override(o) for o in overrides)]
    split = _requested_split(parts, [*recommended, *given_items])
    chosen, requested, from_preset = _preset(preset, file_cfg, parts, split)
    rules = _selector_rules(parts, chosen)
    from_preset = {k: v for k, v in from_preset.items() if k not in rules}
    items: list[tuple[str, Any]] = [*recommended, *from_preset.items(), *rules.items(),
                                    *given_items]
    from grprune.encoders.base import ENCODERS
    encoder_cls = ENCODERS.get(parts.encoder)
    given, reg_given = _split_items(move_keys(items, encoder_cls.defaults), parts.reg)

    sections = {
        "version": VERSION,
        "data": _data_section(parts, given["data"]),
        "selector": _selector_section(parts, given["selector"]),
        "encoder": {"name": parts.encoder,
                    **encoder_cls.resolve_hparams(given["encoder"], prefix="encoder.")},
        "model": ModelSettings.resolve_hparams(given["model"], prefix="model."),
        "reg": {n: cls.resolve_hparams(reg_given[n], prefix=f"reg.{n}.")
                for n, cls in parts.reg.items()},
        "train": TrainSettings.resolve_hparams(given["train"], prefix="train."),
    }
    sections["selector"] = _with_eval_budget(RunConfig(sections))
    record = {"name": chosen.name, "requested": requested,
              "source": chosen.source or str(chosen.path), "values": from_preset}
    return RunConfig({**sections, "preset": record, "hash": config_hash(sections)})


@dataclass
class _Parts:
    """The parts a run is made of, by canonical name, and the dataset's source class."""

    data: str
    encoder: str
    selector: str
    reg: dict[str, type[Regularizer]]  # name -> regularizer class, in --reg order
    source: type[DatasetSource]


def _pick_parts(file_cfg: Mapping[str, Any], *, data, selector, reg, encoder) -> _Parts:
    """Part names from the flags, else the config file, else the defaults; ``--selector
    auto`` becomes gumbel-gin when a regularizer needs a selector, none otherwise."""
    from grprune.data.registry import DATASETS
    from grprune.encoders.base import ENCODERS
    from grprune.regularizers.base import REGULARIZERS
    from grprune.selectors.base import SELECTORS

    def pick(section: str, cli_value: str | None, default: str) -> str:
        if cli_value is not None:
            return cli_value
        body = file_cfg.get(section)
        if isinstance(body, Mapping) and "name" in body:
            return str(body["name"])
        return default

    data_name = DATASETS.canonical(pick("data", data, "ogbg-molbbbp"))
    if reg is None and isinstance(file_cfg.get("reg"), Mapping):
        reg = ",".join(file_cfg["reg"]) or "none"
    reg_names = REGULARIZERS.split(reg if reg is not None else "size,eps-align")
    reg_classes = {n: REGULARIZERS.get(n) for n in reg_names}
    selector_name = pick("selector", selector, "auto")
    if selector_name.lower() == "auto":
        from grprune.regularizers.base import needs_selector
        needs = any(needs_selector(c) for c in reg_classes.values())
        selector_name = "gumbel-gin" if needs else "none"
    selector_name = ("none" if selector_name.lower() == "none"
                     else SELECTORS.canonical(selector_name))
    return _Parts(data=data_name, encoder=ENCODERS.canonical(pick("encoder", encoder, "gin")),
                  selector=selector_name, reg=reg_classes, source=DATASETS.get(data_name))


def _requested_split(parts: _Parts, items: Sequence[tuple[str, Any]]) -> str | None:
    """The split a run asks for before any preset applies: the last ``data.split`` of
    ``items`` (recommended values, config file, flags, ``-H``), else the dataset's default;
    ``None`` for a dataset without splits."""
    split = parts.source.defaults.get("split")
    for key, value in items:
        if key == "data.split":
            split = value
    return None if split is None else str(split)


def _preset(preset: str | None, file_cfg: Mapping[str, Any], parts: _Parts,
            split: str | None = None):
    """The preset asked for (a config file's recorded one when none is given; ``auto``
    takes the dataset and split's default, :func:`grprune.presets.default_for`), and the
    keys of it that apply to this run (:func:`preset_items`)."""
    from grprune import presets
    recorded: Mapping[str, Any] = (file_cfg["preset"] if isinstance(file_cfg.get("preset"),
                                                                    Mapping) else {})
    requested = preset or recorded.get("name") or presets.AUTO
    chosen = presets.load(presets.default_for(parts.data, split)
                          if requested == presets.AUTO else requested)
    return chosen, requested, preset_items(chosen, parts.data, parts.source, parts.encoder,
                                           parts.selector, parts.reg)


def _selector_rules(parts: _Parts, preset: Any) -> dict[str, Any]:
    """The dataset's ``selector_rules`` that apply: none without a selector, and none
    that ``preset``'s own section for the dataset sets (a preset that names the dataset
    decides for it)."""
    if parts.selector == "none":
        return {}
    own = preset.datasets.get(parts.data, {})
    return {k: v for k, v in parts.source.selector_rules.items() if k not in own}


def _split_items(items, reg_classes: Mapping[str, Any]):
    """``[("section.key", value)]`` -> ``{section: {key: value}}`` and ``{reg: {key:
    value}}``; later items win; ``*.name`` keys are skipped (names were picked already).

    Raises
    ------
    GrpruneError
        On ``reg.NAME.key`` for a regularizer that is not in ``--reg``.
    """
    from grprune.regularizers.base import REGULARIZERS
    given: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS if s != "reg"}
    reg_given: dict[str, dict[str, Any]] = {n: {} for n in reg_classes}
    for key, value in items:
        section, _, rest = key.partition(".")
        if section == "reg":
            name, _, hp = rest.partition(".")
            if not hp:
                raise GrpruneError(f"bad key {key!r}: expected reg.NAME.key")
            canonical = REGULARIZERS.canonical(name)
            if canonical not in reg_given:
                raise GrpruneError(
                    f"{key} is set but regularizer {canonical!r} is not in --reg "
                    f"({','.join(reg_classes) or 'none'})")
            reg_given[canonical][hp] = value
        elif rest != "name":
            given[section][rest] = value
    return given, reg_given


def _data_section(parts: _Parts, given: Mapping[str, Any]) -> dict[str, Any]:
    """``data``: the generic settings and the dataset's own hyperparameters."""
    data_keys = dict(DataSettings.defaults)
    ds_defaults = dict(parts.source.defaults)
    unknown = set(given) - set(data_keys) - set(ds_defaults) - {"shift"}
    if unknown:
        raise GrpruneError(
            f"unknown hyperparameter data.{sorted(unknown)[0]}. Known for {parts.data}: "
            f"{', '.join(sorted(set(data_keys) | set(ds_defaults)))}")
    out = {"name": parts.data}
    out.update(DataSettings.resolve_hparams(
        {k: v for k, v in given.items() if k in data_keys}, prefix="data."))
    out.update(parts.source.resolve_params(
        {k: v for k, v in given.items() if k not in data_keys}))
    return out


def _selector_section(parts: _Parts, given: Mapping[str, Any]) -> dict[str, Any]:
    """``selector``: the regularizers' ``selector_defaults`` (GSAT's soft samples) unless
    the user set those keys, then the given keys.

    Raises
    ------
    GrpruneError
        If two regularizers need different values of one key, a regularizer needs a
        (learned) selector the run lacks, or selector keys are set without a selector.
    """
    from grprune.selectors.base import SELECTORS
    reg_selector: dict[str, Any] = {}
    for name, cls in parts.reg.items():
        for key, value in cls.selector_defaults.items():
            if key in given:
                continue
            if key in reg_selector and reg_selector[key][1] != value:
                other = reg_selector[key][0]
                raise GrpruneError(
                    f"regularizers {other!r} and {name!r} need different selector.{key} "
                    f"({reg_selector[key][1]!r} vs {value!r}); choose one with "
                    f"-H selector.{key}=VALUE")
            reg_selector[key] = (name, value)
    from grprune.regularizers.base import check_supports
    check_supports(parts.reg, parts.selector, selectors=SELECTORS)  # the dataset: in training
    if parts.selector == "none":
        if given:
            raise GrpruneError(
                f"selector.{next(iter(given))} is set but no selector is used "
                f"(--selector none, or --reg none with --selector auto)")
        return {"name": "none"}
    sel_cls = SELECTORS.get(parts.selector)
    sel_given = {k: v for k, (_, v) in reg_selector.items() if k in sel_cls.defaults}
    sel_given.update(given)
    return {"name": parts.selector, **sel_cls.resolve_hparams(sel_given, prefix="selector.")}


def _with_eval_budget(cfg: RunConfig) -> dict[str, Any]:
    """The ``selector`` section of ``cfg``, where ``selector.eval_budget`` 0 with
    ``eval_mode=budget`` takes ``reg.size.eta``.

    Raises
    ------
    GrpruneError
        If it is 0 with ``eval_mode=budget`` and there is no size constraint.
    """
    selector = dict(cfg.selector.hparams)
    if cfg.setting("selector.eval_mode") != "budget" or cfg.setting("selector.eval_budget"):
        return {"name": cfg.selector.name, **selector}
    if "size" not in cfg.reg:
        raise GrpruneError("selector.eval_mode=budget keeps the eval_budget fraction of "
                           "each graph's bonds: set -H selector.eval_budget=FRACTION, or "
                           "use the size regularizer, whose reg.size.eta it then takes")
    return {"name": cfg.selector.name, **selector,
            "eval_budget": float(cfg.setting("reg.size.eta"))}
