"""Groups, settings and model selection (DomainBed's rules: by validation, oracle, all)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Sequence

from grprune.collect.common import _MISSING, SELECT_RULES, _value_text
from grprune.collect.reading import Run
from grprune.errors import GrpruneError
from grprune.record.metricinfo import oriented
from grprune.naming import ablation_label, ablation_rank, method_label, method_rank

# ---------------------------------------------------------------------------
# Groups, settings and model selection
# ---------------------------------------------------------------------------

def mean_std(values: Iterable[float | None]) -> tuple[float, float, int]:
    """Mean and sample standard deviation (``ddof=1``; 0 for one value, where the tables
    print no std: :func:`grprune.collect.common.pm`).

    ``None`` entries are left out; NaN propagates.

    Returns
    -------
    (mean, std, n)
        ``(nan, nan, 0)`` when there is no value.

    >>> [round(x, 12) for x in mean_std([0.70, 0.72, 0.74])]
    [0.72, 0.02, 3]
    """
    vals = [float(v) for v in values if v is not None]
    n = len(vals)
    if n == 0:
        return math.nan, math.nan, 0
    mean = math.fsum(vals) / n
    if n == 1:
        return mean, 0.0, 1
    var = math.fsum((v - mean) ** 2 for v in vals) / (n - 1)
    return mean, math.sqrt(var), n


def _column_key(run: Run, free: str | None = None) -> str:
    data = {k: v for k, v in run.hparams.items() if k.startswith("data.") and k != free}
    return json.dumps(data, sort_keys=True, default=str)


def _column_labels(runs: Sequence[Run], free: str | None = None) -> dict[str, str]:
    """Column key -> ``"dataset/split"`` (+ ``/shift`` and data parameters that differ)."""
    by_base: dict[tuple, dict[str, dict]] = {}
    for run in runs:
        base = (run.dataset, run.split, run.shift)
        by_base.setdefault(base, {})[_column_key(run, free)] = {
            k: v for k, v in run.hparams.items()
            if k.startswith("data.") and k not in ("data.name", "data.split", "data.shift")
            and k != free}
    labels = {}
    shifts = {(r.dataset, r.split) for r in runs if r.shift not in (None, "covariate")}
    for (dataset, split, shift), variants in by_base.items():
        text = dataset if split is None else f"{dataset}/{split}"
        if shift is not None and (shift != "covariate" or (dataset, split) in shifts):
            text += f"/{shift}"
        keys = sorted({k for d in variants.values() for k in d})
        differ = [k for k in keys
                  if len({json.dumps(d.get(k, _MISSING), default=str)
                          for d in variants.values()}) > 1]
        for ckey, d in variants.items():
            extra = ", ".join(f"{k[5:]}={_value_text(d.get(k, _MISSING))}" for k in differ)
            labels[ckey] = f"{text} ({extra})" if extra else text
    return labels


@dataclass
class Setting:
    """The seeds of one configuration, aggregated (see :func:`aggregate`)."""

    runs: list[Run]
    hparams: dict            # all hyperparameters of the setting (no seed)

    def stat(self, key: str) -> tuple[float, float, int]:
        """Mean, sample std and count over the seeds of the summary field ``key``
        (:class:`~grprune.record.summary.RunSummary`: ``test``, ``kept_edge_fraction``...)."""
        return mean_std(getattr(r.summary, key) for r in self.runs)


#: ``presets=`` values of :func:`aggregate`: a preset is part of the method, or one more
#: hyperparameter that model selection chooses
PRESET_RULES = ("separate", "select")

#: the preset slot of a group key when presets are pooled (``presets="select"``)
POOLED = "*"


def _group_key(run: Run, free: str | None = None, pool_presets: bool = False) -> tuple:
    return (_column_key(run, free), run.reg, run.selector,
            POOLED if pool_presets else run.preset)


def _groups(runs: Sequence[Run], free: str | None = None,
            pool_presets: bool = False) -> dict[tuple, list[Setting]]:
    """Group key -> settings (ordered by setting id); ``free`` is left out of the key,
    and so is the preset when ``pool_presets``."""
    groups: dict[tuple, dict[str, list[Run]]] = {}
    for run in runs:
        groups.setdefault(_group_key(run, free, pool_presets), {}).setdefault(
            run.setting_id, []).append(run)
    out = {}
    for key, settings in groups.items():
        out[key] = [Setting(runs=sorted(rs, key=_seed_order),
                            hparams=rs[0].hparams)
                    for _, rs in sorted(settings.items())]
    return out


def _seed_order(run: Run) -> tuple:
    numeric = isinstance(run.seed, int) and not isinstance(run.seed, bool)
    return (0, run.seed, "") if numeric else (1, 0, str(run.seed))


def varying_keys(settings: Sequence[Setting]) -> list[str]:
    """The hyperparameter keys whose value differs between the settings (sorted)."""
    keys = sorted({k for s in settings for k in s.hparams})
    return [k for k in keys
            if len({json.dumps(s.hparams.get(k, _MISSING), sort_keys=True, default=str)
                    for s in settings}) > 1]


def _pooled_varying(settings: Sequence[Setting]) -> list[str]:
    """Varying keys of settings that may come from several presets: ``"preset"`` when
    more than one preset is present, then the keys that vary *within* one preset (a key
    that differs only between presets is said by the preset's name)."""
    by_preset: dict[str, list[Setting]] = {}
    for s in settings:
        by_preset.setdefault(s.runs[0].preset, []).append(s)
    within = sorted({k for group in by_preset.values() for k in varying_keys(group)})
    return (["preset"] if len(by_preset) > 1 else []) + within


class SelectionMethod:
    """Model selection as DomainBed frames it (Gulrajani & Lopez-Paz 2021,
    ``domainbed/model_selection.py``): of the settings of one group (same dataset column
    and method, other hyperparameters), the one whose seeds are reported.

    A method maximises the mean over seeds of one ``summary.json`` score (``field``);
    ties go to the setting with more seeds, then to the smaller setting id. Within a
    run, the epoch was already chosen by the trainer's rule (``summary["selected"]``).

    Attributes
    ----------
    name : str
        The ``grprune collect --select`` value.
    field : str
        The summary score maximised: ``valid`` (the dataset's validation split, OOD-valid
        on GOOD) or ``test``.
    label : str
        How tables and notes name the rule.
    """

    name: ClassVar[str] = ""
    field: ClassVar[str] = ""
    label: ClassVar[str] = ""

    @classmethod
    def score(cls, setting: Setting) -> float:
        """Mean ``field`` over the setting's seeds, signed so that higher is better
        (:func:`grprune.record.metricinfo.oriented`: ``-RMSE``); -inf when it has none."""
        mean = setting.stat(cls.field)[0]
        return -math.inf if math.isnan(mean) else oriented(setting.runs[0].metric, mean)

    @classmethod
    def choose(cls, settings: Sequence[Setting]) -> Setting:
        """The selected setting (highest :meth:`score`, then more seeds, then smaller id)."""
        return min(settings, key=lambda s: (-cls.score(s), -len(s.runs), s.runs[0].setting_id))


class ValidationSelection(SelectionMethod):
    """Highest mean validation score: the honest rule (DomainBed's training-domain or
    OOD-validation selection, whichever the dataset's ``valid`` split is)."""

    name, field, label = "valid", "valid", "validation"


class OracleSelection(SelectionMethod):
    """Highest mean *test* score: DomainBed's oracle, optimistic by construction; its
    rows and notes say ORACLE."""

    name, field, label = "oracle", "test", "ORACLE (test)"


#: ``--select`` value -> method (``all`` keeps every setting and selects none)
SELECTION_METHODS: dict[str, type[SelectionMethod]] = {
    m.name: m for m in (ValidationSelection, OracleSelection)}


def aggregate(runs: Sequence[Run], select: str = "valid",
              presets: str = "separate") -> list[dict]:
    """Aggregate seeds and apply model selection.

    Runs are grouped by dataset column (dataset, split, shift, data parameters)
    and method (regularizer set, selector). In a group, runs that differ only
    in ``train.seed`` (and volatile keys) form a setting; its seeds give
    mean ± sample std (``ddof=1``) of every metric.

    Parameters
    ----------
    runs : sequence of Run
        Finished runs (:func:`scan_runs`).
    select : {"valid", "oracle", "all"}
        ``"valid"``: per group, the setting with the best mean validation
        metric (highest; lowest for ``rmse`` and ``mae``); ``"oracle"``: the highest mean *test* metric (optimistic; the
        rows say ``selection="oracle"``); ``"all"``: every setting. Ties go to
        the setting with more seeds, then to the smaller setting id.
    presets : {"separate", "select"}
        ``"separate"``: a preset is part of the method (``PrunE (official)`` and
        ``PrunE`` are two groups). ``"select"``: runs of every preset share a group,
        and the rule chooses the preset like any other hyperparameter; the row's
        ``preset`` is the chosen one, and ``hparams`` names it as ``preset``.

    Returns
    -------
    list of dict
        One row per group (or per setting with ``"all"``), sorted by dataset
        column and method. Keys: ``column`` (``"ogbg-molbbbp/scaffold"``),
        ``dataset``, ``split``, ``shift``, ``method`` (``"PrunE"``), ``ablation``
        (``"size,eps-align"``), ``reg`` (``"size,eps-align"`` or ``""``),
        ``selector``, ``metric``, ``selection``, ``n`` (seeds), ``seeds``,
        ``test_mean``/``test_std`` and the same for ``valid``, ``id_valid``,
        ``id_test``, ``kept_edge_fraction``, ``motif_edge_rocauc``;
        ``wall_time_s_mean``, ``epoch_time_s_median_mean``, ``peak_mem_mib_max``;
        ``hparams`` (the group's varying keys and this setting's values),
        ``varying``, ``n_settings``, ``ties`` (other settings with the same mean
        score under the rule), ``valid_choice``/``oracle_choice`` (whether
        the setting is the one each rule picks), ``setting``, ``config_hash``,
        ``dirs`` and ``warmup_seeds`` (the seeds whose reported model is an ERM warm-up
        epoch's, without its selector: :attr:`RunSummary.warmup_model
        <grprune.record.summary.RunSummary.warmup_model>`).

    Raises
    ------
    GrpruneError
        On an unknown ``select`` or ``presets``.
    """
    if select not in SELECT_RULES:
        raise GrpruneError(f"unknown selection rule {select!r}. Choices: "
                           f"{', '.join(SELECT_RULES)}")
    if presets not in PRESET_RULES:
        raise GrpruneError(f"unknown preset rule {presets!r}. Choices: "
                           f"{', '.join(PRESET_RULES)}")
    pool = presets == "select"
    labels = _column_labels(runs)
    rows = []
    for (ckey, reg, selector, _), settings in _groups(runs, pool_presets=pool).items():
        varying = _pooled_varying(settings) if pool else varying_keys(settings)
        by_valid, by_test = ValidationSelection.choose(settings), OracleSelection.choose(settings)
        chosen = settings if select == "all" else [by_valid if select == "valid" else by_test]
        for s in chosen:
            row = _setting_row(s, labels[ckey], reg, selector, select, pool)
            row.update(_choice_fields(s, settings, varying, select, by_valid, by_test))
            row["_order"] = (row["column"], method_rank(row["method"]),
                             ablation_rank(row["ablation"]))
            rows.append(row)
    rows.sort(key=lambda r: (r["_order"], -_nan_low(oriented(r["metric"], r["valid_mean"])),
                             r["setting"]))
    for row in rows:
        del row["_order"]
    return rows


def _setting_row(s: Setting, column: str, reg: tuple[str, ...], selector: str, select: str,
                 pooled: bool = False) -> dict:
    """What ran and how it scored: the identity and metric columns of one row of
    :func:`aggregate` (seeds aggregated as mean ± sample std). With ``pooled`` presets
    the method is named without its preset (the preset is a chosen hyperparameter)."""
    first = s.runs[0]
    row: dict[str, Any] = {"column": column, "dataset": first.dataset, "split": first.split,
           "shift": first.shift,
           "method": method_label(reg, selector, "paper" if pooled else first.preset),
           "preset": first.preset,
           "ablation": ablation_label(reg, selector), "reg": ",".join(reg),
           "selector": selector, "metric": first.metric,
           "selection": {"valid": "valid", "oracle": "oracle",
                         "all": "all"}[select],
           "n": len(s.runs), "seeds": [r.seed for r in s.runs],
           "warmup_seeds": sum(r.summary.warmup_model for r in s.runs)}
    for key in ("test", "valid", "id_valid", "id_test", "kept_edge_fraction",
                "motif_edge_rocauc", "spurious_precision_at_50"):
        row[f"{key}_mean"], row[f"{key}_std"], _ = s.stat(key)
    for key in ("wall_time_s", "epoch_time_s_median"):
        row[f"{key}_mean"] = s.stat(key)[0]
    mems = [r.summary.peak_mem_mib for r in s.runs
            if isinstance(r.summary.peak_mem_mib, (int, float))]
    row["peak_mem_mib_max"] = max(mems) if mems else math.nan
    return row


def _choice_fields(s: Setting, settings: Sequence[Setting], varying: list[str], select: str,
                   by_valid: Setting, by_test: Setting) -> dict:
    """How setting ``s`` stands in its group: the model-selection columns of a row of
    :func:`aggregate` (its varying hyperparameters, ties, which rule picks it, its runs)."""
    first = s.runs[0]
    rule = SELECTION_METHODS.get(select, ValidationSelection)
    return {"hparams": {k: first.preset if k == "preset" else s.hparams.get(k, _MISSING)
                        for k in varying},
            "varying": varying,
            "n_settings": len(settings),
            "ties": sum(1 for o in settings
                        if o is not s and rule.score(o) == rule.score(s)),
            "valid_choice": s is by_valid,
            "oracle_choice": s is by_test,
            "setting": first.setting_id,
            "config_hash": first.config.hash,
            "dirs": [str(r.path) for r in s.runs]}


def _nan_low(x: float) -> float:
    return -math.inf if x is None or math.isnan(x) else x


