"""``grprune tune``'s flow: an Optuna study whose trials are ordinary run directories.

Each trial asks the study for values of the search space (:mod:`grprune.tune.space`),
resolves them as ``grprune sweep`` resolves a grid point (:func:`grprune.sweep.expansion.expand`
of a one-point grid: same config hash, same run directory
``<out>/<dataset>/<method>-seed<seed>-<hash>``, added to ``<out>/sweep.json``), and runs it
with sweep's machinery (:class:`grprune.sweep.plan.Job`, the local launcher, fed lazily,
and :func:`grprune.sweep.plan.finish_job`). The child reports the validation metric each
epoch and may be pruned (:mod:`grprune.tune.trial`). The objective is the finished run's
``summary.json`` ``valid``: the validation metric at its own selection epoch, never test;
the direction is the metric's (:mod:`grprune.record.metricinfo`).

The trial records its run directory (user attributes ``grprune.run_dir``,
``grprune.hash``) and its owner (``grprune.owner``: host, pid and start time of the tune
process).

Killed at any moment, nothing is lost; the same command continues the study:

* a RUNNING trial whose owner is a dead process on this host is settled from its run
  directory: finished -> told its value; pruned -> told pruned; otherwise it is marked
  FAIL and its parameters are enqueued again (Optuna's ``enqueue_trial``, the same
  re-asking as ``RetryFailedTrialCallback``), so the next trial has the same config
  hash and resumes from the run directory's ``state.pt``;
* a trial whose values name a run directory that is already finished (or pruned) is told
  that result without training; one whose run directory another trial of this process is
  training waits for that run and is told its result;
* a seeded sampler starts its random stream again in every process, so a resumed study's
  sampler is seeded with ``--sampler-seed`` plus the number of trials the study already has: the
  second process does not propose the first one's values again (a fresh study's first
  trials are the same as before);
* the study keeps the configuration its first trial point resolves to, without the
  searched keys (``grprune.base``: the part the config hash covers, flattened): a command
  whose preset, fixed values or defaults resolve to another one is refused (exit 2, the
  differing keys named), since its trials would not be comparable with the study's
  (:func:`grprune.tune.spec.check_base`);
* trials are started while the distinct configurations of the COMPLETE + PRUNED + RUNNING
  trials number fewer than ``--trials``; FAIL trials (a run that crashed, a stale trial)
  do not count, and neither does a trial whose values repeat an earlier trial's
  configuration (TPE on a space of choices asks again; the trial is told that result,
  user attribute ``grprune.repeat_of``), so the study ends with exactly ``--trials``
  distinct configurations trained, finished or pruned, unless the space has fewer or the
  sampler asks :data:`MAX_REPEATS` times in a row for ones it has (:attr:`Tuner.note`).
  (Several machines on one database may overshoot by at most one trial each when they ask
  at the same moment.)
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from grprune.errors import GrpruneError
from grprune.record.marks import read_pruned
from grprune.record.metricinfo import higher_is_better
from grprune.record.rundir import RunDir
from grprune.record.status import RUNNING_ELSEWHERE
from grprune.sweep.expansion import Configuration
from grprune.sweep.plan import Job, child_args, finish_job, run_dir_of, write_plan
from grprune.tune.spec import TuneSpec, check_base, configuration, make_study, metric_of
from grprune.tune.trial import TRIAL_ENV, prune_after_default

#: asks in a row that repeat a configuration of the study before the study ends short
MAX_REPEATS = 100
__all__ = ["Tuner"]


def _start_time(pid: int) -> str:
    """The start time of process ``pid`` (``/proc``; ``""`` elsewhere or when gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner() -> str:
    """This process as a trial owner: ``host:pid:start``."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def owner_dead(text: str) -> bool:
    """Whether the owner ``host:pid:start`` is a process of this host that is gone."""
    host, _, rest = str(text).partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine's: its own tune settles it
    pid = int(pid_text)
    if Path("/proc").is_dir():
        return _start_time(pid) != start or not start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass
class Running:
    """A trial this process runs: the Optuna trial, its configuration and run directory."""

    trial: Any
    conf: Configuration
    run_dir: Path
    params: dict[str, str]
    started: float = 0.0


Callback = Callable[..., None]


class Tuner:
    """Run a study's missing trials (module docstring).

    Parameters
    ----------
    spec : TuneSpec
    on_start : callable, optional
        ``on_start(number, run_dir, params)``.
    on_end : callable, optional
        ``on_end(number, state, value, detail, seconds)``; ``state`` is ``COMPLETE``,
        ``PRUNED`` or ``FAIL``.
    """

    def __init__(self, spec: TuneSpec, on_start: Callback | None = None,
                 on_end: Callback | None = None) -> None:
        self.spec = spec
        self.on_start = on_start or (lambda *a: None)
        self.on_end = on_end or (lambda *a: None)
        first = configuration(spec, spec.space.suggest(_First()))  # refused here when bad
        self.metric = metric_of(first)
        self.direction = "maximize" if higher_is_better(self.metric) else "minimize"
        self.epochs = first.cfg.train.epochs
        self.prune_after = (spec.prune_after if spec.prune_after is not None else
                            prune_after_default(self.epochs, first.cfg.train.warmup_epochs))
        size = spec.space.size()
        if spec.trials is None:
            if spec.sampler != "grid" or size is None:
                raise GrpruneError("--trials is needed (only --sampler grid defaults to the "
                                   "grid's size)")
            spec.trials = size
        self.study = make_study(spec, self.direction, self.epochs, self.prune_after)
        check_base(self.study, spec, first)
        self.study.set_user_attr("grprune.metric", self.metric)
        self.running: dict[int, Running] = {}
        self.waiting: list[tuple[float, Running]] = []
        self.failures = 0
        #: asks of this process that repeated a configuration of the study: all, in a row
        self.repeated = self.repeats = 0
        #: why the study ended short of ``--trials`` distinct configurations ("" if not)
        self.note = ""

    # -- counting and settling -------------------------------------------------------------
    def _counted_dirs(self, but: int | None = None) -> dict[str, int]:
        """``{run directory: first trial number}`` of the COMPLETE, PRUNED and RUNNING
        trials of the study (all machines), trial ``but`` left out; a trial not yet given
        its run directory stands for itself."""
        from optuna.trial import TrialState
        states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        dirs: dict[str, int] = {}
        for t in self.study.get_trials(deepcopy=False, states=states):
            if t.number != but:
                dirs.setdefault(str(t.user_attrs.get("grprune.run_dir", f"#{t.number}")),
                                t.number)
        return dirs

    def counted(self) -> int:
        """The distinct configurations (run directories) among the COMPLETE, PRUNED and
        RUNNING trials: a trial that repeats an earlier one's configuration is told that
        result, but the budget counts trainings, not asks."""
        return len(self._counted_dirs())

    def exhausted(self, counted: int) -> bool:
        """Whether the study, with ``counted`` distinct configurations (:meth:`counted`),
        cannot reach ``--trials``: the space has no more, or the sampler asked
        :data:`MAX_REPEATS` times in a row for configurations the study already has
        (:attr:`note` says which)."""
        size = self.spec.space.size()
        if size is not None and counted >= size:
            self.note = f"the space has {size} configurations, all tried"
        elif self.repeats >= MAX_REPEATS:
            self.note = (f"the sampler asked {self.repeats} times in a row for "
                         f"configurations the study has")
        return bool(self.note)

    def _settle(self, number: int, run_dir: Path) -> str | None:
        """Tell a trial the result its run directory already holds: the state told, or
        None when the run is neither finished nor pruned."""
        from optuna.trial import TrialState
        st = RunDir(run_dir).status()
        if st.state == "finished" and st.summary is not None:
            value = st.summary.valid
            if value is None or value != value:
                self.study.tell(number, state=TrialState.FAIL)
                return "FAIL"
            self.study.tell(number, float(value))
            return "COMPLETE"
        if st.state == "pruned":
            self.study.tell(number, state=TrialState.PRUNED)
            return "PRUNED"
        return None

    def recover(self) -> int:
        """Settle this host's RUNNING trials whose tune process died; returns how many
        were re-asked (enqueued again)."""
        from optuna.trial import TrialState
        again = 0
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            who = t.user_attrs.get("grprune.owner")
            if who is None or not owner_dead(who):
                continue
            rel = t.user_attrs.get("grprune.run_dir")
            if rel is not None and self._settle(t.number, self.spec.root / rel):
                continue
            self.study.tell(t.number, state=TrialState.FAIL)
            if set(t.params) == set(self.spec.space.axes):
                self.study.enqueue_trial(dict(t.params),
                                         user_attrs={"grprune.retry_of": t.number})
                again += 1
        return again

    # -- starting trials ---------------------------------------------------------------------
    def _ask(self) -> Running | None:
        """Ask one trial; settle it at once when its run directory has its result."""
        trial = self.study.ask()
        params = self.spec.space.suggest(trial)
        try:
            conf = configuration(self.spec, params)
        except GrpruneError as exc:
            from optuna.trial import TrialState
            self.study.tell(trial, state=TrialState.FAIL)
            self.failures += 1
            self.on_end(trial.number, "FAIL", None, str(exc), 0.0)
            return None
        run_dir = run_dir_of(conf, self.spec.root)
        rel = run_dir.relative_to(self.spec.root).as_posix()
        first = self._counted_dirs(but=trial.number).get(rel)
        if first is not None:  # asked again: told that configuration's result, not counted
            trial.set_user_attr("grprune.repeat_of", first)
            self.repeated, self.repeats = self.repeated + 1, self.repeats + 1
        else:
            self.repeats = 0
        trial.set_user_attr("grprune.run_dir", rel)
        trial.set_user_attr("grprune.hash", conf.hash)
        trial.set_user_attr("grprune.owner", owner())
        write_plan(self.spec.root, expand_one(conf), self.spec.command)
        item = Running(trial, conf, run_dir, params)
        state = self._settle(trial.number, run_dir)
        if state is not None:
            self.on_start(trial.number, run_dir, params)
            self.on_end(trial.number, state, _value(run_dir), "already in its run directory",
                        0.0)
            return None
        return item

    def _job(self, item: Running) -> Job:
        """The trial's child: ``grprune run`` of its run directory, told its trial."""
        for record in RunDir(item.run_dir).records():  # a resumed run's earlier epochs
            value = record.scores.get("valid", {}).get(self.metric)
            if isinstance(value, (int, float)) and value == value:
                item.trial.report(float(value), record.epoch)
        env = {**self.spec.env, TRIAL_ENV: json.dumps(
            {"storage": self.spec.storage_url, "study": self.spec.study,
             "trial": item.trial.number, "pruner": self.spec.pruner,
             # a Ray task's child has a Ray worker, not this process, as its parent
             "parent": os.getpid() if self.spec.launcher == "local" else 0,
             "epochs": self.epochs, "after": self.prune_after})}
        job = Job(item.conf, item.run_dir, env,
                  args=child_args(item.conf, item.run_dir) + self.spec.child_args)
        self.running[id(job)] = item
        return job

    def jobs(self) -> Iterator[Job | None]:
        """The launcher's jobs, made as slots free up (None: nothing to start now)."""
        while True:
            now = time.monotonic()
            ready = [w for w in self.waiting if w[0] <= now]
            if ready:
                self.waiting.remove(ready[0])
                item = ready[0][1]
                if self._training(item):
                    self.waiting.append((now + 2.0, item))
                    yield None
                    continue
                state = self._settle(item.trial.number, item.run_dir)
                if state is not None:  # the run it waited for ended: that is its result
                    self.on_start(item.trial.number, item.run_dir, item.params)
                    self.on_end(item.trial.number, state, _value(item.run_dir),
                                "already in its run directory", 0.0)
                    continue
                yield self._job(item)
                continue
            counted = self.counted()  # one read of the study a turn
            if self.failures >= max(1, self.spec.trials or 1) or (
                    counted >= (self.spec.trials or 0)) or self.exhausted(counted):
                if not self.running and not self.waiting:
                    return
                yield None
                continue
            asked = self._ask()
            if asked is None:
                continue
            if self._training(asked):  # the sampler asked again for a configuration in training
                self.waiting.append((now + 2.0, asked))
                continue
            yield self._job(asked)

    def _training(self, item: Running) -> bool:
        """Whether another trial of this process trains ``item``'s run directory now (the
        sampler asked for the same configuration again): ``item`` waits for that run's
        result instead of resuming it, pruned or not, as a second run."""
        return any(r.run_dir == item.run_dir for r in self.running.values())

    # -- ending trials -----------------------------------------------------------------------
    def started(self, job: Job) -> None:
        item = self.running[id(job)]
        item.started = time.time()
        self.on_start(item.trial.number, item.run_dir, item.params)

    def done(self, job: Job, returncode: int | None, error: str | None) -> None:
        """Tell the study how the trial's child ended."""
        from optuna.trial import TrialState
        item = self.running.pop(id(job))
        secs = time.time() - item.started if item.started else 0.0
        if error == RUNNING_ELSEWHERE:  # an orphan of a killed tune still holds the run
            self.waiting.append((time.monotonic() + 2.0, item))
            return
        if read_pruned(item.run_dir) is not None:
            self.study.tell(item.trial, state=TrialState.PRUNED)
            pruned = read_pruned(item.run_dir)
            self.on_end(item.trial.number, "PRUNED", None,
                        f"after epoch {pruned.epoch if pruned else '?'}", secs)
            return
        ok, message = finish_job(job, returncode, error)
        state = self._settle(item.trial.number, item.run_dir) if ok else None
        if state is None:
            self.study.tell(item.trial, state=TrialState.FAIL)
            state = "FAIL"
        if state == "FAIL":
            self.failures += 1
            message = message or "no validation score"
        self.on_end(item.trial.number, state, _value(item.run_dir), message, secs)

    def run(self) -> None:
        """Run trials until the study has ``trials`` finished or pruned ones.

        Raises
        ------
        KeyboardInterrupt
            After stopping the children (their trials stay RUNNING; the next tune
            settles them).
        """
        from grprune.sweep.launchers import make_launcher
        launch, env = make_launcher(self.spec.launcher, self.spec.workers, self.spec.address,
                                    self.spec.cpus_per_run)
        self.recover()
        self.spec.env = {**env, **self.spec.env}
        launch(self.jobs(), self.started, self.done)


class _First:
    """A stand-in trial that picks each dimension's first choice or low end (to resolve
    and check one configuration before the study is made)."""

    def suggest_categorical(self, key: str, choices: list) -> Any:
        return choices[0]

    def suggest_int(self, key: str, low: int, high: int, **kw: Any) -> int:
        return low

    def suggest_float(self, key: str, low: float, high: float, **kw: Any) -> float:
        return low


def expand_one(conf: Configuration) -> Any:
    """A one-configuration :class:`~grprune.sweep.expansion.Expansion` (for ``sweep.json``)."""
    from grprune.sweep.expansion import Expansion
    return Expansion([conf], 1, 0, [])


def _value(run_dir: Path) -> float | None:
    summary = RunDir(run_dir).summary()
    return summary.valid if summary is not None else None
