"""The Ray launcher: the mini sweep and a tune study as Ray tasks on a local Ray instance."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

ray = pytest.importorskip("ray")

from grprune.record import files as R  # noqa: E402
from grprune.cli import main  # noqa: E402
from grprune.record.files import ERROR, LOG  # noqa: E402
from grprune.sweep import PLAN, expand, grid_from_options, run_status  # noqa: E402
from grprune.sweep.plan import run_dir_of  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def molbbbp_cache():
    """Build the session's ogbg-molbbbp cache once here, not in two children at once."""
    from grprune.data import load_dataset
    load_dataset("ogbg-molbbbp")


def test_ray_sweep_runs_every_configuration_and_shuts_ray_down(tmp_path):
    root = tmp_path / "sw"
    args = ["sweep", "--launcher", "ray", "--workers", "2", "-H", "reg.size.eta=0.75,0.85",
            "--seeds", "0", "--epochs", "2", "-H", "data.limit=48", "--out", str(root),
            "--progress", "plain"]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "ray launcher, 2 workers" in res.output
    assert "2 done, 0 skipped (already finished), 0 failed" in res.output
    assert not ray.is_initialized()  # the instance the sweep started is shut down
    ex = expand([grid_from_options(seeds="0", epochs="2",
                                   hparams=["reg.size.eta=0.75,0.85", "data.limit=48"])])
    plan = json.loads((root / PLAN).read_text())
    assert [c["hash"] for c in plan["configs"]] == [c.hash for c in ex.configs]
    for conf in ex.configs:
        run_dir = run_dir_of(conf, root)
        assert run_status(conf.cfg, run_dir)[0] == "finished"
        assert (run_dir / LOG).is_file() and not (run_dir / ERROR).exists()
        assert len(R.read_records(run_dir / R.RESULTS)) == 2
    # the same sweep again: everything is finished, Ray runs nothing
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0 and "0 done, 2 skipped" in res.output


def test_ray_sweep_reports_a_failed_run(tmp_path):
    from grprune.regularizers import REGULARIZERS
    from test_sweep import BOOM  # a plugin regularizer that fails in training
    root = tmp_path / "sw"
    boom = tmp_path / "boom_reg.py"
    boom.write_text(BOOM)
    try:
        res = CliRunner().invoke(main, [
            "--plugin", str(boom), "sweep", "--launcher", "ray", "--workers", "1",
            "--reg", "size,eps-align,boom", "--preset", "paper", "--seeds", "0", "--epochs", "2",
            "-H", "data.limit=48", "--out", str(root), "--progress", "none"],
            catch_exceptions=False)
    finally:
        REGULARIZERS.unregister("boom")
    assert res.exit_code == 1, res.output
    assert "ValueError: boom in training" in res.output
    (run_dir,) = [p for p in root.glob("*/*") if p.is_dir()]
    error = json.loads((run_dir / ERROR).read_text())
    assert error["returncode"] == 1 and error["message"].startswith("ValueError")


def test_ray_tune_ends_with_the_trials_as_ray_tasks_and_a_rerun_adds_none(tmp_path):
    """``grprune tune --launcher ray``: each trial a Ray task against the same study; the
    children report to the study although their parent is a Ray worker."""
    optuna = pytest.importorskip("optuna")
    out = tmp_path / "tune"
    args = ["tune", "--launcher", "ray", "--workers", "2", "--trials", "2", "--sampler",
            "random", "--pruner", "none", "--epochs", "2", "-H", "data.limit=48",
            "--out", str(out), "--progress", "plain"]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "ray launcher, 2 workers" in res.output
    assert not ray.is_initialized()
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{out}/study.db")
    done = [t for t in study.get_trials() if t.state.name == "COMPLETE"]
    assert len(done) == 2 and len(study.get_trials()) == 2
    for t in done:  # each trial reported its epochs from inside its Ray task
        assert sorted(t.intermediate_values) == [0, 1]
        assert (out / t.user_attrs["grprune.run_dir"] / R.RESULTS).is_file()
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0 and len(optuna.load_study(
        study_name="tune", storage=f"sqlite:///{out}/study.db").get_trials()) == 2


def test_tune_address_without_ray_launcher_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(main, ["tune", "--address", "auto", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "--address goes with --launcher ray" in res.output
