"""CSV input read in bounded memory whatever its cells hold: a cell of more than
:data:`CELL_LIMIT` bytes is never held whole, but replaced, as it streams past, by a short
note of its size (:func:`cut_note`), so that its row is read (its other cells intact) and
skipped with a reason (:func:`grprune.data.molecules.too_large_reason` reads the note);
and a header's names shown short in messages (:func:`shown_names`).

pandas' reader holds each cell whole (a 1-GiB SMILES cell costs several GiB), and so
would Python's :mod:`csv` (its ``field_size_limit`` refuses a long cell only once the
line holding it is read). :class:`BoundedCells` sits between the (decompressed) file and
pandas: it finds each cell's end by the CSV rules (a comma or a line break outside
double quotes; ``""`` inside quotes is a quote) with numpy over blocks of
:data:`BLOCK_BYTES`, passes the bytes through unchanged while every cell is short, and
holds back at most one cell of :data:`CELL_LIMIT` bytes. Memory is a few blocks, whatever
the file.

Example
-------
>>> import io
>>> src = io.BytesIO(b'id,smiles\\nA,' + b'C' * 3000 + b'\\nB,CCO\\n')
>>> bounded_bytes(src, limit=1000).decode()
'id,smiles\\nA,"<a cell of 3,000 bytes, not read>"\\nB,CCO\\n'
"""

from __future__ import annotations

import io
import re
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator, Sequence

import numpy as np

from grprune.messages import short_text

#: the most bytes of one CSV cell read (1 MiB): a SMILES is refused past 100,000 bytes
#: (:data:`grprune.data.molecules.MAX_SMILES_BYTES`), and IDs and names are short
CELL_LIMIT = 1 << 20
#: bytes read from the file at a time
BLOCK_BYTES = 1 << 20
_NOTE = re.compile(r"<a cell of ([0-9,]{1,30}) bytes, not read>")
_QUOTE, _COMMA, _NEWLINE = 34, 44, 10


def cut_note(size: int) -> str:
    """The text that stands for a cell of ``size`` bytes that was not read.

    >>> cut_note(1 << 30)
    '<a cell of 1,073,741,824 bytes, not read>'
    """
    return f"<a cell of {size:,} bytes, not read>"


def cut_size(text: str) -> int | None:
    """The size in bytes of the cell that ``text`` stands for (:func:`cut_note`), or None
    when ``text`` is a cell as read (no SMILES starts with ``<``).

    >>> cut_size(cut_note(5_000_000)), cut_size("CCO")
    (5000000, None)
    """
    if not text.startswith("<a cell of "):
        return None
    m = _NOTE.fullmatch(text)
    return int(m.group(1).replace(",", "")) if m else None


class BoundedCells(io.RawIOBase):
    """A binary stream over ``source`` (a binary file, decompressed) in which each CSV
    cell of more than ``limit`` bytes is replaced by ``"<a cell of N bytes, not read>"``
    (quoted); every other byte passes unchanged.

    Parameters
    ----------
    source : binary file
    limit : int
        The most bytes of one cell (quotes included), :data:`CELL_LIMIT` by default.
    block : int
        Bytes read from ``source`` at a time.
    """

    def __init__(self, source: IO[bytes], limit: int = CELL_LIMIT,
                 block: int = BLOCK_BYTES) -> None:
        super().__init__()
        self.source, self.limit, self.block = source, limit, block
        self.ready = bytearray()  # bytes that may be read
        self.held = b""  # the cell in progress (at most limit bytes), after a cell's end
        self.skipped: int | None = None  # bytes of a long cell so far, while passing it
        self.parity = 0  # quotes seen in the long cell being passed, mod 2
        self.eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while not self.ready and not self.eof:
            self._pull()
        n = min(len(buf), len(self.ready))
        buf[:n] = self.ready[:n]
        del self.ready[:n]
        return n

    def _pull(self) -> None:
        data = self.source.read(self.block)
        if not data:
            self.eof = True
            if self.skipped is not None:
                self._note(self.skipped)
            self.ready += self.held
            self.held = b""
            return
        if self.skipped is not None:
            rest = self._pass_long(data)
            if rest is None:
                return
            data = rest
        self._scan(self.held + data)

    def _note(self, size: int) -> None:
        self.ready += b'"' + cut_note(size).encode() + b'"'
        self.skipped = None

    def _pass_long(self, data: bytes) -> bytes | None:
        """Bytes of a long cell dropped and counted; what follows its end (None: it goes on)."""
        ends = (_cell_ends(data, self.parity) if b"," in data or b"\n" in data
                else np.zeros(0, dtype=np.int64))
        if not len(ends):
            self.skipped = (self.skipped or 0) + len(data)
            self.parity = (self.parity + data.count(b'"')) & 1
            return None
        end = int(ends[0])
        self._note((self.skipped or 0) + end)
        self.ready += data[end:end + 1]
        return data[end + 1:]

    def _scan(self, data: bytes) -> None:
        """Pass ``data`` (starting at a cell's start) on, cutting each cell over the limit."""
        while True:
            ends = _cell_ends(data, 0)
            starts = np.concatenate(([0], ends + 1))
            lengths = ends - starts[:-1]
            long = np.flatnonzero(lengths > self.limit)
            if len(long):  # a whole long cell in data: its note, then the rest
                k = int(long[0])
                self.ready += data[:int(starts[k])]
                self._note(int(lengths[k]))
                self.ready += data[int(ends[k]):int(ends[k]) + 1]
                data = data[int(ends[k]) + 1:]
                continue
            cut = int(starts[-1])
            self.ready += data[:cut]
            self.held = data[cut:]
            if len(self.held) > self.limit:  # a long cell goes on past data: pass it
                self.skipped, self.parity = len(self.held), self.held.count(b'"') & 1
                self.held = b""
            return


def _cell_ends(data: bytes, parity: int) -> np.ndarray:
    """Offsets of the commas and line breaks of ``data`` outside quotes (``parity``: 1 when
    ``data`` starts inside a quoted cell), int64 ascending."""
    arr = np.frombuffer(data, dtype=np.uint8)
    quotes = np.cumsum(arr == _QUOTE, dtype=np.uint8)  # wraps at 256: the parity is kept
    outside = ((quotes + parity) & 1) == 0
    return np.flatnonzero(((arr == _COMMA) | (arr == _NEWLINE)) & outside).astype(np.int64)


def shown_names(names: Sequence[str], limit: int = 200) -> str:
    """A list of names (a header's columns) for a message, comma-separated, at most about
    ``limit`` characters: each long name shortened (:func:`grprune.messages.short_text`),
    and the names past the limit counted.

    >>> shown_names(["ID", "smiles", "y" * 500], 100)
    'ID, smiles, yyyyyyyyyyyyyyyyyyyy...yyyyyyyyyyyyyyyyyyyy (500 characters)'
    >>> shown_names([f"c{i}" for i in range(100)], 30)
    'c0, c1, c2, c3, c4, c5, c6, ... (100 in all)'
    """
    out: list[str] = []
    used = 0
    for name in names:
        text = short_text(name, 60)
        if out and used + len(text) + 2 > limit:
            return ", ".join(out) + f", ... ({len(names):,} in all)"
        out.append(text)
        used += len(text) + 2
    return ", ".join(out) or "none"


def bounded_bytes(source: IO[bytes], limit: int = CELL_LIMIT) -> bytes:
    """All of ``source`` through :class:`BoundedCells` (for tests and small files)."""
    return BoundedCells(source, limit).read()


@contextmanager
def open_csv(path: str | Path, limit: int = CELL_LIMIT) -> Iterator[IO[bytes]]:
    """The CSV file ``path`` (plain or compressed as pandas infers from the suffix:
    gzip, bz2, xz, zip, zstd, tar) as a buffered binary stream for :func:`pandas.read_csv`,
    each cell over ``limit`` bytes cut (:class:`BoundedCells`).

    Raises
    ------
    OSError
        If the file cannot be opened (a missing compression package: ImportError).
    """
    from pandas.io.common import get_handle
    with get_handle(path, "rb", compression="infer", is_text=False) as handles:
        yield io.BufferedReader(BoundedCells(handles.handle, limit), BLOCK_BYTES)
