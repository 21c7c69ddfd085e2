"""Typed records to their readers (issue 53): the ``on_epoch`` record, ``state.pt``
(:class:`TrainState`), ``error.json`` (:class:`ErrorRecord`), and ``results.jsonl``
appended one line per epoch (a torn last line skipped by readers, cut on resume)."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from grprune.record.files import ERROR, RESULTS, STATE, SUMMARY, keep_records, read_records, to_json
from grprune.record.epoch import EpochRecord
from grprune.record.error import ErrorRecord
from grprune.record.rundir import RunDir
from grprune.record.trainstate import STATE_KEYS, Best, TrainState

LINE = {"epoch": 2, "phase": "train", "lr": 0.001,
        "loss": {"total": 0.5, "kept_edge_fraction": 0.9},
        "valid": {"rocauc": 0.8, "kept_edge_fraction": 0.9},
        "epoch_time_s": 1.5, "train_time_s": 1.0, "best_epoch": 2}


# -- the on_epoch record ------------------------------------------------------------------
def test_improved_and_epochs_are_fields_the_line_does_not_hold():
    rec = dataclasses.replace(EpochRecord.from_dict(LINE), improved=True, epochs=10)
    assert rec.improved and rec.epochs == 10
    assert rec.to_dict() == LINE
    read = EpochRecord.from_dict(rec.to_dict())
    assert not read.improved and read.epochs is None  # as read back from the file


def test_a_line_with_the_callback_fields_reads_into_the_fields():
    rec = EpochRecord.from_dict({**LINE, "improved": True, "epochs": 10})
    assert rec.improved and rec.epochs == 10 and not rec.extra
    assert rec.to_dict() == LINE


# -- error.json ---------------------------------------------------------------------------
def test_the_run_s_error_json_writes_the_bytes_it_wrote_before(tmp_path):
    rundir = RunDir(tmp_path)
    rundir.write_error(ErrorRecord(message="loss became nan at epoch 3", kind="diverged",
                                   epoch=3, hash="abc123"))
    old = {"message": "loss became nan at epoch 3", "kind": "diverged", "epoch": 3,
           "hash": "abc123"}
    assert (tmp_path / ERROR).read_text() == to_json(old) + "\n"
    rec = rundir.error()
    assert rec is not None and rec.diverged and rec.epoch == 3 and rec.hash == "abc123"


def test_a_sweep_s_error_json_reads_typed_and_writes_back_what_it_held():
    sweep = {"kind": "diverged", "epoch": 1, "message": "ValueError: boom", "returncode": 1,
             "time": "2026-01-01T00:00:00Z", "command": "python -m grprune run",
             "hash": "abc", "log": "sweep.log", "stderr_tail": ["a", "ValueError: boom"]}
    rec = ErrorRecord.from_dict(sweep)
    assert rec.returncode == 1 and rec.stderr_tail == ("a", "ValueError: boom")
    assert rec.to_dict() == sweep and not rec.extra


def test_an_error_json_of_other_types_keeps_them_aside():
    odd = {"message": 7, "epoch": "3", "returncode": True, "kind": None, "note": "x"}
    rec = ErrorRecord.from_dict(odd)
    assert rec.message is None and rec.epoch is None and rec.returncode is None
    assert not rec.diverged and rec.to_dict() == odd


def test_an_error_json_that_is_no_object_reads_as_none(tmp_path):
    (tmp_path / ERROR).write_text("[1, 2]")
    assert RunDir(tmp_path).error() is None
    (tmp_path / ERROR).write_text("{torn")
    assert RunDir(tmp_path).error() is None


# -- state.pt -----------------------------------------------------------------------------
BEST = Best(epoch=0, valid=0.7, test=0.6, train=0.8, kept_test=0.5)


def _state(epoch: int = 1) -> dict:
    """A sound ``state.pt`` of a model without weights, as grprune writes it."""
    numpy_state: Any = np.random.get_state()  # the legacy 5-tuple
    kind, keys, pos, has_gauss, gauss = numpy_state
    version, words, py_gauss = random.getstate()
    rng = {"torch": torch.get_rng_state(),
           "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos),
                     int(has_gauss), float(gauss)],
           "python": [version, list(words), py_gauss],
           "loader": torch.Generator().get_state()}
    return {"epoch": epoch, "model": {}, "regs": {}, "optimizer": {},
            "best": dataclasses.asdict(BEST), "rng": rng,
            "n_records": epoch + 1, "stopped": False}


def test_a_state_pt_of_the_old_form_reads_typed_and_writes_the_same_keys(tmp_path):
    torch.save(_state(), tmp_path / STATE)
    state = RunDir(tmp_path).read_state(epochs=3)
    assert isinstance(state, TrainState) and state.best == BEST
    assert state.epoch == 1 and state.n_records == 2 and state.next_epoch(3) == 2
    assert list(state.to_dict()) == list(STATE_KEYS)
    RunDir(tmp_path).save_state(state)
    again = torch.load(tmp_path / STATE, weights_only=True)
    assert list(again) == list(STATE_KEYS) and again["best"] == _state()["best"]
    assert torch.equal(again["rng"]["torch"], state.rng["torch"])


def test_a_stopped_state_resumes_at_the_end():
    state = TrainState.from_dict({**_state(), "stopped": True})
    assert state.next_epoch(5) == 5


def test_an_unsound_state_is_refused_by_its_type():
    with pytest.raises(ValueError, match="its epoch is 7, outside this run's epochs 0..2"):
        TrainState.from_dict({**_state(), "epoch": 7, "n_records": 8}, epochs=3)
    with pytest.raises(ValueError, match="it lacks"):
        TrainState.from_dict({"epoch": 1})


# -- results.jsonl: appended, a torn line skipped and cut -------------------------------------
def _line(epoch: int) -> EpochRecord:
    return EpochRecord.from_dict({**LINE, "epoch": epoch, "best_epoch": epoch})


def test_records_are_appended_one_line_each(tmp_path):
    rundir = RunDir(tmp_path)
    for e in range(3):
        rundir.append_record(_line(e))
    text = (tmp_path / RESULTS).read_text()
    assert text == "".join(to_json(_line(e).to_dict(), indent=None) + "\n" for e in range(3))
    assert [r.epoch for r in rundir.records()] == [0, 1, 2]


def test_a_torn_last_line_is_skipped_by_readers_and_cut_on_resume(tmp_path):
    rundir = RunDir(tmp_path)
    for e in range(3):
        rundir.append_record(_line(e))
    sound = (tmp_path / RESULTS).read_bytes()
    torn = to_json(_line(3).to_dict(), indent=None).encode()[:25]
    with open(tmp_path / RESULTS, "ab") as fh:
        fh.write(torn)  # a crash mid-append
    assert [r.epoch for r in rundir.records()] == [0, 1, 2]
    assert [r.epoch for r in rundir.resumed_records(3)] == [0, 1, 2]
    rundir.keep_records(3)
    assert (tmp_path / RESULTS).read_bytes() == sound
    rundir.append_record(_line(3))
    assert [r.epoch for r in rundir.records()] == [0, 1, 2, 3]


def test_resuming_cuts_the_file_to_the_epochs_state_pt_counts(tmp_path):
    rundir = RunDir(tmp_path)
    for e in range(4):
        rundir.append_record(_line(e))
    lines = (tmp_path / RESULTS).read_bytes().splitlines(keepends=True)
    inode = (tmp_path / RESULTS).stat().st_ino
    rundir.keep_records(4)  # already so: nothing is written
    assert (tmp_path / RESULTS).stat().st_ino == inode
    rundir.keep_records(2)  # the epochs after state.pt's go
    assert (tmp_path / RESULTS).read_bytes() == b"".join(lines[:2])
    rundir.keep_records(0)  # a fresh start: no file
    assert not (tmp_path / RESULTS).exists()
    rundir.keep_records(0)


def test_a_sound_last_line_without_its_newline_gets_one(tmp_path):
    path = tmp_path / RESULTS
    path.write_bytes(b'{"epoch": 0}\n{"epoch": 1}')
    keep_records(path, 2)
    assert path.read_bytes() == b'{"epoch": 0}\n{"epoch": 1}\n'


# -- a run killed in the middle of an append ------------------------------------------------
_TEARER = """
import os, signal, sys
from pathlib import Path
from grprune.record import files
target, nth = sys.argv[1], int(sys.argv[2])
count, append = 0, files.append_bytes
def tear(path, data):
    global count
    if Path(path).name == target:
        count += 1
        if count == nth:  # half the line, on disk, then the process dies
            append(path, data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    append(path, data)
files.append_bytes = tear
from grprune.cli import main
main(sys.argv[3:])
"""

RUN = ["run", "--data", "ogbg-molbbbp", "--epochs", "4", "--device", "cpu", "--progress",
       "none", "--json", "-H", "data.limit=160", "-H", "train.batch_size=32"]
#: fields that measure time or memory, not the computation
VOLATILE = {"epoch_time_s", "train_time_s", "wall_time_s", "data_load_s", "peak_mem_mib",
            "peak_rss_mib", "epoch_time_s_median", "cache"}


def _numbers(run_dir: Path) -> tuple[list, dict]:
    from tests.conftest import strip_keys
    summary = json.loads((run_dir / SUMMARY).read_text())
    return (strip_keys(read_records(run_dir / RESULTS), VOLATILE),
            strip_keys(summary, VOLATILE))


def test_a_run_killed_mid_append_reads_without_the_torn_line_then_resumes_to_the_same_numbers(
        tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    subprocess.run([sys.executable, "-m", "grprune", *RUN, "--out", str(whole)], check=True,
                   capture_output=True, env=env, stdin=subprocess.DEVNULL)
    killed = subprocess.run([sys.executable, "-c", _TEARER, RESULTS, "3", *RUN, "--out",
                             str(cut)], capture_output=True, text=True, env=env,
                            stdin=subprocess.DEVNULL)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (cut / SUMMARY).exists()
    assert not (cut / RESULTS).read_bytes().endswith(b"\n")  # the torn third line
    assert [r["epoch"] for r in read_records(cut / RESULTS)] == [0, 1]
    subprocess.run([sys.executable, "-m", "grprune", *RUN, "--out", str(cut)], check=True,
                   capture_output=True, env=env, stdin=subprocess.DEVNULL)
    assert (cut / RESULTS).read_bytes().count(b"\n") == 4
    assert _numbers(cut) == _numbers(whole)
