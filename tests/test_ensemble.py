"""``grprune predict`` over several runs (issue 64, "Uncertainty and calibration"): each
compound's mean and standard deviation equal those of the single-run predictions, on the
streamed and the in-memory paths, from repeated ``--run`` or a sweep's folder; runs that
cannot be averaged are refused; a changed member changes the resume stamp."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from grprune.cli import main

SEEDS = (0, 1, 2)


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_root):
    """Three tiny molbbbp runs (seeds 0, 1, 2) in one folder, as a sweep leaves them."""
    root = tmp_path_factory.mktemp("ens") / "sweep"
    for seed in SEEDS:
        res = _cli("run", "--data", "ogbg-molbbbp", "--epochs", "2", "-H", "data.limit=48",
                   "--seed", seed, "--progress", "none", "--device", "cpu",
                   "--out", root / f"seed{seed}")
        assert res.exit_code == 0, res.output
    return [root / f"seed{seed}" for seed in SEEDS]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES
    smiles, _ = read_molecule_csv(FILES / "ogbg_molbbbp/bbbp.csv.gz", "smiles", "p_np")
    smiles = [*smiles[300:340], "not a smiles", "", "c1cc[nH]c1"]
    path = tmp_path_factory.mktemp("lib") / "lib.csv"
    pd.DataFrame({"ID": [f"CMPD-{i}" for i in range(len(smiles))], "smiles": smiles}
                 ).to_csv(path, index=False)
    return path


def _read(path):
    from grprune.predict.flow import read_table
    return read_table(path)


def test_ensemble_mean_and_sd_equal_those_of_the_single_runs(runs, library, tmp_path):
    singles = []
    for r in runs:
        out = tmp_path / f"{r.name}.csv"
        res = _cli("predict", r, "--csv", library, "--out", out, "--progress", "none")
        assert res.exit_code == 0, res.output
        singles.append(_read(out)["prob_1"].to_numpy())
    stack = np.stack(singles)
    out = tmp_path / "ens.csv"
    res = _cli("predict", "--run", runs[0], "--run", runs[1], "--run", runs[2], "--csv",
               library, "--out", out, "--progress", "none")
    assert res.exit_code == 0, res.output
    assert "scoring with an ensemble of 3 runs" in res.output
    ens = pd.read_csv(out, keep_default_na=False, na_values={"score_mean": [""],
                                                             "score_sd": [""]})
    assert list(ens.columns) == ["row", "ID", "smiles", "canonical_smiles", "status", "reason",
                                 "score_mean", "score_sd", "ensemble_size", "pred_label",
                                 "num_bonds"]
    ok = ens["status"].to_numpy() == "ok"
    assert ok.sum() == len(ens) - 2 and not ok[-3] and not ok[-2] and ok[-1]
    np.testing.assert_allclose(ens["score_mean"][ok], stack.mean(0)[ok], rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(ens["score_sd"][ok], stack.std(0, ddof=1)[ok], rtol=1e-5,
                               atol=1e-6)
    assert ens["score_mean"][~ok].isna().all()
    assert (ens["ensemble_size"][ok] == 3).all() and (ens["ensemble_size"][~ok] == 0).all()
    assert (ens["pred_label"][ok].astype(int) == (stack.mean(0)[ok] > 0.5)).all()
    # a sweep's folder holding the three runs is the same ensemble
    out2 = tmp_path / "sweep.csv"
    res = _cli("predict", "--run", runs[0].parent, "--csv", library, "--out", out2,
               "--progress", "none")
    assert res.exit_code == 0, res.output
    assert out2.read_bytes() == out.read_bytes()


def test_in_memory_ensemble_and_python_api_match_the_single_runs(runs):
    import grprune
    from grprune.inference import load_run
    smiles = ["CCO", "c1ccccc1O", "CC(=O)Oc1ccccc1C(=O)O", "C[n+]1ccccc1", "N#N#N"]
    single = np.stack([load_run(r).predict(smiles)["prob_1"].to_numpy(float) for r in runs])
    df = grprune.predict_ensemble(runs, smiles)
    ok = df["status"].to_numpy() == "ok"
    assert not ok[-1] and ok[:-1].all()
    np.testing.assert_allclose(df["score_mean"][ok], single.mean(0)[ok], rtol=1e-12)
    np.testing.assert_allclose(df["score_sd"][ok], single.std(0, ddof=1)[ok], rtol=1e-10)
    res = _cli("predict", "--run", runs[0], "--run", runs[1], "--smiles", "CCO")
    assert res.exit_code == 0 and "score_mean" in res.output, res.output


def _one_error(res, text: str) -> None:
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("grprune: error:") and text in lines[0], \
        res.output


def test_incompatible_runs_and_one_model_options_are_refused(runs, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(runs[2], other)
    summary = json.loads((other / "summary.json").read_text())
    summary["metric"] = "accuracy"
    (other / "summary.json").write_text(json.dumps(summary))
    _one_error(_cli("predict", "--run", runs[0], "--run", other, "--smiles", "CCO"),
               "cannot form an ensemble: metric 'rocauc' vs 'accuracy'")
    _one_error(_cli("predict", "--run", runs[0], "--run", runs[1], "--smiles", "CCO",
                    "--draw", tmp_path / "pics"), "--draw shows one model's kept bonds")
    _one_error(_cli("predict", "--run", tmp_path / "nothing", "--smiles", "CCO"),
               "does not exist")
    _one_error(_cli("predict", "--smiles", "CCO"), "name the run")
    (tmp_path / "empty").mkdir()
    _one_error(_cli("predict", "--run", tmp_path / "empty", "--smiles", "CCO"),
               "holds no finished run")


def test_a_changed_member_changes_the_resume_stamp(runs, library, tmp_path):
    from grprune.api import load_model
    from grprune.predict.outputs import input_stamp, resume_point, state_path
    stamp = input_stamp(load_model(runs), library, {})
    assert stamp == input_stamp(load_model(runs), library, {})
    assert stamp != input_stamp(load_model(runs[:2]), library, {})
    ckpt = runs[1] / "checkpoint.pt"
    st = ckpt.stat()
    try:
        os.utime(ckpt, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # member 2 trained again
        changed = input_stamp(load_model(runs), library, {})
    finally:
        os.utime(ckpt, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert changed != stamp and changed["run"]["members"][0] == stamp["run"]["members"][0]
    out = tmp_path / "p.csv"  # an interrupted screen of the old ensemble starts clean
    out.with_name("p.csv.partial").write_bytes(b"")
    state_path(out).write_text(json.dumps({"stamp": stamp, "rows": 0, "bytes": 0, "scored": 0,
                                           "skipped": {}}))
    assert resume_point(out, None, stamp)[0] is not None
    state, why = resume_point(out, None, changed)
    assert state is None and "the run or the options changed" in why
