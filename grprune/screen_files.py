"""The output files of a screen (:mod:`grprune.screen`): ``OUT.partial``, appended chunk
by chunk and renamed to ``OUT`` when complete, and ``OUT.partial.json``, the rows and bytes
written so far and what the run was (input size and modification time, run, options), so
that a rerun resumes after the last finished chunk or starts clean and says why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from grprune.errors import GrpruneError
from grprune.predict import bonds_path


class OutputFile:
    """One output table, appended chunk by chunk to ``OUT.partial`` and renamed at the end."""

    def __init__(self, out: Path, resume_bytes: int | None) -> None:
        self.out, self.partial = out, out.with_name(out.name + ".partial")
        self.parquet = out.suffix.lower() == ".parquet"
        self.writer: Any = None
        self.fh: Any = None
        self.header = True
        if self.parquet:
            check_output(out)
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


def check_output(out: str | Path) -> None:
    """Refuse an output file predict cannot write: Parquet (``.parquet``) without pyarrow.

    Raises
    ------
    GrpruneError
        One line naming the package to install.
    """
    if Path(out).suffix.lower() != ".parquet":
        return
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise GrpruneError(f"--out {out}: Parquet output needs the pyarrow package "
                           f"(pip install pyarrow), or name a .csv file") from None


def state_path(out: Path) -> Path:
    """``OUT.partial.json``: the state of an interrupted screen writing ``OUT``."""
    return out.with_name(out.name + ".partial.json")


def input_stamp(run, csv_file: Path, options: dict) -> dict:
    """What a resumed screen must share with the interrupted one (not the chunk size: a
    resume starts after a row, whatever the chunks were): the input's path, size and
    modification time, the model (:func:`grprune.ensemble.model_stamp`: every member's
    directory, checkpoint and calibration) and the options."""
    from grprune.ensemble import model_stamp
    st = csv_file.stat()
    return {"input": str(csv_file.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "run": model_stamp(run), "options": options}


def resume_point(out: Path, bonds_out: Path | None, stamp: dict) -> tuple[dict | None, str]:
    """The saved state of an interrupted screen writing ``out`` if it fits ``stamp``, else
    None and why the screen starts clean."""
    state_file = state_path(out)
    if out.suffix.lower() == ".parquet":
        return None, "Parquet output is not resumed" + (
            " (an interrupted run's files are there)" if state_file.is_file() else "")
    if not state_file.is_file():
        return None, f"there is no interrupted run's {state_file.name}"
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return None, "its state file is unreadable"
    if state.get("stamp") != stamp:
        return None, "an interrupted run's files are there, but the input, the run or the " \
                     "options changed"
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


def open_outputs(out: Path | None, bonds: bool, stamp: dict, log: Callable[[str], None]
          ) -> tuple[OutputFile | None, OutputFile | None, dict | None]:
    """The output files of a screen (None without ``out``) and the state it resumes from
    (None: a clean start); says which on ``log``."""
    if out is None:
        log("starting clean, because no output file is named (--out): nothing to resume")
        return None, None, None
    bonds_out = bonds_path(out) if bonds else None
    state, why = resume_point(out, bonds_out, stamp)
    if state:
        log(f"resuming {out} after row {int(state['rows']):,} (an interrupted run's "
            f"finished chunks)")
    else:
        log(f"starting {out} clean, because {why}")
    sink = OutputFile(out, state["bytes"] if state else None)
    bsink = (OutputFile(bonds_out, state.get("bond_bytes") if state else None)
             if bonds_out is not None else None)
    return sink, bsink, state


def save_state(sink: OutputFile, bsink: OutputFile | None, stamp: dict, rows: int,
               scored: int, skipped: dict) -> None:
    """Record that ``rows`` input rows are in the output files (atomically), so a rerun
    resumes after them (Parquet output: nothing, it is not resumed)."""
    if sink.parquet:
        return
    state = {"stamp": stamp, "rows": rows, "bytes": sink.tell(),
             "bond_bytes": bsink.tell() if bsink is not None else 0,
             "scored": scored, "skipped": skipped}
    path = state_path(sink.out)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)
