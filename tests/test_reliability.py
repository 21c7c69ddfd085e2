"""Faults and bad input that once ended in a traceback or a silent NaN: each gets one
``grprune: error`` line and exit code 2, or a warning that says what happened."""

from __future__ import annotations

import click
import pandas as pd
import pytest
from click.testing import CliRunner

from grprune.cli import GrpruneGroup, main, out_of_memory


def _one_error(res) -> str:
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("grprune: error: "), res.output
    return lines[0]


@pytest.mark.parametrize("args, words", [
    (["--seed", "99999999999999999999"], "train.seed: expected an integer in [0, "
                                         "9223372036854775807]"),
    (["-H", "encoder.hidden=100000000"], "encoder.hidden: expected an integer in [1, 8192]"),
    (["-H", "selector.hidden=100000000"], "selector.hidden: expected an integer in [1, 8192]"),
    (["-H", "encoder.layers=1000"], "encoder.layers: expected an integer in [1, 64]"),
])
def test_values_that_would_crash_are_outside_their_domain(tmp_path, args, words):
    res = CliRunner().invoke(main, ["run", "--data", "ogbg-molbbbp", *args,
                                    "--out", str(tmp_path / "run")])
    assert words in _one_error(res)


def test_an_allocation_failure_is_one_line():
    @click.group(cls=GrpruneGroup)
    def cli():
        pass

    @cli.command()
    def big():
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
                           "can't allocate memory: you tried to allocate 80000000000 bytes. "
                           "Error code 12 (Cannot allocate memory)")

    @cli.command()
    def other():
        raise RuntimeError("shape mismatch")

    line = _one_error(CliRunner().invoke(cli, ["big"]))
    assert "out of memory (tried to allocate 80000000000 bytes)" in line
    assert "encoder.hidden" in line
    res = CliRunner().invoke(cli, ["other"])  # not an allocation failure: not hidden
    assert isinstance(res.exception, RuntimeError) and res.exit_code == 1
    assert out_of_memory(MemoryError()) and not out_of_memory(RuntimeError("x"))
    assert out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))


def test_labels_of_one_class_are_refused_before_training(tmp_path, data_root):
    csv = tmp_path / "one-class.csv"
    pd.DataFrame({"smiles": ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCC", "CCCl"] * 5,
                  "y": [1] * 30}).to_csv(csv, index=False)
    res = CliRunner().invoke(main, ["run", "--data", "molecule-csv", "-H", f"data.path={csv}",
                                    "-H", "data.label_column=y", "--epochs", "1",
                                    "--progress", "none", "--device", "cpu",
                                    "--out", str(tmp_path / "run")])
    assert "every training label is 1: a classifier needs at least two classes" in \
        _one_error(res)
    # the scaffold split of acyclic molecules: one scaffold, so no training graph
    csv2 = tmp_path / "acyclic.csv"
    pd.DataFrame({"smiles": ["C" * n + "O" for n in range(1, 31)],
                  "y": [0, 1] * 15}).to_csv(csv2, index=False)
    res = CliRunner().invoke(main, ["run", "--data", "molecule-csv", "-H", f"data.path={csv2}",
                                    "-H", "data.label_column=y", "-H", "data.split=scaffold",
                                    "--epochs", "1", "--progress", "none", "--device", "cpu",
                                    "--out", str(tmp_path / "run2")])
    assert "the training split is empty (train 0, " in _one_error(res)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("finished") / "run"
    res = CliRunner().invoke(main, ["run", "--data", "ogbg-molbbbp", "--preset", "paper",
                                    "--epochs", "2", "-H", "data.limit=64", "-H",
                                    "train.batch_size=32", "--progress", "none", "--device",
                                    "cpu", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_a_truncated_edge_probs_file_is_recomputed_from_the_model(finished_run, tmp_path):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    npz = run / "edge_probs.npz"
    for size in (0, npz.stat().st_size // 2, npz.stat().st_size - 7):
        data = (finished_run / "edge_probs.npz").read_bytes()
        npz.write_bytes(data[:size])
        res = CliRunner().invoke(main, ["explain", str(run), "--out", str(tmp_path / f"ex{size}")])
        assert res.exit_code == 0 and "Traceback" not in res.output, res.output
        assert (tmp_path / f"ex{size}" / "edges.csv").is_file()


def test_a_non_finite_edge_probs_file_is_recomputed_and_said_so(finished_run, tmp_path):
    """An ``edge_probs.npz`` of the right form whose scores are NaN (or infinite) is
    treated as absent: explain scores the graphs with the model, says why, and writes the
    table a sound file gives."""
    import shutil

    import numpy as np
    import pandas as pd
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    sound = CliRunner().invoke(main, ["explain", str(run), "--out", str(tmp_path / "sound")])
    assert sound.exit_code == 0, sound.output
    with np.load(run / "edge_probs.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    for key, value in (("edge_prob", np.nan), ("prob", np.inf)):
        bad = {**arrays, key: np.full_like(arrays[key], value)}
        np.savez(run / "edge_probs.npz", **bad)
        out = tmp_path / f"ex-{key}"
        res = CliRunner().invoke(main, ["explain", str(run), "--out", str(out)])
        assert res.exit_code == 0 and "Traceback" not in res.output, res.output
        assert "edge_probs.npz holds scores that are not finite (NaN or infinite): treated " \
               "as absent" in res.output
        assert "scoring " in res.output
        got, want = (pd.read_csv(d / "edges.csv") for d in (out, tmp_path / "sound"))
        assert np.isfinite(got.select_dtypes("number").to_numpy(dtype=float)).all()
        pd.testing.assert_frame_equal(got, want, rtol=1e-5)


def test_a_diverged_run_says_so_in_its_directory_and_in_collect(tmp_path, data_root):
    import json
    run = tmp_path / "sweep" / "diverged"
    res = CliRunner().invoke(main, ["run", "--data", "ogbg-molbbbp", "--preset", "paper",
                                    "--epochs", "2", "-H", "data.limit=64", "-H",
                                    "train.lr=1e9", "--progress", "none", "--device", "cpu",
                                    "--out", str(run)])
    assert "became nan" in _one_error(res)
    error = json.loads((run / "error.json").read_text())
    assert error["kind"] == "diverged" and error["epoch"] >= 0
    assert "became nan" in error["message"]
    res = CliRunner().invoke(main, ["collect", str(tmp_path / "sweep"), "--out",
                                    str(tmp_path / "table")])
    assert res.exit_code == 1  # no finished run to tabulate, and it says why
    assert f"diverged: {run}: " in res.output and "unfinished" not in res.output


def _plan_seed(args):
    """In a child process: plan one seed's configuration into ``root``, several times."""
    root, seed = args
    from pathlib import Path

    from grprune.sweep import expand, grid_from_options
    from grprune.sweep.plan import write_plan
    exp = expand([grid_from_options(reg=["none"], epochs="1", seeds=str(seed), device="cpu",
                                    hparams=["data.limit=16"])])
    for _ in range(5):
        write_plan(Path(root), exp, ["grprune", "sweep", "--seeds", str(seed)])
    return exp.configs[0].hash


def test_sweeps_planning_into_one_root_at_once_lose_nothing(tmp_path):
    import json
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    with ctx.Pool(6) as pool:
        hashes = pool.map(_plan_seed, [(str(tmp_path), seed) for seed in range(6)])
    plan = json.loads((tmp_path / "sweep.json").read_text())
    assert sorted(c["hash"] for c in plan["configs"]) == sorted(hashes)
    assert len(plan["sweeps"]) == 30


def test_a_damaged_epoch_record_is_refused_not_resumed_with_a_gap(tmp_path, data_root):
    from grprune.record.files import RESULTS, SUMMARY, read_records
    from grprune.resolve import resolve_config
    from grprune.run import execute
    cfg = resolve_config(reg="none", preset="paper", flags={
        "train.epochs": 4, "data.limit": 48, "train.batch_size": 32, "train.device": "cpu"})
    run = tmp_path / "run"

    def stop(record):
        if record.epoch == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(cfg, run, on_epoch=stop, log=lambda m: None)
    lines = (run / RESULTS).read_text().splitlines()
    assert len(lines) == 3
    lines[2] = lines[2][:-9]  # the last complete record, damaged
    (run / RESULTS).write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(main, ["run", "--reg", "none", "--preset", "paper", "--epochs", "4",
                                    "-H", "data.limit=48", "-H", "train.batch_size=32",
                                    "--device", "cpu", "--progress", "none", "--out", str(run)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    errors = [x for x in res.output.splitlines() if x.startswith("grprune: error: ")]
    assert len(errors) == 1
    line = errors[0]
    assert "does not hold the 3 epoch records state.pt counts" in line and "--force" in line
    assert "grprune: resuming" not in res.output  # no note that it resumes, then a refusal
    assert not (run / SUMMARY).exists()
    res = CliRunner().invoke(main, ["run", "--reg", "none", "--preset", "paper", "--epochs", "4",
                                    "-H", "data.limit=48", "-H", "train.batch_size=32",
                                    "--device", "cpu", "--progress", "none", "--out", str(run),
                                    "--force"])
    assert res.exit_code == 0, res.output
    assert [r["epoch"] for r in read_records(run / RESULTS)] == [0, 1, 2, 3]


def test_a_terminated_run_says_how_to_resume(tmp_path, data_root):
    import os
    import signal
    import subprocess
    import sys
    import time
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "grprune", "run", "--reg", "none", "--preset", "paper",
           "--epochs", "200", "-H", "data.limit=64", "--device", "cpu", "--progress", "none",
           "--out", str(run)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "GRPRUNE_DATA_ROOT": str(data_root)})
    deadline = time.monotonic() + 300
    while not (run / "results.jsonl").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, (out, err)
    assert "grprune: terminated; run the same command again to resume" in err
    assert "Traceback" not in err


def test_a_planner_never_writes_into_a_run_another_process_holds(tmp_path):
    from grprune.record.files import CONFIG, LOG
    from grprune.record.rundir import RunDir
    from grprune.record.status import RUNNING_ELSEWHERE
    from grprune.sweep import expand, grid_from_options
    from grprune.sweep.launchers import launch_local
    from grprune.sweep.plan import Job, run_dir_of
    exp = expand([grid_from_options(reg=["none"], epochs="1", seeds="0", device="cpu",
                                    hparams=["data.limit=16"])])
    conf = exp.configs[0]
    run_dir = run_dir_of(conf, tmp_path)
    run_dir.mkdir(parents=True)
    (run_dir / CONFIG).write_text('{"the other child": "its config, features and all"}')
    ends: list = []
    with RunDir(run_dir).lock():  # another sweep's child took it after this plan was made
        launch_local([Job(conf, run_dir, {})], on_start=lambda job: ends.append("started"),
                     on_done=lambda job, code, error: ends.append((code, error)))
    assert ends == [(None, RUNNING_ELSEWHERE)]
    assert (run_dir / CONFIG).read_text().startswith('{"the other child"')
    assert not (run_dir / LOG).exists()


def test_a_run_another_sweep_finished_after_the_plan_counts_as_skipped(tmp_path, data_root):
    from grprune.record.files import CONFIG
    from grprune.run import execute
    from grprune.sweep import expand, grid_from_options
    from grprune.sweep.plan import Outcome, run_sweep
    exp = expand([grid_from_options(reg=["none"], epochs="1", seeds="0-1", device="cpu",
                                    hparams=["data.limit=32", "train.batch_size=16"])])

    def launch(jobs, on_start, on_done):
        for job in jobs:
            if job.conf is exp.configs[0]:  # another sweep finishes it before this one starts
                execute(job.conf.cfg, job.run_dir, log=lambda m: None)
                config = (job.run_dir / CONFIG).read_text()
                assert job.prepare()
                assert (job.run_dir / CONFIG).read_text() == config  # features kept
                on_done(job, 0, None)  # its child found it finished
            else:
                assert job.prepare()
                execute(job.conf.cfg, job.run_dir, log=lambda m: None)
                on_done(job, 0, None)

    outcome = run_sweep(exp, tmp_path, launch, env={}, outcome=Outcome())
    assert len(outcome.done) == 1 and len(outcome.skipped) == 1 and not outcome.failed


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_dgl_graphs_file_is_one_line_not_an_abort(tmp_path, damage):
    import random

    from grprune.compat import dgl
    from grprune.data.dgl_graphs import example_graphs
    graphs, labels, envs = example_graphs(40)
    path = tmp_path / "graphs.bin"
    dgl.save_graphs(str(path), graphs, {"label": labels, "env": envs})
    data = bytearray(path.read_bytes())
    if damage == "flip":
        rng = random.Random(0)
        for i in rng.sample(range(len(data)), 20):
            data[i] ^= 0xFF
    else:
        data = data[: len(data) // 3]
    path.write_bytes(bytes(data))
    res = CliRunner().invoke(main, ["data", "info", "dgl-graphs", "-H", f"data.path={path}",
                                    "--root", str(tmp_path / "root")])
    if res.exit_code != 0:
        assert "dgl.save_graphs file" in _one_error(res) or "graphs" in _one_error(res)


def test_a_bad_input_failure_leaves_no_run_directory_and_the_fixed_input_runs(
        tmp_path, data_root):
    """A run refused for its data (one label class) leaves no folder for collect to list
    as unfinished (issue 65, row 10); the same command with the input fixed trains."""
    csv = tmp_path / "mols.csv"
    smiles = ["C" * n + end for n in range(1, 16) for end in ("O", "N")]  # 30 molecules
    pd.DataFrame({"smiles": smiles, "all_one": [1] * 30,
                  "y": [0, 1] * 15}).to_csv(csv, index=False)
    base = ["run", "--data", "molecule-csv", "-H", f"data.path={csv}", "-H",
            "data.split=random", "--epochs", "1",
            "--progress", "none", "--device", "cpu", "--out", str(tmp_path / "run")]
    _one_error(CliRunner().invoke(main, [*base, "-H", "data.label_column=all_one"]))
    assert not (tmp_path / "run").exists()
    res = CliRunner().invoke(main, [*base, "-H", "data.label_column=y"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "run" / "summary.json").is_file()


def test_a_full_disk_names_the_file_being_written(tmp_path, monkeypatch):
    import errno
    import os

    from grprune.record import files

    def full(fd, *args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError) as caught:
        files.atomic_write_json(tmp_path / "summary.json", {"a": 1})
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(tmp_path / "summary.json")
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind
