"""End-to-end runs through the CLI on a small slice of ogbg-molbbbp."""

from __future__ import annotations

from typing import Any
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from grprune.record.files import (CHECKPOINT, CONFIG, EDGE_PROBS, RESULTS, STATE, SUMMARY,
                                  read_records)
from grprune.cli import main
from grprune.record.runconfig import RunConfig
from grprune.record.settings import config_hash
from grprune.resolve import resolve_config
from grprune.run import execute

# the paper preset: its selector trains from the first epoch (official warms up for 10)
SMALL = ["--data", "ogbg-molbbbp", "--preset", "paper", "--epochs", "2", "-H", "data.limit=96",
         "-H", "train.batch_size=32", "--progress", "plain", "--device", "cpu"]


def _run(args, out):
    return CliRunner().invoke(main, ["run", *args, "--out", str(out)], catch_exceptions=False)


def _metrics(run_dir):
    """Per-epoch numbers without timings, flattened to ``key -> value``."""
    flat: dict[tuple, Any] = {}
    for rec in read_records(run_dir / RESULTS):
        for key, value in rec.items():
            if isinstance(value, dict):
                for k, v in value.items():
                    flat[(rec["epoch"], key, k)] = v
            elif "time" not in key:
                flat[(rec["epoch"], key)] = value
    return flat


def assert_same_numbers(a, b):
    """Equal up to float32 reduction-order noise (oneDNN may block sums differently)."""
    ma, mb = _metrics(a), _metrics(b)
    assert ma.keys() == mb.keys()
    for key in ma:
        if isinstance(ma[key], float):
            assert ma[key] == pytest.approx(mb[key], rel=1e-4, abs=1e-5), key
        else:
            assert ma[key] == mb[key], key


def test_prune_run_writes_the_run_directory(tmp_path):
    out = tmp_path / "run"
    res = _run(["--selector", "gumbel-gin", "--reg", "size,eps-align", *SMALL], out)
    assert res.exit_code == 0, res.output
    for name in (CONFIG, RESULTS, SUMMARY, CHECKPOINT, EDGE_PROBS):
        assert (out / name).is_file(), name
    assert not (out / STATE).exists()
    summary = json.loads((out / SUMMARY).read_text())
    for key in ("dataset", "metric", "best_epoch", "valid", "test", "kept_edge_fraction",
                "wall_time_s", "peak_mem_mib"):
        assert key in summary
    assert summary["metric"] == "rocauc" and 0 <= summary["kept_edge_fraction"] <= 1
    env = summary["environment"]  # the code and hardware behind the numbers
    assert env["cpu"] and env["cpu_count"] >= 1 and env["gpu"] is None and env["torch"]
    assert env["commit"] is None or len(env["commit"].split("-")[0]) == 7
    records = read_records(out / RESULTS)
    assert len(records) == 2
    assert set(records[0]["loss"]) >= {"ce", "size", "eps-align", "total"}
    assert set(records[0]) >= {"train", "valid", "test"}
    cfg = json.loads((out / CONFIG).read_text())
    assert cfg["reg"]["size"]["eta"] == 0.85 and cfg["selector"]["name"] == "gumbel-gin"
    probs = np.load(out / EDGE_PROBS)
    assert probs["edge_ptr"][-1] == len(probs["edge_prob"]) == len(probs["src"])
    assert len(probs["graph_index"]) == 96 and len(probs["smiles"]) == 96


def test_rerun_is_a_noop_and_force_reruns(tmp_path):
    out = tmp_path / "run"
    assert _run(["--reg", "none", *SMALL], out).exit_code == 0
    before = (out / SUMMARY).stat().st_mtime_ns
    res = _run(["--reg", "none", *SMALL], out)
    assert res.exit_code == 0 and "already holds this finished run" in res.output
    assert (out / SUMMARY).stat().st_mtime_ns == before
    other = _run(["--reg", "none", *SMALL, "--seed", "5"], out)
    assert other.exit_code == 2 and "different configuration" in other.output
    assert _run(["--reg", "none", *SMALL, "--force"], out).exit_code == 0
    assert (out / SUMMARY).stat().st_mtime_ns != before


def test_same_seed_same_numbers(tmp_path):
    args = ["--reg", "size,eps-align", *SMALL]
    assert _run(args, tmp_path / "a").exit_code == 0
    assert _run(args, tmp_path / "b").exit_code == 0
    assert_same_numbers(tmp_path / "a", tmp_path / "b")


def test_interrupted_run_resumes_to_the_same_result(tmp_path):
    cfg = resolve_config(reg="size,eps-align", preset="paper", flags={
        "train.epochs": 3, "data.limit": 64, "train.batch_size": 32, "train.device": "cpu"})
    execute(cfg, tmp_path / "full", log=lambda m: None)

    def stop_after_first(record):
        if record.epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(cfg, tmp_path / "cut", on_epoch=stop_after_first, log=lambda m: None)
    assert not (tmp_path / "cut" / SUMMARY).exists()
    status, _ = execute(cfg, tmp_path / "cut", log=lambda m: None)
    assert status == "resumed"
    assert_same_numbers(tmp_path / "cut", tmp_path / "full")


class _RunsCode:
    """Unpickling it would create the file named by its argument."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


@pytest.mark.parametrize("content", ["code", "garbage"])
def test_a_state_file_that_would_run_code_or_is_corrupt_is_refused_and_kept_aside(
        tmp_path, content):
    import pickle
    out, marker = tmp_path / "run", tmp_path / "code-ran"
    args = [*SMALL, "--epochs", "3"]

    def stop_after_first(record):
        raise KeyboardInterrupt

    cfg = resolve_config(reg="size,eps-align", preset="paper", flags={
        "train.epochs": 3, "data.limit": 96, "train.batch_size": 32, "train.device": "cpu",
        "train.progress": "plain"})
    with pytest.raises(KeyboardInterrupt):
        execute(cfg, out, on_epoch=stop_after_first, log=lambda m: None)
    state = out / STATE
    assert state.is_file()
    bad = (pickle.dumps({"epoch": 0, "x": _RunsCode(marker)}) if content == "code"
           else b"\x80\x04not a state")
    state.write_bytes(bad)
    res = CliRunner().invoke(main, ["run", *args, "--out", str(out)])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.startswith("grprune: error")]
    assert len(lines) == 1 and "state.rejected.pt" in lines[0], res.output
    assert "Traceback" not in res.output
    assert not marker.exists()  # nothing of the pickle ran
    assert (out / "state.rejected.pt").read_bytes() == bad and not state.exists()
    assert not (out / SUMMARY).exists()
    again = _run(args, out)  # the same command starts the run over
    assert again.exit_code == 0, again.output
    assert (out / SUMMARY).is_file() and not marker.exists()


@pytest.mark.parametrize("args, message", [
    (["--reg", "nope"], "unknown regularizer 'nope'"),
    (["--selector", "gumbel-gni"], "Did you mean 'gumbel-gin'"),
    (["-H", "reg.size.eta=high"], "bad value 'high' for reg.size.eta"),
    (["--data", "mystery"], "unknown dataset 'mystery'"),
    (["--split", "random"], "Choices: scaffold, size"),
    (["--config", "/nonexistent.yaml"], "config file not found"),
])
def test_bad_input_exits_2_with_one_message(args, message, tmp_path):
    res = CliRunner().invoke(main, ["run", *args, "--out", str(tmp_path / "x")])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


def test_console_entry_point_bad_name_has_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "grprune", "run", "--reg", "nope"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("grprune: error: unknown regularizer 'nope'")
    assert "size" in proc.stderr and "eps-align" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ls_lists_parts_and_defaults():
    res = CliRunner().invoke(main, ["ls"])
    assert res.exit_code == 0
    for text in ("gumbel-gin", "gumbel-gcn", "gin", "size", "eps-align", "ogbg-molbbbp",
                 "reg.size.eta", "0.85", "selector.tau", "train.epochs"):
        assert text in res.output, text


def test_options_fall_back_to_environment_variables(tmp_path):
    res = CliRunner().invoke(main, ["run", "--out", str(tmp_path / "x")],
                             env={"GRPRUNE_RUN_REG": "nope"})
    assert res.exit_code == 2 and "unknown regularizer 'nope'" in res.output


def test_run_files_are_readable_by_others(tmp_path):
    import os

    from grprune.record.files import atomic_write_json
    umask = os.umask(0)
    os.umask(umask)
    atomic_write_json(tmp_path / "x.json", {"a": 1})  # mkstemp alone would give 0600
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_run_shorter_than_warmup_reports_the_last_model(tmp_path):
    res = _run([*SMALL, "-H", "train.warmup_epochs=5", "--json", "--progress", "none"],
               tmp_path / "w")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output[res.output.index("{"):])
    assert summary["selected"] == "last-epoch" and summary["best_epoch"] == 1
    assert summary["valid"] is not None and summary["kept_edge_fraction"] == 1.0
    last = read_records(tmp_path / "w" / RESULTS)[-1]
    assert summary["test"] == pytest.approx(last["test"]["rocauc"], abs=1e-6)


def test_synthetic_run_scores_the_motif_edges(tmp_path):
    args = ["--data", "spmotif", "--preset", "paper", "--epochs", "1", "-H", "data.limit=64", "-H",
            "encoder.hidden=16", "--progress", "none", "--device", "cpu", "--json",
            "--root", str(tmp_path / "root")]  # own root: test_synthetic counts cache builds
    res = _run(args, tmp_path / "prune")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output[res.output.index("{"):])
    assert 0.0 <= summary["motif_edge_rocauc"] <= 1.0
    arrays = np.load(tmp_path / "prune" / EDGE_PROBS)
    assert arrays["edge_gt"].shape == arrays["edge_prob"].shape and arrays["edge_gt"].max() == 1
    res = _run([*args, "--reg", "none"], tmp_path / "erm")
    assert json.loads(res.output[res.output.index("{"):])["motif_edge_rocauc"] is None


def test_a_config_that_sets_the_gone_loader_workers_resolves_without_it(tmp_path):
    """train.loader_workers had no effect and is gone: a configuration file that sets it
    (a stored config.json) resolves to the same run without it, with a one-line note; a
    stored config.json that holds it reads as before."""
    flags = {"train.epochs": 3, "data.limit": 64, "train.batch_size": 16, "train.device": "cpu"}
    cfg = resolve_config(reg="size,eps-align", flags=flags)
    assert "loader_workers" not in cfg["train"]
    stored = {**cfg.to_dict(), "train": {**cfg["train"], "loader_workers": 2}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(stored))
    with pytest.warns(UserWarning, match="train.loader_workers is gone"):
        again = resolve_config(file=path)
    assert again["hash"] == cfg["hash"] and again["train"] == cfg["train"]
    assert RunConfig.from_dict(stored).to_dict() == stored
    assert config_hash(stored) == cfg["hash"]


def test_every_json_file_a_run_writes_is_strict_json(tmp_path):
    """NaN (here: the training metric, not evaluated) is written as null and named."""
    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))

    out = tmp_path / "run"
    res = _run([*SMALL, "-H", "train.eval_train=false", "--json"], out)
    assert res.exit_code == 0, res.output
    printed = strict(res.output[res.output.index("{"):])
    summary = strict((out / SUMMARY).read_text())
    assert summary["train"] is None and summary["non_finite"]["train"] == "nan"
    assert printed["train"] is None
    strict((out / CONFIG).read_text())
    for line in (out / RESULTS).read_text().splitlines():
        strict(line)


@pytest.mark.parametrize("code, words", [("ENOSPC", "No space left on device"),
                                          ("EROFS", "Read-only file system"),
                                          ("EACCES", "Permission denied")])
def test_a_full_disk_a_read_only_place_and_no_permission_get_one_line(tmp_path, monkeypatch,
                                                                     code, words):
    """Simulated (this machine's tests run as root, which writes anywhere): the run's first
    file write fails with the errno, and the run ends with one line and exit code 2."""
    import errno
    import os

    def fail(path, data):
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)), str(path))

    from grprune.record import files
    monkeypatch.setattr(files, "atomic_write_bytes", fail)
    res = CliRunner().invoke(main, ["run", *SMALL, "--progress", "none",
                                    "--out", str(tmp_path / "run")])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert len(lines) == 1 and lines[0].startswith("grprune: error: " + words)
    assert str(tmp_path / "run" / CONFIG) in lines[0]


def test_file_system_errors_and_a_corrupt_config_get_one_line_each(tmp_path):
    def one_line(args):
        proc = subprocess.run([sys.executable, "-m", "grprune", "run", *args, "--progress", "none"],
                              text=True,
                              capture_output=True, stdin=subprocess.DEVNULL)
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        return lines[0]

    assert "/proc/forbidden" in one_line([*SMALL, "--out", "/proc/forbidden/run"])
    (tmp_path / "file").write_text("x")
    assert "Not a directory" in one_line([*SMALL, "--out", str(tmp_path / "file" / "run")])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / CONFIG).write_text("{not json")
    assert "config.json is corrupt" in one_line([*SMALL, "--out", str(bad)])
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert "without config.json" in one_line([*SMALL, "--out", str(other)])


@pytest.mark.parametrize("args, message", [
    (["--epochs", "-1"], "bad value -1 for train.epochs: expected an integer in [1, 100000]"),
    (["-H", "data.limit=-5"], "for data.limit: expected an integer in [0, 2147483647]"),
    (["-H", "reg.size.eta=1.5"], "for reg.size.eta: expected a number in [0, 1]"),
    (["-H", "encoder.layers=0"], "for encoder.layers: expected an integer in [1, 64]"),
    (["-H", "train.lr=-1"], "for train.lr: expected a number > 0"),
    (["-H", "train.batch_size=0"], "for train.batch_size: expected an integer in [1, 1048576]"),
    (["-H", "encoder.hidden=-3"], "for encoder.hidden: expected an integer in [1, 8192]"),
    (["-H", "encoder.dropout=2"], "for encoder.dropout: expected a number in [0, 1)"),
    (["--out", "/proc/forbidden/run"], "/proc/forbidden"),
])
def test_the_inputs_that_once_passed_or_crashed_now_exit_2_with_one_line(args, message, tmp_path):
    """The ten bad inputs of the reliability issue (the tenth, a NaN in summary.json, is
    test_every_json_file_a_run_writes_is_strict_json)."""
    out = [] if "--out" in args else ["--out", str(tmp_path / "x")]
    proc = subprocess.run([sys.executable, "-m", "grprune", "run", *args, *out, "--progress",
                           "none"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "x").exists()


def test_readers_open_nothing_for_writing_in_a_finished_run(tmp_path, monkeypatch):
    """collect, curves, explain, predict and load_run on a finished run: no file inside it
    is opened for writing, its lock included, as on a read-only mount (simulated: these
    tests run as root, which writes anywhere) or with another user's ``.lock``."""
    import builtins
    import errno
    import io
    import os

    import grprune

    run = tmp_path / "run"
    assert _run(SMALL, run).exit_code == 0
    assert (run / ".lock").exists()
    inside = str(run.resolve())
    real_os_open, real_open = os.open, builtins.open
    writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def refuse(path):
        if str(Path(path).resolve()).startswith(inside):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    def guarded_os_open(path, flags, *args, **kwargs):
        if flags & writes:
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    def guarded_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and set(mode) & set("wax+"):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_os_open)
    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)
    out = tmp_path / "elsewhere"
    for args in (["collect", run, "--out", out / "table"], ["curves", run, "--out", out / "c.png"],
                 ["explain", run, "--out", out / "ex"],
                 ["predict", run, "--smiles", "CCO", "--out", out / "p.csv"]):
        res = CliRunner().invoke(main, [str(a) for a in args])
        assert res.exit_code == 0, (args[0], res.output)
    assert grprune.load_run(run).summary.test is not None
    assert (out / "table.md").is_file() and (out / "p.csv").is_file()


def test_the_progress_line_numbers_epochs_as_the_files_do(tmp_path):
    res = CliRunner().invoke(main, ["run", *SMALL, "--preset", "paper",
                                    "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    lines = [x for x in res.stderr.splitlines() if x.startswith("epoch ")]
    assert lines[0].startswith("epoch   0 (1/2) [train] loss ")
    assert lines[1].startswith("epoch   1 (2/2) [train] ") and "train kept " in lines[1]
    assert "best epoch (from 0)" in res.stdout
