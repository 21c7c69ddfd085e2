"""The Python API: grprune.train, grprune.load_run and the Run they return."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import grprune
from grprune.api import hparam_keywords
from grprune.cli import main
from grprune.errors import GrpruneError
from grprune.record.files import CONFIG, SUMMARY

ROOT = Path(__file__).resolve().parent.parent
TINY = dict(data="ogbg-molbbbp", epochs=1, device="cpu", progress="none",
            hparams={"data.limit": 48, "train.batch_size": 32})
TINY_CLI = ["--data", "ogbg-molbbbp", "--epochs", "1", "-H", "data.limit=48",
            "-H", "train.batch_size=32", "--device", "cpu", "--progress", "none"]


@pytest.fixture(scope="module")
def api_run(tmp_path_factory):
    return grprune.train(out=tmp_path_factory.mktemp("api") / "run", **TINY)


def test_train_is_grprune_run(api_run, tmp_path):
    """Same configuration hash and numbers as `grprune run` with the same options."""
    res = CliRunner().invoke(main, ["run", *TINY_CLI, "--out", str(tmp_path / "cli"), "--json"])
    assert res.exit_code == 0, res.output
    cli_cfg = json.loads((tmp_path / "cli" / CONFIG).read_text())
    cli_summary = json.loads((tmp_path / "cli" / SUMMARY).read_text())
    assert api_run.config.hash == cli_cfg["hash"]
    assert api_run.summary.test == cli_summary["test"]
    assert api_run.summary.valid == cli_summary["valid"]
    assert isinstance(api_run, grprune.Run) and api_run.path == api_run.run_dir
    rec = api_run.records
    assert len(rec) == 1 and {"epoch", "loss.total", "valid.rocauc"} <= set(rec.columns)
    assert not api_run.model.training


def test_train_again_skips_the_finished_run(api_run, monkeypatch, capsys):
    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr("grprune.trainer.Trainer.fit", no_training)
    again = grprune.train(out=api_run.path, **TINY)
    assert again.summary == api_run.summary and again.config == api_run.config
    assert "already holds this finished run" in capsys.readouterr().err
    with pytest.raises(GrpruneError, match="different configuration"):
        grprune.train(out=api_run.path, **{**TINY, "seed": 1})


def test_predict_and_explain(api_run, tmp_path):
    pred = api_run.predict(["CCO", "not a molecule"])
    assert list(pred["status"])[0] == "ok" and 0 <= pred["prob_1"][0] <= 1
    assert list(pred["status"])[1] != "ok"
    ids = [int(i) for i in api_run.part_indices(api_run.load_dataset(), "test")[:2]]
    ex = api_run.explain(graphs=ids, out=tmp_path / "ex")
    assert ex.graphs == ids and (tmp_path / "ex" / "edges.csv").is_file()
    assert sorted(set(ex.edges["graph_index"])) == sorted(ids)


def test_load_run(api_run, tmp_path):
    run = grprune.load_run(api_run.path)
    assert run.summary == api_run.summary and run._model is None  # loaded on first use
    with pytest.raises(GrpruneError, match="does not exist"):
        grprune.load_run(tmp_path / "nowhere")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("x")
    with pytest.raises(GrpruneError, match="not a grprune run directory"):
        grprune.load_run(tmp_path / "junk")
    unfinished = tmp_path / "unfinished"
    shutil.copytree(api_run.path, unfinished)
    (unfinished / SUMMARY).unlink()
    with pytest.raises(GrpruneError, match="unfinished run"):
        grprune.load_run(unfinished)
    (unfinished / SUMMARY).write_text("{not json")
    with pytest.raises(GrpruneError, match="corrupt"):
        grprune.load_run(unfinished)


def test_train_on_graphs_in_memory(tmp_path):
    from grprune.data.dgl_graphs import example_graphs
    graphs, labels, envs = example_graphs(60)
    out = tmp_path / "mem"
    run = grprune.train(data=grprune.from_graphs(graphs, labels, envs), epochs=1, preset="paper",
                        device="cpu", progress="none", out=out, train_batch_size=32)
    assert run.config["data"]["name"] == "dgl-graphs" and run.config["data"]["split"] == "file"
    assert Path(run.config["data"]["path"]).is_file() and len(run.records) == 1
    # the same graphs built again: the same configuration, so the finished run
    again = grprune.train(data=grprune.from_graphs(graphs, labels, envs), epochs=1,
                          preset="paper", device="cpu", progress="none", out=out,
                          train_batch_size=32)
    assert again.config["hash"] == run.config["hash"]
    # explained from the saved graphs, in a run opened from its directory
    ex = grprune.load_run(out).explain(graphs=[int(run.load_dataset().splits["test"][0])],
                                       out=tmp_path / "ex")
    assert len(ex.edges) > 0 and ex.metrics is not None  # motif ground truth: metrics
    with pytest.raises(GrpruneError, match="split"):
        grprune.train(data=grprune.from_graphs(graphs, labels), split="scaffold", out=out)


def test_hyperparameter_keywords():
    assert hparam_keywords({"data_path": "a.csv", "reg_eps_align_k": 3,
                            "reg_size_eta": 0.7, "train_lr": 0.1}) == {
        "data.path": "a.csv", "reg.eps-align.k": 3, "reg.size.eta": 0.7, "train.lr": 0.1}
    with pytest.raises(GrpruneError, match="unknown keyword 'lr'"):
        hparam_keywords({"lr": 0.1})
    with pytest.raises(GrpruneError, match="names no regularizer"):
        hparam_keywords({"reg_nonesuch_k": 1})
    with pytest.raises(GrpruneError, match="bad hyperparameter key"):
        grprune.train(hparams={"lr": 0.1})


def test_import_grprune_stays_light():
    code = ("import sys, grprune; grprune.load_run; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'dgl', 'rdkit', 'ogb'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_example_script(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "python_api.py"),
                          "--epochs", "1", "--limit", "48", "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "config hash" in out.stdout and "bonds_kept" in out.stdout
    assert (tmp_path / "run" / "explain" / "edges.csv").is_file()
