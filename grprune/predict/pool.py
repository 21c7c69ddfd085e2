"""The featurizing workers of a screen (:mod:`grprune.predict.stream`): input chunks featurized in
worker processes (:func:`grprune.predict.chunk.featurize_rows`), in input order, a few
tasks ahead of the scoring.

A worker that dies (RDKit crashing on a molecule, the kernel's out-of-memory killer) is
noticed, never waited for: the pool is a :class:`concurrent.futures.ProcessPoolExecutor`,
whose tasks raise :class:`~concurrent.futures.process.BrokenProcessPool` when a worker
dies (``multiprocessing.Pool`` replaces the worker and waits for its lost task for ever).
Each task the break cost is then featurized again in a worker of its own, and a task that
kills that one too row by row, each in a worker alone: the row whose worker dies is not
scored (status ``unparsable SMILES``, reason :data:`WORKER_DIED`), and the screen goes on.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterator

import numpy as np

from grprune.data.workers import WORKER_DIED, end_process_pool, process_pool
from grprune.predict.memory import UNPARSABLE
from grprune.predict.chunk import ChunkGraphs, featurize_rows

#: SMILES per worker task
TASK_ROWS = 1000


def featurized(chunks: Iterator[Any], smiles_col: Callable, workers: int,
               task: Callable = featurize_rows) -> Iterator[tuple[Any, ChunkGraphs]]:
    """Each input chunk with its graphs (``task``: :func:`featurize_rows`), in order.

    Parameters
    ----------
    chunks : iterator of pandas.DataFrame
    smiles_col : callable
        A chunk -> its SMILES cells (list of str).
    workers : int
        Worker processes (0 or 1: this process, where a crash ends the screen); they
        featurize at most ``2 * workers`` tasks of :data:`TASK_ROWS` rows ahead of the
        caller, so the input is never read far ahead.
    task : callable
        The featurizer of one task (a list of SMILES -> :class:`ChunkGraphs`).
    """
    if workers <= 1:
        for df in chunks:
            yield df, task(smiles_col(df))
        return
    from concurrent.futures import CancelledError
    from concurrent.futures.process import BrokenProcessPool
    pools = [process_pool(workers)]  # the live pool last; a broken one is replaced
    pending: deque = deque()  # (df or None, SMILES, pool, future); df on a chunk's last task

    def submit(df) -> None:
        smiles = smiles_col(df)
        tasks = [smiles[i:i + TASK_ROWS] for i in range(0, len(smiles), TASK_ROWS)] or [[]]
        for k, rows in enumerate(tasks):
            try:
                future = pools[-1].submit(task, rows)
            except BrokenProcessPool:  # broken since the last take: a new pool from here
                end_process_pool(pools.pop())
                pools.append(process_pool(workers))
                future = pools[-1].submit(task, rows)
            pending.append((df if k == len(tasks) - 1 else None, rows, pools[-1], future))

    def take() -> tuple[Any, ChunkGraphs]:
        last, rows, pool, future = pending.popleft()
        try:
            return last, future.result()
        except (BrokenProcessPool, CancelledError):  # each task of a broken pool, in order
            # (CancelledError: the broken pool was ended before it failed the task)
            if pool is pools[-1]:  # the first of them: the next tasks go to a new pool
                end_process_pool(pools.pop())
                pools.append(process_pool(workers))
            return last, _alone(task, rows)

    try:
        parts: list[ChunkGraphs] = []
        for df in chunks:
            submit(df)
            while len(pending) > 2 * workers or (pending and pending[0][3].done()):
                last, part = take()
                parts.append(part)
                if last is not None:
                    yield last, ChunkGraphs.concat(parts)
                    parts = []
        while pending:
            last, part = take()
            parts.append(part)
            if last is not None:
                yield last, ChunkGraphs.concat(parts)
                parts = []
    finally:
        for pool in pools:
            end_process_pool(pool)


def _alone(task: Callable, rows: list) -> ChunkGraphs:
    """``task(rows)`` in a worker of its own; if that one dies too, each row in a worker
    alone, a row whose worker dies not scored (:data:`WORKER_DIED`)."""
    from concurrent.futures.process import BrokenProcessPool
    pool = process_pool(1)
    try:
        try:
            return pool.submit(task, rows).result()
        except BrokenProcessPool:
            pass
        parts, broken = [], True  # the pool is broken: each row gets a new one then
        for smiles in rows:
            if broken:
                end_process_pool(pool)
                pool, broken = process_pool(1), False
            try:
                parts.append(pool.submit(task, [smiles]).result())
            except BrokenProcessPool:
                parts.append(died([smiles]))
                broken = True
        return ChunkGraphs.concat(parts)
    finally:
        end_process_pool(pool)


def died(rows: list) -> ChunkGraphs:
    """The graphs of rows whose featurizing worker died: none, each row ``unparsable
    SMILES`` with the reason :data:`WORKER_DIED`."""
    from grprune.data.featurize import featurize_chunk
    n = len(rows)
    return ChunkGraphs([UNPARSABLE] * n, [WORKER_DIED] * n, [""] * n, np.zeros(n, dtype=bool),
                       np.zeros(0, dtype=np.int64), featurize_chunk([])[0])
