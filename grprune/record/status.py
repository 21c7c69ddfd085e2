"""A run directory's state, judged from its files alone (shared by ``run``, ``sweep``,
``collect``, ``explain`` and ``predict`` through :meth:`grprune.record.rundir.RunDir.status`),
and the reader's probe of its lock (:func:`lock_held`).

A reader's module: it writes nothing and takes no lock. Taking the lock, and reading and
writing the run's files, is :class:`~grprune.record.rundir.RunDir`'s.

States (:data:`STATES`), checked in this order:

``empty``
    No directory, or one holding only a sweep's log (``sweep.log``) and the lock file.
``foreign``
    A file, a non-empty directory without ``config.json`` (or with ``summary.json`` but
    no ``config.json``), or a ``config.json`` that is JSON but no grprune configuration:
    not a grprune run directory.
``corrupt``
    ``config.json`` that is not readable JSON, or a ``summary.json`` that is not readable
    or does not belong to the configuration.
``outdated``
    A run older than grprune reads (:data:`~grprune.record.runconfig.MIN_VERSION`).
``other-config``
    A run of another configuration than the one asked about (config hash differs).
``running``
    Another process holds the run's lock (:meth:`~grprune.record.rundir.RunDir.lock`).
``finished``
    ``summary.json`` is there and sound.
``pruned``
    A tune's pruner stopped it (``pruned.json``, :mod:`grprune.record.marks`); resumable.
``failed``
    A sweep recorded a failure (``error.json``) and no summary followed.
``interrupted``
    ``config.json`` without a summary: stopped (resumable when ``state.pt`` is there).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from grprune.record.error import ErrorRecord
from grprune.record.files import (CONFIG, ERROR, LOG, PRUNED, RESULTS, STATE, SUMMARY,
                                  read_records, read_run_file)
from grprune.record.runconfig import RunConfig, check_config, format_problem
from grprune.record.settings import config_hash
from grprune.record.summary import RunSummary, check_summary

#: a run directory's lock file (:meth:`grprune.record.rundir.RunDir.lock`)
LOCK = ".lock"
#: files a directory may hold and still count as empty
HOUSEKEEPING = (LOG, LOCK)
#: the reason given for a run directory whose lock another process holds
RUNNING_ELSEWHERE = "another process is running it (its lock is held)"
STATES = ("empty", "foreign", "corrupt", "outdated", "other-config", "running", "finished",
          "pruned", "failed", "interrupted")


@dataclass(frozen=True)
class Status:
    """A run directory's state and why; with its configuration (in the current layout)
    and, when finished, its summary."""

    state: str
    reason: str = ""
    config: RunConfig | None = None
    summary: RunSummary | None = None

    def __str__(self) -> str:
        return f"{self.state}: {self.reason}" if self.reason else self.state


def one_line(text: Any, limit: int = 200) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def load_json(path: Path) -> tuple[Any, str | None]:
    """Parsed JSON, or ``(None, reason)`` when the file cannot be read or parsed."""
    try:
        return json.loads(read_run_file(path)), None  # regular, bounded
    except OSError as exc:
        return None, f"cannot read {path.name}: {exc.strerror or exc}"
    except (ValueError, RecursionError) as exc:  # JSON, UTF-8, an integer's digits, depth
        return None, f"{path.name} is not valid JSON ({one_line(exc, 80)})"


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


def rerun_hint(path: Path, force: bool = True) -> str:
    """``re-run it with `grprune run --config DIR/config.json --out DIR --force``` for the
    run directory ``path``."""
    return (f"re-run it with `grprune run --config {path / CONFIG} --out {path}"
            f"{' --force' if force else ''}`")


def status_of(path: Path, cfg: Mapping[str, Any] | None = None, held: bool = False) -> Status:
    """The state of the run directory ``path`` (module docstring); with ``cfg``, also
    whether it holds that configuration (``other-config`` when not). ``held``: the caller
    holds the lock itself, so it does not make the run ``running``."""
    p = path
    if p.exists() and not p.is_dir():
        return Status("foreign", "exists and is not a directory")
    names = [x.name for x in p.iterdir()] if p.is_dir() else []
    if not [n for n in names if n not in HOUSEKEEPING]:
        return Status("empty")
    if CONFIG not in names:
        if SUMMARY in names:
            return Status("foreign", f"{SUMMARY} without {CONFIG}")
        if ERROR in names:
            return Status("failed", _error_message(p))
        other = sorted(n for n in names if n not in HOUSEKEEPING)[0]
        return Status("foreign", f"a non-empty directory without {CONFIG} ({other}, ...)")
    old, why = load_json(p / CONFIG)
    if why is not None:
        return Status("corrupt", f"{CONFIG} is corrupt: {why}")
    why = check_config(old)
    if why is not None:
        return Status("foreign", why)
    why = format_problem(old)  # below the oldest version read: re-made, not read
    if why is not None:
        return Status("outdated", f"{why}; {rerun_hint(p)}")
    old = RunConfig.from_dict(old)  # older layouts read in the current one
    if cfg is not None and config_hash(old) != config_hash(cfg):
        return Status("other-config", f"holds another configuration (hash {old.hash})",
                      config=old)
    if not held and lock_held(p):
        return Status("running", RUNNING_ELSEWHERE, config=old)
    if SUMMARY in names:
        summary, why = load_json(p / SUMMARY)
        why = why or check_summary(summary, old)
        if why is not None:
            return Status("corrupt", why, config=old)
        return Status("finished", config=old, summary=RunSummary.from_dict(summary))
    if PRUNED in names:
        return Status("pruned", "stopped by a tune's pruner; resumable", config=old)
    if ERROR in names:
        return Status("failed", _error_message(p), config=old)
    return Status("interrupted", _progress(p, old), config=old)


def _error_message(path: Path) -> str:
    data, why = load_json(path / ERROR)
    if why is not None:
        return f"failed ({why})"
    if not isinstance(data, dict):
        return one_line(data)
    return one_line(ErrorRecord.from_dict(data).message or json.dumps(data))


def _progress(path: Path, cfg: RunConfig) -> str:
    """``"3/100 epochs; state.pt present: ...; last written 2 min ago"``."""
    parts = [f"{len(read_records(path / RESULTS))}/"
             f"{cfg.setting('train.epochs', '?')} epochs"]
    parts.append("state.pt present: resumable with the same command"
                 if (path / STATE).is_file() else "no state.pt yet")
    mtimes = [p.stat().st_mtime for p in path.iterdir() if p.is_file()]
    if mtimes:
        parts.append(f"last written {_age(time.time() - max(mtimes))} ago")
    return "; ".join(parts)


def lock_held(path: Path) -> bool:
    """Whether another process holds the lock of the run directory ``path`` now.

    A reader's question, so it opens nothing for writing: the lock file is opened
    read-only and probed with a non-blocking shared ``flock``, which fails while a
    writer holds its exclusive one (:meth:`~grprune.record.rundir.RunDir.lock`). So a
    finished run reads on a read-only mount, or with another user's ``.lock``. A lock file
    that can't be opened at all tells nothing, and counts as not held.
    """
    lock = path / LOCK
    if not lock.exists():
        return False
    try:
        import fcntl
    except ImportError:  # no flock (Windows): filelock's probe, which opens it for writing
        return _locked_by_filelock(lock)
    try:
        fd = os.open(lock, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))  # not on Windows
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # and with it the shared lock
    return False


def _locked_by_filelock(lock_file: Path) -> bool:
    from filelock import FileLock, Timeout
    lock = FileLock(str(lock_file))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False
