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

import logging
import time
from typing import Any, Callable, Iterable, Sequence

from grprune.errors import GrpruneError
from grprune.record.rundir import RUNNING_ELSEWHERE
from grprune.sweep.plan import Job, start_child

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
    queue = iter(jobs)
    exhausted = False
    running: dict = {}  # Popen -> Job
    try:
        while not exhausted or running:
            while not exhausted and len(running) < max(1, workers):
                job = next(queue, _END)
                if job is _END:
                    exhausted = True
                    break
                if job is None:  # nothing to start now
                    break
                if not _prepared(job, on_done):
                    continue
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


def launch_ray(jobs: Sequence[Job], on_start: OnStart, on_done: OnDone, *,
               workers: int = 1, address: str | None = None, cpus_per_run: float = 1.0,
               max_in_flight: int | None = None, poll_s: float = 0.5) -> None:
    """Run the jobs as Ray tasks, one task per job, each running the same child.

    Without ``address`` a local Ray instance with ``num_cpus = workers *
    cpus_per_run`` is started and shut down at the end; with one, the driver
    connects to that cluster (``"auto"``, ``"ray://host:10001"``, ...). Run
    directories must be on a file system that every Ray worker sees at the same path.

    Parameters
    ----------
    jobs : sequence of Job
    on_start, on_done : callable
        See the module docstring; ``on_start`` is called when a task is submitted.
    workers : int
        CPUs of a local instance (with ``cpus_per_run``).
    address : str, optional
        Address of a running Ray cluster.
    cpus_per_run : float
        ``num_cpus`` of each task.
    max_in_flight : int, optional
        Tasks submitted at once (default: ``workers`` on a local instance, all on a
        cluster).
    poll_s : float
        Seconds between checks for finished tasks.

    Raises
    ------
    GrpruneError
        If ray is missing or the cluster cannot be reached.
    KeyboardInterrupt
        After cancelling the tasks (their children are terminated).
    """
    require_ray()
    import ray

    started_here = False
    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, round(workers * cpus_per_run)),
                         include_dashboard=False, logging_level=logging.ERROR,
                         log_to_driver=False)
        except Exception as exc:
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise GrpruneError(f"cannot start {where}: {exc}") from None
        started_here = True
    if max_in_flight is None:
        max_in_flight = len(jobs) if address else max(1, workers)
    task = ray.remote(num_cpus=cpus_per_run, max_retries=0)(run_child)
    queue = list(jobs)
    pending: dict = {}  # ObjectRef -> Job
    try:
        while queue or pending:
            while queue and len(pending) < max(1, max_in_flight):
                job = queue.pop(0)
                if not _prepared(job, on_done):
                    continue
                pending[task.remote(job.args, job.env, str(job.log), job.cwd)] = job
                on_start(job)
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
