"""Calibration report and post-hoc calibration (issue 64, "Uncertainty and calibration"):
ECE and Brier against a direct numpy computation, temperature scaling on an over-confident
fake, the record's checks, and ``grprune calibrate`` / ``predict --calibrated`` on a tiny run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import tiny_molbbbp_run
from click.testing import CliRunner

from grprune.calibration import Calibrator, brier, ece, fit, logit, nll, reliability
from grprune.cli import main
from grprune.errors import GrpruneError
from grprune.record.calibration import CalibrationRecord

PNG = b"\x89PNG\r\n\x1a\n"


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _direct_ece(p1: np.ndarray, y: np.ndarray, bins: int) -> float:
    """Guo et al.'s ECE, written out once more with a loop over the edges."""
    conf = np.maximum(p1, 1 - p1)
    correct = ((p1 > 0.5).astype(int) == y).astype(float)
    total = 0.0
    for m in range(bins):
        lo, hi = m / bins, (m + 1) / bins
        sel = (conf > lo) & (conf <= hi)
        if sel.any():
            total += sel.sum() / len(p1) * abs(correct[sel].mean() - conf[sel].mean())
    return total


def test_ece_and_brier_match_a_direct_computation():
    rng = np.random.default_rng(0)
    p1 = rng.uniform(0.01, 0.99, 500)
    y = (rng.uniform(size=500) < p1 ** 2).astype(int)
    for bins in (1, 10, 15):
        assert ece(p1, y, bins) == pytest.approx(_direct_ece(p1, y, bins), abs=1e-12)
    assert brier(p1, y) == pytest.approx(np.mean((p1 - y) ** 2), abs=1e-15)
    both = np.stack([1 - p1, p1], axis=1)  # (N, 2) reads as (N,) class-1 probabilities
    assert ece(both, y) == ece(p1, y) and brier(both, y) == brier(p1, y)


def test_ece_by_hand():
    p1, y = np.array([0.9, 0.9, 0.2, 0.4]), np.array([1, 0, 0, 1])
    # bins of 0.1: confidences 0.9, 0.9 (accuracy 1/2), 0.8 (1), 0.6 (0)
    assert ece(p1, y, 10) == pytest.approx(0.5 * 0.4 + 0.25 * 0.2 + 0.25 * 0.6)
    table = reliability(p1, y, 10)
    assert [b["count"] for b in table] == [0, 0, 0, 0, 0, 1, 0, 1, 2, 0]
    assert table[8]["accuracy"] == 0.5 and table[0]["confidence"] is None
    assert brier(p1, y) == pytest.approx((0.01 + 0.81 + 0.04 + 0.36) / 4)


def _overconfident(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels drawn from sigmoid(z), reported as sigmoid(4 z): 4x too confident."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, n)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(int)
    p1 = 1 / (1 + np.exp(-4 * z))
    return np.stack([1 - p1, p1], axis=1), y


def test_temperature_scaling_reduces_validation_nll_of_an_overconfident_model():
    prob, y = _overconfident(2000, 1)
    cal = fit("temperature", prob, y)
    assert 3.0 < cal.params["temperature"] < 5.5  # close to the 4 it was made with
    after = cal.apply(prob)
    assert nll(after, y) < nll(prob, y) - 0.1
    assert ece(after, y) < ece(prob, y)
    assert np.array_equal(after.argmax(1), prob.argmax(1))  # labels and ranking kept
    assert np.array_equal(np.argsort(after[:, 1]), np.argsort(prob[:, 1]))
    test_prob, test_y = _overconfident(2000, 2)  # and on fresh data
    assert nll(cal.apply(test_prob), test_y) < nll(test_prob, test_y)


@pytest.mark.parametrize("method", ["platt", "isotonic"])
def test_platt_and_isotonic_reduce_nll_and_match_scikit_learn(method):
    prob, y = _overconfident(1000, 3)
    cal = fit(method, prob, y)
    q = cal.apply(prob)
    assert q.shape == prob.shape and np.allclose(q.sum(1), 1)
    assert nll(q, y) < nll(prob, y)
    if method == "isotonic":
        from sklearn.isotonic import IsotonicRegression
        iso = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(prob[:, 1], y)
        assert np.allclose(q[:, 1], iso.predict(prob[:, 1]))
    else:
        assert cal.params["slope"] == pytest.approx(0.25, abs=0.08)


def test_logit_is_finite_where_a_probability_rounds_to_one():
    prob = np.array([[1e-20, 1.0], [0.5, 0.5]], dtype=np.float32)
    z = logit(prob)
    assert np.isfinite(z).all() and z[1] == 0
    assert Calibrator("temperature", {"temperature": 2.0}).apply(prob)[1, 1] == 0.5


def test_fit_refuses_one_class_and_unknown_methods():
    with pytest.raises(GrpruneError, match="needs both classes"):
        fit("temperature", np.full(5, 0.7), np.ones(5))
    with pytest.raises(GrpruneError, match="Choices: temperature, platt, isotonic"):
        fit("beta", np.full(5, 0.7), np.array([0, 1, 0, 1, 1]))


def test_the_record_refuses_other_formats_and_bad_parameters():
    good = CalibrationRecord("temperature", {"temperature": 1.5}, "abc").to_dict()
    assert CalibrationRecord.from_dict(good).params == {"temperature": 1.5}
    for bad, text in (({**good, "format": 9}, "format 9"),
                      ({**good, "method": "beta"}, "unknown method"),
                      ({**good, "params": {}}, "needs the parameters"),
                      ({**good, "params": {"temperature": -1}}, "not valid numbers")):
        with pytest.raises(GrpruneError, match=text):
            CalibrationRecord.from_dict(bad)


# -- on a run ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, data_root):
    return tiny_molbbbp_run(tmp_path_factory.mktemp("cal") / "run", limit=64)


def _one_error(res, text: str) -> None:
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("grprune: error:") and text in lines[0], \
        res.output


def test_predict_calibrated_without_a_calibration_is_one_line(tiny_run):
    _one_error(_cli("predict", tiny_run, "--calibrated", "--smiles", "CCO"),
               f"run `grprune calibrate {tiny_run}` first")


def test_calibrate_writes_the_record_and_diagram_and_predict_applies_it(tiny_run, tmp_path):
    from grprune.calibration import split_scores
    from grprune.inference import load_run
    res = _cli("calibrate", tiny_run, "--out", tmp_path / "report")
    assert res.exit_code == 0, res.output
    assert "ECE on test:" in res.output and " after (15 bins)" in res.output
    rec = json.loads((tiny_run / "calibration.json").read_text())
    assert rec["format"] == 1 and rec["method"] == "temperature" and rec["bins"] == 15
    run = load_run(tiny_run)
    prob, y = split_scores(run, "test")
    assert rec["test"]["before"]["ece"] == pytest.approx(_direct_ece(prob[:, 1], y, 15))
    assert rec["test"]["before"]["brier"] == pytest.approx(np.mean((prob[:, 1] - y) ** 2))
    assert len(rec["test"]["reliability"]["after"]) == 15
    assert (tmp_path / "report" / "reliability.png").read_bytes().startswith(PNG)
    plain = _cli("predict", tiny_run, "--smiles", "CCO", "--smiles", "c1ccccc1O")
    cal = _cli("predict", tiny_run, "--calibrated", "--smiles", "CCO", "--smiles",
               "c1ccccc1O")
    assert cal.exit_code == 0 and "calibrated: run temperature T = " in cal.output, cal.output
    raw = run.predict(["CCO", "c1ccccc1O"])["prob_1"].to_numpy()
    expected = Calibrator("temperature", rec["params"]).apply(raw)
    assert f"{expected[0]:.4f}" in cal.output and plain.exit_code == 0


def test_calibrate_refuses_a_changed_checkpoint_and_bad_options(tiny_run, tmp_path):
    import shutil
    other = tmp_path / "copy"
    shutil.copytree(tiny_run, other)
    assert _cli("calibrate", other).exit_code == 0
    rec = json.loads((other / "calibration.json").read_text())
    rec["checkpoint_sha256"] = "0" * 64  # fitted on an earlier model: the run trained again
    (other / "calibration.json").write_text(json.dumps(rec))
    _one_error(_cli("predict", other, "--calibrated", "--smiles", "CCO"),
               "was fitted on another checkpoint.pt")
    _one_error(_cli("calibrate", tiny_run, "--bins", "0"), "--bins must be at least 1")
