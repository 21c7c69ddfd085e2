"""Run files on disk: their names, atomic writes, and JSON / JSON-lines readers.

The bottom of the house (:mod:`grprune.record`): every module may import it, and it
imports nothing of grprune. A write goes to a temporary file in the target's folder,
is flushed and fsync'ed, then renamed over the target (``os.replace``), so a reader sees
the old file or the new one, never a part; the file keeps the process umask's mode.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Mapping

_UMASK = os.umask(0)
os.umask(_UMASK)

CONFIG, RESULTS, SUMMARY = "config.json", "results.jsonl", "summary.json"
STATE, CHECKPOINT, EDGE_PROBS = "state.pt", "checkpoint.pt", "edge_probs.npz"
LAST_CHECKPOINT = "checkpoint-last.pt"
#: a post-hoc calibration fitted after training (``grprune calibrate``,
#: :class:`grprune.record.calibration.CalibrationRecord`)
CALIBRATION = "calibration.json"
#: a sweep's files in a run directory: the failure record and the child's log
ERROR, LOG = "error.json", "sweep.log"
#: a run stopped early by a tune's pruner (:class:`grprune.record.marks.PrunedRecord`), and
#: the ids of the experiment trackers' runs of a run (:mod:`grprune.trackers`)
PRUNED, TRACKERS = "pruned.json", "trackers.json"
#: a sweep root's plan of its runs (:mod:`grprune.sweep.plan`), which ``collect`` looks for
PLAN = "sweep.json"


@contextmanager
def _removed_on_error(tmp: str, path: Path):
    """Remove the temporary file ``tmp`` when the block raises; an ``OSError`` that names
    no file (a full disk: ``ENOSPC`` from ``write``) is raised again naming ``path``."""
    try:
        yield
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``.

    A reader never sees a partial file; an interrupted write leaves the old one.

    Raises
    ------
    OSError
        As the write raised it; one that names no file (a full disk: ``ENOSPC`` from
        ``write``) is raised again naming ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with _removed_on_error(tmp, path):
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; use what open() would
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)


#: key added to a JSON object whose NaN or infinite numbers were written as null
NON_FINITE = "non_finite"


def plain(obj: Any) -> Any:
    """``obj`` as plain JSON-able values: every mapping (a read-only section of a
    :class:`~grprune.record.runconfig.RunConfig`) a new ``dict``, every tuple a ``list``."""
    if isinstance(obj, Mapping):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def _finite(obj: Any, path: str, found: dict[str, str]) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        found[path or "."] = "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
        return None
    if isinstance(obj, Mapping):
        return {k: _finite(v, f"{path}.{k}" if path else str(k), found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v, f"{path}[{i}]", found) for i, v in enumerate(obj)]
    return obj


def to_json(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON (RFC 8259) text of ``obj``: NaN and infinities become ``null``.

    A JSON object with such values gets the key ``non_finite``: the path of each
    (``"train"``, ``"last.valid"``, ``"valid.selector.p_quantiles.0.5"``) and what it was
    (``"nan"``, ``"inf"``, ``"-inf"``). NaN marks a metric that was not computed (the
    training split when ``train.eval_train`` is off) or is undefined (ROC-AUC of a split
    with one class).

    Examples
    --------
    >>> to_json({"test": 0.5, "train": float("nan")}, indent=None)
    '{"test": 0.5, "train": null, "non_finite": {"train": "nan"}}'
    """
    found: dict[str, str] = {}
    clean = _finite(obj, "", found)
    if found and isinstance(clean, dict):
        clean[NON_FINITE] = found
    return json.dumps(clean, indent=indent, allow_nan=False)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented strict JSON (:func:`to_json`)."""
    atomic_write_bytes(path, (to_json(obj) + "\n").encode())


def atomic_save(path: str | Path, save_fn) -> None:
    """Atomically write a file produced by ``save_fn(file_object)`` (torch.save, np.savez)."""
    import io
    buf = io.BytesIO()
    save_fn(buf)
    atomic_write_bytes(path, buf.getvalue())


def atomic_save_to(path: str | Path, save_fn) -> None:
    """Atomically write a file that ``save_fn(temporary_path)`` writes by name
    (``dgl.save_graphs``): written beside ``path``, then moved over it with
    ``os.replace``; a failed write leaves the old file and no temporary one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    with _removed_on_error(tmp, path):
        save_fn(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)


def write_records(path: str | Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Atomically (re)write a JSON-lines file."""
    text = "".join(to_json(r, indent=None) + "\n" for r in records)
    atomic_write_bytes(path, text.encode())


def append_bytes(path: str | Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created with the umask's mode when absent) in one
    ``write``, then flush and fsync it.

    Not atomic: a crash mid-append can leave a torn last line, which
    :func:`read_records` skips and :func:`keep_records` removes.

    Raises
    ------
    OSError
        As the write raised it; one that names no file (a full disk) is raised again
        naming ``path``.
    """
    path = Path(path)
    try:
        with open(path, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise


def append_record(path: str | Path, record: Mapping[str, Any]) -> None:
    """Append one line of strict JSON (:func:`to_json`) to a JSON-lines file, flushed and
    fsync'ed (:func:`append_bytes`)."""
    append_bytes(path, (to_json(record, indent=None) + "\n").encode())


def keep_records(path: str | Path, n: int) -> None:
    """Cut a JSON-lines file to its first ``n`` lines, as they are written (their bytes
    unchanged, each ending in a newline); what follows, a torn last line included, is
    dropped. The file is replaced atomically (:func:`atomic_write_bytes`), and only when
    it changes; ``n`` 0 removes it. The caller checks that the lines are sound
    (:func:`read_records`)."""
    p = Path(path)
    if n <= 0:
        p.unlink(missing_ok=True)
        return
    try:
        data = read_run_file(p, MAX_RECORDS_BYTES)
    except FileNotFoundError:
        data = b""
    lines = data.splitlines(keepends=True)[:n]
    kept = b"".join(x if x.endswith((b"\n", b"\r")) else x + b"\n" for x in lines)
    if kept != data:
        atomic_write_bytes(p, kept)


#: the most bytes of a run's JSON file read (``config.json``, ``summary.json``, ...: grprune
#: writes a few KB)
MAX_JSON_BYTES = 16 << 20
#: the most bytes of ``results.jsonl`` read (one line of about 1 KB per epoch; at most
#: 100,000 epochs)
MAX_RECORDS_BYTES = 256 << 20


def read_run_file(path: str | Path, limit: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of a run file, read only when it is a regular file of at most ``limit``
    bytes (a symbolic link to one is followed; one to ``/dev/zero``, a FIFO or a
    directory is refused without reading it, and without waiting for a FIFO's writer).

    Parameters
    ----------
    path : str or Path
    limit : int
        The most bytes read (:data:`MAX_JSON_BYTES`, :data:`MAX_RECORDS_BYTES`).

    Raises
    ------
    OSError
        Naming ``path``: as :func:`os.open` raised it (``FileNotFoundError`` for a missing
        file), or with ``errno.EINVAL`` for a file that is not regular and ``errno.EFBIG``
        for one over ``limit`` bytes, its ``strerror`` a phrase in words.
    """
    import errno
    import stat
    path = str(path)
    # no wait on a FIFO (O_NONBLOCK: POSIX only)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, pipe or directory); "
                                        "grprune reads only regular files here", path)
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"over {limit:,} bytes, larger than any file grprune "
                                   f"writes there", path)
    return data


def read_records(path: str | Path) -> list[dict]:
    """Records of a JSON-lines file, up to the first line that is not a JSON object: a
    torn last line (crash mid-write) is dropped, and so is everything from a damaged
    line on (bytes that are not UTF-8, text that is not JSON), so the records returned
    are always the file's sound first ones. No regular file there (none, or a device):
    no records.

    Raises
    ------
    OSError
        For a file over :data:`MAX_RECORDS_BYTES` bytes, or unreadable
        (:func:`read_run_file`).
    """
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    for line in read_run_file(p, MAX_RECORDS_BYTES).splitlines():
        try:
            record = json.loads(line.decode())
        except (ValueError, RecursionError):  # not UTF-8 or JSON; 4,300 digits; nesting
            break
        if not isinstance(record, dict):
            break
        out.append(record)
    return out


def read_json(path: str | Path) -> Any | None:
    """Parsed JSON, or None if the file is missing, unreadable, not regular, over
    :data:`MAX_JSON_BYTES` bytes (:func:`read_run_file`) or not JSON."""
    try:
        return json.loads(read_run_file(path))
    except (OSError, ValueError, RecursionError):  # ValueError: JSON, UTF-8, digits
        return None


def damaged_zip_member(path: str | Path) -> str | None:
    """The first member of the zip archive ``path`` (what ``torch.save`` and
    ``np.savez`` write) whose bytes no longer match their CRC-32 or cannot be read; None
    when every member reads sound, or when ``path`` is no zip archive at all (its reader
    then decides).

    :func:`torch.load` does not check the CRC: a flipped byte inside a tensor would load
    as a silently different weight.
    """
    import zipfile
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return None
    with archive:
        for info in archive.infolist():
            try:
                with archive.open(info) as member:
                    while member.read(1 << 20):
                        pass
            except Exception:  # a CRC mismatch (BadZipFile), a damaged local header, ...
                return info.filename
    return None


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks.

    Raises
    ------
    OSError
        If the file can't be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
