"""A run says what model it is (issue 64, point 1): a model selected at an ERM warm-up
epoch, and early stopping, are said in words by ``run``, ``collect``, ``explain`` and
``predict``; on your own data a run with a selector selects among the epochs that use it.

The trained runs force their validation scores (the warm-up epoch 0 scores best), so
which epoch is selected does not depend on the numbers a tiny run happens to reach."""

from __future__ import annotations

import json
import struct

import pytest
from conftest import force_valid_scores
from click.testing import CliRunner

from grprune.cli import main
from grprune.data.molecule_csv import MoleculeCsv
from grprune.record import RunSummary
from grprune.resolve import resolve_config

#: the OOD-valid score of each epoch: the ERM warm-up epoch 0 is the best one
VALID = {0: 0.9, 1: 0.5, 2: 0.4, 3: 0.3, 4: 0.2}
WARM_NOTE = "is an ERM warm-up epoch: this model does not use the selector; every bond is kept"


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _forced_valid(mp: pytest.MonkeyPatch) -> None:
    """Make each epoch's validation score :data:`VALID` (the final evaluation is real)."""
    force_valid_scores(mp, VALID)


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    return MoleculeCsv.example_params(tmp_path_factory.mktemp("own"))["path"]


def _run_args(csv_path, out, *more):
    return ["run", "--data", "molecule-csv", "--reg", "size,eps-align", "-H",
            f"data.path={csv_path}", "-H", "data.split=random", "-H", "data.metric=accuracy",
            "-H", "train.warmup_epochs=1", "-H", "encoder.hidden=16", "-H", "selector.hidden=16",
            "--progress", "none", "--device", "cpu", "--out", out, *more]


@pytest.fixture(scope="module")
def runs(csv_path, tmp_path_factory):
    """Two molecule-csv PrunE runs whose best validation epoch is the warm-up epoch 0:
    ``default`` (3 epochs, the own-data rule) and ``warm`` (``train.select_warmup=true``,
    5 epochs, patience 2: early stopping after epoch 2); their run directories and CLI
    results."""
    root = tmp_path_factory.mktemp("warm")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        _forced_valid(mp)
        for name, more in (("default", ["--epochs", "3"]),
                           ("warm", ["--epochs", "5", "-H", "train.select_warmup=true",
                                     "-H", "train.patience=2"])):
            res = _cli(*_run_args(csv_path, root / name, *more))
            assert res.exit_code == 0, res.output
            out[name] = (root / name, res)
    return out


def _summary(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


# -- own data: select among the epochs that use the selector --------------------------------
def test_own_data_selects_a_post_warm_up_epoch_unless_asked(runs):
    default = _summary(runs["default"][0])
    assert default["preset"] == "official"  # whose own rule would select the warm-up epoch
    assert (default["best_epoch"], default["selected_phase"], default["use_selector"]) == (
        1, "train", True)
    warm = _summary(runs["warm"][0])  # -H train.select_warmup=true: the user's choice
    assert (warm["best_epoch"], warm["selected_phase"], warm["use_selector"]) == (
        0, "warmup", False)
    assert WARM_NOTE not in runs["default"][1].stdout


def test_the_own_data_rule_is_resolved_where_it_applies(csv_path, tmp_path):
    def select_warmup(data="molecule-csv", reg="size,eps-align", *more, preset=None):
        path = [f"data.path={csv_path}"] if data in ("molecule-csv", "dgl-graphs") else []
        cfg = resolve_config(data=data, reg=reg, preset=preset, overrides=[*path, *more])
        return cfg["train"]["select_warmup"], cfg["preset"]["values"]

    assert select_warmup()[0] is False and select_warmup("dgl-graphs")[0] is False
    assert "train.select_warmup" not in select_warmup()[1]  # the preset did not set it
    assert select_warmup("molecule-csv", "size,eps-align", "train.select_warmup=true")[0]
    assert select_warmup("molecule-csv", "none")[0] is True  # ERM: the preset's rule
    # the benchmarks keep their presets' rules
    for data in ("ogbg-molbbbp", "good-motif", "good-hiv", "drugood-ec50"):
        assert select_warmup(data, preset="official") == (
            True, resolve_config(data=data, preset="official")["preset"]["values"])
        assert select_warmup(data, preset="paper")[0] is False
    # a preset that names the dataset decides for it
    own = tmp_path / "mine.yaml"
    own.write_text("description: mine\nall:\n  train.select_warmup: true\n"
                   "datasets:\n  molecule-csv:\n    train.select_warmup: true\n")
    assert select_warmup(preset=str(own))[0] is True
    own.write_text("description: mine\nall:\n  train.select_warmup: true\n")
    assert select_warmup(preset=str(own))[0] is False


# -- run: the summary says a warm-up model and early stopping -------------------------------
def test_run_says_the_warm_up_model_and_the_early_stop(runs):
    run_dir, res = runs["warm"]
    assert f"note: the selected epoch 0 {WARM_NOTE}" in res.stdout
    assert "0 (ERM warm-up: no selector)" in res.stdout
    assert "3 of 5 (early stop, patience 2)" in res.stdout
    assert ("note: early stopping ended the run at epoch 2 (3 of 5 epochs): no better "
            "validation score for 2 epochs (train.patience)") in res.stdout
    summary = _summary(run_dir)
    assert summary["early_stop"] == {"epoch": 2, "patience": 2, "epochs": 5}
    assert summary["epochs_run"] == 3
    assert _summary(runs["default"][0])["early_stop"] is None  # it trained every epoch


def test_the_summary_record_reads_old_and_new_files():
    from grprune.record.summary import EarlyStop
    new = RunSummary(selector="gumbel-gin", best_epoch=7, use_selector=False,
                     selected_phase="warmup", epochs_run=60,
                     early_stop=EarlyStop.of(60, 50, 100))
    assert RunSummary.from_dict(new.to_dict()) == new
    assert new.to_dict()["early_stop"] == {"epoch": 59, "patience": 50, "epochs": 100}
    notes = new.model_notes()
    assert notes[0].startswith(f"the selected epoch 7 {WARM_NOTE}")
    assert notes[1].startswith("early stopping ended the run at epoch 59 (60 of 100 epochs)")
    # a summary without early_stop and use_selector: it reads, and writes back as it was;
    # the model it reports is the one the selector evaluated (use_selector is what says not)
    old = {"dataset": "molecule-csv", "selector": "gumbel-gin", "metric": "rocauc",
           "test": 0.7, "best_epoch": 3, "selected_phase": "warmup"}
    read = RunSummary.from_dict(old)
    assert read.early_stop is None and "early_stop" in read.absent and read.to_dict() == old
    assert not read.warmup_model and read.model_notes() == []
    # an ERM run has no selector to leave out; a record of another form is kept as it was
    assert not RunSummary(selector="none", use_selector=False).warmup_model
    odd = RunSummary.from_dict({**old, "early_stop": {"epoch": "x"}})
    assert odd.early_stop is None and odd.to_dict()["early_stop"] == {"epoch": "x"}
    assert EarlyStop.of(100, 50, 100) is None and EarlyStop.of(60, 0, 100) is None


# -- explain and predict --------------------------------------------------------------------
def test_explain_and_predict_say_the_model_keeps_every_bond(runs, tmp_path):
    warm, default = runs["warm"][0], runs["default"][0]
    res = _cli("predict", warm, "--smiles", "CCO", "--device", "cpu")
    assert res.exit_code == 0, res.output
    assert f"grprune: the selected epoch 0 {WARM_NOTE}" in res.stderr
    res = _cli("explain", warm, "--graphs", "0", "--part", "train", "--device", "cpu",
               "--out", tmp_path / "x")
    assert res.exit_code == 0, res.output
    assert f"grprune: the selected epoch 0 {WARM_NOTE}" in res.stderr
    manifest = json.loads((tmp_path / "x" / "explain.json").read_text())
    assert any(WARM_NOTE in n for n in manifest["notes"])
    res = _cli("predict", default, "--smiles", "CCO", "--device", "cpu")
    assert res.exit_code == 0 and WARM_NOTE not in res.output


# -- collect and curves ---------------------------------------------------------------------
def test_collect_marks_the_warm_up_cell_and_prints_one_seed_without_sd(runs, tmp_path):
    res = _cli("collect", runs["warm"][0], runs["default"][0], "--out", tmp_path / "t",
               "--layout", "long")
    assert res.exit_code == 0, res.output
    md = (tmp_path / "t.md").read_text()
    assert "†" in md and "± 0.00" not in md and "(n=1)" in md
    assert ("† ERM warm-up model: the selected epoch is an ERM warm-up epoch, so the model "
            "does not use the selector and keeps every bond") in md
    assert "ERM warm-up model" in res.stdout and "± 0.00" not in res.stdout


def test_curves_leave_out_panels_without_data(runs, tmp_path):
    from grprune.curves import PANELS, drawn_panels, series
    groups = series([runs["default"][0]])
    titles = [PANELS[i][0] for i in drawn_panels(groups)]
    assert titles and not any("motif" in t or "Precision@50" in t for t in titles)
    res = _cli("curves", runs["default"][0], "--out", tmp_path / "c.png")
    assert res.exit_code == 0, res.output
    width = struct.unpack(">I", (tmp_path / "c.png").read_bytes()[16:20])[0]
    assert width == round(4.2 * 3 * 110)  # five panels and the legend: three a row
