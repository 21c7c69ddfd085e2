"""A sweep's plan file, the status of its run directories, and running them.

See :mod:`grprune.sweep` for the layout of ``sweep.json``, ``error.json`` and
``sweep.log``.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from grprune.errors import GrpruneError
from grprune.record.files import PLAN, atomic_write_json, read_json
from grprune.record.runconfig import RunConfig
from grprune.record.error import ErrorRecord
from grprune.record.rundir import RunDir
from grprune.record.status import RUNNING_ELSEWHERE
from grprune.record.settings import same_run
from grprune.sweep.expansion import Configuration, Expansion

#: held while a planner reads, extends and writes ``sweep.json``
PLAN_LOCK = ".sweep.json.lock"
PLAN_VERSION = 1
#: lines of the child's stderr kept in error.json
TAIL_LINES = 50
STATUSES = ("finished", "failed", "interrupted", "pending", "running", "foreign")


def now() -> str:
    """The current UTC time, ISO 8601 to the second (``2025-01-31T12:00:00Z``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_status(cfg: Mapping[str, Any], run_dir: Path) -> tuple[str, str]:
    """The status of a configuration's run directory, as a sweep acts on it.

    From :meth:`grprune.record.rundir.RunDir.status`: ``empty`` is ``"pending"``; ``finished``,
    ``failed``, ``interrupted`` and ``running`` (another process holds the run's lock) are
    themselves; ``pruned`` (a tune's pruner stopped it) is ``"interrupted"``: resumed to
    its end; ``foreign``, ``corrupt``, ``outdated`` and ``other-config`` are ``"foreign"``:
    left alone.

    Returns
    -------
    (status, detail)
        One of :data:`STATUSES`, and the reason (empty for ``pending`` and ``finished``).
    """
    st = RunDir(run_dir).status(cfg)
    if st.state == "empty":
        return "pending", ""
    if st.state in ("foreign", "corrupt", "outdated", "other-config"):
        return "foreign", st.reason
    if st.state == "pruned":  # a tune's pruner stopped it: a sweep runs it to its end
        return "interrupted", st.reason
    return st.state, st.reason if st.state in ("failed", "running") else ""


def read_plan(root: Path) -> dict | None:
    """The sweep root's ``sweep.json``, or None when there is none.

    Raises
    ------
    GrpruneError
        If the file exists but is not a sweep plan (it is never overwritten then).
    """
    path = root / PLAN
    if not path.exists():
        return None
    plan = read_json(path)
    if (not isinstance(plan, dict) or not isinstance(plan.get("configs"), list)
            or not all(isinstance(c, dict) and "hash" in c for c in plan["configs"])):
        raise GrpruneError(f"{path} exists but is not a grprune sweep plan; move it away "
                           f"or choose another --out")
    return plan


def plan_entries(expansion: Expansion, root: Path) -> list[dict]:
    """The plan entries (``sweep.json`` ``configs``) of an expansion: hash, run
    directory, dataset, method (:func:`grprune.naming.method_slug`), seed, the grid's
    values and the dropped ``-H`` keys; readers need not parse directory names."""
    from grprune.naming import method_slug
    out = []
    for conf in expansion.configs:
        cfg = conf.cfg
        out.append({"hash": conf.hash, "run_dir": rel_dir(conf, root),
                    "dataset": cfg.data.name, "method": method_slug(cfg), "seed": cfg.train.seed,
                    "values": expansion.values(conf), "dropped": list(conf.dropped)})
    return out


def write_plan(root: Path, expansion: Expansion, command: Sequence[str]) -> dict:
    """Add this sweep's configurations to ``<root>/sweep.json`` (atomically, and under the
    root's ``.sweep.json.lock``, so that sweeps planning into one root at once lose nothing).

    Entries already in the plan are kept as they are; new hashes are appended.

    Parameters
    ----------
    root : Path
        The sweep root.
    expansion : Expansion
        This sweep's configurations.
    command : sequence of str
        This sweep's command line.

    Returns
    -------
    dict
        The plan as written.

    Raises
    ------
    GrpruneError
        If an existing ``sweep.json`` is not a plan.
    """
    from filelock import FileLock
    root.mkdir(parents=True, exist_ok=True)
    # read, add and write under one lock: two sweeps planning into one root at once would
    # otherwise each write back what it read, and one's entries would be lost
    with FileLock(str(root / PLAN_LOCK)):
        return _add_to_plan(root, expansion, command)


def _add_to_plan(root: Path, expansion: Expansion, command: Sequence[str]) -> dict:
    plan = read_plan(root) or {"version": PLAN_VERSION, "created": now(), "configs": [],
                               "sweeps": []}
    stamp = now()
    command_text = shlex.join(command)
    known = {c["hash"] for c in plan["configs"]}
    added = 0
    for entry in plan_entries(expansion, root):
        if entry["hash"] not in known:
            plan["configs"].append({**entry, "added": stamp})
            known.add(entry["hash"])
            added += 1
    plan["version"] = PLAN_VERSION
    plan["command"] = command_text
    plan["updated"] = stamp
    plan.setdefault("sweeps", []).append(
        {"command": command_text, "time": stamp, "configs": [c.hash for c in expansion.configs],
         "added": added})
    atomic_write_json(root / PLAN, plan)
    return plan


def run_dir_of(conf: Configuration, root: Path) -> Path:
    """``<root>/<dataset>/<method>-seed<seed>-<hash>`` (:func:`grprune.run.default_run_dir`)."""
    from grprune.run import default_run_dir
    return default_run_dir(conf.cfg, root=root)


def rel_dir(conf: Configuration, root: Path) -> str:
    """The run directory relative to the sweep root, with ``/``."""
    return run_dir_of(conf, root).relative_to(root).as_posix()


def child_args(conf: Configuration, run_dir: Path) -> list[str]:
    """Arguments of ``python -m grprune`` that run one configuration.

    ``run --config <run_dir>/config.json --out <run_dir> --progress none --json``, plus
    ``--device`` / ``--root`` when the sweep sets them (they are left out of the hash).
    """
    args = ["run", "--config", str(RunDir(run_dir).config_path), "--out", str(run_dir),
            "--progress", "none", "--json"]
    for key in ("device", "root"):
        if conf.fixed.get(key) is not None:
            args += [f"--{key}", str(conf.fixed[key])]
    return args


def thread_env(workers: int) -> dict[str, str]:
    """``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` for each of ``workers`` parallel children.

    ``max(1, cpu_count // workers)``; nothing when the user set ``OMP_NUM_THREADS``
    (children inherit it).
    """
    if "OMP_NUM_THREADS" in os.environ:
        return {}
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    n = str(max(1, cpus // max(1, workers)))
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}


def child_environ(extra: dict[str, str]) -> dict[str, str]:
    """The environment of a child run: ours without ``GRPRUNE_RUN_*``, plus ``extra``.

    ``GRPRUNE_RUN_*`` variables would override the child's config file, so the run
    could end up with a configuration other than the planned one.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPRUNE_RUN_")}
    env.update(extra)
    return env


@dataclass
class Job:
    """One configuration to run: what a launcher needs.

    A launcher calls :meth:`prepare` right before it starts the child, then runs
    ``python -m grprune ARGS`` (:func:`start_child`) with ``env`` and stderr appended
    to ``log``, in ``cwd``.

    Attributes
    ----------
    conf : Configuration
    run_dir : Path
        Absolute run directory.
    args : list of str
        Arguments of ``python -m grprune`` (:func:`child_args`).
    env : dict
        Environment variables to set for the child (on top of the launcher's own).
    log : Path
        The run's ``sweep.log``; the child's stderr is appended to it.
    cwd : str
        Working directory of the child (the sweep's).
    log_offset : int
        Size of the log before this attempt (its tail goes into ``error.json``).
    started : float
        When the launcher started it (seconds since the epoch).
    """

    conf: Configuration
    run_dir: Path
    env: dict[str, str]
    args: list[str] = field(default_factory=list)
    log: Path = Path()
    cwd: str = ""
    log_offset: int = 0
    started: float = 0.0

    def __post_init__(self) -> None:
        self.args = self.args or child_args(self.conf, self.run_dir)
        self.log = RunDir(self.run_dir).log_path
        self.cwd = self.cwd or os.getcwd()

    def prepare(self) -> bool:
        """Write ``config.json``, remove a stale ``error.json``, start the log's entry.

        Returns False, having written nothing, when another process holds the run's lock
        (another sweep's child runs it): the launcher then starts no child and reports the
        run as running elsewhere."""
        rundir = RunDir(self.run_dir)
        if rundir.locked():
            return False
        self.run_dir.mkdir(parents=True, exist_ok=True)
        rundir.remove_error()
        if rundir.status(self.conf.cfg, held=True).state != "finished":
            # a run another sweep finished since the plan keeps its config.json (features)
            rundir.write_config(self.conf.cfg)
        header = f"=== grprune sweep {now()}: python -m grprune {shlex.join(self.args)}\n"
        with open(self.log, "ab") as fh:
            fh.write(header.encode())
            self.log_offset = fh.tell()
        self.started = time.time()
        return True


def start_child(args: Sequence[str], env: dict[str, str], log: str | Path, cwd: str | None):
    """Start ``python -m grprune ARGS`` with stderr appended to ``log``.

    Parameters
    ----------
    args : sequence of str
        Arguments after ``python -m grprune``.
    env : dict
        Extra environment variables (see :func:`child_environ`).
    log : path
        The log file.
    cwd : str, optional
        Working directory; ignored when it does not exist here (another machine).

    Returns
    -------
    subprocess.Popen
    """
    import subprocess
    with open(log, "ab") as fh:
        return subprocess.Popen([sys.executable, "-m", "grprune", *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=fh, env=child_environ(env),
                                cwd=cwd if cwd and os.path.isdir(cwd) else None)


def _tail(job: Job) -> list[str]:
    try:
        with open(job.log, "rb") as fh:
            fh.seek(job.log_offset)
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return text.splitlines()[-TAIL_LINES:]


def _one_line(lines: list[str], returncode: int | None) -> str:
    for line in reversed(lines):
        if line.startswith("grprune: error:"):
            return line[len("grprune: "):].strip()
    for line in reversed(lines):
        if line.strip() and not line.startswith((" ", "\t", "Traceback", "===")):
            return line.strip()
    if returncode is not None and returncode < 0:
        return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def finish_job(job: Job, returncode: int | None, error: str | None = None) -> tuple[bool, str]:
    """Check a finished child's run directory; write ``error.json`` if it failed.

    Parameters
    ----------
    job : Job
    returncode : int or None
        The child's exit status (None when the launcher lost it).
    error : str, optional
        The launcher's own error (a crashed Ray worker), if any.

    Returns
    -------
    (ok, message)
        ``ok`` when the run's summary is there and its config has the planned hash;
        otherwise ``message`` is the one-line error, also in ``error.json``.
    """
    cfg, rundir = job.conf.cfg, RunDir(job.run_dir)
    summary = rundir.summary()
    written = rundir.read_config()
    if returncode == 0 and error is None and summary is not None and isinstance(written, dict):
        if same_run(written, cfg):
            rundir.remove_error()
            return True, ""
        error = (f"the run wrote configuration {RunConfig.from_dict(written).hash} instead "
                 f"of the planned {cfg.hash}")
    lines = _tail(job)
    message = error or _one_line(lines, returncode)
    if returncode == 0 and error is None:
        message = "exited with code 0 but wrote no summary.json"
    # what the run itself recorded (a diverged run's kind and epoch) is kept
    own = rundir.error() or ErrorRecord()
    rundir.write_error(ErrorRecord(
        kind=own.kind, epoch=own.epoch, message=message, returncode=returncode, time=now(),
        command="python -m grprune " + shlex.join(job.args), hash=cfg.hash,
        log=rundir.log_path.name, stderr_tail=tuple(lines)))
    return False, message


@dataclass
class Outcome:
    """What a sweep did.

    Attributes
    ----------
    done : list of Path
        Run directories completed now.
    skipped : list of Path
        Already finished; not run.
    failed : list of (Path, str)
        Run directories whose run failed, with the one-line error.
    foreign : list of (Path, str)
        Planned run directories occupied by something else, or run by another process
        now (also one that another sweep over the same root started after this sweep
        made its plan: its child found the lock held); not run.
    """

    done: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)
    foreign: list[tuple[Path, str]] = field(default_factory=list)


Launch = Callable[..., None]


def reuse_runs(expansion: Expansion, root: Path, sources: Sequence[Path]) -> list[Path]:
    """Link finished runs of other sweep roots into ``root`` instead of training them again.

    A configuration's run directory is ``<root>/<dataset>/<method>-seed<seed>-<hash>``
    (:func:`rel_dir`), named by its config hash, so the same relative path under another
    root is the same configuration. For each configuration with no directory under ``root``
    yet, the first of ``sources`` that holds it finished becomes its directory, as a
    symbolic link to the absolute path (readers follow it: :func:`run_status`,
    ``grprune collect``, ``explain``, ``predict``). A directory already under ``root``, in
    any state, is left alone; a link whose target is gone is removed first (then linked
    again from a source that has the run, or trained).

    Parameters
    ----------
    expansion : Expansion
    root : Path
        The sweep root (absolute).
    sources : sequence of Path
        Other sweep roots (``grprune sweep --reuse DIR``).

    Returns
    -------
    list of Path
        The run directories linked, under ``root``.

    Raises
    ------
    GrpruneError
        When a source is not a directory.
    """
    for src in sources:
        if not Path(src).is_dir():
            raise GrpruneError(f"--reuse {src}: not a directory")
    linked = []
    for conf in expansion.configs:
        run_dir = run_dir_of(conf, root)
        if run_dir.is_symlink() and not run_dir.exists():
            run_dir.unlink()  # a link whose run is gone holds nothing: link again or train
        if run_dir.exists():
            continue
        for src in sources:
            there = Path(src).absolute() / rel_dir(conf, root)
            if there.resolve() == run_dir.resolve():
                continue
            if run_status(conf.cfg, there)[0] == "finished":
                run_dir.parent.mkdir(parents=True, exist_ok=True)
                run_dir.symlink_to(there.resolve(), target_is_directory=True)
                linked.append(run_dir)
                break
    return linked


def run_sweep(expansion: Expansion, root: Path, launch: Launch, *, env: dict[str, str],
              on_start: Callable[[Job], None] | None = None,
              on_done: Callable[[Job, bool, str], None] | None = None,
              on_foreign: Callable[[Job, str], None] | None = None,
              outcome: Outcome | None = None, extra_args: Sequence[str] = ()) -> Outcome:
    """Run every configuration that is not finished, with ``launch``.

    Parameters
    ----------
    expansion : Expansion
        The sweep's configurations.
    root : Path
        The sweep root (absolute).
    launch : callable
        ``launch(jobs, on_start, on_done)`` runs the jobs' children and calls
        ``on_done(job, returncode, error)`` as each ends (see
        :mod:`grprune.sweep.launchers`).
    env : dict
        Environment variables for every child.
    on_start, on_done : callable, optional
        Progress callbacks: ``on_start(job)``, ``on_done(job, ok, message)``.
    on_foreign : callable, optional
        ``on_foreign(job, detail)``, called instead of ``on_done`` for a job whose child
        ended because another process holds the run's lock (two sweeps over one root
        both started it); the job is counted in ``foreign``, not ``failed``, and no
        ``error.json`` is written into the directory the other process is running.
    outcome : Outcome, optional
        Filled in as runs end (so a caller sees partial results after Ctrl-C).
    extra_args : sequence of str
        Appended to every child's ``grprune run`` arguments (``--log ...``; never part
        of the configuration or its hash).

    Returns
    -------
    Outcome
    """
    outcome = outcome if outcome is not None else Outcome()
    jobs = []
    for conf in expansion.configs:
        run_dir = run_dir_of(conf, root)
        status, detail = run_status(conf.cfg, run_dir)
        if status == "finished":
            outcome.skipped.append(run_dir)
        elif status in ("foreign", "running"):
            outcome.foreign.append((run_dir, detail))
        else:
            jobs.append(conf)
    prepared = [Job(conf, run_dir_of(conf, root), dict(env),
                    args=child_args(conf, run_dir_of(conf, root)) + list(extra_args))
                for conf in jobs]

    def started(job: Job) -> None:
        if on_start is not None:
            on_start(job)

    def done(job: Job, returncode: int | None, error: str | None = None) -> None:
        # our child has ended, so a held lock is another process's: another sweep over
        # this root started the run after this sweep made its plan
        if error == RUNNING_ELSEWHERE or (returncode != 0 and error is None
                                            and RunDir(job.run_dir).locked()):
            outcome.foreign.append((job.run_dir, RUNNING_ELSEWHERE))
            if on_foreign is not None:
                on_foreign(job, RUNNING_ELSEWHERE)
            return
        ok, message = finish_job(job, returncode, error)
        written = RunDir(job.run_dir).summary_mtime()
        if ok and job.started and written is not None and written < job.started:
            outcome.skipped.append(job.run_dir)  # another sweep finished it before we began
        elif ok:
            outcome.done.append(job.run_dir)
        else:
            outcome.failed.append((job.run_dir, message))
        if on_done is not None:
            on_done(job, ok, message)

    if prepared:
        launch(prepared, started, done)
    return outcome
