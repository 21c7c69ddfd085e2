"""The child's side of a ``grprune tune`` trial: report, and maybe prune, each epoch.

``grprune tune`` starts each trial as an ordinary ``python -m grprune run --config
<run_dir>/config.json --out <run_dir>`` child (as ``grprune sweep`` does), with the
environment variable :data:`TRIAL_ENV` naming the study and the trial::

    GRPRUNE_TUNE_TRIAL='{"storage": "sqlite:///runs/tune/study.db", "study": "tune",
                         "trial": 3, "parent": 41223, "pruner": "median", "epochs": 100}'

:func:`trial_hook` turns it into the trainer's epoch callback: once per epoch it reports
the validation metric (``record.scores["valid"][metric]``, the value the run selects on)
to the trial (``Trial.report(value, step=epoch)``), and when the study's pruner says so
it writes ``pruned.json`` (:class:`grprune.record.marks.PrunedRecord`) and raises
:class:`grprune.errors.RunPruned`, which ``grprune run`` reports in one line (exit 0). The
epoch's ``state.pt`` is already written, so a pruned run can be resumed to its end.

On Linux the child asks to be killed with its tune process (``PR_SET_PDEATHSIG``), so a
SIGKILLed tune leaves no orphan training against a trial the next tune re-asks.
"""

from __future__ import annotations

import json
import math
import os
import signal
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from grprune.errors import GrpruneError, RunPruned
from grprune.record.epoch import EpochRecord
from grprune.record.marks import PrunedRecord, write_pruned

#: the environment variable that makes a ``grprune run`` a tune trial
TRIAL_ENV = "GRPRUNE_TUNE_TRIAL"


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when ``parent`` exits; refuse to start when it
    already has."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: a trial may outlive its tune; the next tune waits for its lock
    if parent and os.getppid() != parent:
        raise GrpruneError("the grprune tune process that started this trial is gone; "
                           "run the tune command again")


#: what ``--pruner`` accepts
PRUNERS = ("median", "hyperband", "none")


def prune_after_default(epochs: int, warmup_epochs: int) -> int:
    """The epochs a trial runs before it may be pruned, by default: its ERM warm-up epochs
    (the selector has not acted yet, so their scores say nothing about its
    hyperparameters), and at least the first quarter of training, where one epoch's
    validation score is noisiest. Measured: without it, the median pruner stopped the
    best of 10 molbbbp trials at epoch 8 (``benchmarks/tune/pruning-molbbbp.md``)."""
    return max(int(warmup_epochs), int(epochs) // 4)


def make_pruner(name: str, epochs: int, after: int = 0) -> Any:
    """The Optuna pruner of ``--pruner name`` for runs of ``epochs`` epochs, pruning no
    trial before epoch ``after`` (0-based; ``--prune-after``).

    ``median``: ``MedianPruner(n_startup_trials=2, n_warmup_steps=after)`` (prune a trial
    whose epoch's value is worse than the median of earlier trials' at that epoch, once 2
    trials have ended); ``hyperband``: ``HyperbandPruner(min_resource=max(1, after),
    max_resource=epochs)``; ``none``. The study's storage does not keep its pruner, so the
    tune process and each trial's child both build it here, from the same values.
    """
    import optuna
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=max(0, after))
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=max(1, min(after, epochs)),
                                              max_resource=max(1, epochs))
    return optuna.pruners.NopPruner()


class TrialHook:
    """The epoch callback of one trial (module docstring).

    Parameters
    ----------
    storage, study : str
        Optuna storage URL and study name.
    trial : int
        The trial's number in the study.
    run_dir : Path
        The run directory (``pruned.json`` goes there).
    pruner : Any
        The study's pruner (:func:`make_pruner`).
    """

    def __init__(self, storage: str, study: str, trial: int, run_dir: Path,
                 pruner: Any) -> None:
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        st = optuna.storages.get_storage(storage)
        trial_id = st.get_trial_id_from_study_id_trial_number(
            st.get_study_id_from_name(study), trial)
        # a Trial of an existing trial id: Optuna's way to report from another process
        loaded = optuna.load_study(study_name=study, storage=st, pruner=pruner)
        self.trial = optuna.trial.Trial(loaded, trial_id)
        self.study, self.number, self.run_dir = study, trial, Path(run_dir)

    def __call__(self, record: EpochRecord) -> None:
        metric = record.metric
        value = record.scores.get("valid", {}).get(metric) if metric else None
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return  # nothing to judge this epoch by (validation undefined)
        self.trial.report(float(value), record.epoch)
        if not self.trial.should_prune():
            return
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        write_pruned(self.run_dir, PrunedRecord(
            epoch=record.epoch, value=float(value), metric=str(metric), study=self.study,
            trial=self.number, time=stamp))
        raise RunPruned(f"pruned by tune study {self.study!r} trial {self.number} after "
                        f"epoch {record.epoch} (valid {metric} {value:.4f})", record.epoch)


def trial_hook(run_dir: Path, environ: dict[str, str] | None = None
               ) -> Callable[[EpochRecord], None] | None:
    """The trial's epoch callback when :data:`TRIAL_ENV` is set, else None.

    Raises
    ------
    GrpruneError
        If the variable is malformed, optuna is missing, or the tune process is gone.
    """
    text = (os.environ if environ is None else environ).get(TRIAL_ENV)
    if not text:
        return None
    try:
        spec: Any = json.loads(text)
        storage, study, number = str(spec["storage"]), str(spec["study"]), int(spec["trial"])
        parent = int(spec.get("parent") or 0)
        pruner, epochs = str(spec.get("pruner", "median")), int(spec.get("epochs") or 1)
        after = int(spec.get("after") or 0)
        if pruner not in PRUNERS:
            raise ValueError(pruner)
    except (ValueError, KeyError, TypeError):
        raise GrpruneError(f"{TRIAL_ENV} is not a tune trial's JSON: {text[:100]}") from None
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise GrpruneError("a tune trial needs the optuna package: "
                           "pip install 'grprune[tune]'") from None
    _die_with_parent(parent)
    return TrialHook(storage, study, number, run_dir, make_pruner(pruner, epochs, after))
