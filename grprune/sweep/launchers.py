"""Launchers: run a sweep's jobs as child processes, locally or as Ray tasks.

A launcher is one function ``launch(jobs, on_start, on_done, **options)``. For each
job it calls ``job.prepare()``, starts ``python -m grprune ARGS``
(:func:`grprune.sweep.plan.start_child`), calls ``on_start(job)``, and, when the child
ends, ``on_done(job, returncode, error)`` (``error`` is the launcher's own message when
it lost the child, else None). When ``job.prepare()`` finds the run's lock held by another
process it starts no child and calls ``on_done(job, None, RUNNING_ELSEWHERE)``. Everything else (statuses, ``error.json``, the summary)
is shared, in :func:`grprune.sweep.plan.run_sweep`.

On ``KeyboardInterrupt`` a launcher stops its children and re-raises; their run
directories stay interrupted, and the next sweep resumes them.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from typing import Any, Callable, Iterable, Sequence

from grprune.errors import GrpruneError
from grprune.record.status import RUNNING_ELSEWHERE
from grprune.sweep.plan import Job, start_child, thread_env

OnStart = Callable[[Job], None]
OnDone = Callable[[Job, "int | None", "str | None"], None]
#: the end of a launcher's job iterable
_END: Any = object()
#: seconds a child gets to exit after SIGTERM before it is killed
GRACE_S = 10.0


def _stop(procs: Sequence) -> None:
    """Terminate child processes, then kill those still alive after :data:`GRACE_S`."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + GRACE_S
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:
            proc.kill()
            proc.wait()


def _prepared(job: Job, on_done: OnDone) -> bool:
    """``job.prepare()``; when another process holds the run, no child is started, nothing
    is written, and ``on_done(job, None, RUNNING_ELSEWHERE)`` reports it."""
    if job.prepare():
        return True
    on_done(job, None, RUNNING_ELSEWHERE)
    return False


class _Feed:
    """A launcher's jobs, read lazily: :meth:`take` returns the next prepared ones for the
    free slots; a ``None`` in the iterable means "nothing to start now"."""

    def __init__(self, jobs: Iterable["Job | None"]) -> None:
        self.queue, self.exhausted = iter(jobs), False

    def take(self, free: int, on_done: OnDone) -> list[Job]:
        """Up to ``free`` jobs, each prepared (:func:`_prepared`; one another process runs
        is reported to ``on_done`` and replaced by the next)."""
        out: list[Job] = []
        while not self.exhausted and len(out) < free:
            job = next(self.queue, _END)
            if job is _END:
                self.exhausted = True
            elif job is None:  # nothing to start now
                break
            elif _prepared(job, on_done):
                out.append(job)
        return out


def launch_local(jobs: Iterable["Job | None"], on_start: OnStart, on_done: OnDone, *,
                 workers: int = 1, poll_s: float = 0.2) -> None:
    """Run the jobs as local child processes, at most ``workers`` at a time.

    Parameters
    ----------
    jobs : iterable of Job or None
        In the order to start them. Read lazily, one job per free slot, so that a
        generator can make each job when it starts (``grprune tune`` asks its study for
        a trial then); a ``None`` means "nothing to start now": asked again after
        ``poll_s``. The launcher returns when the iterable is exhausted and every child
        has ended.
    on_start, on_done : callable
        See the module docstring.
    workers : int
        Children running at once.
    poll_s : float
        Seconds between checks for finished children.

    Raises
    ------
    KeyboardInterrupt
        After terminating the running children.
    """
    feed = _Feed(jobs)
    running: dict = {}  # Popen -> Job
    try:
        while not feed.exhausted or running:
            for job in feed.take(max(1, workers) - len(running), on_done):
                running[start_child(job.args, job.env, job.log, job.cwd)] = job
                on_start(job)
            time.sleep(poll_s)
            for proc in [p for p in running if p.poll() is not None]:
                on_done(running.pop(proc), proc.returncode, None)
    except BaseException:
        _stop(list(running))
        raise


def run_child(args: list[str], env: dict[str, str], log: str, cwd: str) -> int:
    """Run one child to its end (the body of a Ray task); returns its exit status.

    A cancelled task (``KeyboardInterrupt`` in the worker) terminates the child first.
    """
    import subprocess
    proc = start_child(args, env, log, cwd)
    try:
        while True:  # a timed wait, so that a cancellation is seen while the child runs
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                continue
    except BaseException:
        _stop([proc])
        raise


def ray_available() -> bool:
    """Whether ``import ray`` works."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def require_ray() -> None:
    """Raise a :class:`GrpruneError` that says how to install ray when it is missing."""
    if not ray_available():
        raise GrpruneError("--launcher ray needs the ray package: pip install 'grprune[ray]'")


def _ray_init(address: str | None, num_cpus: int) -> bool:
    """Connect to the Ray cluster at ``address``, or start a local instance of ``num_cpus``
    CPUs, unless Ray is initialized already; returns whether this call started it.

    Raises
    ------
    GrpruneError
        If ray is missing or the cluster cannot be reached.
    """
    require_ray()
    import ray

    if ray.is_initialized():
        return False
    try:
        if address:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level=logging.ERROR,
                     log_to_driver=False)
    except Exception as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise GrpruneError(f"cannot start {where}: {exc}") from None
    return True


def launch_ray(jobs: Iterable["Job | None"], on_start: OnStart, on_done: OnDone, *,
               workers: int = 1, address: str | None = None, cpus_per_run: float = 1.0,
               max_in_flight: int | None = None, poll_s: float = 0.5) -> None:
    """Run the jobs as Ray tasks, one task per job, each running the same child.

    Without ``address`` a local Ray instance with ``num_cpus = workers *
    cpus_per_run`` is started and shut down at the end; with one, the driver
    connects to that cluster (``"auto"``, ``"ray://host:10001"``, ...). Run
    directories must be on a file system that every Ray worker sees at the same path.

    Parameters
    ----------
    jobs : iterable of Job or None
        Read lazily, one job per free slot, as :func:`launch_local` reads them (``None``:
        nothing to submit now; ``grprune tune`` asks its study for a trial when a slot
        frees up).
    on_start, on_done : callable
        See the module docstring; ``on_start`` is called when a task is submitted.
    workers : int
        CPUs of a local instance (with ``cpus_per_run``).
    address : str, optional
        Address of a running Ray cluster.
    cpus_per_run : float
        ``num_cpus`` of each task.
    max_in_flight : int, optional
        Tasks submitted at once (default: ``workers`` on a local instance; on a cluster,
        all of a sequence's jobs, or ``workers`` of a lazy iterable).
    poll_s : float
        Seconds between checks for finished tasks.

    Raises
    ------
    GrpruneError
        If ray is missing or the cluster cannot be reached.
    KeyboardInterrupt
        After cancelling the tasks (their children are terminated).
    """
    import ray

    started_here = _ray_init(address, max(1, round(workers * cpus_per_run)))
    if max_in_flight is None:
        max_in_flight = (len(jobs) if address and isinstance(jobs, Sequence)
                         else max(1, workers))
    task = ray.remote(num_cpus=cpus_per_run, max_retries=0)(run_child)
    feed = _Feed(jobs)
    pending: dict = {}  # ObjectRef -> Job
    try:
        while not feed.exhausted or pending:
            for job in feed.take(max(1, max_in_flight) - len(pending), on_done):
                pending[task.remote(job.args, job.env, str(job.log), job.cwd)] = job
                on_start(job)
            if not pending:
                time.sleep(poll_s)
                continue
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=poll_s)
            for ref in ready:
                job = pending.pop(ref)
                try:
                    on_done(job, ray.get(ref), None)
                except ray.exceptions.RayError as exc:
                    text = str(exc).strip().splitlines()
                    on_done(job, None, f"Ray task failed: {text[-1] if text else exc}")
    except BaseException:
        for ref in pending:
            ray.cancel(ref)
        if pending:
            ray.wait(list(pending), num_returns=len(pending), timeout=GRACE_S)
        raise
    finally:
        if started_here:
            ray.shutdown()


def make_launcher(kind: str, workers: int | None = 1, address: str | None = None,
                  cpus_per_run: float = 1.0) -> tuple["functools.partial[None]", dict[str, str]]:
    """The launcher of ``--launcher kind`` (``launch(jobs, on_start, on_done)``) and the
    environment variables every child needs (its thread counts), as ``grprune sweep`` and
    ``grprune tune`` use them.

    ``local``: :func:`launch_local` with ``workers`` (None: 1) children, each with
    :func:`~grprune.sweep.plan.thread_env` threads. ``ray``: :func:`launch_ray`, each task
    with ``cpus_per_run`` CPUs and as many threads (unless ``OMP_NUM_THREADS`` is set), the
    ``GRPRUNE_*`` settings of this process passed on (a Ray worker does not inherit this
    environment); with ``address``, ``workers`` tasks in flight (None: all of a sequence
    of jobs). Whether ray is installed is checked when the launcher starts Ray.
    """
    n = workers or 1
    if kind == "ray":
        cpus = str(max(1, int(cpus_per_run)))
        env = thread_env(1) if "OMP_NUM_THREADS" in os.environ else {
            "OMP_NUM_THREADS": cpus, "MKL_NUM_THREADS": cpus}
        env.update({k: v for k, v in os.environ.items() if k.startswith("GRPRUNE_")
                    and not k.startswith(("GRPRUNE_RUN_", "GRPRUNE_SWEEP_",
                                          "GRPRUNE_TUNE_"))})
        return functools.partial(launch_ray, workers=n, address=address,
                                 cpus_per_run=cpus_per_run,
                                 max_in_flight=workers if address else None), env
    return functools.partial(launch_local, workers=n), thread_env(n)
