"""Many SMILES to flat OGB feature arrays: chunked, process-parallel, no per-molecule graph.

:func:`featurize_ogb` is :func:`grprune.data.molecules.smiles_to_graph` (OGB's
:func:`ogb.utils.smiles2graph`) for a whole column of SMILES at once. It returns
one :class:`FlatGraphs` (node and edge features, edge index and per-graph counts
as numpy arrays) that becomes a :class:`~grprune.data.packed.PackedGraphs` over the
same arrays, with no ``DGLGraph`` at all (:meth:`FlatGraphs.to_packed`), the layout of the
graph cache (:mod:`grprune.data.cache`) and of training's
:class:`~grprune.data.store.GraphStore`.

* **Same graphs.** Atom ``i`` is RDKit atom ``i``; RDKit bond ``k`` is directed
  edges ``2k`` (begin -> end) and ``2k + 1``, both with the bond's features;
  OGB's :func:`ogb.utils.smiles2graph` computes every feature, this module only
  concatenates (``tests/test_featurize_scale.py`` compares every bundled BACE and
  BBBP molecule with :func:`smiles_to_graph`). A SMILES OGB rejects goes through
  :func:`smiles_to_graph` for its message, so a rejected row carries exactly it.
* **Small dtypes.** OGB's categorical features are stored as ``uint8`` (every
  vocabulary has fewer than 256 entries): 9 bytes per atom instead of 72.
  :class:`~grprune.data.packed.PackedGraphs` and
  :meth:`~grprune.data.store.GraphStore.batch` widen them to int64 when a graph
  or a batch is formed, so models see the same values.
* **Each distinct SMILES once.** Repeated SMILES strings reuse the first one's
  arrays (a string, not a canonical form: two spellings of one molecule number
  their atoms differently).
* **Both cores.** From :data:`PARALLEL_MIN_ROWS` distinct SMILES up, chunks of
  :data:`CHUNK_SIZE` are parsed by ``min(2, os.cpu_count())`` worker processes
  (:func:`grprune.data.workers.ordered_map`: results come back in input order, so the
  output does not depend on timing); below it, serially in this process. A worker that
  dies is noticed, never waited for: the molecule that kills it (found by halving its
  chunk in lone workers) is skipped with the reason
  :data:`~grprune.data.workers.WORKER_DIED`; in a scaffold computation it ends the
  build with one line naming it.
* **Progress.** From :data:`PROGRESS_MIN_ROWS` SMILES up: a rich bar with rate and
  ETA when stderr is a terminal, else plain lines on stderr (a batch job's log): one at
  the start, then at every 10 % and at least every :data:`PLAIN_INTERVAL_S` seconds.
  ``GRPRUNE_FEATURIZE_PROGRESS`` (``auto``, ``rich``, ``plain``, ``none``) overrides.
* **Bounded work.** A SMILES over :data:`grprune.data.molecules.MAX_ATOMS` atoms
  is rejected (``too large``) from its text, before RDKit parses it. Workers leave Ctrl-C
  to the parent and end quietly on SIGTERM; the parent ends them when it stops.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Generator, Sequence

import numpy as np

from grprune.data.workers import (WORKER_DIED, WorkerDied, end_process_pool,  # noqa: F401
                                  find_killer, ordered_map, process_pool, run_alone)
from grprune.errors import DataError
from grprune.messages import short_repr

#: distinct SMILES from which worker processes are used (below: serial, no start-up cost)
PARALLEL_MIN_ROWS = 5000
#: SMILES per worker task
CHUNK_SIZE = 1000
#: SMILES from which progress is shown
PROGRESS_MIN_ROWS = 5000
#: the most seconds between two plain progress lines (stderr not a terminal)
PLAIN_INTERVAL_S = 30.0
#: dtype of OGB's categorical atom and bond features in flat arrays and the cache
OGB_FEAT_DTYPE = np.uint8
NUM_ATOM_FEATURES, NUM_BOND_FEATURES = 9, 3


@dataclass
class FlatGraphs:
    """G graphs as flat arrays, graph ``k``'s nodes and edges after those of graph ``k - 1``.

    Attributes
    ----------
    node_feat : np.ndarray of shape (N, 9), uint8
        OGB's categorical atom features.
    edge_index : np.ndarray of shape (2, E), int32
        Source and destination of each directed edge, numbered inside its own graph.
    edge_feat : np.ndarray of shape (E, 3), uint8
        OGB's categorical bond features.
    num_nodes, num_edges : np.ndarray of shape (G,), int64
    """

    node_feat: np.ndarray
    edge_index: np.ndarray
    edge_feat: np.ndarray
    num_nodes: np.ndarray
    num_edges: np.ndarray

    def __len__(self) -> int:
        return len(self.num_nodes)

    @classmethod
    def empty(cls) -> "FlatGraphs":
        """No graphs."""
        return cls(np.zeros((0, NUM_ATOM_FEATURES), OGB_FEAT_DTYPE), np.zeros((2, 0), np.int32),
                   np.zeros((0, NUM_BOND_FEATURES), OGB_FEAT_DTYPE), np.zeros(0, np.int64),
                   np.zeros(0, np.int64))

    @classmethod
    def concat(cls, parts: list["FlatGraphs"]) -> "FlatGraphs":
        """The graphs of ``parts`` one after the other.

        Each field is joined and then dropped from ``parts`` (the list is emptied), so the
        peak memory is the result plus one field of the parts, not twice the result.
        """
        if not parts:
            return cls.empty()
        out = {}
        for name, axis in (("node_feat", 0), ("edge_index", 1), ("edge_feat", 0),
                           ("num_nodes", 0), ("num_edges", 0)):
            out[name] = np.concatenate([getattr(p, name) for p in parts], axis=axis)
            for p in parts:
                setattr(p, name, None)
        parts.clear()
        return cls(**out)

    def take(self, index: np.ndarray) -> "FlatGraphs":
        """The graphs at ``index`` (int, shape (G',), repeats allowed), in that order."""
        from grprune.data.packed import ranges

        index = np.asarray(index, dtype=np.int64).reshape(-1)
        node_ptr = np.concatenate([[0], np.cumsum(self.num_nodes)])
        edge_ptr = np.concatenate([[0], np.cumsum(self.num_edges)])
        num_nodes, num_edges = self.num_nodes[index], self.num_edges[index]
        node_at = ranges(node_ptr[index], num_nodes)
        edge_at = ranges(edge_ptr[index], num_edges)
        return FlatGraphs(self.node_feat[node_at], self.edge_index[:, edge_at],
                          self.edge_feat[edge_at], num_nodes, num_edges)

    def to_packed(self):
        """A :class:`~grprune.data.packed.PackedGraphs` over these arrays (shared, not
        copied): ``ndata['feat']`` (N, 9) and ``edata['feat']`` (E, 3), uint8;
        ``packed[i]`` is graph ``i`` with int64 features, equal to
        :func:`~grprune.data.molecules.smiles_to_graph` of its SMILES.
        """
        import torch

        from grprune.data.packed import PackedGraphs

        return PackedGraphs(torch.from_numpy(self.edge_index), torch.from_numpy(self.num_nodes),
                            torch.from_numpy(self.num_edges),
                            {"feat": torch.from_numpy(self.node_feat)},
                            {"feat": torch.from_numpy(self.edge_feat)})


# -- one chunk: OGB's smiles2graph, in a worker or in this process ------------------------
def featurize_chunk(smiles: Sequence[str], max_atoms: int | None = None
                    ) -> tuple[FlatGraphs, dict[int, str]]:
    """OGB arrays of a list of SMILES (one worker task), by :func:`ogb.utils.smiles2graph`.

    The features are OGB's own (the library featurizes; this only concatenates), so
    a graph equals :func:`~grprune.data.molecules.smiles_to_graph`'s, which wraps the
    same function: RDKit bond ``k`` is directed edges ``2k`` and ``2k + 1``.

    Parameters
    ----------
    smiles : sequence of str, length S
    max_atoms : int, optional
        Molecules with more atoms are rejected (``too large``) before RDKit parses
        them; default :data:`grprune.data.molecules.MAX_ATOMS`, 0 = no limit.

    Returns
    -------
    graphs : FlatGraphs
        The molecules that featurize, in input order.
    failed : dict of int to str
        Position in ``smiles`` -> the :class:`~grprune.errors.DataError` message of
        :func:`~grprune.data.molecules.smiles_to_graph` (the positions not in ``graphs``).
    """
    from ogb.utils import smiles2graph
    from rdkit import rdBase

    from grprune.data.molecules import MAX_ATOMS, smiles_to_graph, too_large_reason

    limit = MAX_ATOMS if max_atoms is None else int(max_atoms)
    atoms, bonds, edges, num_nodes, num_edges = [], [], [], [], []
    failed: dict[int, str] = {}
    with rdBase.BlockLogs():
        for pos, s in enumerate(smiles):
            large = too_large_reason(s, limit)
            if large:
                failed[pos] = large
                continue
            try:
                d = smiles2graph(s) if isinstance(s, str) and s.strip() else None
            except Exception:  # RDKit gave no molecule: smiles_to_graph says why in words
                d = None
            if d is None or d["num_nodes"] == 0:
                try:
                    smiles_to_graph(s, max_atoms=limit)
                    failed[pos] = "the SMILES could not be featurized"
                except DataError as exc:
                    failed[pos] = str(exc)
                continue
            atoms.append(np.asarray(d["node_feat"]).reshape(-1, NUM_ATOM_FEATURES))
            bonds.append(np.asarray(d["edge_feat"]).reshape(-1, NUM_BOND_FEATURES))
            edges.append(np.asarray(d["edge_index"]).reshape(2, -1))
            num_nodes.append(int(d["num_nodes"]))
            num_edges.append(edges[-1].shape[1])

    def cat(parts: list, width: int, dtype) -> np.ndarray:
        return (np.concatenate(parts).astype(dtype, copy=False) if parts
                else np.zeros((0, width), dtype=dtype))

    edge_index = (np.concatenate(edges, axis=1).astype(np.int32) if edges
                  else np.zeros((2, 0), dtype=np.int32))
    graphs = FlatGraphs(cat(atoms, NUM_ATOM_FEATURES, OGB_FEAT_DTYPE),
                        np.ascontiguousarray(edge_index),
                        cat(bonds, NUM_BOND_FEATURES, OGB_FEAT_DTYPE),
                        np.asarray(num_nodes, dtype=np.int64), np.asarray(num_edges, dtype=np.int64))
    return graphs, failed


# -- many chunks ----------------------------------------------------------------------
def featurize_ogb(smiles: Sequence[str], *, workers: int | None = None,
                  chunk_size: int = CHUNK_SIZE, progress: str | None = None,
                  what: str = "molecules", max_atoms: int | None = None
                  ) -> tuple[FlatGraphs, np.ndarray, dict[int, str]]:
    """OGB's featurization of many SMILES into flat arrays, each distinct SMILES once.

    Parameters
    ----------
    smiles : sequence of str, length S
    workers : int, optional
        Worker processes; default ``min(2, os.cpu_count())`` from
        :data:`PARALLEL_MIN_ROWS` distinct SMILES up, else 0 (this process). 0 or 1:
        this process.
    chunk_size : int
        SMILES per worker task.
    progress : str, optional
        ``auto`` (default; ``$GRPRUNE_FEATURIZE_PROGRESS`` if set), ``rich``,
        ``plain`` or ``none`` (see the module docstring).
    what : str
        How the progress display names the input (e.g. the file name).
    max_atoms : int, optional
        See :func:`featurize_chunk`.

    Returns
    -------
    graphs : FlatGraphs
        G graphs, one per featurized position, in input order.
    kept : np.ndarray of int64, shape (G,)
        Position in ``smiles`` of each graph (increasing).
    failed : dict of int to str
        Position -> the message :func:`~grprune.data.molecules.smiles_to_graph` raises
        for it (e.g. ``"RDKit cannot parse SMILES 'C1CC(C': not valid SMILES syntax"``).
    """
    first: dict[str, int] = {}
    distinct = np.fromiter((first.setdefault(s, len(first)) for s in smiles), dtype=np.int64,
                           count=len(smiles))
    unique = list(first)
    del first
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if len(unique) >= PARALLEL_MIN_ROWS else 0
    chunks = [unique[i:i + chunk_size] for i in range(0, len(unique), max(1, chunk_size))]
    parts: list[FlatGraphs] = []
    failed_unique: dict[int, str] = {}
    # the workers fork before the bar's thread starts
    pool = process_pool(workers, start=True) if workers > 1 and len(chunks) > 1 else None
    bar = Progress(len(unique), what, progress,
                   note=f"the distinct SMILES of {len(smiles):,} rows")
    task = (featurize_chunk if max_atoms is None
            else functools.partial(featurize_chunk, max_atoms=max_atoms))
    # a generator either way, so that close() ends ordered_map's pools
    results: Generator[Any, None, None] = (
        (task(chunk) for chunk in chunks) if pool is None else
        ordered_map(task, chunks, workers, pool,  # rescue: the chunk died alone
                    rescue=lambda rows, k: _without_killers(task, rows, died=True)))
    try:
        for k, (part, failed) in enumerate(results):
            parts.append(part)
            failed_unique.update({k * chunk_size + p: why for p, why in failed.items()})
            bar.advance(len(chunks[k]))
    finally:
        results.close()  # ends ordered_map's pools
        end_process_pool(pool)
        bar.close()
    del chunks
    flat = FlatGraphs.concat(parts)
    ok = np.ones(len(unique), dtype=bool)
    ok[list(failed_unique)] = False
    graph_of = np.cumsum(ok) - 1  # distinct SMILES -> its graph in flat (where ok)
    kept = np.flatnonzero(ok[distinct]).astype(np.int64)
    failed = {int(p): failed_unique[int(distinct[p])] for p in np.flatnonzero(~ok[distinct])}
    order = graph_of[distinct[kept]]
    if not np.array_equal(order, np.arange(len(flat))):  # a repeated SMILES
        flat = flat.take(order)
    return flat, kept, failed


def _without_killers(task, rows: list[str], died: bool = False
                     ) -> tuple[FlatGraphs, dict[int, str]]:
    """``task(rows)`` (:func:`featurize_chunk`) in a worker of its own, each row that kills
    it skipped with the reason :data:`~grprune.data.workers.WORKER_DIED` (found by
    halving, :func:`~grprune.data.workers.find_killer`) and the rest featurized again;
    ``died``: ``rows`` already killed a worker of their own (not tried again).

    Raises
    ------
    DataError
        When the rows die together but none alone (the memory ran out).
    """
    if not died:
        try:
            return run_alone(task, rows)
        except WorkerDied:
            pass
    bad = find_killer(task, rows)
    if bad is None:
        raise DataError(f"featurizing: a worker process died on the {len(rows):,} molecules "
                        f"from {short_repr(rows[0], 60)} on, though on none of them alone "
                        f"(the memory ran out?); run again with more memory")
    graphs, failed = _without_killers(task, rows[:bad] + rows[bad + 1:])
    failed = {(p if p < bad else p + 1): why for p, why in failed.items()}
    failed[bad] = WORKER_DIED
    return graphs, dict(sorted(failed.items()))


def _scaffold_chunk(task: tuple[list[str], bool]) -> list[str]:
    from grprune.data.splits import murcko_scaffolds
    return murcko_scaffolds(*task)


class _ScaffoldKiller(DataError):
    """A molecule that kills the worker computing its scaffold (not computed again here:
    it would kill this process)."""


def _scaffold_killer(item: tuple[list[str], bool], k: int) -> list[str]:
    """A scaffold task whose worker died alone too: one line naming the molecule."""
    rows, chirality = item
    bad = find_killer(_scaffold_chunk, rows, lambda part: (part, chirality))
    what = (f"the SMILES {short_repr(rows[bad], 80)}" if bad is not None else
            f"one of the {len(rows):,} molecules from {short_repr(rows[0], 60)} on")
    raise _ScaffoldKiller(f"computing scaffolds: the worker process died on {what} "
                          f"(RDKit crashed on it, or the memory ran out); remove it from "
                          f"the data file")


def parallel_scaffolds(smiles: Sequence[str], include_chirality: bool = True, *,
                       workers: int | None = None, chunk_size: int = CHUNK_SIZE,
                       progress: str | None = None, what: str = "molecules") -> list[str]:
    """:func:`grprune.data.splits.murcko_scaffolds` over worker processes, in input order:
    the same list of scaffold SMILES (length n, ``""`` for acyclic molecules) and the same
    :class:`~grprune.errors.DataError` naming the molecule's index in ``smiles``.

    Each distinct SMILES string is computed once (a file that repeats molecules costs what
    its distinct ones cost). ``workers`` defaults to ``min(2, os.cpu_count())`` from
    :data:`PARALLEL_MIN_ROWS` distinct molecules, else serial; ``chunk_size`` molecules
    go to a worker at a time. From :data:`PROGRESS_MIN_ROWS` distinct molecules, progress
    goes to stderr as :class:`Progress` shows it (``progress``, ``what``).
    """
    from grprune.data.splits import murcko_scaffolds

    smiles = list(smiles)
    first: dict[str, int] = {}
    distinct = [first.setdefault(s, len(first)) for s in smiles]
    unique = list(first)
    del first
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if len(unique) >= PARALLEL_MIN_ROWS else 0
    step = max(1, chunk_size)
    tasks = [(unique[i:i + step], include_chirality) for i in range(0, len(unique), step)]
    pool = process_pool(workers, start=True) if workers > 1 and len(tasks) > 1 else None
    bar = Progress(len(unique), what, progress, verb="scaffolds of",
                   note=f"the distinct ones of {len(smiles):,}")
    # a generator either way, so that close() ends ordered_map's pools
    results: Generator[Any, None, None] = (
        (_scaffold_chunk(t) for t in tasks) if pool is None else
        ordered_map(_scaffold_chunk, tasks, workers, pool, rescue=_scaffold_killer))
    try:
        out: list[str] = []
        for k, part in enumerate(results):
            out.extend(part)
            bar.advance(len(tasks[k][0]))
    except _ScaffoldKiller:
        raise
    except DataError:
        results.close()
        end_process_pool(pool)
        pool = None
        murcko_scaffolds(smiles, include_chirality)  # raises naming the row's own index
        raise
    finally:
        results.close()  # ends ordered_map's pools
        end_process_pool(pool)
        bar.close()
    return [out[i] for i in distinct]


# -- progress -------------------------------------------------------------------------
#: a data file from this size (bytes) up says when it is being read (``announce``)
ANNOUNCE_MIN_BYTES = 1 << 20


def announce(text: str, size: int = ANNOUNCE_MIN_BYTES, mode: str | None = None,
             stream=None) -> None:
    """One plain progress line on stderr (``text``) before a long step that has no count
    of its own (reading a large file), so a batch job's log speaks from its first seconds;
    nothing for a file under :data:`ANNOUNCE_MIN_BYTES` bytes (``size``), or with
    ``$GRPRUNE_FEATURIZE_PROGRESS`` (or ``mode``) ``none``."""
    mode = (mode or os.environ.get("GRPRUNE_FEATURIZE_PROGRESS") or "auto").strip().lower()
    if mode != "none" and size >= ANNOUNCE_MIN_BYTES:
        print(text, file=stream if stream is not None else sys.stderr, flush=True)


class Progress:
    """Featurization progress on stderr: a rich bar with rate and ETA on a terminal; plain
    lines otherwise (a batch job's log): one when the work starts, then at every 10 % and
    at least every :data:`PLAIN_INTERVAL_S` seconds; nothing below
    :data:`PROGRESS_MIN_ROWS` molecules.

    Parameters
    ----------
    total : int
        Molecules to featurize.
    what : str
        Names the input in the display.
    mode : str, optional
        ``auto``, ``rich``, ``plain`` or ``none``; default ``$GRPRUNE_FEATURIZE_PROGRESS``
        or ``auto``.
    stream : file, optional
        Default ``sys.stderr``.
    verb : str
        What is done to the molecules, as the lines begin (``"featurizing"``,
        ``"scaffolds of"``).
    unit : str
        What is counted (``"molecules"``, ``"configurations"``).
    note : str
        Added to the first plain line (e.g. rows and distinct SMILES).
    interval_s : float, optional
        Seconds between plain lines at most; default :data:`PLAIN_INTERVAL_S`
        (``$GRPRUNE_PROGRESS_INTERVAL`` overrides).
    """

    def __init__(self, total: int, what: str, mode: str | None = None, stream=None, *,
                 verb: str = "featurizing", unit: str = "molecules", note: str = "",
                 interval_s: float | None = None) -> None:
        self.total, self.what, self.done, self.verb = int(total), what, 0, verb
        self.unit = unit
        if interval_s is None:
            try:
                interval_s = float(os.environ.get("GRPRUNE_PROGRESS_INTERVAL") or
                                   PLAIN_INTERVAL_S)
            except ValueError:
                interval_s = PLAIN_INTERVAL_S
        self.interval_s = interval_s
        self.stream = stream if stream is not None else sys.stderr
        mode = (mode or os.environ.get("GRPRUNE_FEATURIZE_PROGRESS") or "auto").strip().lower()
        if mode == "auto":
            mode = ("none" if self.total < PROGRESS_MIN_ROWS else
                    # a stream may lack isatty (a user's file-like object)
                    "rich" if getattr(self.stream, "isatty", lambda: False)() else "plain")
        self.mode = mode if mode in ("rich", "plain") else "none"
        self.t0 = time.perf_counter()
        self._last_line = self.t0
        self._next_tenth = 1
        self._rich = None
        if self.mode == "plain":
            print(f"{verb} {what}: {self.total:,} {unit}{f' ({note})' if note else ''}",
                  file=self.stream, flush=True)
        if self.mode == "rich":
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn(f"{verb} {{task.description}}"), BarColumn(),
                MofNCompleteColumn(), TextColumn(f"{{task.fields[rate]}} {unit}/s"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=Console(file=self.stream), transient=False)
            self._task = self._rich.add_task(what, total=self.total, rate="-")
            self._rich.start()

    def rate(self) -> float:
        """Molecules per second so far."""
        return self.done / max(time.perf_counter() - self.t0, 1e-9)

    def advance(self, n: int) -> None:
        """``n`` more molecules are done."""
        self.done += int(n)
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done, rate=f"{self.rate():,.0f}")
        elif self.mode == "plain" and self.total:
            tenth = self.done * 10 // self.total
            now = time.perf_counter()
            if tenth >= self._next_tenth or now - self._last_line >= self.interval_s:
                self._next_tenth = max(self._next_tenth, tenth + 1)
                self._last_line = now
                rate = self.rate()
                eta = (self.total - self.done) / rate if rate > 0 else 0.0
                print(f"{self.verb} {self.what}: {self.done:,}/{self.total:,} {self.unit} "
                      f"({100 * self.done // self.total}%), {rate:,.0f} {self.unit}/s, "
                      f"ETA {time.strftime('%H:%M:%S', time.gmtime(eta))}",
                      file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the rich bar (idempotent)."""
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
