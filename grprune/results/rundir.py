"""One judge of a run directory's state, shared by ``run``, ``sweep``, ``collect``,
``explain`` and ``predict``, and the lock that keeps two processes out of one run.

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
``other-config``
    A run of another configuration than the one asked about (config hash differs).
``running``
    Another process holds the run's lock (:meth:`RunDir.lock`).
``finished``
    ``summary.json`` is there and sound.
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
from typing import Any

from grprune.errors import GrpruneError

from grprune.record.epoch import EpochRecord
from grprune.record.files import CONFIG, ERROR, LOG, RESULTS, STATE, SUMMARY, read_records
# the checks of config.json and summary.json belong to the record layer; re-exported here
from grprune.record.runconfig import RunConfig, check_config  # noqa: F401  (re-exported)
from grprune.record.settings import config_hash
from grprune.record.summary import RunSummary, check_summary  # noqa: F401  (re-exported)

LOCK = ".lock"
#: files a directory may hold and still count as empty
HOUSEKEEPING = (LOG, LOCK)
#: the reason given for a run directory whose lock another process holds
RUNNING_ELSEWHERE = "another process is running it (its lock is held)"
STATES = ("empty", "foreign", "corrupt", "other-config", "running", "finished", "failed",
          "interrupted")


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
        return json.loads(path.read_text()), None
    except OSError as exc:
        return None, f"cannot read {path.name}: {exc.strerror or exc}"
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"{path.name} is not valid JSON ({one_line(exc, 80)})"


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


class RunDir:
    """A run directory: its files, its state and its lock.

    Parameters
    ----------
    path : str or Path
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def _error_message(self) -> str:
        data, why = load_json(self.path / ERROR)
        if why is not None:
            return f"failed ({why})"
        msg = data.get("message") or json.dumps(data) if isinstance(data, dict) else data
        return one_line(msg)

    def _progress(self, cfg: RunConfig) -> str:
        """``"3/100 epochs; state.pt present: ...; last written 2 min ago"``."""
        parts = [f"{len(read_records(self.path / RESULTS))}/"
                 f"{cfg.setting('train.epochs', '?')} epochs"]
        parts.append("state.pt present: resumable with the same command"
                     if (self.path / STATE).is_file() else "no state.pt yet")
        mtimes = [p.stat().st_mtime for p in self.path.iterdir() if p.is_file()]
        if mtimes:
            parts.append(f"last written {_age(time.time() - max(mtimes))} ago")
        return "; ".join(parts)

    def status(self, cfg: dict | None = None, held: bool = False) -> Status:
        """The directory's state (module docstring); with ``cfg``, also whether it holds
        that configuration (``other-config`` when not). ``held``: the caller holds the
        lock itself, so it does not make the run ``running``."""
        p = self.path
        if p.exists() and not p.is_dir():
            return Status("foreign", "exists and is not a directory")
        names = [x.name for x in p.iterdir()] if p.is_dir() else []
        if not [n for n in names if n not in HOUSEKEEPING]:
            return Status("empty")
        if CONFIG not in names:
            if SUMMARY in names:
                return Status("foreign", f"{SUMMARY} without {CONFIG}")
            if ERROR in names:
                return Status("failed", self._error_message())
            other = sorted(n for n in names if n not in HOUSEKEEPING)[0]
            return Status("foreign", f"a non-empty directory without {CONFIG} ({other}, ...)")
        old, why = load_json(p / CONFIG)
        if why is not None:
            return Status("corrupt", f"{CONFIG} is corrupt: {why}")
        why = check_config(old)
        if why is not None:
            return Status("foreign", why)
        old = RunConfig.from_dict(old)  # older layouts read in the current one
        if cfg is not None and config_hash(old) != config_hash(cfg):
            return Status("other-config", f"holds another configuration (hash {old.hash})",
                          config=old)
        if not held and self.locked():
            return Status("running", RUNNING_ELSEWHERE,
                          config=old)
        if SUMMARY in names:
            summary, why = load_json(p / SUMMARY)
            why = why or check_summary(summary, old)
            if why is not None:
                return Status("corrupt", why, config=old)
            return Status("finished", config=old, summary=RunSummary.from_dict(summary))
        if ERROR in names:
            return Status("failed", self._error_message(), config=old)
        return Status("interrupted", self._progress(old), config=old)

    def records(self) -> list[EpochRecord]:
        """``results.jsonl``, one typed record per epoch (a torn last line is skipped)."""
        return [EpochRecord.from_dict(r) for r in read_records(self.path / RESULTS)]

    def _lock(self):
        from filelock import FileLock
        return FileLock(str(self.path / LOCK))

    def locked(self) -> bool:
        """Whether another process holds the run's lock now.

        A reader's question, so it opens nothing for writing: the lock file is opened
        read-only and probed with a non-blocking shared ``flock``, which fails while a
        writer holds its exclusive one (:meth:`lock`). So a finished run reads on a
        read-only mount, or with another user's ``.lock``. A lock file that can't be
        opened at all tells nothing, and counts as not held.
        """
        path = self.path / LOCK
        if not path.exists():
            return False
        try:
            import fcntl
        except ImportError:  # no flock (Windows): filelock's probe, which opens it for writing
            return self._locked_by_filelock()
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # and with it the shared lock
        return False

    def _locked_by_filelock(self) -> bool:
        from filelock import Timeout
        lock = self._lock()
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return True
        lock.release()
        return False

    def lock(self):
        """The run's lock, held while a process trains it (a context manager).

        Raises
        ------
        GrpruneError
            If another process holds it.
        """
        from filelock import Timeout
        self.path.mkdir(parents=True, exist_ok=True)
        lock = self._lock()
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise GrpruneError(f"{self.path} is being run by another process (its lock "
                               f"{self.path / LOCK} is held); wait for it, or choose another "
                               f"--out") from None
        return _Held(lock)


class _Held:
    def __init__(self, lock) -> None:
        self.lock = lock

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()
