"""Screening a compound library: ``grprune predict --csv`` streamed in chunks, in bounded memory.

:func:`screen_csv` reads the input CSV in chunks (every cell a string): the first of
:data:`FIRST_CHUNK_ROWS` rows, so that the first progress line and the first resume point
come seconds after the start, each next one twice the last, up to ``chunk_rows``
(:data:`CHUNK_ROWS` by default; ``grprune predict --chunk-rows``). It featurizes each chunk
with OGB's features in worker processes (:func:`grprune.data.featurize.featurize_chunk`, the
chunked featurizer of ``molecule-csv`` training and ``grprune data info``, so a row training
skips is skipped here with the same reason; :mod:`grprune.predict.pool`: a few tasks in
flight so the input is never read ahead, and a worker that dies on a molecule costs that
molecule a reason, not the screen), scores the molecules in batches of
``batch_size`` on the run's device under the trainer's evaluation rule
(:func:`grprune.evaluation.evaluate_batches`, each molecule's evaluation noise keyed by
:func:`grprune.predict.memory.smiles_key`, so its score does not depend on the other rows), and
appends the rows to the output as each chunk finishes. Memory is one chunk's rows and
graphs (plus the IDs seen, for the duplicate report), not the library's. On the CPU, scoring uses the cores the featurizing workers
leave (one thread on two cores), so the processes do not contend.

* **Atomic, resumable.** Rows go to ``OUT.partial`` (and ``OUT.partial.json``, the rows
  and bytes written so far, the input's size and modification time, the run and options).
  The finished file is renamed to ``OUT`` at the end, so a killed run leaves no file that
  looks complete. A rerun with the same input, run and options resumes after the last
  finished chunk (a kill loses at most the chunk in progress); anything else starts clean.
  Every run says which, and why, on stderr. The state is checked whole before it is
  trusted (:func:`grprune.predict.outputs.check_state`: its counts, and the partial files
  ending where it says), no symbolic link is followed for ``OUT.partial``, ``OUT`` or the
  state file, and ``OUT.lock`` keeps a second screen of the same ``OUT`` out (it refuses
  in one line). An ``OUT`` that is a directory or the input itself is refused first. Parquet output (``OUT`` ending in
  ``.parquet``) always starts clean.
* **Rows.** One output row per input row, in input order: the input's own columns but its
  SMILES column, then :data:`grprune.predict.memory.MOLECULE_COLUMNS`. A row that is not scored
  has its ``status`` (``empty SMILES``, ``unparsable SMILES``, ``too large``: more than
  :data:`grprune.data.molecules.MAX_ATOMS` atoms, never canonicalized; a cell over
  :data:`grprune.data.csv_cells.CELL_LIMIT` bytes is not even read) and its ``reason``,
  as training words its skip reasons. Repeated IDs are reported, a resumed screen's
  included (the IDs of the rows written before are read again from the input).
* **Progress** on stderr (:mod:`grprune.predict.progress`): molecules done, rate and ETA,
  on one rewritten line on a terminal, else a plain line at the start, one after the
  first chunk, then at every 10 % or 30 s; then one summary line.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generator, Iterator, Sequence

import numpy as np

from grprune.errors import DataError, GrpruneError
from grprune.predict.ensemble import Ensemble
from grprune.predict.memory import OK
from grprune.predict.chunk import (bond_table, chunk_table, featurize_rows,
                                   input_name, score_chunk)
from grprune.predict.pool import featurized
from grprune.predict.progress import Progress
from grprune.predict.outputs import (OutputFile, check_output, check_target, count_rows,
                                  input_stamp, lock_output, open_outputs, save_state,
                                  state_path)

#: input rows per chunk at most (each chunk is scored and written before the next is read)
CHUNK_ROWS = 20_000
#: input rows of the first chunk (the next ones double, up to the chunk size)
FIRST_CHUNK_ROWS = 500


@dataclass
class ScreenSummary:
    """What :func:`screen_csv` did.

    Attributes
    ----------
    rows : int
        Input rows (= output rows).
    scored : int
    skipped : dict of str to int
        Status -> rows with it (not ``ok``).
    seconds : float
        Wall time, seconds.
    resumed_from : int
        Input rows taken from an earlier, interrupted run (0: started clean).
    head : pandas.DataFrame or None
        The first output rows (for the terminal table).
    duplicate_ids : int
        Rows whose ID an earlier row has (with an ID column).
    duplicate_rows : list of (int, str)
        The first such rows and their IDs.
    files : list of Path
        The files written (none without an output file).
    id_column : str or None
        The output column of the IDs (with an ID column).
    """

    rows: int = 0
    scored: int = 0
    skipped: dict = field(default_factory=dict)
    seconds: float = 0.0
    resumed_from: int = 0
    head: Any = None
    duplicate_ids: int = 0
    duplicate_rows: list = field(default_factory=list)
    files: list = field(default_factory=list)
    id_column: str | None = None

    def line(self) -> str:
        """The one summary line."""
        rate = (self.rows - self.resumed_from) / self.seconds if self.seconds > 0 else 0.0
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        return (f"{self.scored:,} of {self.rows:,} molecules scored"
                + (f"; skipped: {skipped}" if skipped else "")
                + (f"; {self.resumed_from:,} rows done before the resume"
                   if self.resumed_from else "")
                + f"; {self.seconds:.1f} s ({rate:,.0f} molecules/s)")


# -- the stream --------------------------------------------------------------------------
def chunk_sizes(chunk_rows: int, first: int | None = None) -> Iterator[int]:
    """The rows of each chunk: ``first`` (:data:`FIRST_CHUNK_ROWS`), then twice the last,
    up to ``chunk_rows``.

    >>> import itertools
    >>> list(itertools.islice(chunk_sizes(20_000), 7))
    [500, 1000, 2000, 4000, 8000, 16000, 20000]
    >>> list(itertools.islice(chunk_sizes(5), 3))
    [5, 5, 5]
    """
    size = min(FIRST_CHUNK_ROWS if first is None else first, chunk_rows)
    while True:
        yield size
        size = min(2 * size, chunk_rows)


def _chunks(csv_file: Path, skip: int, chunk_rows: int) -> Generator[Any, None, None]:
    """The CSV in chunks of :func:`chunk_sizes` rows, every cell a string (a cell too long
    to read: its note, :func:`grprune.data.csv_cells.open_csv`), after ``skip`` rows."""
    import lzma
    import zlib

    import pandas as pd

    from grprune.data.csv_cells import open_csv
    from grprune.messages import short_text
    if not csv_file.is_file():
        raise DataError(f"--csv not found: {csv_file}")
    try:
        with open_csv(csv_file) as fh, pd.read_csv(
                fh, dtype=str, keep_default_na=False, iterator=True,
                skiprows=range(1, skip + 1) if skip else None) as reader:
            for size in chunk_sizes(chunk_rows):
                try:
                    df = reader.get_chunk(size)
                except StopIteration:
                    return
                if not len(df):
                    return
                yield df
    except pd.errors.EmptyDataError:
        raise DataError(f"--csv {csv_file} is empty") from None
    except (ValueError, OSError, EOFError, ImportError, zlib.error, lzma.LZMAError) as exc:
        # (decoding, parser, a zip of several files, a damaged or unknown compression)
        raise DataError(f"cannot read --csv {csv_file}: {type(exc).__name__}: "
                        f"{short_text(exc)}") from None


@dataclass
class ScreenOptions:
    """The options of :func:`screen_csv` (also the resume check's)."""

    smiles_column: str | None = None
    id_column: str | None = None
    keep_columns: Sequence[str] | None = None
    batch_size: int = 2048
    bonds: bool = False
    workers: int | None = None
    progress: str = "auto"
    head_rows: int = 50
    chunk_rows: int = CHUNK_ROWS


def _columns(run, df, opts: ScreenOptions) -> tuple[str, str | None, list[str]]:
    """The SMILES column, the ID column (or None) and the carried input columns: ``--id-column``,
    else the run's ``data.id_column`` where the CSV has it (:func:`same_column`)."""
    from grprune.data.csv_tables import match_columns, same_column
    cols = [str(c) for c in df.columns]
    smiles = match_columns(cols, {"--smiles-column": opts.smiles_column or "smiles"},
                           "--csv")["--smiles-column"]
    id_col = (match_columns(cols, {"--id-column": opts.id_column}, "--csv")["--id-column"]
              if opts.id_column else same_column(cols, run.cfg.data.id_column))
    keep = cols
    if opts.keep_columns:
        found = match_columns(cols, {k: k for k in opts.keep_columns}, "--csv (--keep-columns)")
        keep = list(dict.fromkeys(found[k] for k in opts.keep_columns))
    if id_col is not None and id_col not in keep:  # every output row carries its ID
        keep = [id_col, *keep]
    keep = [c for c in keep if c != smiles]  # its text is the output's smiles column
    return smiles, id_col, keep


def can_stream(run) -> bool:
    """Whether :func:`screen_csv` can score with ``run``: its featurizer is OGB's, the one
    the chunks are featurized with (a ``data.featurizer=dgllife-canonical`` run is scored
    in memory, :func:`grprune.predict.memory.predict_smiles`)."""
    from grprune.data.molecules import smiles_to_graph
    from grprune.predict.memory import molecule_featurizer
    return molecule_featurizer(run) is smiles_to_graph


def screen_csv(run, csv_file: str | Path, out: str | Path | None,
               opts: ScreenOptions | None = None,
               log: Callable[[str], None] = lambda msg: None) -> ScreenSummary:
    """Score every SMILES of a CSV with a molecule run, streaming rows to ``out``.

    Parameters
    ----------
    run : grprune.inference.Run or grprune.predict.ensemble.Ensemble
        A run (or runs) trained on OGB-featurized molecules (:func:`can_stream`).
    csv_file : path
        The library (plain or compressed CSV).
    out : path or None
        ``.csv`` (default) or ``.parquet``; with ``opts.bonds`` the bond table goes to
        :func:`grprune.predict.memory.bonds_path` of it. None writes no file (the summary's
        ``head`` and counts only) and so resumes nothing.
    opts : ScreenOptions
    log : callable
        Receives the state line, one per run: that it resumes (after which row) or
        starts clean (and why).

    Returns
    -------
    ScreenSummary

    Raises
    ------
    DataError
        A missing or unreadable CSV, or a missing column.
    GrpruneError
        ``opts.chunk_rows`` below 1; Parquet output without pyarrow; a run whose features
        are not OGB's; ``out`` a directory or the input itself; another screen writing
        ``out`` (its lock ``OUT.lock`` held).
    """
    opts = opts or ScreenOptions()
    csv_file = Path(csv_file)
    target = _check(run, opts, out, csv_file)
    with lock_output(target) if target is not None else nullcontext():
        return _screen(run, csv_file, target, opts, log)


def _screen(run, csv_file: Path, target: Path | None, opts: ScreenOptions,
            log: Callable[[str], None]) -> ScreenSummary:
    """:func:`screen_csv` once its output is locked."""
    t0 = time.perf_counter()
    with closing(_chunks(csv_file, 0, 1)) as head:
        first = next(head, None)
    if first is None:
        raise DataError(f"--csv {csv_file} has no rows")
    smiles_col, id_col, keep = _columns(run, first, opts)
    stamp = input_stamp(run, csv_file, {"smiles": smiles_col, "id": id_col, "keep": keep,
                                         "bonds": opts.bonds, "batch": opts.batch_size})
    lines = count_rows(csv_file)
    sink, bsink, state = open_outputs(target, opts.bonds, stamp, log,
                                      _most_rows(csv_file, lines))
    done = int(state["rows"]) if state else 0
    summary = ScreenSummary(resumed_from=done,
                            skipped=dict(state.get("skipped", {})) if state else {},
                            scored=int(state["scored"]) if state else 0,
                            id_column=input_name(id_col) if id_col is not None else None)
    workers = opts.workers if opts.workers is not None else min(2, os.cpu_count() or 1)
    bar = Progress(lines, opts.progress, start=done)
    bar.begin(csv_file.name, min(FIRST_CHUNK_ROWS, opts.chunk_rows))
    seen = _ids_before(csv_file, id_col, done, summary) if id_col is not None else {}
    import torch
    threads = torch.get_num_threads()
    if workers > 1 and run.device.type == "cpu":  # the workers hold the other cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - workers))
    try:
        _run_chunks(run, csv_file, opts, (smiles_col, id_col, keep), done, workers,
                    (sink, bsink), bar, summary, stamp, seen)
    except BaseException:
        for s in (sink, bsink):
            if s is not None:
                s.abandon()
        bar.close()
        raise
    finally:
        torch.set_num_threads(threads)
    bar.close()
    summary.files = [s.finish() for s in (sink, bsink) if s is not None]
    if target is not None:
        state_path(target).unlink(missing_ok=True)
    summary.rows = bar.done
    summary.seconds = time.perf_counter() - t0
    return summary


def _most_rows(csv_file: Path, rows: int | None) -> int | None:
    """The most data rows a CSV can hold, given :func:`count_rows` of it (its line breaks
    less one): one more (a last line without a break); None where the count says nothing
    (unreadable, or compressed other than with gzip)."""
    counted = csv_file.suffix.lower() not in (".bz2", ".xz", ".zip", ".zst", ".tar")
    return rows + 1 if rows is not None and counted else None


def _check(run, opts: ScreenOptions, out: str | Path | None, csv_file: Path) -> Path | None:
    """The output file of :func:`screen_csv` (None without one), once the options, the run
    and the file type are checked (the Raises of :func:`screen_csv`)."""
    if opts.chunk_rows < 1:
        raise GrpruneError(f"--chunk-rows must be at least 1, got {opts.chunk_rows}")
    if opts.bonds and isinstance(run, Ensemble) and len(run) > 1:
        raise GrpruneError("--bonds lists one model's kept bonds; it does not apply to an "
                           "ensemble of several runs")
    if not can_stream(run):
        raise GrpruneError("streamed screening featurizes with OGB's features; this run was "
                           "trained with another featurizer: score it in memory "
                           "(grprune predict --draw, or Run.predict with a list of SMILES)")
    if out is not None:
        check_output(out)
        check_target(Path(out), csv_file, opts.bonds)
    return Path(out) if out is not None else None


def _run_chunks(run, csv_file: Path, opts: ScreenOptions, cols: tuple, done: int,
                workers: int, sinks: tuple[OutputFile | None, OutputFile | None],
                bar: Progress, summary: ScreenSummary, stamp: dict, seen: dict) -> None:
    """The chunk loop of :func:`screen_csv`: featurize, score, write, save the state;
    ``seen``: ID -> its first row, of the rows before ``done``."""
    smiles_col, id_col, keep = cols
    sink, bsink = sinks
    row = done
    chunks = _chunks(csv_file, done, opts.chunk_rows)
    for df, graphs in featurized(chunks, lambda d: d[smiles_col].tolist(), workers,
                                 featurize_rows):
        rows = np.arange(row, row + len(df), dtype=np.int64)
        ids = df[id_col].tolist() if id_col is not None else None
        if ids is not None:
            _note_duplicates(ids, rows, seen, summary)
        if isinstance(run, Ensemble):  # each member scores, calibrated; then combined
            table, scores = run.chunk_table(df, keep, rows, df[smiles_col].tolist(), graphs,
                                            opts.batch_size)
        else:
            scores = score_chunk(run, graphs, batch_size=opts.batch_size,
                                 seed=run.prediction_seed)
            table = chunk_table(run, df, keep, rows, df[smiles_col].tolist(), graphs, scores)
        if sink is not None:
            sink.write(table)
        if bsink is not None:
            bsink.write(bond_table(df[smiles_col].tolist(), rows, graphs, scores, ids))
        if summary.head is None:  # the terminal table: the first rows only
            summary.head = table.head(opts.head_rows)
        elif len(summary.head) < opts.head_rows:
            import pandas as pd
            summary.head = pd.concat([summary.head, table]).head(opts.head_rows)
        for status, n in Counter(table["status"]).items():
            if status == OK:
                summary.scored += n
            else:
                summary.skipped[status] = summary.skipped.get(status, 0) + n
        row += len(df)
        if sink is not None:
            save_state(sink, bsink, stamp, row, summary.scored, summary.skipped)
        bar.advance(len(df))


def _ids_before(csv_file: Path, id_col: str, done: int, summary: ScreenSummary) -> dict:
    """ID -> its first row, over the input's first ``done`` rows (those an interrupted run
    wrote), their repeated IDs counted in ``summary`` (:func:`_note_duplicates`): so that
    a resumed screen reports what an uninterrupted one does. Reads the input only."""
    seen: dict[str, int] = {}
    row = 0
    if not done:
        return seen
    with closing(_chunks(csv_file, 0, CHUNK_ROWS)) as chunks:
        for df in chunks:
            if row >= done:
                break
            ids = df[id_col].tolist()[:done - row]
            _note_duplicates(ids, np.arange(row, row + len(ids)), seen, summary)
            row += len(ids)
    return seen


def _note_duplicates(ids: list, rows: np.ndarray, seen: dict, summary: ScreenSummary) -> None:
    for i, r in zip(ids, rows.tolist()):
        if i == "":
            continue
        if i in seen:
            summary.duplicate_ids += 1
            if len(summary.duplicate_rows) < 10:
                summary.duplicate_rows.append((r, i, seen[i]))
        else:
            seen[i] = r
