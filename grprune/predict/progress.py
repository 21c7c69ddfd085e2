"""The progress display of a screen (:func:`grprune.predict.stream.screen_csv`) on stderr: a
line rewritten in place on a terminal; off a terminal (a log, CI), plain lines from the
start, so that a long first chunk never leaves the log silent."""

from __future__ import annotations

import sys
import time

#: plain progress lines: at most every this many seconds apart, else at each 10 %
PROGRESS_EVERY_S = 30.0


class Progress:
    """Progress of a screen on a stream (stderr): a rewritten line on a terminal, else
    plain lines: one at the start (:meth:`begin`, before anything is featurized), one after
    the first chunk, then one at every 10 % or :data:`PROGRESS_EVERY_S` seconds.

    Parameters
    ----------
    total : int or None
        Rows expected (an estimate; None: no ETA).
    mode : str
        ``auto``, ``plain`` or ``none``.
    """

    def __init__(self, total: int | None, mode: str = "auto", stream=None, start: int = 0):
        self.stream = stream if stream is not None else sys.stderr
        tty = getattr(self.stream, "isatty", lambda: False)()  # a stream may lack isatty
        self.mode = ("tty" if tty else "plain") if mode == "auto" else mode
        self.total, self.start, self.done = total, start, start
        self.t0 = self.last = time.perf_counter()
        self.next_tenth = 1

    def begin(self, name: str, first_rows: int) -> None:
        """The plain start line (``screening NAME: ...``), at once: what is to do, and when
        the next line comes (after the first chunk of ``first_rows`` rows)."""
        if self.mode != "plain":
            return
        rows = f"about {self.total:,} rows" if self.total else "its rows"
        after = f", after row {self.start:,}" if self.start else ""
        print(f"screening {name}: {rows}{after}; the next line after the first "
              f"{first_rows:,} are scored, then at every 10 % or {PROGRESS_EVERY_S:.0f} s",
              file=self.stream, flush=True)

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
