"""Worker processes of featurization: the pools of training's chunked featurizer and
scaffolds (:func:`grprune.data.featurize.featurize_ogb`,
:func:`~grprune.data.featurize.parallel_scaffolds`) and of the streamed screen
(:mod:`grprune.predict.pool`).

A pool is a :class:`concurrent.futures.ProcessPoolExecutor` (:func:`process_pool`), forked
where the platform can: a worker that dies (RDKit crashing on a molecule, the kernel's
out-of-memory killer) breaks the pool, and the tasks' ``result()`` raise
:class:`~concurrent.futures.process.BrokenProcessPool` (``multiprocessing.Pool`` replaces
the worker and waits for its lost task for ever). :func:`ordered_map` then runs each
task the break cost again, alone, and names the one whose worker dies again
(:class:`WorkerDied`). Workers leave Ctrl-C to the parent, end quietly on SIGTERM, and
end when their parent is gone.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from typing import Any, Callable, Generator, Sequence


#: the reason of a molecule whose featurizing worker died on it (it is not scored, or
#: skipped in training)
WORKER_DIED = ("its featurizing process died on it (RDKit crashed on the molecule, or the "
               "memory ran out)")


class WorkerDied(Exception):
    """The worker process of task ``index`` died, and died again when the task ran alone
    (:func:`ordered_map`): the task itself kills it."""

    def __init__(self, index: int) -> None:
        super().__init__(f"the worker process of task {index} died")
        self.index = index


def _worker_signals() -> None:
    """A worker's signals: Ctrl-C (SIGINT, sent to the whole process group) is the parent's
    to handle, and SIGTERM ends the worker at once and quietly (the default action), not
    through the ``Terminated`` handler it inherited from ``grprune``'s command (which would
    print a traceback per worker). The parent ends its workers itself
    (:func:`end_process_pool`)."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def process_pool(workers: int, start: bool = False):
    """A :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes, forked
    where the platform can, each worker's signals set by :func:`_worker_signals`: a worker
    that dies (RDKit crashing, the kernel's out-of-memory killer) breaks the pool, and its
    tasks' ``result()`` raises :class:`~concurrent.futures.process.BrokenProcessPool`
    instead of waiting for ever, as ``multiprocessing.Pool`` does for a lost task.

    ``start``: fork the workers now (one task run), before the caller starts a thread (a
    progress bar's), since a fork copies no thread but may copy a lock one holds.
    """
    from concurrent.futures import ProcessPoolExecutor
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_executor_worker)
    if start:
        pool.submit(int).result()  # forks every worker (fork: all are made at once)
    return pool


def _executor_worker() -> None:
    """A :func:`process_pool` worker's start: its signals (:func:`_worker_signals`), and a
    watch that ends it once its parent is gone (killed with SIGKILL, say): unlike
    ``multiprocessing.Pool``'s, an executor's worker would otherwise wait for tasks for
    ever, holding the parent's stdout and stderr open."""
    import threading
    import time
    _worker_signals()
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="grprune-parent-watch", daemon=True).start()


def end_process_pool(pool) -> None:
    """End a :func:`process_pool` now: its tasks are cancelled, its workers sent SIGTERM
    (they end quietly) and waited for; None is none."""
    if pool is None:
        return
    procs = list((pool._processes or {}).values())  # the stdlib has no terminate before 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join()


def ordered_map(task: Callable[[Any], Any], items: Sequence, workers: int,
                pool=None, rescue: Callable[[Any, int], Any] | None = None
                ) -> Generator[Any, None, None]:
    """``map(task, items)`` in ``workers`` worker processes, results in input order, at
    most ``2 * workers`` tasks in flight.

    A worker that dies breaks the pool: the tasks in flight then run again, each alone in
    a fresh worker first (the one that kills it again is given to ``rescue``, or named),
    the rest in a new pool.

    Parameters
    ----------
    task : callable
        A picklable function of one item.
    items : sequence
    workers : int
        At least 1.
    pool : ProcessPoolExecutor, optional
        The first pool (:func:`process_pool`, e.g. started before a progress thread);
        ended, as every pool made here, when the iteration ends.
    rescue : callable, optional
        ``rescue(item, index)``: the result of a task whose worker died alone too (e.g.
        its rows without the one that kills it, :func:`find_killer`); it runs here.

    Raises
    ------
    WorkerDied
        Without ``rescue``: naming the index in ``items`` of the task whose worker died,
        alone, too.
    """
    from concurrent.futures import CancelledError
    from concurrent.futures.process import BrokenProcessPool
    pool = pool if pool is not None else process_pool(workers)
    todo: deque = deque(range(len(items)))  # indices not submitted yet, in order
    pending: deque = deque()  # (index, future), in order

    def alone(k: int) -> Any:
        try:
            return _alone(task, items[k], k)
        except WorkerDied:
            if rescue is None:
                raise
            return rescue(items[k], k)

    try:
        while todo or pending:
            while todo and len(pending) < 2 * workers:
                try:
                    future = pool.submit(task, items[todo[0]])
                except BrokenProcessPool:  # broken since: its tasks in flight say so below
                    break
                pending.append((todo.popleft(), future))
            if not pending:  # broken with no task in flight: the next one alone
                end_process_pool(pool)
                result = alone(todo.popleft())
                pool = process_pool(workers)
                yield result
                continue
            k, future = pending.popleft()
            try:
                result = future.result()
            except (BrokenProcessPool, CancelledError):  # which task killed it is unknown:
                end_process_pool(pool)  # k's alone first, then the others in a new pool
                result = alone(k)
                todo.extendleft(reversed([j for j, _ in pending]))
                pending.clear()
                pool = process_pool(workers)
            yield result
    finally:
        end_process_pool(pool)


def _alone(task: Callable[[Any], Any], item: Any, index: int) -> Any:
    """``task(item)`` in a worker of its own.

    Raises
    ------
    WorkerDied
        If that worker dies too.
    """
    from concurrent.futures.process import BrokenProcessPool
    pool = process_pool(1)
    try:
        return pool.submit(task, item).result()
    except BrokenProcessPool:
        raise WorkerDied(index) from None
    finally:
        end_process_pool(pool)


def run_alone(task: Callable[[Any], Any], item: Any) -> Any:
    """``task(item)`` in a worker process of its own.

    Raises
    ------
    WorkerDied
        If the worker dies (index 0).
    """
    return _alone(task, item, 0)


def find_killer(task: Callable[[Any], Any], rows: Sequence,
                wrap: Callable[[list], Any] = list) -> int | None:
    """The index in ``rows`` of the row whose task, ``task(wrap(rows[i:i + 1]))``, kills
    a worker of its own, found by halving (about ``log2(len(rows))`` lone workers); None
    when no single row does (the worker died of something else: the memory ran out)."""
    lo, hi = 0, len(rows)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            _alone(task, wrap(list(rows[lo:mid])), lo)
            lo = mid  # the first half passes: the killer is in the second
        except WorkerDied:
            hi = mid
    if hi - lo < 1:
        return None
    try:
        _alone(task, wrap(list(rows[lo:hi])), lo)
    except WorkerDied:
        return lo
    return None
