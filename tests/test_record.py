"""The typed run records (:mod:`grprune.record`) against the files runs wrote before them.

``tests/fixtures/runs/`` holds the ``config.json``, ``summary.json`` and ``results.jsonl`` of
three short fixed-seed runs written by the code before :class:`RunSummary` and
:class:`EpochRecord` were types (molbbbp PrunE; GOOD-Motif with the official preset, whose
summary has the ID splits; molbbbp ERM without training-split evaluation, whose summary
has a NaN and the ``non_finite`` key). Reading them and writing them back must give the same
bytes, and their config hashes must stay theirs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from grprune.record import (EpochRecord, FeatureSpec, RunConfig, RunSummary, config_hash,
                            flat_items, lookup, to_json)
from grprune.record.files import read_records
from grprune.record.runconfig import DataConfig, ModelConfig, TrainConfig
from grprune.record.settings import (OPTION_KEYS, PART_KEYS, DataSettings, ModelSettings,
                                     TrainSettings)

FIXTURES = Path(__file__).parent / "fixtures" / "runs"
RUNS = sorted(p.name for p in FIXTURES.iterdir())


@pytest.mark.parametrize("name", RUNS)
def test_a_stored_summary_reads_and_writes_back_byte_for_byte(name):
    text = (FIXTURES / name / "summary.json").read_text()
    summary = RunSummary.from_dict(json.loads(text))
    assert to_json(summary.to_dict()) + "\n" == text
    assert RunSummary.from_dict(summary.to_dict()) == summary


@pytest.mark.parametrize("name", RUNS)
def test_stored_epoch_records_read_and_write_back_byte_for_byte(name):
    text = (FIXTURES / name / "results.jsonl").read_text()
    records = [EpochRecord.from_dict(r) for r in read_records(FIXTURES / name / "results.jsonl")]
    assert "".join(to_json(r.to_dict(), indent=None) + "\n" for r in records) == text
    assert [r.epoch for r in records] == list(range(len(records)))


@pytest.mark.parametrize("name", RUNS)
def test_a_stored_config_keeps_its_hash_and_bytes(name):
    text = (FIXTURES / name / "config.json").read_text()
    cfg = RunConfig.from_dict(json.loads(text))
    assert config_hash(cfg) == cfg.hash == RunSummary.from_dict(
        json.loads((FIXTURES / name / "summary.json").read_text())).config_hash
    assert to_json(cfg) + "\n" == text


def test_the_summary_fields_are_typed():
    motif = RunSummary.from_dict(json.loads(
        (FIXTURES / "good-motif-basis-official" / "summary.json").read_text()))
    assert motif.dataset == "good-motif" and motif.preset == "official"
    assert motif.reg == ("size", "eps-align") and motif.metric == "accuracy"
    assert motif.in_distribution and motif.score("id-test") == motif.id_test
    assert isinstance(motif.features, FeatureSpec) and motif.features.classes == 3
    erm = RunSummary.from_dict(json.loads(
        (FIXTURES / "molbbbp-erm-no-eval-train" / "summary.json").read_text()))
    assert not erm.in_distribution and erm.train is None and erm.score("train") is None
    assert erm.extra == {"non_finite": {"train": "nan"}}
    assert "id_test" not in erm.to_dict() and erm.selector == "none" and erm.reg == ()


def test_an_older_summary_reads_with_defaults_and_keeps_what_it_had():
    old = {"dataset": "ogbg-molbbbp", "metric": "rocauc", "test": 0.7, "best_epoch": 3,
           "model": {"feature_kind": "ogb", "node_dim": 9}, "someday": [1, 2]}
    summary = RunSummary.from_dict(old)
    assert summary.selected == "best-valid" and summary.use_selector is None
    assert summary.features is None and summary.extra["someday"] == [1, 2]
    assert summary.to_dict() == old  # the incomplete model record is kept as it was
    assert summary.test == 0.7 and summary.valid is None


def test_a_summary_built_in_memory_writes_nan_as_null_and_says_so():
    summary = RunSummary(dataset="d", metric="rocauc", test=math.nan, reg=("size",),
                         absent=frozenset({"id_valid", "id_test"}))
    record = json.loads(to_json(summary.to_dict()))
    assert record["test"] is None and record["non_finite"] == {"test": "nan"}
    assert record["reg"] == ["size"] and list(record)[:3] == ["dataset", "split", "selector"]
    assert "id_valid" not in record and list(record)[-2:] == ["dataset_info", "non_finite"]


def test_an_epoch_record_keeps_the_order_of_its_keys():
    record = EpochRecord(epoch=2, phase="warmup", lr=0.1, loss={"total": 1.0},
                         scores={"valid": {"rocauc": 0.5, "kept_edge_fraction": 1.0},
                                 "test": {"rocauc": math.nan, "kept_edge_fraction": 1.0}},
                         epoch_time_s=1.0, train_time_s=0.5, best_epoch=-1)
    assert list(record.to_dict()) == ["epoch", "phase", "lr", "loss", "valid", "test",
                                      "epoch_time_s", "train_time_s", "best_epoch"]
    assert record.warmup and record.metric == "rocauc" and record.score("valid", "rocauc") == 0.5
    assert math.isnan(record.value("test", "rocauc")) and record.value("train", "rocauc") is None
    assert record.value("train", "rocauc", math.nan) != record.value("train", "rocauc", math.nan)


def test_the_typed_sections_are_the_declared_settings():
    assert [f.name for f in dataclasses.fields(TrainConfig)] == list(TrainSettings.params)
    assert [f.name for f in dataclasses.fields(ModelConfig)] == list(ModelSettings.params)
    assert {"name", *DataSettings.params} <= {f.name for f in dataclasses.fields(DataConfig)}
    cfg = RunConfig.from_dict(json.loads(
        (FIXTURES / "good-motif-basis-official" / "config.json").read_text()))
    assert cfg.train.epochs == 2 and cfg.data.limit == 600
    assert cfg.data.split == "basis" and cfg.data.shift == cfg["data"]["shift"]
    assert cfg.model.readout == "sum-l2" and cfg.selector.name == cfg["selector"]["name"]
    assert "tau" in cfg.selector.hparams and "name" not in cfg.encoder.hparams
    assert list(cfg.reg) == list(cfg["reg"]) and cfg.setting("reg.size.eta") == cfg.reg[
        "size"]["eta"]
    assert cfg.preset == "official" and cfg.setting("preset.name") == "official"
    older = {k: v for k, v in cfg["train"].items() if k not in ("fast_path", "eval_batch_size")}
    assert TrainConfig.from_dict(older).fast_path is False  # a key it lacks: the default


def test_one_dotted_reading_of_the_settings():
    cfg = RunConfig.from_dict(json.loads(
        (FIXTURES / "molbbbp-prune-paper" / "config.json").read_text()))
    flat = dict(flat_items(cfg))
    assert flat["train.lr"] == cfg.train.lr and flat["reg.eps-align.k"] == cfg.reg["eps-align"]["k"]
    assert all(lookup(cfg, key) == value for key, value in flat.items())
    assert not any(k.startswith(("hash", "preset", "features", "version")) for k in flat)
    assert lookup(cfg, "reg.vrex.weight", "-") == "-" and lookup(cfg, "nosuch.key") is None
    for key in (*OPTION_KEYS.values(), *PART_KEYS.values()):
        assert key.split(".")[0] in (*cfg, "preset")


# -- one reader and writer of run files -----------------------------------------------
#: the names of a run's files (grprune.record.files), and the constants that hold them
RUN_FILE_NAMES = {"config.json", "results.jsonl", "summary.json", "state.pt", "checkpoint.pt",
                  "checkpoint-last.pt", "edge_probs.npz", "error.json", "sweep.log",
                  "calibration.json"}
RUN_FILE_CONSTANTS = {"CONFIG", "RESULTS", "SUMMARY", "STATE", "CHECKPOINT", "LAST_CHECKPOINT",
                      "EDGE_PROBS", "ERROR", "LOG", "RUN_FILES", "MARKERS", "CALIBRATION"}
#: where the run files are defined (record/files.py) and read and written (record/rundir.py)
OWNERS = ("record",)


def run_file_uses(path: Path) -> list[str]:
    """Where the module at ``path`` names a run file: a string that is one of
    :data:`RUN_FILE_NAMES`, or one of :data:`RUN_FILE_CONSTANTS` imported from, or read
    as an attribute of, ``grprune.record.files`` or ``grprune.record.rundir``."""
    import ast
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef,
                                    ast.ClassDef))
                  and n.body and isinstance(n.body[0], ast.Expr)
                  and isinstance(n.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and node.value in RUN_FILE_NAMES
                and id(node) not in docstrings):
            found.append(f"{path}:{node.lineno}: {node.value!r}")
        elif (isinstance(node, ast.ImportFrom) and node.module in ("grprune.record.files",
                                                                    "grprune.record.rundir")):
            found += [f"{path}:{node.lineno}: imports {a.name}" for a in node.names
                      if a.name in RUN_FILE_CONSTANTS]
        elif (isinstance(node, ast.Attribute) and node.attr in RUN_FILE_CONSTANTS
              and isinstance(node.value, ast.Name) and node.value.id == "R"):
            found.append(f"{path}:{node.lineno}: R.{node.attr}")
    return found


def test_only_the_run_directory_reads_and_writes_run_files():
    """No module outside grprune/record names a run's files: everything else goes through
    :class:`grprune.record.rundir.RunDir` (issue 40, item 3)."""
    package = Path(__file__).resolve().parents[1] / "grprune"
    found = [use for path in sorted(package.rglob("*.py"))
             if path.relative_to(package).parts[0] not in OWNERS
             for use in run_file_uses(path)]
    assert not found, "run files named outside RunDir:\n" + "\n".join(found)


def test_the_run_file_check_sees_each_way_of_naming_one(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('"""Writes config.json."""\nfrom grprune.record.files import SUMMARY\n'
                   'import grprune.record.files as R\np = R.CHECKPOINT\nq = "state.pt"\n')
    assert [u.split(": ", 1)[1] for u in run_file_uses(src)] == [
        "imports SUMMARY", "R.CHECKPOINT", "'state.pt'"]


# -- a read-only configuration ----------------------------------------------------------
@pytest.mark.parametrize("name", RUNS)
def test_a_run_config_is_read_only_at_every_depth(name):
    import copy
    import pickle

    stored = json.loads((FIXTURES / name / "config.json").read_text())
    cfg = RunConfig.from_dict(stored)
    with pytest.raises(TypeError):
        cfg["train"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        cfg["train"]["epochs"] = 1
    with pytest.raises(TypeError):
        cfg.hash = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        cfg["reg"].update({})  # a read-only section has no update
    # setting() reads a dotted key, get() the top level
    assert cfg.setting("train.epochs") == stored["train"]["epochs"]
    assert cfg.setting("reg.nothing.eta", 3) == 3 and cfg.get("hash") == stored["hash"]
    # what is written is what was read, and a copy changes nothing in it
    plain = cfg.to_dict()
    assert type(plain) is dict and to_json(plain) == to_json(stored)
    plain["train"]["epochs"] = -1
    assert cfg.train.epochs == stored["train"]["epochs"] and cfg == stored
    # copies are itself; a pickle (Ray, process pools) is an equal configuration
    assert copy.deepcopy(cfg) is cfg
    again = pickle.loads(pickle.dumps(cfg))
    assert isinstance(again, RunConfig) and again == cfg and config_hash(again) == cfg.hash
    # a new configuration is a new object
    features = FeatureSpec("ogb", 9, 3, 2)
    new = cfg.with_features(features)
    assert new.features == features and new is not cfg and cfg.to_dict() == stored


def test_the_summary_names_its_feature_sizes_features_and_writes_them_as_model():
    record = json.loads((FIXTURES / "good-motif-basis-official" / "summary.json").read_text())
    summary = RunSummary.from_dict(record)
    assert summary.to_dict() == record and list(summary.to_dict()) == list(record)
    assert not hasattr(summary, "model") and summary.to_dict()["model"] == record["model"]
