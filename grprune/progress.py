"""Per-epoch progress while a run trains, and its summary table when it ends: one
printer for ``grprune run`` and :func:`grprune.train` alike.

:func:`epoch_progress` wraps a run: it starts an :class:`EpochPrinter` (``train.progress``:
a rich line on a terminal, plain lines on stderr otherwise, or nothing), says where the run
goes, and hands back the ``on_epoch`` callback that :func:`grprune.run.execute` calls
with each epoch's :class:`~grprune.record.epoch.EpochRecord`. :func:`print_summary` prints the final metrics as a table.
"""

from __future__ import annotations

import math
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import click

from grprune.record.epoch import EpochRecord
from grprune.record.summary import RunSummary


def _fmt(value) -> str:
    """A score as printed: 4 decimals; NaN (a split of one class has no ROC-AUC, a
    diverged model no score) as ``undefined``."""
    if isinstance(value, float):
        return "undefined" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def _split_fields(rec: EpochRecord, metric: str) -> dict[str, str]:
    """``{"train": "train 0.9312", "valid": ..., "test": ...}`` for the evaluated splits."""
    return {split: f"{split} {_fmt(rec.value(split, metric))}"
            for split in ("train", "valid", "test") if split in rec.scores}


def _clock(seconds: float | None) -> str:
    """``H:MM:SS`` for a duration in seconds; ``-:--:--`` when it is not known yet."""
    if seconds is None or not math.isfinite(seconds):
        return "-:--:--"
    seconds = int(round(max(seconds, 0.0)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class _EpochLine:
    """The rich progress line, laid out anew for the width it is given (a rich renderable).

    Always shown: the epoch counter, the new-best ``*`` and the ETA, estimated from the
    mean ``epoch_time_s`` (seconds) of the last :attr:`ETA_WINDOW` epochs. The other
    fields and the bar join in :attr:`PRIORITY` order while they fit, shown in
    :attr:`ORDER`; a bar shown takes the width left, :attr:`MIN_BAR` to :attr:`MAX_BAR` cells.
    The line needs about 32 columns (100 epochs); on a narrower terminal it wraps.
    """

    PRIORITY = ("valid", "test", "kept", "phase", "loss", "bar", "train", "elapsed")
    ORDER = ("phase", "loss", "train", "valid", "test", "kept", "elapsed")
    MIN_BAR, MAX_BAR, ETA_WINDOW = 10, 40, 5

    def __init__(self, epochs: int) -> None:
        import time
        self.epochs, self.metric = epochs, "?"
        self.rec: EpochRecord | None = None
        self.times: list[float] = []
        self.started = time.monotonic()

    def update(self, rec: EpochRecord | Mapping[str, Any], metric: str) -> None:
        """Show one finished epoch's record (what ``run``'s ``on_epoch`` gets; a line of
        ``results.jsonl``, a dict, is read with :meth:`EpochRecord.from_dict`)."""
        self.rec, self.metric = EpochRecord.from_dict(rec), metric
        self.times = [*self.times, float(self.rec.epoch_time_s or 0.0)][-self.ETA_WINDOW:]

    def _fields(self) -> dict[str, str]:
        import time
        rec = self.rec
        assert rec is not None  # fields are drawn after the first update
        fields = {"phase": f"[{rec.phase}]", "loss": f"loss {rec.total_loss:.4f}",
                  "kept": f"train kept {rec.train_kept:.2f}",
                  "elapsed": f"elapsed {_clock(time.monotonic() - self.started)}"}
        fields.update(_split_fields(rec, self.metric))
        return fields

    def __rich_console__(self, console, options):
        from rich.cells import cell_len
        from rich.text import Text
        rec, done = self.rec, 0 if self.rec is None else self.rec.epoch + 1
        head = f"epoch {'-' if rec is None else rec.epoch:>3} ({done}/{self.epochs})"
        eta = sum(self.times) / len(self.times) * (self.epochs - done) if self.times else None
        tail = f"{'*' if rec is not None and rec.improved else ' '} ETA {_clock(eta)}"
        room = options.max_width - cell_len(head) - cell_len(tail) - 2
        fields = {} if rec is None else self._fields()
        costs = {"bar": 1 + self.MIN_BAR, **{k: 2 + cell_len(v) for k, v in fields.items()}}
        shown = set()
        for key in (k for k in self.PRIORITY if k in costs):  # " " + bar, "  " + a field
            if costs[key] <= room:
                shown.add(key)
                room -= costs[key]
        line = Text()
        line.append(head, style="bold")
        if "bar" in shown:
            bar = min(self.MIN_BAR + room, self.MAX_BAR)
            filled = bar * min(done, self.epochs) // max(self.epochs, 1)
            line.append(" ")
            line.append("━" * filled, style="bar.finished" if done >= self.epochs
                        else "bar.complete")
            line.append("━" * (bar - filled), style="bar.back")
        for key in (k for k in self.ORDER if k in shown):
            line.append((" " if line.plain.endswith("]") or key == "phase" else "  ")
                        + fields[key])
        line.append("  " if shown else " ")
        line.append(tail[0], style="bold")
        line.append(tail[1:], style="progress.remaining")
        yield line


class EpochPrinter:
    """Per-epoch progress: a rich line on a terminal, plain lines otherwise.

    Parameters
    ----------
    mode : str
        ``"auto"`` (rich when stderr is a terminal, else plain), ``"rich"``, ``"plain"``
        or ``"none"``.
    metric : str
        The metric key of the records' ``train`` / ``valid`` / ``test`` dicts; the caller
        may set :attr:`metric` before each call.
    epochs : int
        The run's number of epochs (``train.epochs``).
    title : str
        The run's title; kept for callers, the line itself shows the epoch counter.
    console : rich.console.Console, optional
        Where the rich line goes [default: a console on stderr].

    The rich line always keeps the epoch counter, the new-best ``*`` and the ETA, and
    drops the bar and the other fields first on a narrow terminal (see :class:`_EpochLine`).
    """

    def __init__(self, mode: str, metric: str, epochs: int, title: str, *,
                 console=None) -> None:
        if mode == "auto":
            mode = "rich" if sys.stderr.isatty() else "plain"
        self.mode, self.metric, self.epochs, self.title = mode, metric, epochs, title
        self.live: Any = None  # a rich Live in "rich" mode
        if mode == "rich":
            from rich.console import Console
            from rich.live import Live
            self.line = _EpochLine(epochs)
            self.live = Live(self.line, console=console or Console(stderr=True),
                             refresh_per_second=4, transient=False)
            self.live.start()

    def __call__(self, rec: EpochRecord | Mapping[str, Any]) -> None:
        """Show one finished epoch (its ``improved`` draws the new-best ``*``); a line of
        ``results.jsonl``, a dict, is read with :meth:`EpochRecord.from_dict`."""
        if self.mode == "rich":
            self.line.update(rec, self.metric)
            self.live.refresh()
        elif self.mode == "plain":
            r = EpochRecord.from_dict(rec)
            parts = [f"loss {r.total_loss:.4f}", *_split_fields(r, self.metric).values(),
                     f"train kept {r.train_kept:.2f}"]
            info = "  ".join(parts) + ("  *" if r.improved else "")
            # epochs are numbered from 0, as in results.jsonl and summary.json's best_epoch;
            # (n/N) counts the epochs done
            click.echo(f"epoch {r.epoch:>3} ({r.epoch + 1}/{self.epochs}) "
                       f"[{r.phase}] {info} ({r.epoch_time_s or 0.0:.1f}s)", err=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def print_summary(summary: RunSummary | dict, run_dir: Path, status: str) -> None:
    """The final metrics as a rich table on stdout, then what the model is where a user
    could take it for another (:meth:`RunSummary.model_notes`: an ERM warm-up model of a
    run with a selector, early stopping), one ``note:`` line each."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from grprune.naming import method_label
    s = RunSummary.from_dict(summary)
    m = s.metric
    table = Table(title=f"{s.dataset} ({s.split}) - {status}", show_header=True)
    table.add_column("field")
    table.add_column("value", justify="right")
    rows = [("method", method_label(s.reg, s.selector, s.preset)),
            ("selector", s.selector), ("seed", s.seed),
            ("best epoch (from 0)", _best_epoch_text(s)),
            ("epochs run", _epochs_run_text(s)), (f"valid {m}", s.valid),
            (f"test {m}", s.test)]
    if s.in_distribution:
        rows[-2:] = [(f"OOD-valid {m}", s.valid), (f"OOD-test {m}", s.test),
                     (f"ID-valid {m}", s.id_valid), (f"ID-test {m}", s.id_test)]
    if s.motif_edge_rocauc is not None:
        rows.append(("motif edge ROC-AUC (test)", s.motif_edge_rocauc))
    rows += [("kept edge fraction (test)", s.kept_edge_fraction),
             ("wall time (s)", s.wall_time_s),
             ("median epoch time (s)", s.epoch_time_s_median),
             ("peak memory (MiB)", s.peak_mem_mib),
             ("device", s.device), ("run directory", str(run_dir))]
    for name, value in rows:
        table.add_row(name, escape(_fmt(value)) if value is not None else "-")  # run dir
    console = Console(width=100)
    console.print(table)
    for note in s.model_notes():
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)


def _best_epoch_text(s: RunSummary) -> str:
    """``7``, or ``7 (ERM warm-up: no selector)`` for a warm-up model of a selector run."""
    return f"{s.best_epoch} (ERM warm-up: no selector)" if s.warmup_model else str(s.best_epoch)


def _epochs_run_text(s: RunSummary) -> str:
    """``60 of 100 (early stop, patience 50)``, or the number of epochs trained."""
    stop = s.early_stop
    if stop is None:
        return str(s.epochs_run)
    return f"{s.epochs_run} of {stop.epochs} (early stop, patience {stop.patience})"


@contextmanager
def epoch_progress(mode: str, epochs: int, title: str, run_dir: Path, *,
                   log: Callable[[str], None],
                   on_epoch: Callable[[EpochRecord], None] | None = None,
                   ) -> Iterator[Callable[[EpochRecord], None]]:
    """The progress of one run, from its first epoch to its end (a context manager).

    Parameters
    ----------
    mode : str
        ``train.progress``: ``"auto"``, ``"rich"``, ``"plain"`` or ``"none"``
        (:class:`EpochPrinter`).
    epochs : int
        The run's number of epochs (``train.epochs``).
    title : str
        The run's title (``RunPlan.title``); ``log`` gets ``"<title> -> <run_dir>"``
        first, unless ``mode`` is ``"none"``.
    run_dir : Path
        The run directory.
    log : callable
        Writes one message line (the caller's own ``"grprune: ..."`` on stderr).
    on_epoch : callable, optional
        The caller's own callback, called after the printer with each epoch's
        :class:`~grprune.record.epoch.EpochRecord`, the same object.

    Yields
    ------
    callable
        The ``on_epoch`` callback for :func:`grprune.run.execute`: each epoch's
        :class:`~grprune.record.epoch.EpochRecord` (its ``results.jsonl`` line, with
        ``improved`` and ``epochs``) to the printer, then to ``on_epoch``. The printer
        is closed when the block ends, also on an error or Ctrl-C.
    """
    printer = EpochPrinter(mode, "?", epochs, title)
    if printer.mode != "none":
        log(f"{title} -> {run_dir}")

    def callback(rec: EpochRecord) -> None:
        printer.metric = EpochRecord.from_dict(rec).metric or printer.metric
        printer(rec)
        if on_epoch is not None:
            on_epoch(rec)

    try:
        yield callback
    finally:
        printer.close()
