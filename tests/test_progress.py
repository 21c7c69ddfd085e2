"""The progress of ``grprune run`` and :func:`grprune.train` (:mod:`grprune.progress`).

The rich line, rendered into consoles of set widths: the epoch counter, the new-best
``*`` and the ETA stay on one line that fits, from 60 columns up; the other fields and the
bar give way first."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from grprune.progress import EpochPrinter, epoch_progress
from grprune.record.epoch import EpochRecord

EPOCHS = 100


#: the scores of the records here: the total loss, train, valid and test ROC-AUC, the
#: fraction of bonds kept in training, and the epoch's seconds
SCORES = (0.3121, 0.9012, 0.9568, 0.6753, 0.85, 1.9)
#: the README job's epoch 86 (docs/cli.md's lines)
README_JOB = (3.7706, 0.9627, 0.9512, 0.6919, 0.51, 1.3)


def _line(epoch: int, phase: str = "train", scores: tuple = SCORES) -> dict:
    """A ``results.jsonl`` line."""
    total, train, valid, test, kept, seconds = scores
    return {"epoch": epoch, "phase": phase, "lr": 1e-3,
            "loss": {"total": total, "kept_edge_fraction": kept},
            "train": {"rocauc": train, "kept_edge_fraction": 0.9},
            "valid": {"rocauc": valid, "kept_edge_fraction": 0.9},
            "test": {"rocauc": test, "kept_edge_fraction": 0.9},
            "epoch_time_s": seconds, "train_time_s": 1.0, "best_epoch": epoch}


def _record(epoch: int, *, improved: bool, phase: str = "train",
            scores: tuple = SCORES) -> EpochRecord:
    """An epoch record as ``run``'s ``on_epoch`` gets it (see grprune/trainer.py)."""
    import dataclasses
    return dataclasses.replace(EpochRecord.from_dict(_line(epoch, phase, scores)),
                               improved=improved, epochs=EPOCHS)


def _frames(width: int, records: list[EpochRecord]) -> list[str]:
    """Every frame the rich line drew, the last one drawn by ``close()``."""
    console = Console(file=io.StringIO(), width=width, force_terminal=True,
                      color_system=None, record=True)
    printer = EpochPrinter("rich", "rocauc", EPOCHS, "ogbg-molbbbp PrunE seed 0",
                           console=console)
    try:
        for rec in records:
            printer(rec)
    finally:
        printer.close()
    # the cursor moves between frames are control codes, which export_text leaves out
    text = console.export_text(styles=False)
    return [f.rstrip("\n") for f in re.split(r"(?=epoch )", text) if f.strip()]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_counter_star_and_eta_fit_the_width(width):
    records = [_record(e, improved=e in (3, 82)) for e in range(83)]
    last = _frames(width, records)[-1]
    assert "\n" not in last and cell_len(last) <= width, last
    assert last.startswith("epoch  82 (83/100)"), last
    # 17 epochs to go at 1.9 s each: 32 s
    assert last.endswith("* ETA 0:00:32"), last
    assert "valid 0.9568" in last and "test 0.6753" in last, last
    if width >= 80:
        assert "train kept 0.85" in last, last
    if width >= 120:
        assert "[train]" in last and "loss 0.3121" in last and "━" in last, last


def test_the_star_marks_only_an_epoch_that_improved():
    records = [_record(e, improved=e == 0) for e in range(2)]
    frames = _frames(80, records[:1])
    assert frames[-1].endswith("* ETA 0:03:08"), frames[-1]  # 99 epochs at 1.9 s
    frames = _frames(80, records)
    assert frames[-1].startswith("epoch   1 (2/100)"), frames[-1]
    assert "*" not in frames[-1] and frames[-1].endswith("ETA 0:03:06"), frames[-1]


def test_before_the_first_epoch_the_eta_is_unknown():
    frames = _frames(80, [])
    assert frames[-1].startswith("epoch   - (0/100)") and frames[-1].endswith("ETA -:--:--")


def test_a_warmup_epoch_says_so_where_there_is_room():
    last = _frames(120, [_record(0, improved=False, phase="warmup")])[-1]
    assert "[warmup]" in last and last.endswith("ETA 0:03:08"), last


def test_plain_lines_keep_every_field(capsys):
    printer = EpochPrinter("plain", "rocauc", EPOCHS, "t")
    printer(_record(82, improved=True))
    printer.close()
    line = capsys.readouterr().err.strip()
    assert line == ("epoch  82 (83/100) [train] loss 0.3121  train 0.9012  valid 0.9568  "
                    "test 0.6753  train kept 0.85  * (1.9s)")


def test_the_lines_in_docs_cli_md_are_what_the_terminal_shows():
    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    shown = [x for x in text.splitlines() if x.startswith("epoch  86 (87/100)") and "ETA" in x]
    assert len(shown) == 2, shown
    records = [_record(e, improved=e == 86, scores=README_JOB) for e in range(87)]
    for line, width in zip(shown, (120, 80)):
        assert _frames(width, records)[-1] == line


def test_epoch_progress_says_where_the_run_goes_then_prints_and_passes_each_epoch_on(capsys):
    """What the CLI and the API share: the title line through ``log``, each record to the
    printer and then to the caller's ``on_epoch``; nothing at all with progress ``none``."""
    logged: list[str] = []
    seen: list[EpochRecord] = []
    records = [_record(e, improved=e == 0) for e in range(2)]
    with epoch_progress("plain", EPOCHS, "t", Path("runs/x"), log=logged.append,
                        on_epoch=seen.append) as on_epoch:
        for rec in records:
            on_epoch(rec)
    assert logged == [f"t -> {Path('runs/x')}"] and seen == records
    lines = capsys.readouterr().err.splitlines()
    assert [x[:18] for x in lines] == ["epoch   0 (1/100) ", "epoch   1 (2/100) "], lines
    assert "valid 0.9568" in lines[0], lines  # the records' own metric, rocauc

    logged.clear()
    seen.clear()
    with epoch_progress("none", EPOCHS, "t", Path("runs/x"), log=logged.append,
                        on_epoch=seen.append) as on_epoch:
        on_epoch(records[0])
    assert logged == [] and seen == records[:1] and capsys.readouterr().err == ""


def test_epoch_progress_closes_the_printer_when_the_run_stops(monkeypatch):
    from grprune import progress
    closed = []
    monkeypatch.setattr(progress.EpochPrinter, "close", lambda self: closed.append(self.mode))
    with pytest.raises(KeyboardInterrupt):
        with epoch_progress("plain", EPOCHS, "t", Path("runs/x"), log=lambda msg: None) as cb:
            cb(_record(0, improved=True))
            raise KeyboardInterrupt
    assert closed == ["plain"]


def test_the_record_is_passed_on_as_it_is_and_its_callback_fields_are_not_in_the_line():
    rec = _record(3, improved=True)
    seen: list[EpochRecord] = []
    with epoch_progress("none", EPOCHS, "t", Path("runs/x"), log=lambda m: None,
                        on_epoch=seen.append) as on_epoch:
        on_epoch(rec)
    assert seen[0] is rec and rec.improved and rec.epochs == EPOCHS
    assert rec.to_dict() == _line(3)  # improved and epochs are never written


def test_a_dict_of_the_old_form_still_prints(capsys):
    """Code that calls the printer with the dict ``on_epoch`` got before issue 53."""
    printer = EpochPrinter("plain", "rocauc", EPOCHS, "t")
    printer({**_line(82), "improved": True, "epochs": EPOCHS})
    printer.close()
    assert capsys.readouterr().err.strip().endswith("train kept 0.85  * (1.9s)")
