"""Reading run directories and sweep plans: what finished, what did not and why."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from grprune.collect.common import NOT_HPARAMS
from grprune.errors import GrpruneError
from grprune.naming import canonical_reg
from grprune.record.files import PLAN
from grprune.record.runconfig import RunConfig
from grprune.record.rundir import RunDir
from grprune.record.status import load_json
from grprune.record.settings import flat_items
from grprune.record.summary import RunSummary

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
    config : RunConfig
        ``config.json`` (in the current layout).
    summary : RunSummary
        ``summary.json``.
    hparams : dict
        The config flattened to namespaced keys (``reg.size.eta``, ``train.lr``,
        ``selector.name``), without ``train.seed`` and the volatile keys
        (``data.root``, ``data.download``, ``train.device``, ``train.progress``).
    seed : int
        ``train.seed``.
    """

    path: Path
    config: RunConfig
    summary: RunSummary
    hparams: dict
    seed: Any

    @property
    def dataset(self) -> str:
        return self.config.data.name

    @property
    def split(self) -> str | None:
        return self.config.data.split

    @property
    def shift(self) -> str | None:
        return self.config.data.shift

    @property
    def reg(self) -> tuple[str, ...]:
        """The regularizer names in canonical order (``size`` before ``eps-align``)."""
        return canonical_reg(list(self.config.reg))

    @property
    def selector(self) -> str:
        return self.config.selector.name

    @property
    def preset(self) -> str:
        """The preset the run was resolved with (``paper`` for runs before presets)."""
        return self.config.preset

    @property
    def metric(self) -> str:
        return self.summary.metric

    @property
    def setting_id(self) -> str:
        """12-hex-digit hash of the configuration without seed and volatile keys."""
        return _digest(self.hparams)


@dataclass
class Problem:
    """A directory that was not collected, and why.

    ``kind`` is ``"corrupt"`` (unreadable or inconsistent files), ``"outdated"`` (a run
    older than grprune reads: re-made, not read), ``"foreign"`` (not a grprune run
    directory), ``"duplicate"`` (same configuration and seed
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


def flatten_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved config as ``{"section.key": value}`` (``reg.NAME.key`` for reg).

    ``train.seed`` and the volatile keys are left out.

    >>> flatten_config({"train": {"seed": 3, "lr": 0.1}, "reg": {"size": {"eta": 0.5}}})
    {'reg.size.eta': 0.5, 'train.lr': 0.1}
    """
    flat = dict(flat_items(cfg))  # the record layer's one reading of the dotted keys
    return {k: flat[k] for k in sorted(flat) if k not in NOT_HPARAMS}


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def read_run(run_dir: str | Path) -> Run | Problem:
    """Read one run directory, judged by :meth:`grprune.record.rundir.RunDir.status`.

    Parameters
    ----------
    run_dir : path
        A directory holding ``config.json`` (and, when finished, ``summary.json``).

    Returns
    -------
    Run or Problem
        A :class:`Run` when the run finished and its files are sound, otherwise a
        :class:`Problem` saying why not: ``corrupt``, ``outdated``, ``foreign``, ``failed``,
        ``diverged`` (its loss became NaN; ``error.json`` says ``"kind": "diverged"``),
        ``unfinished`` (interrupted), ``pruned`` (a tune's pruner stopped it) or
        ``running`` (another process holds its lock).
    """
    run_dir = Path(run_dir)
    rundir = RunDir(run_dir)
    st = rundir.status()
    if st.state == "finished" and st.config is not None and st.summary is not None:
        cfg = st.config
        return Run(path=run_dir, config=cfg, summary=st.summary, hparams=flatten_config(cfg),
                   seed=cfg.setting("train.seed"))
    kind = {"interrupted": "unfinished", "empty": "foreign"}.get(st.state, st.state)
    error = rundir.error() if kind == "failed" else None
    if error is not None and error.diverged:
        kind = "diverged"  # the loss became NaN: a result of its settings, not a fault
    return Problem(run_dir, kind, st.reason or "an empty directory")




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
        # followlinks: a sweep's --reuse links runs of another root in; `seen` (resolved
        # paths) reads each once and stops a link loop
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if here.resolve() in seen:
                dirnames[:] = []
                continue
            if PLAN in filenames:
                scan.sweeps.append(here / PLAN)
            if RunDir.marks_a_run(filenames):
                seen.add(here.resolve())
                dirnames[:] = []
                item = read_run(here)
                if isinstance(item, Run):
                    scan.runs.append(item)
                else:
                    scan.problems.append(item)
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
        ``planned``, ``finished``, ``failed``, ``running`` (another process holds
        the run's lock), ``unfinished``, ``unreadable``,
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
        entries = _planned_entries(scan, sweep_path)
        if entries is None:
            continue
        groups: dict[str, dict] = {}
        for entry in entries:
            rel = entry.get("run_dir") if isinstance(entry, dict) else None
            if not rel:
                continue
            rel = Path(rel)
            run_dir = (root / rel).resolve()
            g, seed = _plan_group(groups, root, rel, entry.get("values") or {})
            g["planned"] += 1
            if seed is not None:
                g["seeds_planned"].add(int(seed))
            _tally(scan, g, seed, entry, root / rel, sweep_path,
                   finished.get(run_dir), status_of.get(run_dir))
        for g in groups.values():
            g["seeds_done"] = sorted(g["seeds_done"])
            g["seeds_planned"] = sorted(g["seeds_planned"])
            out.append(g)
    return out


def _planned_entries(scan: Scan, sweep_path: Path) -> list | None:
    """The ``configs`` list of a ``sweep.json``; ``None`` (and a ``"corrupt"`` problem
    in ``scan.problems``) when the file is unreadable or has no such list."""
    data, why = load_json(sweep_path)
    entries = None
    if isinstance(data, dict):
        entries = data.get("configs")
    if why is not None or not isinstance(entries, list):
        scan.problems.append(Problem(sweep_path, "corrupt",
                                     why or "sweep.json has no 'configs' list"))
        return None
    return entries


def _plan_group(groups: dict[str, dict], root: Path, rel: Path,
                values: dict) -> tuple[dict, Any]:
    """The counts of the ``<dataset>/<method>`` group of a planned run directory
    ``root / rel`` (added to ``groups`` on first use), and the run's seed (``None`` when
    neither the directory name nor the plan's ``values`` give it)."""
    m = _DIR_RE.match(rel.name)
    method = m.group("method") if m else rel.name
    seed = m.group("seed") if m else values.get("seed", values.get("train.seed"))
    name = f"{rel.parent}/{method}" if str(rel.parent) != "." else method
    g = groups.setdefault(name, {"sweep": str(root), "group": name, "planned": 0,
                                 "finished": 0, "failed": 0, "running": 0, "unfinished": 0,
                                 "unreadable": 0, "not_started": 0,
                                 "seeds_done": set(), "seeds_planned": set()})
    return g, seed


def _tally(scan: Scan, g: dict, seed: Any, entry: dict, where: Path, sweep_path: Path,
           run: Run | None, status: str | None) -> None:
    """Count one planned run in its group ``g`` by what is at ``where``: the finished
    ``run`` (``None`` if none) or the kind of problem found there (``status``).

    A finished run of another configuration than planned is added to ``scan.problems``
    as ``"foreign"``, a run directory that does not exist yet as ``"not started"``.
    """
    if run is not None and entry.get("hash") not in (None, run.config.hash):
        g["unreadable"] += 1
        scan.problems.append(Problem(where, "foreign", (
            f"holds configuration {run.config.hash}, but {sweep_path} "
            f"planned {entry['hash']} there")))
    elif run is not None or status == "duplicate":
        g["finished"] += 1
        if seed is not None:
            g["seeds_done"].add(int(seed))
    elif status == "failed":
        g["failed"] += 1
    elif status == "running":
        g["running"] += 1
    elif status == "unfinished":
        g["unfinished"] += 1
    elif status in ("corrupt", "outdated", "foreign"):
        g["unreadable"] += 1
    else:
        g["not_started"] += 1
        scan.problems.append(Problem(where, "not started",
                                     f"planned in {sweep_path}, no run directory yet"))


def notes_for(scan: Scan, sweeps: Sequence[dict]) -> list[str]:
    """One-line notes: incomplete sweep groups, failed, unfinished and skipped runs."""
    notes = []
    for g in sweeps:
        if g["finished"] == g["planned"]:
            continue
        parts = [f"{g['finished']}/{g['planned']} runs finished"]
        for key, word in (("failed", "failed"), ("running", "running"),
                          ("unfinished", "unfinished"),
                          ("unreadable", "unreadable"), ("not_started", "not started")):
            if g[key]:
                parts.append(f"{g[key]} {word}")
        seeds = (f"; seeds done {_seed_list(g['seeds_done'])} of "
                 f"{_seed_list(g['seeds_planned'])}" if g["seeds_planned"] else "")
        notes.append(f"incomplete: {g['group']} ({g['sweep']}): {', '.join(parts)}{seeds}")
    order = ("diverged", "failed", "running", "unfinished", "not started", "corrupt", "foreign",
             "duplicate")
    for p in sorted(scan.problems, key=lambda p: (order.index(p.kind)
                                                  if p.kind in order else 99, str(p.path))):
        notes.append(f"{p.kind}: {p.path}: {p.reason}")
    return notes


def _seed_list(seeds: Sequence[int]) -> str:
    return ",".join(map(str, seeds)) if seeds else "none"
