"""A run directory: the one reader and writer of its files, the one way to its state
(shared by ``run``, ``sweep``, ``collect``, ``explain`` and ``predict``), and the lock
that keeps two processes out of one run.

No other module opens a run's files (``tests/test_record.py`` checks that none names
them): the trainer, ``run``, ``sweep``, ``collect``, ``curves`` and inference read and
write through :class:`RunDir`'s methods, in the formats of :mod:`grprune.record`.
Writers hold the lock (:meth:`RunDir.lock`); readers take none.

Its state (:meth:`RunDir.status`: ``empty``, ``finished``, ``interrupted``, ...) is
judged by :mod:`grprune.record.status`, which also probes the lock for readers.
"""

from __future__ import annotations

import os
import pickle
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, NoReturn

from grprune.errors import GrpruneError
from grprune.record.epoch import EpochRecord
from grprune.record.error import ErrorRecord
from grprune.record.files import (
    CALIBRATION, CHECKPOINT, CONFIG, EDGE_PROBS, ERROR, PRUNED, TRACKERS, LAST_CHECKPOINT, LOG,
    RESULTS, STATE, SUMMARY,
    append_record,
    atomic_save,
    atomic_write_json,
    damaged_zip_member,
    file_sha256,
    keep_records,
    read_json,
    read_records,
)
from grprune.record.locks import hold_lock
from grprune.record.runconfig import RunConfig
from grprune.record.status import LOCK, Status, lock_held, rerun_hint, status_of
from grprune.record.summary import RunSummary

if TYPE_CHECKING:  # trainstate imports torch: read_state imports it when it runs
    from grprune.record.calibration import CalibrationRecord
    from grprune.record.trainstate import TrainState

#: what a run writes as it trains: removed when a run starts over
RUN_FILES = (RESULTS, STATE, CHECKPOINT, LAST_CHECKPOINT, EDGE_PROBS, SUMMARY, CALIBRATION,
             PRUNED, TRACKERS)
#: files whose presence makes a directory a run directory (for collect's search)
MARKERS = frozenset((CONFIG, SUMMARY, ERROR, STATE, PRUNED))
#: where a state.pt that was refused is moved, so that nothing is silently discarded
REJECTED_STATE = "state.rejected.pt"


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

    def status(self, cfg: Mapping[str, Any] | None = None, held: bool = False) -> Status:
        """The directory's state (:func:`grprune.record.status.status_of`); with ``cfg``,
        also whether it holds that configuration (``other-config`` when not). ``held``: the
        caller holds the lock itself, so it does not make the run ``running``."""
        return status_of(self.path, cfg, held)

    # -- what is there ------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        """``config.json``: what ``grprune run --config`` takes to re-run the run."""
        return self.path / CONFIG

    @property
    def checkpoint_path(self) -> Path:
        """``checkpoint.pt``: the selected epoch's model."""
        return self.path / CHECKPOINT

    @property
    def log_path(self) -> Path:
        """``sweep.log``: a sweep child's stderr, appended by the sweep."""
        return self.path / LOG

    def has_config(self) -> bool:
        return (self.path / CONFIG).is_file()

    def has_summary(self) -> bool:
        """Whether ``summary.json`` is there (the run finished; :meth:`status` judges it)."""
        return (self.path / SUMMARY).is_file()

    def has_state(self) -> bool:
        """Whether ``state.pt`` is there (an interrupted run can resume)."""
        return (self.path / STATE).is_file()

    def has_checkpoint(self) -> bool:
        return (self.path / CHECKPOINT).is_file()

    def trained(self) -> bool:
        """Whether anything of training is there (epochs, state, a checkpoint or a
        summary), as opposed to a ``config.json`` alone."""
        return any((self.path / n).exists() for n in (RESULTS, STATE, CHECKPOINT, SUMMARY))

    def summary_mtime(self) -> float | None:
        """When ``summary.json`` was written (seconds since the epoch); None without one."""
        try:
            return (self.path / SUMMARY).stat().st_mtime
        except OSError:
            return None

    @staticmethod
    def marks_a_run(filenames: Iterable[str]) -> bool:
        """Whether a directory's file names include one that only run directories hold
        (:data:`MARKERS`): how ``collect`` finds runs while it walks a tree."""
        return not MARKERS.isdisjoint(filenames)

    def rerun_hint(self, force: bool = True) -> str:
        """``re-run it with `grprune run --config DIR/config.json --out DIR --force```."""
        return rerun_hint(self.path, force)

    # -- reading (no lock, nothing opened for writing) -------------------------------------
    def read_config(self) -> Any | None:
        """``config.json`` as parsed JSON (no checks: :meth:`status` judges it); None when
        absent or unreadable."""
        return read_json(self.path / CONFIG)

    def summary(self) -> RunSummary | None:
        """``summary.json``, typed; None when absent or unreadable (no checks against the
        configuration: :meth:`status` makes them)."""
        data = read_json(self.path / SUMMARY)
        return RunSummary.from_dict(data) if isinstance(data, dict) else None

    def error(self) -> ErrorRecord | None:
        """``error.json``, typed (:class:`~grprune.record.error.ErrorRecord`: a failure a
        sweep or the run recorded); None without one, or when it is unreadable or not a
        JSON object."""
        data = read_json(self.path / ERROR)
        return ErrorRecord.from_dict(data) if isinstance(data, dict) else None

    def calibration(self) -> "CalibrationRecord | None":
        """``calibration.json`` (:func:`grprune.record.calibration.read_calibration`: None
        without one; one-line GrpruneError when unreadable or fitted on another checkpoint)."""
        from grprune.record.calibration import read_calibration
        return read_calibration(self.path / CALIBRATION, self.path / CHECKPOINT)

    def record_lines(self) -> list[dict]:
        """``results.jsonl`` as written, one dict per epoch (a torn last line is skipped)."""
        return read_records(self.path / RESULTS)

    def records(self) -> list[EpochRecord]:
        """``results.jsonl``, one typed record per epoch (a torn last line is skipped)."""
        return [EpochRecord.from_dict(r) for r in self.record_lines()]

    def resumed_records(self, n: int) -> list[EpochRecord]:
        """The first ``n`` records of ``results.jsonl``: the epochs ``state.pt`` counts.

        Raises
        ------
        GrpruneError
            If the file no longer holds them, one per epoch from 0 (a damaged line):
            resuming would leave a gap in the run's epochs.
        """
        records = self.records()[:n]
        epochs = [r.epoch for r in records]
        if epochs != list(range(n)):
            k = next((i for i, e in enumerate(epochs) if e != i), len(epochs))
            found = (f"line {k + 1} is epoch {epochs[k]}" if k < len(epochs) else
                     f"it ends after {k} sound line{'s' if k != 1 else ''}")
            raise GrpruneError(
                f"{self.path / RESULTS} does not hold the {n} epoch records {STATE} counts "
                f"(epochs 0..{n - 1}): {found}, where epoch {k} belongs (a damaged or "
                f"missing line). Resuming would leave a gap: restore the file from a copy, "
                f"or run the same command with --force to start this run over")
        return records

    def read_state(self, epochs: int | None = None) -> TrainState:
        """``state.pt`` (:mod:`grprune.record.trainstate`), read without running code from it, and
        checked as a whole before anything of it is used.

        :func:`torch.load` with ``weights_only=True`` accepts tensors and plain Python
        values only, so a pickle that would run code (a run directory copied from
        someone else) is refused before anything of it runs. What loads is then checked
        by :func:`grprune.record.trainstate.state_problem`: every key and its type, ``epoch``
        in ``[0, epochs - 1]``, the record count, the selected epoch, the random streams
        (the model's shapes are checked against the model by the trainer,
        :func:`grprune.resume.model_problem`, through :meth:`reject_state`), and it is
        returned typed (:class:`~grprune.record.trainstate.TrainState`).

        Parameters
        ----------
        epochs : int, optional
            The run's ``train.epochs``.

        Raises
        ------
        GrpruneError
            If the file cannot be read that way (corrupt, its archive's CRC-32 checksums
            do not match, or not what grprune writes) or its contents are not a state of
            this run (:meth:`reject_state`).
        """
        from grprune.record.trainstate import TrainState, state_problem
        path = self.path / STATE
        bad = damaged_zip_member(path)  # torch.load does not check the archive's checksums
        reason = None if bad is None else f"it is damaged ({bad} does not match its checksum)"
        state = None
        if reason is None:
            reason, state = _torch_state(path)
        if state is not None:
            problem = state_problem(state, epochs)
            if problem is None:
                return TrainState.from_dict(state, epochs)
            self.reject_state(problem, loaded=True)
        self.reject_state(reason or "it is not a grprune training state")

    def reject_state(self, reason: str, loaded: bool = False) -> NoReturn:
        """Move ``state.pt`` aside to ``state.rejected.pt`` (nothing is silently
        discarded) and say why, so that the same command starts the run over.

        Parameters
        ----------
        reason : str
            What is wrong with it, in words (``"its epoch is -5, outside ..."``).
        loaded : bool
            It was read (tensors and plain values only) but its contents are refused.

        Raises
        ------
        GrpruneError
            Always: the message names the file, the reason and what to do.
        """
        path = self.path / STATE
        aside = path.with_name(REJECTED_STATE)
        if path.exists():
            path.replace(aside)
        done = ("nothing of it was used" if loaded else "so no code in it ran")
        raise GrpruneError(f"{path} was not loaded, {done}: {reason}. It was moved to "
                           f"{aside.name}; run the same command again to start this run over")

    def require_checkpoint(self) -> Path:
        """``checkpoint.pt``'s path.

        Raises
        ------
        GrpruneError
            If there is none (the message says how to re-run).
        """
        if not self.checkpoint_path.is_file():
            raise GrpruneError(f"{self.path} has no {CHECKPOINT}; {self.rerun_hint()}")
        return self.checkpoint_path

    def read_checkpoint(self, map_location: Any = "cpu") -> dict:
        """``checkpoint.pt``: the selected model's ``state_dict``, read with
        ``weights_only=True`` after its archive's CRC-32 checksums are checked.

        Raises
        ------
        GrpruneError
            If it is missing, damaged, truncated or not a torch file (the message says
            how to re-run).
        """
        import torch
        ckpt = self.require_checkpoint()
        damaged = damaged_zip_member(ckpt)  # torch.load would read changed weights unnoticed
        if damaged is not None:
            raise GrpruneError(f"cannot load {ckpt}: it is damaged ({damaged} does not match "
                               f"its checksum); {self.rerun_hint()}")
        try:
            return torch.load(ckpt, map_location=map_location, weights_only=True)
        except Exception as exc:  # a torn file
            raise GrpruneError(f"cannot load {ckpt} ({error_detail(exc)}): it is truncated or "
                               f"damaged; {self.rerun_hint()}") from None

    def edge_arrays(self) -> dict[str, Any] | None:
        """The arrays of ``edge_probs.npz`` (:func:`grprune.evaluation.edge_probs_arrays`);
        None when the file is absent, unreadable or damaged (a truncated or corrupt zip):
        the caller recomputes them from the model."""
        import numpy as np
        try:
            with np.load(self.path / EDGE_PROBS) as npz:
                return {k: npz[k] for k in npz.files}
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error):
            return None

    # -- writing (the lock's holder) --------------------------------------------------------
    def write_config(self, cfg: RunConfig | Mapping[str, Any]) -> None:
        """Write ``config.json`` (a :class:`RunConfig` or a configuration mapping)."""
        atomic_write_json(self.path / CONFIG,
                          cfg.to_dict() if isinstance(cfg, RunConfig) else cfg)

    def keep_records(self, n: int) -> None:
        """Cut ``results.jsonl`` to its first ``n`` lines, their bytes unchanged (``n`` 0
        removes it): before a run trains its first epoch, or resumes after the ``n``
        epochs its ``state.pt`` counts (:meth:`resumed_records` checked them), lines of
        later epochs and a torn last line (a crash mid-append) go. Atomic, and nothing is
        written when the file already holds just those lines."""
        keep_records(self.path / RESULTS, n)

    def append_record(self, record: EpochRecord) -> None:
        """Append one epoch's line (:meth:`EpochRecord.to_dict`) to ``results.jsonl``,
        flushed and fsync'ed (:func:`grprune.record.files.append_bytes`): a crash mid-append
        leaves at most a torn last line, which readers skip and :meth:`keep_records`
        removes on resume."""
        append_record(self.path / RESULTS, record.to_dict())

    def save_state(self, state: TrainState) -> None:
        """Write ``state.pt`` (:func:`grprune.resume.state_of`;
        :meth:`~grprune.record.trainstate.TrainState.to_dict` on disk)."""
        self._torch_save(STATE, state.to_dict())

    def save_checkpoint(self, state_dict: Mapping[str, Any], last: bool = False) -> None:
        """Write the model's ``state_dict`` to ``checkpoint.pt`` (the selected epoch), or
        with ``last`` to ``checkpoint-last.pt``."""
        self._torch_save(LAST_CHECKPOINT if last else CHECKPOINT, state_dict)

    def write_edge_arrays(self, arrays: Mapping[str, Any]) -> None:
        """Write ``edge_probs.npz`` (compressed) from
        :func:`grprune.evaluation.edge_probs_arrays`."""
        import numpy as np
        atomic_save(self.path / EDGE_PROBS, lambda f: np.savez_compressed(f, **arrays))

    def write_summary(self, summary: RunSummary) -> None:
        """Write ``summary.json``: the run is finished."""
        atomic_write_json(self.path / SUMMARY, summary.to_dict())

    def write_calibration(self, record: "CalibrationRecord") -> None:
        """Write ``calibration.json``, atomically, stamped with ``checkpoint.pt``'s sha256."""
        from dataclasses import replace
        sha = file_sha256(self.path / CHECKPOINT)
        atomic_write_json(self.path / CALIBRATION, replace(record, checkpoint_sha256=sha).to_dict())

    def write_error(self, record: ErrorRecord | Mapping[str, Any]) -> None:
        """Write ``error.json``: why the run failed (:class:`ErrorRecord`, or a mapping of
        its fields: ``message``, ``kind``, ...)."""
        data = record.to_dict() if isinstance(record, ErrorRecord) else dict(record)
        atomic_write_json(self.path / ERROR, data)

    def remove_error(self) -> None:
        (self.path / ERROR).unlink(missing_ok=True)

    def remove_state(self) -> None:
        """Remove ``state.pt`` (a finished run needs no resuming)."""
        (self.path / STATE).unlink(missing_ok=True)

    def remove_if_untrained(self) -> None:
        """Remove the directory of a run refused before training, if it holds no more than
        the lock and ``config.json`` (a diverged run's ``error.json`` stays), so that
        ``collect`` lists no unfinished run that never started; another process's files
        arriving meanwhile leave it in place."""
        try:
            if {p.name for p in self.path.iterdir()} <= {LOCK, CONFIG}:
                (self.path / CONFIG).unlink(missing_ok=True)
                (self.path / LOCK).unlink(missing_ok=True)
                self.path.rmdir()
        except OSError:
            pass

    def clear(self) -> None:
        """Remove what training wrote (:data:`RUN_FILES`): the run starts over."""
        for name in RUN_FILES:
            (self.path / name).unlink(missing_ok=True)

    def _torch_save(self, name: str, obj: Any) -> None:
        import torch
        atomic_save(self.path / name, lambda f: torch.save(obj, f))

    def locked(self) -> bool:
        """Whether another process holds the run's lock now
        (:func:`grprune.record.status.lock_held`: a reader's probe, which opens nothing
        for writing)."""
        return lock_held(self.path)

    def lock(self):
        """The run's lock, held while a process trains it (a context manager).

        Raises
        ------
        GrpruneError
            If another process holds it.
        """
        if self.path.is_symlink() and not self.path.exists():
            raise GrpruneError(f"{self.path} is a symbolic link to {os.readlink(self.path)}, "
                               f"which does not exist; create that folder, remove the link, "
                               f"or choose another --out")
        self.path.mkdir(parents=True, exist_ok=True)
        return hold_lock(self.path / LOCK, f"{self.path} is being run by another process "
                                           f"(its lock {self.path / LOCK} is held); wait for "
                                           f"it, or choose another --out")


def error_detail(exc: BaseException) -> str:
    """``"Type: first sentence of its message"`` (at most 160 characters of it): an
    exception in one line, for messages that name a file that could not be read."""
    detail = (str(exc).strip().splitlines() or [""])[0].split(". ")[0][:160]
    return f"{type(exc).__name__}{': ' + detail if detail else ''}"


def _torch_state(path: Path) -> tuple[str | None, dict | None]:
    """``(None, state)`` of a ``state.pt`` that loads with ``weights_only``, else
    ``(why not, None)``."""
    import torch
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note on foreign pickle protocols
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        return "it holds objects other than tensors and plain values, or is no torch file", None
    except Exception as exc:  # truncated or unreadable file
        detail = (str(exc).strip().splitlines() or ["no detail"])[0][:120]
        return f"it is truncated or unreadable ({type(exc).__name__}: {detail})", None
    if not isinstance(state, dict) or "epoch" not in state:
        return "it is not a grprune training state", None
    return None, state

