"""Collect finished run directories into paper-style result tables.

``grprune collect`` (and this module's functions, usable from Python) read run
directories, never logs: ``config.json`` says what ran, ``summary.json`` (written
last) says that it finished and what it scored. Runs are grouped by **dataset
column** (dataset, split, shift and data parameters) and **method** (the
regularizer set and the selector). Inside a group, a **setting** is a
configuration without its seed; the seeds of a setting are aggregated as
mean ± sample standard deviation (``ddof=1``, as in the paper; 0 for one seed).

Model selection follows DomainBed: per group, the setting with the highest mean
validation score is chosen (``select="valid"``). ``select="oracle"`` chooses by
mean *test* score instead, which is optimistic, and every output says so.
``select="all"`` keeps every setting.

A typical session::

    scan = scan_runs(["runs/sweep1"])                  # runs, problems, sweep.json files
    rows = aggregate(scan.runs, select="valid")        # one row per dataset x method
    print(to_markdown(rows, layout="table"))
    points = sensitivity(scan.runs, "reg.size.eta")    # test metric against eta

Metrics are fractions in [0, 1], as in ``summary.json``; tables show them x100
with two decimals ("70.32 ± 1.73"). The CSV keeps the fractions.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from grprune import results as R
from grprune.config import SECTIONS, VOLATILE_KEYS
from grprune.errors import GrpruneError, did_you_mean
from grprune.results.rundir import load_json
from grprune.naming import (ablation_label, ablation_rank, canonical_reg,
                             method_label, method_rank)
from grprune.sweep.plan import ERROR as ERROR_FILE, PLAN as SWEEP_FILE

SELECT_RULES = ("valid", "oracle", "all")
LAYOUTS = ("table", "ablation", "long")
#: ``train.seed`` and the keys that do not change results are not hyperparameters
NOT_HPARAMS = {"train.seed"} | {f"{s}.{k}" for s, k in VOLATILE_KEYS}
METRIC_NAMES = {"rocauc": "ROC-AUC", "accuracy": "accuracy"}
#: the paper's names of PrunE's hyperparameters (Figure 3b)
PAPER_SYMBOLS = {"reg.size.eta": "η", "reg.size.weight": "λ1", "reg.eps-align.k": "K",
                 "reg.eps-align.weight": "λ2", "selector.tau": "τ"}

# ---------------------------------------------------------------------------
# Reading run directories
# ---------------------------------------------------------------------------

@dataclass
class Run:
    """One finished run: its resolved config and its ``summary.json``.

    Attributes
    ----------
    path : Path
        The run directory.
    config, summary : dict
        Parsed ``config.json`` and ``summary.json``.
    hparams : dict
        The config flattened to namespaced keys (``reg.size.eta``, ``train.lr``,
        ``selector.name``), without ``train.seed`` and the volatile keys
        (``data.root``, ``data.download``, ``train.device``, ``train.progress``).
    seed : int
        ``train.seed``.
    """

    path: Path
    config: dict
    summary: dict
    hparams: dict
    seed: Any

    @property
    def dataset(self) -> str:
        return self.config["data"]["name"]

    @property
    def split(self) -> str | None:
        return self.config["data"].get("split")

    @property
    def shift(self) -> str | None:
        return self.config["data"].get("shift")

    @property
    def reg(self) -> tuple[str, ...]:
        """The regularizer names in canonical order (``size`` before ``eps-align``)."""
        return canonical_reg(self.config["reg"])

    @property
    def selector(self) -> str:
        return self.config["selector"]["name"]

    @property
    def preset(self) -> str:
        """The preset the run was resolved with (``paper`` for runs before presets)."""
        return (self.config.get("preset") or {}).get("name", "paper")

    @property
    def metric(self) -> str:
        return self.summary["metric"]

    @property
    def setting_id(self) -> str:
        """12-hex-digit hash of the configuration without seed and volatile keys."""
        return _digest(self.hparams)


@dataclass
class Problem:
    """A directory that was not collected, and why.

    ``kind`` is ``"corrupt"`` (unreadable or inconsistent files), ``"foreign"``
    (not a grprune run directory), ``"duplicate"`` (same configuration and seed
    as a run already collected), ``"failed"`` (``error.json``), ``"unfinished"``
    (no ``summary.json`` yet: interrupted or still running) or ``"not started"``
    (planned in a ``sweep.json``, no run directory yet).
    """

    path: Path
    kind: str
    reason: str


@dataclass
class Scan:
    """What :func:`scan_runs` found. Unpacks as ``runs, problems = scan``.

    Attributes
    ----------
    runs : list of Run
        Finished runs, in path order, without duplicates.
    problems : list of Problem
        Skipped, failed and unfinished run directories.
    sweeps : list of Path
        The ``sweep.json`` files found (sweep roots written by ``grprune sweep``).
    """

    runs: list[Run] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    sweeps: list[Path] = field(default_factory=list)

    def __iter__(self) -> Iterator:
        return iter((self.runs, self.problems))


def flatten_config(cfg: dict) -> dict[str, Any]:
    """A resolved config as ``{"section.key": value}`` (``reg.NAME.key`` for reg).

    ``train.seed`` and the volatile keys are left out.

    >>> flatten_config({"train": {"seed": 3, "lr": 0.1}, "reg": {"size": {"eta": 0.5}}})
    {'reg.size.eta': 0.5, 'train.lr': 0.1}
    """
    flat: dict[str, Any] = {}
    for section in SECTIONS:
        body = cfg.get(section)
        if not isinstance(body, dict):
            continue
        if section == "reg":
            for name, hp in body.items():
                for k, v in (hp or {}).items():
                    flat[f"reg.{name}.{k}"] = v
        else:
            for k, v in body.items():
                flat[f"{section}.{k}"] = v
    return {k: v for k, v in sorted(flat.items()) if k not in NOT_HPARAMS}


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def read_run(run_dir: str | Path) -> Run | Problem:
    """Read one run directory, judged by :meth:`grprune.results.RunDir.status`.

    Parameters
    ----------
    run_dir : path
        A directory holding ``config.json`` (and, when finished, ``summary.json``).

    Returns
    -------
    Run or Problem
        A :class:`Run` when the run finished and its files are sound, otherwise a
        :class:`Problem` saying why not: ``corrupt``, ``foreign``, ``failed``,
        ``unfinished`` (interrupted) or ``running`` (another process holds its lock).
    """
    run_dir = Path(run_dir)
    st = R.RunDir(run_dir).status()
    if st.state == "finished":
        cfg = st.config
        return Run(path=run_dir, config=cfg, summary=st.summary, hparams=flatten_config(cfg),
                   seed=cfg["train"].get("seed"))
    kind = {"interrupted": "unfinished", "empty": "foreign"}.get(st.state, st.state)
    return Problem(run_dir, kind, st.reason or "an empty directory")


_RUN_MARKERS = (R.CONFIG, R.SUMMARY, ERROR_FILE, R.STATE)


def scan_runs(paths: str | Path | Sequence[str | Path]) -> Scan:
    """Find and read every run directory under ``paths``, recursively.

    A directory holding ``config.json``, ``summary.json``, ``error.json`` or
    ``state.pt`` is a run directory (and is not searched further). Hidden
    directories are skipped. ``sweep.json`` files are noted for
    :func:`sweep_report`.

    Parameters
    ----------
    paths : path or sequence of paths
        Run directories or folders that contain them.

    Returns
    -------
    Scan
        ``runs`` (finished runs), ``problems`` (skipped, failed and unfinished
        run directories, path and reason) and ``sweeps``; it unpacks as
        ``runs, problems = scan_runs(...)``.

    Raises
    ------
    GrpruneError
        If a path does not exist or is not a directory.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    scan = Scan()
    seen: set[Path] = set()
    for root in map(Path, paths):
        if not root.exists():
            raise GrpruneError(f"no such directory: {root}")
        if not root.is_dir():
            raise GrpruneError(f"not a directory: {root}")
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if here.resolve() in seen:
                dirnames[:] = []
                continue
            if SWEEP_FILE in filenames:
                scan.sweeps.append(here / SWEEP_FILE)
            if any(name in filenames for name in _RUN_MARKERS):
                seen.add(here.resolve())
                dirnames[:] = []
                item = read_run(here)
                (scan.runs if isinstance(item, Run) else scan.problems).append(item)
    scan.runs, duplicates = _drop_duplicates(scan.runs)
    scan.problems += duplicates
    return scan


def _drop_duplicates(runs: list[Run]) -> tuple[list[Run], list[Problem]]:
    """Keep one run per (configuration, seed): copies would count a seed twice."""
    first: dict[tuple, Run] = {}
    kept, dups = [], []
    for run in sorted(runs, key=lambda r: str(r.path)):
        key = (run.setting_id, json.dumps(run.seed))
        if key in first:
            dups.append(Problem(run.path, "duplicate",
                                f"same configuration and seed as {first[key].path}; "
                                f"counted once"))
        else:
            first[key] = run
            kept.append(run)
    return kept, dups


# ---------------------------------------------------------------------------
# Sweeps: planned versus finished
# ---------------------------------------------------------------------------

_DIR_RE = re.compile(r"^(?P<method>.+)-seed(?P<seed>-?\d+)-(?P<hash>[0-9a-f]+)$")


def sweep_report(scan: Scan) -> list[dict]:
    """Compare each ``sweep.json`` found by :func:`scan_runs` with what finished.

    ``sweep.json`` (written by ``grprune sweep``, see :mod:`grprune.sweep`) lists
    the planned configurations: ``{"configs": [{"hash": ..., "run_dir": "<relative
    run dir>", "values": {...}}, ...]}``.
    Planned runs are counted per ``<dataset>/<method>`` of their run directory
    (``<root>/<dataset>/<method>-seed<seed>-<hash>``).

    Parameters
    ----------
    scan : Scan
        The result of :func:`scan_runs`.

    Returns
    -------
    list of dict
        One entry per sweep and group with ``sweep`` (root), ``group``,
        ``planned``, ``finished``, ``failed``, ``unfinished``, ``unreadable``,
        ``not_started`` (counts) and ``seeds_done`` / ``seeds_planned`` (sorted
        lists). Planned runs without a run directory are added to
        ``scan.problems`` as ``"not started"``; a finished run directory that
        holds another configuration than planned, and an unreadable
        ``sweep.json``, are added as ``"foreign"`` / ``"corrupt"``.
    """
    finished = {r.path.resolve(): r for r in scan.runs}
    status_of = {p.path.resolve(): p.kind for p in scan.problems}
    out = []
    for sweep_path in scan.sweeps:
        root = sweep_path.parent
        data, why = load_json(sweep_path)
        entries = None
        if isinstance(data, dict):
            entries = data.get("configs")
        if why is not None or not isinstance(entries, list):
            scan.problems.append(Problem(sweep_path, "corrupt",
                                         why or "sweep.json has no 'configs' list"))
            continue
        groups: dict[str, dict] = {}
        for entry in entries:
            rel = entry.get("run_dir") if isinstance(entry, dict) else None
            if not rel:
                continue
            rel = Path(rel)
            run_dir = (root / rel).resolve()
            values = entry.get("values") or {}
            m = _DIR_RE.match(rel.name)
            method = m.group("method") if m else rel.name
            seed = m.group("seed") if m else values.get("seed", values.get("train.seed"))
            name = f"{rel.parent}/{method}" if str(rel.parent) != "." else method
            g = groups.setdefault(name, {"sweep": str(root), "group": name, "planned": 0,
                                         "finished": 0, "failed": 0, "unfinished": 0,
                                         "unreadable": 0, "not_started": 0,
                                         "seeds_done": set(), "seeds_planned": set()})
            g["planned"] += 1
            if seed is not None:
                g["seeds_planned"].add(int(seed))
            status = status_of.get(run_dir)
            run = finished.get(run_dir)
            if run is not None and entry.get("hash") not in (None, run.config.get("hash")):
                g["unreadable"] += 1
                scan.problems.append(Problem(root / rel, "foreign", (
                    f"holds configuration {run.config.get('hash')}, but {sweep_path} "
                    f"planned {entry['hash']} there")))
            elif run is not None or status == "duplicate":
                g["finished"] += 1
                if seed is not None:
                    g["seeds_done"].add(int(seed))
            elif status == "failed":
                g["failed"] += 1
            elif status == "unfinished":
                g["unfinished"] += 1
            elif status in ("corrupt", "foreign"):
                g["unreadable"] += 1
            else:
                g["not_started"] += 1
                scan.problems.append(Problem(root / rel, "not started",
                                             f"planned in {sweep_path}, no run directory yet"))
        for g in groups.values():
            g["seeds_done"] = sorted(g["seeds_done"])
            g["seeds_planned"] = sorted(g["seeds_planned"])
            out.append(g)
    return out


# ---------------------------------------------------------------------------
# Groups, settings and model selection
# ---------------------------------------------------------------------------

def mean_std(values: Iterable[float | None]) -> tuple[float, float, int]:
    """Mean and sample standard deviation (``ddof=1``; 0 for one value).

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


def pm(mean: float, std: float, scale: float = 100.0, digits: int = 2) -> str:
    """``"70.32 ± 1.73"`` for fractions 0.7032 and 0.0173; ``"–"`` when missing.

    >>> pm(0.7032, 0.0173)
    '70.32 ± 1.73'
    """
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–" if mean is None else "nan"
    s = "nan" if std is None or math.isnan(std) else f"{std * scale:.{digits}f}"
    return f"{mean * scale:.{digits}f} ± {s}"


def _value_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _kept_text(row: dict) -> str:
    """Mean fraction of test edges kept at evaluation, e.g. ``0.987`` (``–`` if unknown)."""
    kept = row.get("kept_edge_fraction_mean", float("nan"))
    return "–" if kept is None or math.isnan(kept) else f"{kept:.3f}"


def _fraction_text(row: dict, key: str) -> str:
    """``0.863 ± 0.012`` for a fraction-valued column of a row; ``–`` when missing."""
    mean, std = row.get(f"{key}_mean", math.nan), row.get(f"{key}_std", math.nan)
    if mean is None or math.isnan(mean):
        return "–"
    return f"{mean:.3f}" + ("" if math.isnan(std) else f" ± {std:.3f}")


def hparams_text(hparams: dict, short: bool = False) -> str:
    """``"reg.size.eta=0.5, train.lr=0.001"``; ``short`` drops the ``reg.`` prefix."""
    return ", ".join(f"{k[4:] if short and k.startswith('reg.') else k}={_value_text(v)}"
                     for k, v in hparams.items())


_MISSING = "<unset>"


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
        return mean_std(r.summary.get(key) for r in self.runs)


def _group_key(run: Run, free: str | None = None) -> tuple:
    return (_column_key(run, free), run.reg, run.selector, run.preset)


def _groups(runs: Sequence[Run], free: str | None = None) -> dict[tuple, list[Setting]]:
    """Group key -> settings (ordered by setting id); ``free`` is left out of the key."""
    groups: dict[tuple, dict[str, list[Run]]] = {}
    for run in runs:
        groups.setdefault(_group_key(run, free), {}).setdefault(run.setting_id, []).append(run)
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


def _score(setting: Setting, by: str) -> float:
    mean = setting.stat(by)[0]
    return -math.inf if math.isnan(mean) else mean


def _choose(settings: Sequence[Setting], by: str) -> Setting:
    """Highest mean ``by`` (valid or test); ties: more seeds, then smaller setting id."""
    return min(settings, key=lambda s: (-_score(s, by), -len(s.runs), s.runs[0].setting_id))


def aggregate(runs: Sequence[Run], select: str = "valid") -> list[dict]:
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
        ``"valid"``: per group, the setting with the highest mean validation
        metric; ``"oracle"``: the highest mean *test* metric (optimistic; the
        rows say ``selection="oracle"``); ``"all"``: every setting. Ties go to
        the setting with more seeds, then to the smaller setting id.

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
        the setting is the one each rule picks), ``setting``, ``config_hash``
        and ``dirs``.

    Raises
    ------
    GrpruneError
        On an unknown ``select``.
    """
    if select not in SELECT_RULES:
        raise GrpruneError(f"unknown selection rule {select!r}. Choices: "
                           f"{', '.join(SELECT_RULES)}")
    labels = _column_labels(runs)
    rows = []
    for (ckey, reg, selector, preset), settings in _groups(runs).items():
        varying = varying_keys(settings)
        by_valid, by_test = _choose(settings, "valid"), _choose(settings, "test")
        chosen = settings if select == "all" else [by_valid if select == "valid" else by_test]
        for s in chosen:
            first = s.runs[0]
            row = {"column": labels[ckey], "dataset": first.dataset, "split": first.split,
                   "shift": first.shift, "method": method_label(reg, selector, preset),
                   "preset": preset,
                   "ablation": ablation_label(reg, selector), "reg": ",".join(reg),
                   "selector": selector, "metric": first.metric,
                   "selection": {"valid": "valid", "oracle": "oracle",
                                 "all": "all"}[select],
                   "n": len(s.runs), "seeds": [r.seed for r in s.runs]}
            for key in ("test", "valid", "id_valid", "id_test", "kept_edge_fraction",
                        "motif_edge_rocauc", "spurious_precision_at_50"):
                row[f"{key}_mean"], row[f"{key}_std"], _ = s.stat(key)
            for key in ("wall_time_s", "epoch_time_s_median"):
                row[f"{key}_mean"] = s.stat(key)[0]
            mems = [r.summary.get("peak_mem_mib") for r in s.runs
                    if isinstance(r.summary.get("peak_mem_mib"), (int, float))]
            row["peak_mem_mib_max"] = max(mems) if mems else math.nan
            row["hparams"] = {k: s.hparams.get(k, _MISSING) for k in varying}
            row["varying"] = varying
            row["n_settings"] = len(settings)
            rule = "test" if select == "oracle" else "valid"
            row["ties"] = sum(1 for o in settings
                              if o is not s and _score(o, rule) == _score(s, rule))
            row["valid_choice"] = s is by_valid
            row["oracle_choice"] = s is by_test
            row["setting"] = first.setting_id
            row["config_hash"] = first.config.get("hash")
            row["dirs"] = [str(r.path) for r in s.runs]
            row["_order"] = (row["column"], method_rank(row["method"]),
                             ablation_rank(row["ablation"]))
            rows.append(row)
    rows.sort(key=lambda r: (r["_order"], -_nan_low(r["valid_mean"]), r["setting"]))
    for row in rows:
        del row["_order"]
    return rows


def _nan_low(x: float) -> float:
    return -math.inf if x is None or math.isnan(x) else x


# ---------------------------------------------------------------------------
# Output: Markdown, CSV, rich
# ---------------------------------------------------------------------------

SELECTION_TEXT = {
    "valid": "model selection: per method and dataset, the setting with the best mean "
             "validation score",
    "oracle": "ORACLE selection: per method and dataset, the setting with the best mean "
              "TEST score (optimistic; not a valid model selection)",
    "all": "every setting listed (no model selection)",
}


def _row_label(row: dict, layout: str, select: str) -> str:
    base = row["ablation"] if layout == "ablation" else row["method"]
    if select == "all" and row["hparams"]:
        return f"{base} · {hparams_text(row['hparams'])}"
    return base


def _grid(rows: Sequence[dict], layout: str, select: str):
    """Row labels, column labels and ``{(row, column): row dict}`` for a wide layout."""
    columns = sorted({r["column"] for r in rows})
    rank = ablation_rank if layout == "ablation" else method_rank
    rlabels: dict[str, tuple] = {}
    cells: dict[tuple[str, str], dict] = {}
    for r in rows:
        label = _row_label(r, layout, select)
        rlabels.setdefault(label, (rank(r["ablation"] if layout == "ablation"
                                        else r["method"]), label))
        cells[(label, r["column"])] = r
    return sorted(rlabels, key=rlabels.get), columns, cells


def _metric_text(rows: Sequence[dict]) -> str:
    names = sorted({METRIC_NAMES.get(r["metric"], r["metric"]) for r in rows})
    return " / ".join(names)


def _title(select: str, layout: str) -> str:
    what = {"table": "Test performance", "ablation": "Ablation of the regularizers",
            "long": "All results"}[layout]
    return f"{what} (ORACLE selection by test score)" if select == "oracle" else what


def to_markdown(rows: Sequence[dict], layout: str = "table", select: str | None = None,
                notes: Sequence[str] = ()) -> str:
    """Paper-style Markdown: a caption, a table and the selected hyperparameters.

    Parameters
    ----------
    rows : sequence of dict
        Rows of :func:`aggregate`.
    layout : {"table", "ablation", "long"}
        ``"table"``: methods x dataset columns (paper Table 1); ``"ablation"``:
        regularizer sets (``size,eps-align``, ``size``, ``eps-align``, ``none``,
        then others) x dataset columns (paper Figure 3a); ``"long"``: one line
        per row with every number.
    select : str, optional
        The selection rule of the rows (default: read from the rows).
    notes : sequence of str
        Extra lines for a "Notes" section (missing, failed, unfinished runs).

    Returns
    -------
    str
        Markdown text. Cells show the test metric x100 as "mean ± std" (sample
        std over seeds); the best mean of a column is bold.
    """
    if layout not in LAYOUTS:
        raise GrpruneError(f"unknown layout {layout!r}. Choices: {', '.join(LAYOUTS)}")
    select = select or (rows[0]["selection"] if rows else "valid")
    ns = sorted({r["n"] for r in rows})
    seeds = (f"{ns[0]} seed{'s' if ns[0] != 1 else ''}" if len(ns) == 1
             else "n seeds as marked")
    lines = [f"## {_title(select, layout)}", ""]
    caption = (f"Test {_metric_text(rows)} (%), mean ± std (sample std) over {seeds}; "
               f"{SELECTION_TEXT[select]}.")
    if select == "oracle":
        caption = f"**{caption}**"
    lines += [caption, ""]
    if layout == "long":
        head = ["dataset", "method", "reg", "selector", "n", "test", "valid", "ID test",
                "test edges kept", "motif ROC-AUC", "Precision@50", "hyperparameters",
                "chosen by"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rows:
            chosen = ", ".join(k for k, flag in (("valid", r["valid_choice"]),
                                                 ("oracle", r["oracle_choice"])) if flag)
            lines.append("| " + " | ".join([
                r["column"], r["method"], r["reg"] or "none", r["selector"], str(r["n"]),
                pm(r["test_mean"], r["test_std"]), pm(r["valid_mean"], r["valid_std"]),
                "–" if math.isnan(r["id_test_mean"]) else pm(r["id_test_mean"], r["id_test_std"]),
                _kept_text(r), _fraction_text(r, "motif_edge_rocauc"),
                _fraction_text(r, "spurious_precision_at_50"),
                hparams_text(r["hparams"]) or "–", chosen or "–"]) + " |")
    else:
        rlabels, columns, cells = _grid(rows, layout, select)
        best = {}
        for c in columns:
            means = [cells[(rl, c)]["test_mean"] for rl in rlabels if (rl, c) in cells]
            means = [m for m in means if not math.isnan(m)]
            best[c] = max(means) if len(means) > 1 else None
        head = "Method" if layout == "table" else "Regularizers"
        lines += ["| " + " | ".join([head, *columns]) + " |",
                  "|" + "---|" + "---:|" * len(columns)]
        for rl in rlabels:
            out = [rl]
            for c in columns:
                r = cells.get((rl, c))
                if r is None:
                    out.append("–")
                    continue
                text = pm(r["test_mean"], r["test_std"])
                if len(ns) > 1:
                    text += f" (n={r['n']})"
                if best[c] is not None and r["test_mean"] == best[c]:
                    text = f"**{text}**"
                out.append(text)
            lines.append("| " + " | ".join(out) + " |")
        chosen = [r for r in rows if r["varying"]] if select != "all" else []
        if chosen:
            how = "ORACLE, by test score" if select == "oracle" else "by validation score"
            lines += ["", f"Selected hyperparameters ({how}; only keys that vary within a "
                          f"method and dataset):", ""]
            for r in chosen:
                name = r["ablation"] if layout == "ablation" else r["method"]
                tie = (f"; tied with {r['ties']} other setting{'s' if r['ties'] > 1 else ''}"
                       f", broken by more seeds, then by setting id" if r["ties"] else "")
                lines.append(f"- {name}, {r['column']}: {hparams_text(r['hparams'])} "
                             f"(chosen from {r['n_settings']} settings; valid "
                             f"{pm(r['valid_mean'], r['valid_std'])}{tie})")
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


CSV_COLUMNS = ["selection", "dataset", "split", "shift", "column", "method", "reg", "selector",
               "preset", "metric", "n", "seeds", "test_mean", "test_std", "valid_mean",
               "valid_std", "id_valid_mean", "id_valid_std", "id_test_mean", "id_test_std",
               "kept_edge_fraction_mean", "kept_edge_fraction_std", "motif_edge_rocauc_mean",
               "motif_edge_rocauc_std", "spurious_precision_at_50_mean",
               "spurious_precision_at_50_std", "wall_time_s_mean", "epoch_time_s_median_mean",
               "peak_mem_mib_max", "hparams", "varying", "n_settings", "ties", "valid_choice",
               "oracle_choice", "setting", "config_hash", "dirs"]


def to_csv(rows: Sequence[dict]) -> str:
    """Long-format CSV: one line per row of :func:`aggregate`, every number.

    Metrics are fractions as in ``summary.json`` (not x100); empty cells are
    missing values. ``selection`` is ``valid``, ``oracle`` or ``all`` on every
    line; ``hparams`` is JSON (``{"reg.size.eta": 0.5}``); ``seeds`` and
    ``dirs`` are ``;``-separated.
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        out = []
        for col in CSV_COLUMNS:
            v = r.get(col)
            if col in ("seeds", "dirs", "varying"):
                v = ";".join(map(str, v))
            elif col == "hparams":
                v = json.dumps(v, sort_keys=True)
            elif isinstance(v, float):
                v = "" if math.isnan(v) else repr(v)
            elif v is None:
                v = ""
            out.append(v)
        writer.writerow(out)
    return buf.getvalue()


def write_outputs(rows: Sequence[dict], prefix: str | Path, layout: str = "table",
                  select: str | None = None, notes: Sequence[str] = ()) -> tuple[Path, Path]:
    """Write ``PREFIX.md`` and ``PREFIX.csv`` atomically; returns both paths."""
    prefix = Path(prefix)
    md = prefix.with_name(prefix.name + ".md")
    cs = prefix.with_name(prefix.name + ".csv")
    R.atomic_write_bytes(md, to_markdown(rows, layout, select, notes).encode())
    R.atomic_write_bytes(cs, to_csv(rows).encode())
    return md, cs


def rich_table(rows: Sequence[dict], layout: str = "table", select: str | None = None):
    """The rows as a :class:`rich.table.Table` (test ×100, mean ± std; n and hparams dim).

    The selection rule is in the title only when it is the oracle; print
    ``SELECTION_TEXT[select]`` under the table to state it in full.
    """
    from rich.markup import escape
    from rich.table import Table

    select = select or (rows[0]["selection"] if rows else "valid")
    title = f"{_title(select, layout)}: test {_metric_text(rows)} (%)"
    table = Table(title=title, show_lines=layout != "long")
    if layout == "long":
        for col in ("dataset", "method", "reg", "n", "test", "valid", "ID test", "kept",
                    "motif AUC", "P@50", "hyperparameters", "chosen"):
            table.add_column(col, justify="right" if col in ("n", "test", "valid", "ID test",
                                                             "kept", "motif AUC", "P@50")
                             else "left")
        for r in rows:
            chosen = "/".join(k for k, f in (("valid", r["valid_choice"]),
                                             ("oracle", r["oracle_choice"])) if f)
            idt = (pm(r["id_test_mean"], r["id_test_std"])
                   if not math.isnan(r["id_test_mean"]) else "–")
            table.add_row(*map(escape, (
                r["column"], r["method"], r["reg"] or "none", str(r["n"]),
                pm(r["test_mean"], r["test_std"]), pm(r["valid_mean"], r["valid_std"]), idt,
                _kept_text(r), _fraction_text(r, "motif_edge_rocauc"),
                _fraction_text(r, "spurious_precision_at_50"),
                hparams_text(r["hparams"]) or "–", chosen or "–")))
        return table
    rlabels, columns, cells = _grid(rows, layout, select)
    table.add_column("method" if layout == "table" else "regularizers")
    for c in columns:
        table.add_column(escape(c), justify="right")
    for rl in rlabels:
        out = [escape(rl)]
        for c in columns:
            r = cells.get((rl, c))
            if r is None:
                out.append("–")
                continue
            extra = f"n={r['n']}"
            if r["hparams"] and select != "all":
                extra += f" · {hparams_text(r['hparams'], short=True)}"
            out.append(f"{pm(r['test_mean'], r['test_std'])}\n[dim]{escape(extra)}[/dim]")
        table.add_row(*out)
    return table


def notes_for(scan: Scan, sweeps: Sequence[dict]) -> list[str]:
    """One-line notes: incomplete sweep groups, failed, unfinished and skipped runs."""
    notes = []
    for g in sweeps:
        if g["finished"] == g["planned"]:
            continue
        parts = [f"{g['finished']}/{g['planned']} runs finished"]
        for key, word in (("failed", "failed"), ("unfinished", "unfinished"),
                          ("unreadable", "unreadable"), ("not_started", "not started")):
            if g[key]:
                parts.append(f"{g[key]} {word}")
        seeds = (f"; seeds done {_seed_list(g['seeds_done'])} of "
                 f"{_seed_list(g['seeds_planned'])}" if g["seeds_planned"] else "")
        notes.append(f"incomplete: {g['group']} ({g['sweep']}): {', '.join(parts)}{seeds}")
    order = ("failed", "running", "unfinished", "not started", "corrupt", "foreign", "duplicate")
    for p in sorted(scan.problems, key=lambda p: (order.index(p.kind)
                                                  if p.kind in order else 99, str(p.path))):
        notes.append(f"{p.kind}: {p.path}: {p.reason}")
    return notes


def _seed_list(seeds: Sequence[int]) -> str:
    return ",".join(map(str, seeds)) if seeds else "none"


# ---------------------------------------------------------------------------
# Sensitivity
# ---------------------------------------------------------------------------

def _sort_values(values: Iterable[Any]) -> list[Any]:
    vals = list(values)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return sorted(vals)
    return sorted(vals, key=lambda v: json.dumps(v, sort_keys=True, default=str))


def sensitivity(runs: Sequence[Run], key: str, select: str = "valid") -> list[dict]:
    """Test metric against the values of one hyperparameter (paper Figure 3b).

    For every dataset column and method in which ``key`` varies, the settings
    that differ only in ``key`` are compared: the other varying hyperparameters
    are held at the values of the validation-selected setting (``select=
    "oracle"``: the test-selected one) when those cover at least two values of
    ``key``; otherwise at the values that cover the most values of ``key`` (ties:
    the best mean validation score), and ``fixed_note`` says so.

    Parameters
    ----------
    runs : sequence of Run
        Finished runs (:func:`scan_runs`).
    key : str
        A namespaced hyperparameter, e.g. ``reg.size.eta`` (η), ``reg.size.weight``
        (λ1), ``reg.eps-align.k`` (K), ``reg.eps-align.weight`` (λ2), ``data.bias``.
    select : {"valid", "oracle", "all"}
        Which setting fixes the other hyperparameters (``"all"`` acts as ``"valid"``).

    Returns
    -------
    list of dict
        One point per group and value of ``key``, ordered by group and value:
        ``column``, ``method``, ``key``, ``value``, ``n``, ``seeds``, ``test_mean``,
        ``test_std``, ``valid_mean``, ``valid_std``, ``metric``, ``fixed`` (the
        other varying hyperparameters and their held values), ``fixed_note``,
        ``selection``.

    Raises
    ------
    GrpruneError
        If no run has ``key`` (the message suggests the nearest key and lists the
        keys that vary) or ``key`` does not vary within any group.
    """
    if select not in SELECT_RULES:
        raise GrpruneError(f"unknown selection rule {select!r}. Choices: "
                           f"{', '.join(SELECT_RULES)}")
    by = "test" if select == "oracle" else "valid"
    free = key if key.startswith("data.") else None
    groups = _groups(runs, free)
    all_varying = sorted({k for settings in _groups(runs).values()
                          for k in varying_keys(settings)}
                         | {k for settings in groups.values() for k in varying_keys(settings)
                            if k.startswith("data.")})
    known = sorted({k for r in runs for k in r.hparams})
    if key not in known:
        hint = did_you_mean(key, known, cutoff=0.6)
        raise GrpruneError(f"no run has hyperparameter {key!r}.{hint} Keys that vary: "
                           f"{', '.join(all_varying) or 'none'}")
    labels = _column_labels(runs, free)
    points: list[dict] = []
    entangled: list[str] = []
    for (ckey, reg, selector, preset), settings in groups.items():
        varying = varying_keys(settings)
        if key not in varying:
            continue
        settings = [s for s in settings if key in s.hparams]
        others = [k for k in varying if k != key]

        def context(s: Setting) -> str:
            return json.dumps({k: s.hparams.get(k, _MISSING) for k in others},
                              sort_keys=True, default=str)

        contexts: dict[str, list[Setting]] = {}
        for s in settings:
            contexts.setdefault(context(s), []).append(s)
        if max(len(c) for c in contexts.values()) < 2:
            entangled.append(f"{labels[ckey]} {method_label(reg, selector, preset)}")
            continue  # key changes only together with other hyperparameters
        chosen = _choose(settings, by)
        ctx = context(chosen)
        rule = "validation" if by == "valid" else "ORACLE (test)"
        if len(contexts[ctx]) >= 2:
            note = (f"held at the {rule}-selected values" if others
                    else "no other hyperparameter varies")
        else:
            ctx = min(contexts, key=lambda c: (-len(contexts[c]),
                                               -max(_score(s, by) for s in contexts[c]), c))
            note = (f"held at the values covering the most {key} values; the {rule}-selected "
                    f"setting has only {key}={_value_text(chosen.hparams[key])}")
        fixed = {k: contexts[ctx][0].hparams.get(k, _MISSING) for k in others}
        first = settings[0].runs[0]
        ordered = _sort_values([s.hparams[key] for s in contexts[ctx]])
        by_value = {json.dumps(s.hparams[key], sort_keys=True, default=str): s
                    for s in contexts[ctx]}
        for value in ordered:
            s = by_value[json.dumps(value, sort_keys=True, default=str)]
            test_m, test_s, n = s.stat("test")
            valid_m, valid_s, _ = s.stat("valid")
            points.append({"column": labels[ckey], "method": method_label(reg, selector, preset),
                           "reg": ",".join(reg), "selector": selector, "key": key,
                           "value": value, "n": n, "seeds": [r.seed for r in s.runs],
                           "test_mean": test_m, "test_std": test_s,
                           "valid_mean": valid_m, "valid_std": valid_s,
                           "metric": first.metric, "fixed": fixed, "fixed_note": note,
                           "selection": "oracle" if by == "test" else "valid"})
    if not points and entangled:
        raise GrpruneError(f"{key} never varies alone: in {'; '.join(entangled)} every change "
                           f"of {key} comes with changes of other hyperparameters, so no "
                           f"curve can hold them fixed")
    if not points:
        values = sorted({json.dumps(r.hparams.get(key), default=str) for r in runs
                         if key in r.hparams})
        raise GrpruneError(f"{key} does not vary within any dataset and method (values "
                           f"seen: {', '.join(values)}). Keys that vary: "
                           f"{', '.join(all_varying) or 'none'}")
    points.sort(key=lambda p: (p["column"], method_rank(p["method"])))
    return points


def plot_sensitivity(points: Sequence[dict], path: str | Path) -> Path:
    """Write a PNG: test metric (%) against the key, one line with error bars per group.

    Uses matplotlib's Agg canvas directly (no display, no global backend change)
    and writes the file atomically.

    Parameters
    ----------
    points : sequence of dict
        The result of :func:`sensitivity`.
    path : path
        The PNG file.

    Returns
    -------
    Path
        ``path``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    key = points[0]["key"]
    lines: dict[str, list[dict]] = {}
    for p in points:
        lines.setdefault(f"{p['column']} · {p['method']}", []).append(p)
    values = [p["value"] for p in points]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    cats = _sort_values({json.dumps(v, sort_keys=True, default=str): v
                         for v in values}.values()) if not numeric else []
    fig = Figure(figsize=(6.4, 4.2), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for label, pts in lines.items():
        xs = [p["value"] if numeric else cats.index(p["value"]) for p in pts]
        ys = [100 * p["test_mean"] for p in pts]
        es = [100 * (p["test_std"] if not math.isnan(p["test_std"]) else 0) for p in pts]
        ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=label)
    if numeric:
        pos = [v for v in values if v > 0]
        if len(pos) == len(values) and max(pos) / min(pos) >= 100:
            ax.set_xscale("log")
    else:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels([_value_text(c) for c in cats])
    metrics = sorted({METRIC_NAMES.get(p["metric"], p["metric"]) for p in points})
    ax.set_xlabel(f"{key} ({PAPER_SYMBOLS[key]})" if key in PAPER_SYMBOLS else key)
    ax.set_ylabel(f"test {' / '.join(metrics)} (%)")
    oracle = points[0]["selection"] == "oracle"
    ax.set_title(f"Sensitivity to {key}" + (" (ORACLE selection)" if oracle else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    R.atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def sensitivity_csv(points: Sequence[dict]) -> str:
    """The points of :func:`sensitivity` as CSV (fractions, as in ``summary.json``)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    cols = ["selection", "column", "method", "reg", "selector", "metric", "key", "value", "n",
            "seeds", "test_mean", "test_std", "valid_mean", "valid_std", "fixed", "fixed_note"]
    writer.writerow(cols)
    for p in points:
        writer.writerow([json.dumps(p[c], sort_keys=True) if c in ("fixed", "value")
                         else ";".join(map(str, p[c])) if c == "seeds"
                         else ("" if isinstance(p[c], float) and math.isnan(p[c]) else p[c])
                         for c in cols])
    return buf.getvalue()


def sensitivity_table(points: Sequence[dict]):
    """The points of :func:`sensitivity` as a :class:`rich.table.Table`."""
    from rich.markup import escape
    from rich.table import Table

    key = points[0]["key"]
    oracle = points[0]["selection"] == "oracle"
    table = Table(title=f"Sensitivity to {key}: test (%)"
                  + (" (ORACLE selection by test)" if oracle else ""))
    for col in ("dataset", "method", key, "n", "test", "valid", "held fixed"):
        table.add_column(col, justify="right" if col in (key, "n", "test", "valid")
                         else "left")
    previous = None
    for p in points:
        group = (p["column"], p["method"])
        held = (hparams_text(p["fixed"]) or "–") + f" ({p['fixed_note']})"
        table.add_row(*map(escape, (*(group if group != previous else ("", "")),
                                    _value_text(p["value"]), str(p["n"]),
                                    pm(p["test_mean"], p["test_std"]),
                                    pm(p["valid_mean"], p["valid_std"]),
                                    held if group != previous else "")))
        previous = group
    return table
