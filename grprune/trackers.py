"""Experiment trackers: TensorBoard and MLflow, behind one small interface.

In the spirit of PyKEEN's ``ResultTracker``: a :class:`Tracker` starts with the run's
configuration, logs each epoch's record (:class:`~grprune.record.epoch.EpochRecord`,
flattened to scalars: ``loss/total``, ``valid/rocauc``, ``valid/kept_edge_fraction``,
``lr``, ``epoch_time_s``, ..., at step = the epoch, from 0) and ends with the summary
(``final/valid``, ``final/test``, ...). ``grprune run|sweep|tune --log tensorboard[:DIR]
--log mlflow[:URI]`` chooses them (:func:`parse_logs`).

Nothing is logged twice, and a resumed run continues its tracker's run:

* TensorBoard writes into one directory per run (``<run_dir>/tensorboard`` by default,
  ``DIR/<run directory name>`` with ``tensorboard:DIR``); a resumed run opens a new event
  file there with ``purge_step=0`` and writes the epochs of ``results.jsonl`` again, so
  readers drop what the interrupted attempt wrote (TensorBoard's own restart rule) and
  see each epoch once.
* MLflow's run id is kept in the run directory (``trackers.json``,
  :mod:`grprune.record.marks`); a resumed run logs into the same MLflow run, only the
  epochs after the last step MLflow holds. The default store is a local SQLite database
  (``sqlite:///<dir>/mlflow.db``: the run directory's parent for ``run``, ``--out`` for
  ``sweep`` and ``tune``). A run whose environment names a parent
  (``GRPRUNE_MLFLOW_PARENT_RUN``, set by ``grprune tune``) is nested under it.

The packages are optional extras: :func:`require` raises a one-line
:class:`~grprune.errors.GrpruneError` naming ``pip install 'grprune[tensorboard]'`` or
``[mlflow]``.
"""

from __future__ import annotations

import math
import os
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping, Sequence

from grprune.errors import GrpruneError
from grprune.record.epoch import EpochRecord
from grprune.record.marks import read_trackers, write_tracker
from grprune.record.summary import RunSummary

#: the environment variables that nest a run's MLflow run and name its experiment
MLFLOW_PARENT_ENV, MLFLOW_EXPERIMENT_ENV = "GRPRUNE_MLFLOW_PARENT_RUN", "GRPRUNE_MLFLOW_EXPERIMENT"
#: the MLflow experiment of runs that name none
DEFAULT_EXPERIMENT = "grprune"


@dataclass(frozen=True)
class LogSpec:
    """One ``--log NAME[:WHERE]``: a tracker name and its place (None: the default)."""

    name: str
    where: str | None = None

    def text(self) -> str:
        """The option's value again (``mlflow:sqlite:///x/mlflow.db``)."""
        return self.name if self.where is None else f"{self.name}:{self.where}"


def flatten(record: EpochRecord) -> dict[str, float]:
    """An epoch's finite scalars as ``{key: value}``.

    >>> r = EpochRecord(epoch=0, lr=0.001, loss={"total": 0.5},
    ...                 scores={"valid": {"rocauc": 0.75, "kept_edge_fraction": 0.9}})
    >>> sorted(flatten(r).items())
    [('loss/total', 0.5), ('lr', 0.001), ('valid/kept_edge_fraction', 0.9), ('valid/rocauc', 0.75)]
    """
    out: dict[str, float] = {}

    def put(key: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                put(f"{key}/{k}", v)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value):
            out[key] = float(value)

    put("loss", record.loss)
    for split, scores in record.scores.items():
        put(split, scores)
    for key in ("lr", "epoch_time_s", "train_time_s"):
        put(key, getattr(record, key))
    return out


def summary_scalars(summary: RunSummary) -> dict[str, float]:
    """The selected model's scores as ``final/<split>`` (and ``final/best_epoch``)."""
    out = {f"final/{part}": float(v) for part in ("valid", "test", "train", "id_valid",
                                                   "id_test")
           if (v := summary.score(part)) is not None and math.isfinite(v)}
    if isinstance(summary.best_epoch, int):
        out["final/best_epoch"] = float(summary.best_epoch)
    return out


class Tracker(ABC):
    """One experiment tracker for one run directory.

    Subclasses set :attr:`name` and :attr:`extra` and implement :meth:`log_epoch`;
    :meth:`start` and :meth:`end` do nothing by default.
    """

    #: the name of ``--log NAME``
    name: ClassVar[str] = ""
    #: the package a user installs for it, and grprune's extra
    package: ClassVar[str] = ""

    def __init__(self, run_dir: Path, where: str | None = None) -> None:
        self.run_dir, self.where = Path(run_dir), where

    def start(self, config: Mapping[str, Any], first_epoch: int) -> None:
        """Begin (or continue) this run's tracking; ``first_epoch`` is the first epoch
        this process trains (0 for a new run). The epochs before it are then passed to
        :meth:`log_epoch` again (a tracker skips those it holds)."""

    @abstractmethod
    def log_epoch(self, record: EpochRecord) -> None:
        """Log one epoch (its record is in ``results.jsonl``)."""

    def end(self, summary: RunSummary | None) -> None:
        """Log the summary (None: the run stopped early, e.g. pruned) and close."""


class TensorBoardTracker(Tracker):
    """TensorBoard event files (``torch.utils.tensorboard.SummaryWriter``)."""

    name, package = "tensorboard", "tensorboard"

    def log_dir(self) -> Path:
        """``<run_dir>/tensorboard``, or ``<DIR>/<run directory name>``."""
        if self.where:
            return Path(self.where) / self.run_dir.name
        return self.run_dir / "tensorboard"

    def start(self, config: Mapping[str, Any], first_epoch: int) -> None:
        import json

        from torch.utils.tensorboard import SummaryWriter
        # a resumed run rewrites its earlier epochs (RunTrackers' catch-up) after a purge
        # from step 0, so what an interrupted attempt wrote is dropped by every reader
        again = self.log_dir().is_dir() and any(self.log_dir().glob("events.out.tfevents.*"))
        self.writer = SummaryWriter(str(self.log_dir()), purge_step=0 if again else None)
        self.writer.add_text("config", "```\n" + json.dumps(dict(config), indent=1,
                                                            default=str) + "\n```", 0)

    def log_epoch(self, record: EpochRecord) -> None:
        for key, value in flatten(record).items():
            self.writer.add_scalar(key, value, record.epoch)
        self.writer.flush()

    def end(self, summary: RunSummary | None) -> None:
        if summary is not None:
            step = max(0, (summary.epochs_run or 1) - 1)
            for key, value in summary_scalars(summary).items():
                self.writer.add_scalar(key, value, step)
        self.writer.close()


class MLflowTracker(Tracker):
    """An MLflow run (``mlflow.MlflowClient``), its id kept in ``trackers.json``."""

    name, package = "mlflow", "mlflow"

    def uri(self) -> str:
        """``where``, ``MLFLOW_TRACKING_URI``, or ``sqlite:///<run_dir parent>/mlflow.db``."""
        return (self.where or os.environ.get("MLFLOW_TRACKING_URI")
                or default_mlflow_uri(self.run_dir.absolute().parent))

    def start(self, config: Mapping[str, Any], first_epoch: int) -> None:
        from mlflow import MlflowClient
        from mlflow.entities import Param
        uri = self.uri()
        self.client = MlflowClient(tracking_uri=uri)
        state = read_trackers(self.run_dir).get(self.name, {})
        self.last = -1
        if state.get("run_id") and state.get("uri") == uri:
            self.run_id = str(state["run_id"])
            self.client.update_run(self.run_id, status="RUNNING")
            steps = [m.step for m in self.client.get_metric_history(self.run_id, "epoch")]
            self.last = max(steps, default=-1)
            return
        experiment = os.environ.get(MLFLOW_EXPERIMENT_ENV) or DEFAULT_EXPERIMENT
        exp_id = experiment_id(self.client, experiment)
        parent = os.environ.get(MLFLOW_PARENT_ENV)
        tags = {"mlflow.parentRunId": parent} if parent else {}
        tags["grprune.run_dir"] = str(self.run_dir.absolute())
        run = self.client.create_run(exp_id, run_name=self.run_dir.name, tags=tags)
        self.run_id = run.info.run_id
        write_tracker(self.run_dir, self.name, {"run_id": self.run_id, "uri": uri})
        params = [Param(k, str(v)[:500]) for k, v in flat_config(config).items()]
        for i in range(0, len(params), 100):
            self.client.log_batch(self.run_id, params=params[i:i + 100])

    def log_epoch(self, record: EpochRecord) -> None:
        from mlflow.entities import Metric
        if record.epoch <= self.last:  # an interrupted attempt logged it already
            return
        stamp = int(time.time() * 1000)
        values = {**flatten(record), "epoch": float(record.epoch)}  # "epoch": the resume mark
        self.client.log_batch(self.run_id, metrics=[
            Metric(k, v, stamp, record.epoch) for k, v in values.items()])
        self.last = record.epoch

    def end(self, summary: RunSummary | None) -> None:
        from mlflow.entities import Metric
        if summary is None:
            self.client.set_terminated(self.run_id, status="KILLED")
            return
        stamp = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[
            Metric(k, v, stamp, 0) for k, v in summary_scalars(summary).items()])
        self.client.set_terminated(self.run_id, status="FINISHED")


#: the trackers ``--log`` names
TRACKERS: dict[str, type[Tracker]] = {t.name: t for t in (TensorBoardTracker, MLflowTracker)}


def default_mlflow_uri(directory: Path) -> str:
    """``sqlite:///<directory>/mlflow.db`` (MLflow's local SQLite store)."""
    return f"sqlite:///{Path(directory).absolute() / 'mlflow.db'}"


def experiment_id(client: Any, name: str) -> str:
    """The id of MLflow experiment ``name``, created when missing."""
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    try:
        return str(client.create_experiment(name))
    except Exception:  # another process created it meanwhile
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A configuration mapping as ``{"train.lr": 0.001, ...}`` (MLflow params)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update(flat_config(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def require(name: str) -> None:
    """Raise a one-line :class:`GrpruneError` naming the extra when ``name``'s package is
    missing.

    Raises
    ------
    GrpruneError
        ``--log mlflow needs the mlflow package: pip install 'grprune[mlflow]'``.
    """
    package = TRACKERS[name].package
    try:
        __import__(package)
    except ImportError:
        raise GrpruneError(f"--log {name} needs the {package} package: "
                           f"pip install 'grprune[{name}]'") from None


def parse_logs(values: Iterable[str]) -> list[LogSpec]:
    """``--log`` values as :class:`LogSpec` s, each tracker once, packages checked.

    Raises
    ------
    GrpruneError
        On an unknown tracker, one given twice, or a missing package.

    >>> parse_logs([])
    []
    """
    from grprune.errors import did_you_mean
    out: list[LogSpec] = []
    for value in values:
        name, _, where = str(value).partition(":")
        name = name.strip().lower()
        if name not in TRACKERS:
            raise GrpruneError(f"--log {value}: unknown tracker {name!r}; choose one of "
                               f"{', '.join(TRACKERS)}.{did_you_mean(name, TRACKERS)}")
        if any(s.name == name for s in out):
            raise GrpruneError(f"--log {name} is given twice")
        out.append(LogSpec(name, where or None))
    for spec in out:  # the values are checked first, then what they need installed
        require(spec.name)
    return out


def for_children(specs: Sequence[LogSpec], root: Path,
                 experiment: str | None = None) -> list[LogSpec]:
    """The specs a sweep's or tune's children get: defaults made absolute and shared
    (``tensorboard:<root>/tensorboard``, ``mlflow:sqlite:///<root>/mlflow.db``), and the
    MLflow store and ``experiment`` (default ``$GRPRUNE_MLFLOW_EXPERIMENT`` or
    ``grprune``) created here first, so that children do not race to create them."""
    out = []
    for spec in specs:
        if spec.name == "tensorboard":
            where = str(Path(spec.where or root / "tensorboard").absolute())
        else:
            where = (spec.where or os.environ.get("MLFLOW_TRACKING_URI")
                     or default_mlflow_uri(root))
            from mlflow import MlflowClient
            Path(root).mkdir(parents=True, exist_ok=True)
            experiment_id(MlflowClient(tracking_uri=where), experiment
                          or os.environ.get(MLFLOW_EXPERIMENT_ENV) or DEFAULT_EXPERIMENT)
        out.append(LogSpec(spec.name, where))
    return out


def parent_run(uri: str, experiment: str, name: str, run_id: str | None = None,
               end: dict[str, float] | None = None) -> str:
    """An MLflow run for a tune study, under which its trials' runs nest.

    Parameters
    ----------
    uri, experiment, name : str
        Tracking URI, experiment (created when missing) and run name.
    run_id : str, optional
        The study's parent run from an earlier invocation: continued, not duplicated.
    end : dict, optional
        Metrics to log before marking the run finished (the best value).

    Returns
    -------
    str
        The run id.
    """
    from mlflow import MlflowClient
    from mlflow.entities import Metric
    client = MlflowClient(tracking_uri=uri)
    if run_id is None:
        run_id = client.create_run(experiment_id(client, experiment), run_name=name).info.run_id
    if end is None:
        client.update_run(run_id, status="RUNNING")
    else:
        stamp = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(k, v, stamp, 0) for k, v in end.items()])
        client.set_terminated(run_id, status="FINISHED")
    return str(run_id)


def log_args(specs: Sequence[LogSpec]) -> list[str]:
    """``["--log", "tensorboard:/x", ...]``: the child command's options."""
    return [a for s in specs for a in ("--log", s.text())]


class RunTrackers:
    """The trackers of one run: started at its first epoch, one ``on_epoch`` for all.

    Parameters
    ----------
    specs : sequence of LogSpec
    run_dir : Path
    """

    def __init__(self, specs: Sequence[LogSpec], run_dir: Path) -> None:
        self.trackers = [TRACKERS[s.name](Path(run_dir), s.where) for s in specs]
        self.run_dir, self.started = Path(run_dir), False

    def _start(self, first_epoch: int) -> None:
        """Start every tracker, then catch up with the epochs ``results.jsonl`` holds
        before ``first_epoch`` (a resumed run, or one killed between writing an epoch's
        line and logging it)."""
        from grprune.record.rundir import RunDir
        rundir = RunDir(self.run_dir)
        config = rundir.read_config() or {}
        earlier = [r for r in rundir.records() if r.epoch < first_epoch]
        for t in self.trackers:
            t.start(config, first_epoch)
            for record in earlier:
                t.log_epoch(record)
        self.started = True

    def on_epoch(self, record: EpochRecord) -> None:
        """Log one epoch to every tracker (the trainer's epoch callback)."""
        if not self.trackers:
            return
        if not self.started:
            self._start(record.epoch)
        for t in self.trackers:
            t.log_epoch(record)

    def end(self, summary: RunSummary | None) -> None:
        """End every started tracker (a run resumed after its last epoch starts them)."""
        if not self.trackers:
            return
        if not self.started:
            if summary is None:
                return
            self._start(summary.epochs_run or 0)  # every epoch is caught up
        for t in self.trackers:
            t.end(summary)
