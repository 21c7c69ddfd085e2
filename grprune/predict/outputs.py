"""The output files of a screen (:mod:`grprune.predict.stream`): ``OUT.partial``, appended chunk
by chunk and renamed to ``OUT`` when complete, and ``OUT.partial.json``, the rows and bytes
written so far, the SHA-256 of those bytes, and what the run was (input size and
modification time, run, options), so that a rerun resumes after the last finished chunk
or starts clean and says why (a changed byte of ``OUT.partial`` included).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from grprune.errors import GrpruneError
from grprune.predict.memory import Prediction, bonds_path

#: ``open`` never follows a symbolic link for the screen's own files (where the OS can)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class OutputFile:
    """One output table, appended chunk by chunk to ``OUT.partial`` and renamed at the end."""

    def __init__(self, out: Path, resume_bytes: int | None) -> None:
        self.out, self.partial = out, out.with_name(out.name + ".partial")
        self.parquet = out.suffix.lower() == ".parquet"
        self.writer: Any = None
        self.fh: Any = None
        self.header = True
        self.sha256 = hashlib.sha256()  # of the bytes written (CSV), for the state file
        if self.parquet:
            check_output(out)
            resume_bytes = None
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        if resume_bytes is not None and self.partial.is_file() and not self.partial.is_symlink():
            self.fh = os.fdopen(os.open(self.partial, os.O_RDWR | _NOFOLLOW), "r+b")
            self.fh.truncate(resume_bytes)
            self.sha256 = _prefix_sha256(self.fh, resume_bytes)
            self.fh.seek(resume_bytes)
            self.header = resume_bytes == 0
        else:
            if self.partial.is_symlink():  # planted: the link goes, never what it names
                self.partial.unlink()
            self.fh = os.fdopen(os.open(self.partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                                        | _NOFOLLOW, 0o666), "wb")

    def write(self, df) -> None:
        if self.parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq
            table = pa.Table.from_pandas(df, preserve_index=False)
            if self.writer is None:
                self.writer = pq.ParquetWriter(self.fh, table.schema)
            self.writer.write_table(table.cast(self.writer.schema))
            return
        data = df.to_csv(index=False, header=self.header, float_format="%.6g").encode()
        self.fh.write(data)
        self.sha256.update(data)
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


def write_prediction(pred: Prediction, out: str | Path, bonds: bool = True) -> list[Path]:
    """Write an in-memory prediction's molecule table to ``out`` and (``bonds``) its bond
    table next to it (:func:`~grprune.predict.memory.bonds_path`), as the screen writes
    its chunks (:class:`OutputFile`): each file complete or not there.

    Returns
    -------
    list of Path
        ``[out, bonds_path(out)]`` (``[out]`` without ``bonds``).
    """
    tables = [(Path(out), pred.molecules)]
    if bonds:
        tables.append((bonds_path(out), pred.bonds))
    written = []
    for path, df in tables:
        sink = OutputFile(path, None)
        try:
            sink.write(df)
        except BaseException:
            sink.abandon()
            sink.partial.unlink(missing_ok=True)
            raise
        written.append(sink.finish())
    return written


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


def check_target(out: Path, csv_file: Path | None, bonds: bool) -> None:
    """Refuse an output file a screen must not write, before any work: a directory, or
    the input itself (also as ``--bonds``'s table).

    Raises
    ------
    GrpruneError
        One line.
    """
    from grprune.messages import short_repr
    if out.is_dir():
        raise GrpruneError(f"--out {short_repr(str(out))} is a directory; name a file in it "
                           f"(e.g. {short_repr(str(out / 'preds.csv'))})")
    if csv_file is None or not csv_file.exists():
        return
    for path, what in ((out, "--out"), *(((bonds_path(out), "--bonds's table"),) if bonds
                                         else ())):
        if path.exists() and os.path.samefile(path, csv_file):
            raise GrpruneError(f"{what} {short_repr(str(path))} is the input file (--csv); "
                               f"name another file, so the input is not replaced")


def state_path(out: Path) -> Path:
    """``OUT.partial.json``: the state of an interrupted screen writing ``OUT``."""
    return out.with_name(out.name + ".partial.json")


def lock_output(out: Path):
    """The lock of a screen writing ``out`` (``OUT.lock``, held until it is done; a
    context manager), so that two screens never write one file.

    Raises
    ------
    GrpruneError
        One line, if another process holds it.
    """
    from grprune.messages import short_repr
    from grprune.record.locks import hold_lock
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = out.with_name(out.name + ".lock")
    return hold_lock(lock, f"--out {short_repr(str(out))} is being written by another "
                           f"predict (its lock {lock.name} is held); wait for it to finish, "
                           f"or choose another --out")


def input_stamp(run, csv_file: Path, options: dict) -> dict:
    """What a resumed screen must share with the interrupted one (not the chunk size: a
    resume starts after a row, whatever the chunks were): the input's path, size and
    modification time, the model (:func:`grprune.predict.ensemble.model_stamp`: every member's
    directory, checkpoint and calibration) and the options."""
    from grprune.predict.ensemble import model_stamp
    st = csv_file.stat()
    return {"input": str(csv_file.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "run": model_stamp(run), "options": options}


def resume_point(out: Path, bonds_out: Path | None, stamp: dict,
                 input_rows: int | None = None) -> tuple[dict | None, str]:
    """The saved state of an interrupted screen writing ``out`` if it fits ``stamp`` and
    the partial files (:func:`check_state`), else None and why the screen starts clean;
    ``input_rows`` bounds the rows it may claim (:func:`count_rows` of the input)."""
    state_file = state_path(out)
    if out.suffix.lower() == ".parquet":
        return None, "Parquet output is not resumed" + (
            " (an interrupted run's files are there)" if state_file.is_file() else "")
    if state_file.is_symlink():
        return None, f"its state file {state_file.name} is a symbolic link"
    if not state_file.is_file():
        return None, f"there is no interrupted run's {state_file.name}"
    try:
        with os.fdopen(os.open(state_file, os.O_RDONLY | _NOFOLLOW), "rb") as fh:
            text = fh.read(MAX_STATE_BYTES + 1)
        if len(text) > MAX_STATE_BYTES:
            return None, f"its state file is over {MAX_STATE_BYTES:,} bytes"
        state = json.loads(text)
    except (OSError, ValueError, RecursionError):
        return None, "its state file is unreadable"
    if not isinstance(state, dict) or state.get("stamp") != stamp:
        return None, "an interrupted run's files are there, but the input, the run or the " \
                     "options changed"
    partials = [(out.with_name(out.name + ".partial"), "bytes")]
    if bonds_out is not None:
        partials.append((bonds_out.with_name(bonds_out.name + ".partial"), "bond_bytes"))
    why = check_state(state, partials, input_rows)
    return (None, why) if why else (state, "")


#: a state file larger than this is not a screen's (it holds a stamp and a few counts)
MAX_STATE_BYTES = 1 << 20


def _count(value, low: int, high: int | None) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool) and value >= low
            and (high is None or value <= high))


#: the state's key of each partial file's length -> that of its bytes' SHA-256
DIGESTS = {"bytes": "sha256", "bond_bytes": "bond_sha256"}


def _prefix_sha256(fh, size: int):
    """The SHA-256 (a running ``hashlib`` object) of the first ``size`` bytes of ``fh``."""
    h = hashlib.sha256()
    fh.seek(0)
    left = size
    while left > 0:
        block = fh.read(min(left, 1 << 22))
        if not block:
            break
        h.update(block)
        left -= len(block)
    return h


def check_state(state: dict, partials: list[tuple[Path, str]], input_rows: int | None) -> str:
    """Why a screen's saved state cannot be resumed (``""``: it can): its counts must be
    whole numbers in range (``0 <= rows <=`` the input's rows, ``scored`` and ``skipped``
    summing to ``rows``), and each partial file (path, the state's key of its length) a
    plain file at least that long whose first that many bytes end at a chunk's end (the
    molecule table's last line there is row ``rows - 1``'s; no bytes for no rows) and
    have the SHA-256 the state recorded (:data:`DIGESTS`).
    """
    rows, scored, skipped = state.get("rows"), state.get("scored"), state.get("skipped")
    if not isinstance(rows, int) or not _count(rows, 0, input_rows):
        return (f"its state file's rows ({str(rows)[:40]}) is no whole number from 0 to the "
                f"input's {input_rows:,} rows" if input_rows is not None else
                f"its state file's rows ({str(rows)[:40]}) is no whole number from 0 up")
    if (not isinstance(scored, int) or not _count(scored, 0, rows)
            or not isinstance(skipped, dict)
            or not all(isinstance(k, str) and _count(v, 1, rows) for k, v in skipped.items())
            or scored + sum(skipped.values()) != rows):
        return "its state file's counts of scored and skipped rows do not add up to its rows"
    for k, (path, key) in enumerate(partials):
        size = state.get(key)
        if path.is_symlink() or not path.is_file():
            return f"{path.name} is missing or not a plain file"
        if not isinstance(size, int) or not _count(size, 1 if rows else 0,
                                                   path.stat().st_size if rows else 0):
            return (f"{path.name} is shorter than its state file says, or the state file's "
                    f"{key} is no whole number that fits its rows")
        if rows and not _ends_chunk(path, size, rows if k == 0 else None):
            return f"{path.name} does not end a finished chunk where its state file says"
        if not size:  # no bytes to be other than written
            continue
        with os.fdopen(os.open(path, os.O_RDONLY | _NOFOLLOW), "rb") as fh:
            if _prefix_sha256(fh, size).hexdigest() != state.get(DIGESTS[key]):
                return (f"{path.name}'s first {size:,} bytes are not those its state file "
                        f"recorded (their SHA-256 differs)")
    return ""


def _ends_chunk(path: Path, size: int, rows: int | None, window: int = 1 << 20) -> bool:
    """Whether the first ``size`` bytes of ``path`` end with a line break, and (with
    ``rows``) their last line is the molecule row ``rows - 1``'s (its ``row`` column,
    the first, reads ``rows - 1``), within the last ``window`` bytes."""
    with os.fdopen(os.open(path, os.O_RDONLY | _NOFOLLOW), "rb") as fh:
        start = max(0, size - window)
        fh.seek(start)
        tail = fh.read(size - start)
    if not tail.endswith(b"\n"):
        return False
    if rows is None:
        return True
    cut = tail.rstrip(b"\r\n").rfind(b"\n")
    if cut < 0 and start > 0:
        return False
    return tail[cut + 1:].startswith(f"{rows - 1},".encode())


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


def open_outputs(out: Path | None, bonds: bool, stamp: dict, log: Callable[[str], None],
                 input_rows: int | None = None
                 ) -> tuple[OutputFile | None, OutputFile | None, dict | None]:
    """The output files of a screen (None without ``out``) and the state it resumes from
    (None: a clean start); says which on ``log``."""
    if out is None:
        log("starting clean, because no output file is named (--out): nothing to resume")
        return None, None, None
    bonds_out = bonds_path(out) if bonds else None
    state, why = resume_point(out, bonds_out, stamp, input_rows)
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
             "sha256": sink.sha256.hexdigest(),
             "bond_sha256": bsink.sha256.hexdigest() if bsink is not None else "",
             "scored": scored, "skipped": skipped}
    from grprune.record.files import atomic_write_bytes
    atomic_write_bytes(state_path(sink.out), json.dumps(state).encode())
