"""Screening a compound library: ``grprune predict --csv`` streamed in chunks, in bounded memory.

:func:`screen_csv` reads the input CSV in chunks of :data:`CHUNK_ROWS` rows (pandas
``chunksize``, every cell a string), featurizes each chunk with OGB's features in
worker processes (:func:`grprune.data.featurize.featurize_chunk`, the chunked featurizer of
``grprune data info``; :data:`TASK_ROWS` SMILES per task, at most a few tasks in flight so
the input is never read ahead), scores the molecules in batches of ``batch_size`` on the
run's device under the trainer's evaluation rule (:func:`grprune.evaluation.evaluate_batches`,
each molecule's evaluation noise keyed by :func:`grprune.predict.smiles_key`, so its score
does not depend on the other rows), and appends the rows to the output as each chunk
finishes. Memory is one chunk's rows and graphs (plus the IDs seen, for the duplicate
report), not the library's. On the CPU, scoring uses the cores the featurizing workers
leave (one thread on two cores), so the processes do not contend.

* **Atomic, resumable.** Rows go to ``OUT.partial`` (and ``OUT.partial.json``, the rows
  and bytes written so far, the input's size and modification time, the run and options).
  The finished file is renamed to ``OUT`` at the end, so a killed run leaves no file that
  looks complete. A rerun with the same input, run and options resumes after the last
  finished chunk; anything else starts clean. Either is said on stderr. Parquet output
  (``OUT`` ending in ``.parquet``) always starts clean.
* **Rows.** One output row per input row, in input order: the input's own columns, then
  :data:`grprune.predict.MOLECULE_COLUMNS`. A row that is not scored has its ``status``:
  ``empty SMILES``, ``unparsable SMILES``, ``too large`` (more than
  :data:`grprune.predict.MAX_HEAVY_ATOMS` heavy atoms, never canonicalized).
* **Progress** on stderr: molecules done, rate and ETA, on one rewritten line on a
  terminal, else a plain line at every 10 % or 30 s; then one summary line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from grprune.errors import DataError, GrpruneError
from grprune.predict import OK
from grprune.predict_chunk import ChunkGraphs, bond_table, chunk_table, featurize_rows, score_chunk

#: input rows per chunk (each chunk is scored and written before the next is read)
CHUNK_ROWS = 20_000
#: SMILES per worker task
TASK_ROWS = 1000
#: plain progress lines: at most every this many seconds apart, else at each 10 %
PROGRESS_EVERY_S = 30.0


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

    def line(self) -> str:
        """The one summary line."""
        rate = (self.rows - self.resumed_from) / self.seconds if self.seconds > 0 else 0.0
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        return (f"{self.scored:,} of {self.rows:,} molecules scored"
                + (f"; skipped: {skipped}" if skipped else "")
                + (f"; {self.resumed_from:,} rows done before the resume"
                   if self.resumed_from else "")
                + f"; {self.seconds:.1f} s ({rate:,.0f} molecules/s)")


class Progress:
    """Progress of a screen on a stream (stderr): a rewritten line on a terminal, else a
    plain line after the first chunk, then at every 10 % or :data:`PROGRESS_EVERY_S` seconds.

    Parameters
    ----------
    total : int or None
        Rows expected (an estimate; None: no ETA).
    mode : str
        ``auto``, ``plain`` or ``none``.
    """

    def __init__(self, total: int | None, mode: str = "auto", stream=None, start: int = 0):
        self.stream = stream if stream is not None else sys.stderr
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.mode = ("tty" if tty else "plain") if mode == "auto" else mode
        self.total, self.start, self.done = total, start, start
        self.t0 = self.last = time.perf_counter()
        self.next_tenth = 1

    def text(self) -> str:
        dt = max(time.perf_counter() - self.t0, 1e-9)
        rate = (self.done - self.start) / dt
        s = f"predict: {self.done:,}"
        if self.total:
            left = max(self.total - self.done, 0)
            eta = left / rate if rate > 0 else float("nan")
            s += (f"/{self.total:,} molecules ({100 * self.done / self.total:.0f} %), "
                  f"{rate:,.0f}/s, ETA {eta:.0f} s")
        else:
            s += f" molecules, {rate:,.0f}/s"
        return s

    def advance(self, n: int) -> None:
        self.done += n
        if self.mode == "none":
            return
        now = time.perf_counter()
        if self.mode == "tty":
            self.stream.write("\r" + self.text() + " " * 4)
            self.stream.flush()
            return
        tenth = int(10 * self.done / self.total) if self.total else 0
        first = self.last == self.t0  # the first chunk: a line at once
        if first or tenth >= self.next_tenth or now - self.last >= PROGRESS_EVERY_S:
            self.next_tenth = tenth + 1
            self.last = now
            print(self.text(), file=self.stream, flush=True)

    def close(self) -> None:
        if self.mode == "tty":
            self.stream.write("\n")
            self.stream.flush()


# -- the output files ------------------------------------------------------------------
class _Sink:
    """One output table, appended chunk by chunk to ``OUT.partial`` and renamed at the end."""

    def __init__(self, out: Path, resume_bytes: int | None) -> None:
        self.out, self.partial = out, out.with_name(out.name + ".partial")
        self.parquet = out.suffix.lower() == ".parquet"
        self.writer: Any = None
        self.fh: Any = None
        self.header = True
        if self.parquet:
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise GrpruneError(f"--out {out}: Parquet output needs pyarrow "
                                   f"(pip install pyarrow), or name a .csv file") from None
            resume_bytes = None
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        if resume_bytes is not None and self.partial.is_file():
            self.fh = open(self.partial, "r+b")
            self.fh.truncate(resume_bytes)
            self.fh.seek(resume_bytes)
            self.header = resume_bytes == 0
        else:
            self.fh = open(self.partial, "wb")

    def write(self, df) -> None:
        if self.parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq
            table = pa.Table.from_pandas(df, preserve_index=False)
            if self.writer is None:
                self.writer = pq.ParquetWriter(self.fh, table.schema)
            self.writer.write_table(table.cast(self.writer.schema))
            return
        self.fh.write(df.to_csv(index=False, header=self.header,
                                float_format="%.6g").encode())
        self.header = False

    def tell(self) -> int:
        self.fh.flush()
        return self.fh.tell()

    def finish(self) -> Path:
        if self.writer is not None:
            self.writer.close()
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        os.replace(self.partial, self.out)
        return self.out

    def abandon(self) -> None:
        if self.writer is not None:
            try:
                self.writer.close()
            except Exception:
                pass
        self.fh.close()


def _state_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial.json")


def _input_stamp(run, csv_file: Path, options: dict) -> dict:
    st = csv_file.stat()
    return {"input": str(csv_file.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "run": str(Path(run.run_dir).resolve()), "options": options,
            "chunk_rows": CHUNK_ROWS}


def _resume_point(out: Path, bonds_out: Path | None, stamp: dict) -> tuple[dict | None, str]:
    """The saved state of an interrupted screen writing ``out``, if it fits ``stamp``."""
    state_file = _state_path(out)
    if not state_file.is_file():
        return None, ""
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return None, "its state file is unreadable"
    if state.get("stamp") != stamp:
        return None, "the input, the run or the options changed"
    partial = out.with_name(out.name + ".partial")
    if not partial.is_file() or partial.stat().st_size < state.get("bytes", 0):
        return None, f"{partial} is missing or short"
    if bonds_out is not None:
        bp = bonds_out.with_name(bonds_out.name + ".partial")
        if not bp.is_file() or bp.stat().st_size < state.get("bond_bytes", 0):
            return None, f"{bp} is missing or short"
    return state, ""


def count_rows(path: Path) -> int | None:
    """Data rows of a CSV, estimated by counting line breaks (None if unreadable)."""
    import gzip
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        n = 0
        with opener(path, "rb") as fh:  # type: ignore[operator]
            for block in iter(lambda: fh.read(1 << 22), b""):
                n += block.count(b"\n")
        return max(n - 1, 0)
    except OSError:
        return None


# -- the stream --------------------------------------------------------------------------
def _chunks(csv_file: Path, skip: int) -> Iterator[Any]:
    """The CSV in chunks of :data:`CHUNK_ROWS` rows, every cell a string, after ``skip`` rows."""
    import pandas as pd
    if not csv_file.is_file():
        raise DataError(f"--csv not found: {csv_file}")
    try:
        reader = pd.read_csv(csv_file, dtype=str, keep_default_na=False, compression="infer",
                             chunksize=CHUNK_ROWS,
                             skiprows=range(1, skip + 1) if skip else None)
        yield from reader
    except pd.errors.EmptyDataError:
        raise DataError(f"--csv {csv_file} is empty") from None
    except (UnicodeDecodeError, pd.errors.ParserError, OSError, EOFError) as exc:
        raise DataError(f"cannot read --csv {csv_file}: {type(exc).__name__}: {exc}") from None


def _featurized(chunks: Iterator[Any], smiles_col: Callable, workers: int
                ) -> Iterator[tuple[Any, ChunkGraphs]]:
    """Each input chunk with its graphs (:func:`grprune.predict.featurize_rows`), in order;
    worker processes featurize at most ``2 * workers`` tasks ahead of the caller."""
    if workers <= 1:
        for df in chunks:
            yield df, featurize_rows(smiles_col(df))
        return
    from grprune.data.featurize import _pool
    pool = _pool(workers)
    pending: deque = deque()  # (df or None, async result); df on a chunk's last task
    try:
        def submit(df) -> None:
            smiles = smiles_col(df)
            tasks = [smiles[i:i + TASK_ROWS] for i in range(0, len(smiles), TASK_ROWS)] or [[]]
            for k, task in enumerate(tasks):
                pending.append((df if k == len(tasks) - 1 else None,
                                pool.apply_async(featurize_rows, (task,))))
        parts: list[ChunkGraphs] = []
        for df in chunks:
            submit(df)
            while len(pending) > 2 * workers or (pending and pending[0][1].ready()):
                last, res = pending.popleft()
                parts.append(res.get())
                if last is not None:
                    yield last, ChunkGraphs.concat(parts)
                    parts = []
        while pending:
            last, res = pending.popleft()
            parts.append(res.get())
            if last is not None:
                yield last, ChunkGraphs.concat(parts)
                parts = []
    finally:
        pool.terminate()
        pool.join()


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


def _columns(run, df, opts: ScreenOptions) -> tuple[str, str | None, list[str]]:
    """The SMILES column, the ID column (or None) and the carried input columns."""
    from grprune.data.molecules import match_columns
    cols = [str(c) for c in df.columns]
    smiles = match_columns(cols, {"--smiles-column": opts.smiles_column or "smiles"},
                           "--csv")["--smiles-column"]
    name = opts.id_column or run.cfg.data.id_column
    id_col = None
    if name and (opts.id_column or name.casefold() in {c.casefold() for c in cols}):
        id_col = match_columns(cols, {"--id-column": name}, "--csv")["--id-column"]
    keep = cols
    if opts.keep_columns:
        found = match_columns(cols, {k: k for k in opts.keep_columns}, "--csv (--keep-columns)")
        keep = list(dict.fromkeys(found[k] for k in opts.keep_columns))
    if id_col is not None and id_col not in keep:  # every output row carries its ID
        keep = [id_col, *keep]
    return smiles, id_col, keep


def screen_csv(run, csv_file: str | Path, out: str | Path, opts: ScreenOptions | None = None,
               log: Callable[[str], None] = lambda msg: None) -> ScreenSummary:
    """Score every SMILES of a CSV with a molecule run, streaming rows to ``out``.

    Parameters
    ----------
    run : grprune.inference.Run
        A run trained on OGB-featurized molecules.
    csv_file : path
        The library (plain or compressed CSV).
    out : path
        ``.csv`` (default) or ``.parquet``; with ``opts.bonds`` the bond table goes to
        :func:`grprune.predict.bonds_path` of it.
    opts : ScreenOptions
    log : callable
        Receives notes (resume or clean start, duplicate IDs).

    Returns
    -------
    ScreenSummary

    Raises
    ------
    DataError
        A missing or unreadable CSV, or a missing column.
    GrpruneError
        Parquet output without pyarrow; a run whose features are not OGB's.
    """
    from grprune.predict import bonds_path
    opts = opts or ScreenOptions()
    csv_file, out = Path(csv_file), Path(out)
    t0 = time.perf_counter()
    first = next(_chunks(csv_file, 0), None)
    if first is None:
        raise DataError(f"--csv {csv_file} has no rows")
    smiles_col, id_col, keep = _columns(run, first, opts)
    del first
    bonds_out = bonds_path(out) if opts.bonds else None
    stamp = _input_stamp(run, csv_file, {"smiles": smiles_col, "id": id_col, "keep": keep,
                                         "bonds": opts.bonds, "batch": opts.batch_size})
    state, why = _resume_point(out, bonds_out, stamp)
    if out.suffix.lower() == ".parquet":
        state, why = None, "Parquet output is not resumed"
    done = int(state["rows"]) if state else 0
    if state:
        log(f"resuming {out} after row {done:,} (an interrupted run's finished chunks)")
    elif why:
        log(f"starting {out} clean: an interrupted run's files are there, but {why}")
    summary = ScreenSummary(resumed_from=done, skipped=dict(state.get("skipped", {})) if state else {})
    summary.scored = int(state["scored"]) if state else 0
    sink = _Sink(out, state["bytes"] if state else None)
    bsink = (_Sink(bonds_out, state.get("bond_bytes") if state else None)
             if bonds_out is not None else None)
    workers = opts.workers if opts.workers is not None else min(2, os.cpu_count() or 1)
    bar = Progress(count_rows(csv_file), opts.progress, start=done)
    seen: dict[str, int] = {}
    import torch
    threads = torch.get_num_threads()
    if workers > 1 and run.device.type == "cpu":  # the workers hold the other cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - workers))
    try:
        _run_chunks(run, csv_file, opts, (smiles_col, id_col, keep), done, workers, sink, bsink,
                    bar, summary, seen, stamp)
    except BaseException:
        sink.abandon()
        if bsink is not None:
            bsink.abandon()
        bar.close()
        raise
    finally:
        torch.set_num_threads(threads)
    bar.close()
    summary.files = [sink.finish()] + ([bsink.finish()] if bsink is not None else [])
    _state_path(out).unlink(missing_ok=True)
    summary.rows = bar.done
    summary.seconds = time.perf_counter() - t0
    return summary


def _run_chunks(run, csv_file: Path, opts: ScreenOptions, cols: tuple, done: int,
                workers: int, sink: _Sink, bsink: _Sink | None, bar: Progress,
                summary: ScreenSummary, seen: dict, stamp: dict) -> None:
    """The chunk loop of :func:`screen_csv`: featurize, score, write, save the state."""
    smiles_col, id_col, keep = cols
    row = done
    from grprune.predict import prediction_seed
    model_seed = prediction_seed(run)
    chunks = _chunks(csv_file, done)
    for df, graphs in _featurized(chunks, lambda d: d[smiles_col].tolist(), workers):
        rows = np.arange(row, row + len(df), dtype=np.int64)
        ids = df[id_col].tolist() if id_col is not None else None
        if ids is not None:
            _note_duplicates(ids, rows, seen, summary)
        scores = score_chunk(run, graphs, batch_size=opts.batch_size, seed=model_seed)
        table = chunk_table(run, df, keep, rows, df[smiles_col].tolist(), graphs, scores)
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
        _save_state(sink, bsink, stamp, row, summary)
        bar.advance(len(df))


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


def _save_state(sink: _Sink, bsink: _Sink | None, stamp: dict, rows: int,
                summary: ScreenSummary) -> None:
    if sink.parquet:
        return
    state = {"stamp": stamp, "rows": rows, "bytes": sink.tell(),
             "bond_bytes": bsink.tell() if bsink is not None else 0,
             "scored": summary.scored, "skipped": summary.skipped}
    path = _state_path(sink.out)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)

