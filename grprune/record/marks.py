"""Two small records of a run directory beside its results: ``pruned.json`` and
``trackers.json``.

``pruned.json`` (:class:`PrunedRecord`, version 1) is written by a ``grprune tune`` trial
whose pruner stopped it (:mod:`grprune.tune.trial`); the run directory's state is then
``pruned`` (:meth:`grprune.record.rundir.RunDir.status`), not ``failed``::

    {"version": 1, "epoch": 1, "value": 0.7312, "metric": "rocauc",
     "study": "tune", "trial": 3, "time": "2026-01-02T03:04:05Z"}

``trackers.json`` holds what an experiment tracker needs to continue its own run when the
run resumes (:mod:`grprune.trackers`)::

    {"version": 1, "mlflow": {"run_id": "9f1c...", "uri": "sqlite:///runs/mlflow.db"}}

Both are written atomically; a missing or unreadable file reads as None / ``{}``. Both are
removed when a run starts over (:data:`grprune.record.rundir.RUN_FILES`), and
``pruned.json`` also when a pruned run is resumed to its end.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grprune.record.files import PRUNED, TRACKERS, atomic_write_json, read_json

#: the layout of both files
MARKS_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class PrunedRecord:
    """A run stopped by a tune's pruner (``pruned.json``).

    Attributes
    ----------
    epoch : int
        The last epoch trained (from 0); ``state.pt`` resumes after it.
    value : float or None
        The validation metric reported at that epoch.
    metric : str
        Its name (``rocauc``, ``rmse``, ...).
    study, trial : str, int
        The Optuna study and trial number that pruned it.
    time : str
        When (ISO 8601, UTC).
    """

    epoch: int
    value: float | None = None
    metric: str = ""
    study: str = ""
    trial: int = -1
    time: str = ""

    def to_dict(self) -> dict[str, Any]:
        """What ``pruned.json`` holds."""
        return {"version": MARKS_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Any) -> "PrunedRecord | None":
        """The record of a parsed ``pruned.json``; None when it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("epoch"), int):
            return None
        value = data.get("value")
        return cls(epoch=data["epoch"],
                   value=float(value) if isinstance(value, (int, float)) else None,
                   metric=str(data.get("metric", "")), study=str(data.get("study", "")),
                   trial=int(data["trial"]) if isinstance(data.get("trial"), int) else -1,
                   time=str(data.get("time", "")))


def read_pruned(run_dir: str | Path) -> PrunedRecord | None:
    """``run_dir``'s ``pruned.json``, or None when the run was not pruned."""
    path = Path(run_dir) / PRUNED
    return PrunedRecord.from_dict(read_json(path)) if path.is_file() else None


def write_pruned(run_dir: str | Path, record: PrunedRecord) -> None:
    """Write ``pruned.json`` (the holder of the run's lock)."""
    atomic_write_json(Path(run_dir) / PRUNED, record.to_dict())


def remove_pruned(run_dir: str | Path) -> None:
    """Remove ``pruned.json``: the run goes on."""
    (Path(run_dir) / PRUNED).unlink(missing_ok=True)


def read_trackers(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """``{tracker name: its state}`` from ``trackers.json`` (``{}`` when none)."""
    data = read_json(Path(run_dir) / TRACKERS)
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if k != "version" and isinstance(v, dict)}


def write_tracker(run_dir: str | Path, name: str, state: dict[str, Any]) -> None:
    """Set one tracker's state in ``trackers.json`` (atomically)."""
    data: dict[str, Any] = {"version": MARKS_VERSION, **read_trackers(run_dir)}
    data[name] = state
    atomic_write_json(Path(run_dir) / TRACKERS, data)
