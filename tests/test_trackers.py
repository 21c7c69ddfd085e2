"""``--log tensorboard`` / ``--log mlflow`` (issue 62): one event stream and one MLflow run
per run, each epoch once, also across a SIGKILL and a resume; a missing package is one
line and exit 2."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grprune.cli import main
from grprune.record.epoch import EpochRecord
from grprune.trackers import LogSpec, RunTrackers, flatten, parse_logs

TINY = ["--data", "ogbg-molbbbp", "--reg", "size,eps-align", "-H", "data.limit=100"]


def _scalars(log_dir: Path, tag: str) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


def _mlflow_runs(uri: str):
    from mlflow import MlflowClient
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("grprune")
    return client, client.search_runs([exp.experiment_id]) if exp else []


@pytest.mark.parametrize("name,extra", [("tensorboard", "tensorboard"), ("mlflow", "mlflow")])
def test_a_missing_tracker_package_exits_2_with_one_line(tmp_path, monkeypatch, name, extra):
    monkeypatch.setitem(sys.modules, name, None)
    result = CliRunner().invoke(main, ["run", *TINY, "--epochs", "1", "--log", name,
                                       "--out", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"grprune: error: --log {name} needs the {name} package: "
        f"pip install 'grprune[{extra}]'"]
    assert not (tmp_path / "run").exists()  # refused before anything was made


def test_bad_log_values_exit_2():
    from grprune.errors import GrpruneError
    with pytest.raises(GrpruneError, match="unknown tracker 'tensorbord'.*tensorboard"):
        parse_logs(["tensorbord"])
    with pytest.raises(GrpruneError, match="given twice"):
        parse_logs(["mlflow", "mlflow:sqlite:///x.db"])


def test_an_epoch_is_flattened_to_finite_scalars():
    record = EpochRecord(epoch=2, lr=0.01, loss={"total": 1.0, "size": float("nan")},
                         scores={"valid": {"rocauc": 0.7, "selector": {"entropy": 0.3}}})
    assert flatten(record) == {"loss/total": 1.0, "valid/rocauc": 0.7,
                               "valid/selector/entropy": 0.3, "lr": 0.01}


def test_a_resumed_run_catches_up_without_logging_an_epoch_twice(tmp_path):
    """Unit level: an MLflow run that holds epochs 0-1 and a run resumed at epoch 2 (its
    epoch 1 never logged by the killed attempt) end with each epoch once."""
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboard")
    from grprune.record.rundir import RunDir
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    RunDir(run_dir).write_config({"data": {"name": "x"}})
    records = [EpochRecord(epoch=e, lr=0.1, scores={"valid": {"rocauc": 0.5 + e / 10}})
               for e in range(3)]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    specs = [LogSpec("tensorboard"), LogSpec("mlflow", uri)]
    first = RunTrackers(specs, run_dir)
    RunDir(run_dir).append_record(records[0])
    first.on_epoch(records[0])
    RunDir(run_dir).append_record(records[1])  # killed before logging epoch 1
    second = RunTrackers(specs, run_dir)
    RunDir(run_dir).append_record(records[2])
    second.on_epoch(records[2])
    second.end(None)
    assert _scalars(run_dir / "tensorboard", "valid/rocauc") == [0, 1, 2]
    client, runs = _mlflow_runs(uri)
    assert len(runs) == 1
    steps = [m.step for m in client.get_metric_history(runs[0].info.run_id, "valid/rocauc")]
    assert sorted(steps) == [0, 1, 2]


@pytest.mark.slow
def test_a_run_killed_and_resumed_leaves_one_stream_and_one_mlflow_run(tmp_path):
    """The issue's test: a 3-epoch run with --log tensorboard --log mlflow, SIGKILLed after
    its second epoch's line and run again, leaves one TensorBoard event stream and one
    MLflow run with 3 epochs of metrics each, read back with each library's reader."""
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboard")
    run_dir = tmp_path / "runs" / "r"
    args = [sys.executable, "-m", "grprune", "run", *TINY, "--epochs", "3", "--log",
            "tensorboard", "--log", "mlflow", "--out", str(run_dir), "--progress", "plain"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env=env)
    assert proc.stderr is not None
    killed = False
    for line in proc.stderr:
        if re.match(r"\s*epoch\s+1 \(", line):
            proc.send_signal(signal.SIGKILL)
            killed = True
            break
    proc.wait()
    assert killed
    from grprune.record.rundir import RunDir
    assert RunDir(run_dir).status().state == "interrupted"
    again = subprocess.run(args, capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr
    assert "resuming" in again.stderr
    streams = {p.parent for p in run_dir.rglob("events.out.tfevents.*")}
    assert streams == {run_dir / "tensorboard"}
    assert _scalars(run_dir / "tensorboard", "valid/rocauc") == [0, 1, 2]
    client, runs = _mlflow_runs(f"sqlite:///{run_dir.parent / 'mlflow.db'}")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(runs[0].info.run_id, "valid/rocauc")]
    assert sorted(steps) == [0, 1, 2]
    assert "final/valid" in runs[0].data.metrics


def test_a_sweep_hands_its_log_options_to_every_child(tmp_path):
    """``sweep --log``: each child ``grprune run`` gets the tracker options, outside the
    configuration (the config hash is the same with and without them)."""
    from grprune.sweep.expansion import expand
    from grprune.sweep.grid import grid_from_options
    from grprune.sweep.plan import run_sweep
    expansion = expand([grid_from_options(reg=["none"], seeds="0-1", hparams=["data.limit=50"])])
    seen: list[list[str]] = []

    def launch(jobs, on_start, on_done):
        seen.extend(job.args for job in jobs)

    extra = ["--log", f"tensorboard:{tmp_path / 'tb'}"]
    run_sweep(expansion, tmp_path, launch, env={}, extra_args=extra)
    assert len(seen) == 2 and all(args[-2:] == extra for args in seen)
    assert all(args[:2] == ["run", "--config"] for args in seen)
