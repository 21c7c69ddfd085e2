"""Targets beyond one binary label: regression (``data.task=regression``), several label
columns with missing cells (multi-task), PR-AUC, metric direction in selection, and the
regularizers that need class labels refusing regression."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.metrics import average_precision_score

from grprune.cli import main
from grprune.collect.selection import ValidationSelection
from grprune.data.labels import read_targets, target_scale
from grprune.data.ogbg import FILES
from grprune.losses import masked_target_loss
from grprune.metrics import evaluate
from grprune.record.metricinfo import higher_is_better
from grprune.record.trainstate import Best

import torch


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def targets_csv(tmp_path_factory):
    """Every 10th BACE molecule (152 rows): a regression column ``pic50`` (from pIC50,
    with two empty cells) and three 0/1 columns with missing cells."""
    df = pd.read_csv(FILES / "moleculenet" / "bace.csv.gz").iloc[::10].reset_index(drop=True)
    rng = np.random.default_rng(0)
    out = pd.DataFrame({"smiles": df["mol"], "pic50": df["pIC50"].round(3).astype(str)})
    out.loc[[4, 9], "pic50"] = ""
    tasks = {"a": df["Class"], "b": (df["mol"].str.count("N") > 3).astype(int),
             "c": (df["mol"].str.count("O") > 2).astype(int)}
    for name, col in tasks.items():
        cells = col.astype(int).astype(str)
        cells[rng.random(len(cells)) < 0.2] = ""
        out[name] = cells
    path = tmp_path_factory.mktemp("targets") / "targets.csv"
    out.to_csv(path, index=False)
    return path


def _run(path, out, *more):
    res = _cli("run", "--data", "molecule-csv", "-H", f"data.path={path}", "--split", "random",
               "--epochs", 4, "-H", "train.warmup_epochs=1", "--out", out, *more)
    assert res.exit_code == 0, res.output
    return json.loads((out / "summary.json").read_text())


def _lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_regression_run_selects_lowest_rmse_collects_and_predicts(targets_csv, tmp_path):
    run = tmp_path / "reg"
    s = _run(targets_csv, run, "-H", "data.label_column=pic50", "-H", "data.task=regression")
    assert s["metric"] == "rmse"
    records = _lines(run / "results.jsonl")
    valid = {r["epoch"]: r["valid"]["rmse"] for r in records if r["phase"] == "train"}
    assert s["best_epoch"] == min(valid, key=lambda e: valid[e])  # lower RMSE is better
    cfg = json.loads((run / "config.json").read_text())
    scale = cfg["features"]
    assert scale["task"] == "regression" and scale["target_std"][0] > 0
    res = _cli("collect", tmp_path)
    assert res.exit_code == 0 and "RMSE" in res.output and "(%)" not in res.output, res.output
    lib = tmp_path / "lib.csv"
    pd.DataFrame({"smiles": pd.read_csv(targets_csv)["smiles"][:5]}).to_csv(lib, index=False)
    res = _cli("predict", run, "--csv", lib, "--out", tmp_path / "pred.csv")
    assert res.exit_code == 0, res.output
    pred = pd.read_csv(tmp_path / "pred.csv")
    assert "pred_pic50" in pred and "prob_1" not in pred
    # de-standardized: in pIC50's units, not around 0
    assert abs(pred["pred_pic50"].mean() - scale["target_mean"][0]) < 3
    assert pred["pred_label"].isna().all()


def test_multitask_run_with_missing_labels(targets_csv, tmp_path):
    run = tmp_path / "mt"
    s = _run(targets_csv, run, "-H", "data.label_column=a,b,c", "-H", "data.metric=prauc")
    assert s["metric"] == "prauc" and 0 <= s["test"] <= 1 and s["best_epoch"] >= 0
    assert math.isfinite(_lines(run / "results.jsonl")[-1]["loss"]["ce"])
    res = _cli("collect", tmp_path)
    assert res.exit_code == 0 and "PR-AUC" in res.output, res.output
    lib = tmp_path / "lib.csv"
    pd.DataFrame({"smiles": pd.read_csv(targets_csv)["smiles"][:4]}).to_csv(lib, index=False)
    res = _cli("predict", run, "--csv", lib, "--out", tmp_path / "pred.csv")
    assert res.exit_code == 0, res.output
    pred = pd.read_csv(tmp_path / "pred.csv")
    assert [c for c in pred if c.startswith("prob_")] == ["prob_a", "prob_b", "prob_c"]
    assert pred[["prob_a", "prob_b", "prob_c"]].stack().between(0, 1).all()


@pytest.mark.parametrize("reg", ["groupdro", "ciga", "irm"])
def test_class_regularizers_refuse_regression(targets_csv, tmp_path, reg):
    res = _cli("run", "--data", "molecule-csv", "-H", f"data.path={targets_csv}",
               "-H", "data.label_column=pic50", "-H", "data.task=regression",
               "--split", "random", "--epochs", 1, "--reg", reg, "--out", tmp_path / reg)
    assert res.exit_code == 2, res.output
    errors = [x for x in res.output.splitlines() if x.startswith("grprune: error")]
    assert len(errors) == 1 and reg in errors[0] and "regression" in errors[0]
    assert "Traceback" not in res.output and not (tmp_path / reg / "results.jsonl").exists()


def test_classification_metric_on_regression_refused(targets_csv, tmp_path):
    res = _cli("run", "--data", "molecule-csv", "-H", f"data.path={targets_csv}",
               "-H", "data.label_column=pic50", "-H", "data.task=regression",
               "-H", "data.metric=prauc", "--epochs", 1, "--out", tmp_path / "x")
    assert res.exit_code == 2 and "rmse, mae, r2" in res.output, res.output


def test_prauc_is_sklearns_average_precision():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 50)
    p1 = rng.random(50)
    prob = np.stack([1 - p1, p1], 1)
    assert evaluate("prauc", y, prob) == average_precision_score(y, p1)
    # multi-task: per task over labelled rows, tasks with one class skipped (OGB)
    ym = np.array([[1, 0, 1], [0, np.nan, 1], [1, 1, np.nan], [0, 0, 1]], dtype=float)
    pm = rng.random((4, 3))
    want = np.mean([average_precision_score(ym[:, 0], pm[:, 0]),
                    average_precision_score(ym[[0, 2, 3], 1], pm[[0, 2, 3], 1])])
    assert evaluate("prauc", ym, pm) == pytest.approx(want)


def test_regression_metrics_by_hand():
    y = np.array([[1.0], [2.0], [np.nan], [4.0]])
    p = np.array([[1.5], [2.0], [100.0], [3.0]])
    assert evaluate("rmse", y, p) == pytest.approx(math.sqrt((0.25 + 0 + 1) / 3))
    assert evaluate("mae", y, p) == pytest.approx(0.5)
    assert evaluate("r2", y, p) == pytest.approx(1 - 1.25 / (14 / 3))


def test_best_follows_the_metric_direction():
    class E:  # an Evaluation's metric and kept fraction
        def __init__(self, m):
            self.metric, self.kept = m, 1.0
    best = Best()
    for epoch, v in enumerate([2.0, 1.5, float("nan"), 1.7]):
        best.update(epoch, {"valid": E(v), "test": E(v)}, False, higher=higher_is_better("rmse"))
    assert best.epoch == 1 and best.valid == 1.5 and best.since == 2
    assert higher_is_better("rocauc") and higher_is_better("prauc") and not higher_is_better("mae")

    class S:  # a collect Setting with one run
        def __init__(self, m):
            self.runs = [type("R", (), {"metric": "rmse", "setting_id": str(m)})()]
            self.m = m

        def stat(self, field):
            return (self.m, 0.0)
    chosen: Any = ValidationSelection.choose([S(0.9), S(0.4), S(0.7)])  # type: ignore[list-item]
    assert chosen.m == 0.4


def test_masked_loss_and_scale():
    y = torch.tensor([[1.0, float("nan")], [3.0, 0.0]])
    assert float(masked_target_loss(torch.tensor([[0.0, 5.0], [1.0, 0.0]]), y,
                                    "regression")) == pytest.approx(5 / 3)
    labels, bad = read_targets({"y": ["1.5", "", "x"]}, ["C", "CC", "CCC"], "regression")
    assert bad == {1: "missing label", 2: "label 'x' is not a number"}
    assert labels[0, 0] == 1.5
    assert target_scale(np.array([[1.0], [3.0], [5.0]]), np.array([0, 1])) == ([2.0], [1.0])
