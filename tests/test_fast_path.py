"""``train.fast_path`` and ``train.eval_batch_size`` on the CPU: off, a run is what it was
before they existed (same hash, same numbers, also from a config.json without them); on, the
CPU's numbers stay the same bit for bit. The CUDA side is in tests/test_device.py."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import strip_keys
from grprune.record.files import EDGE_PROBS, RESULTS, SUMMARY, read_json, read_records
from grprune.record.settings import config_hash
from grprune.resolve import resolve_config
from grprune.data import load_dataset
from grprune.run import execute
from grprune.record.runconfig import RunConfig
from grprune.trainer import Trainer

SMALL = {"train.epochs": 2, "data.limit": 96, "train.batch_size": 32, "train.device": "cpu",
         "train.progress": "none"}
NEW_KEYS = ("fast_path", "eval_batch_size", "pad_buckets")
#: fields that measure time or memory, not the computation, and whether the data cache was
#: built or hit (built by the first run of a session that starts with an empty cache)
VOLATILE = {"epoch_time_s", "train_time_s", "wall_time_s", "data_load_s", "peak_mem_mib",
            "peak_rss_mib", "epoch_time_s_median", "load_seconds", "environment", "cache"}


def _strip(obj):
    """``obj`` without the VOLATILE fields, at any depth."""
    return strip_keys(obj, VOLATILE)


def _outputs(run_dir):
    """Records, summary and edge_probs.npz arrays of a run, timings left out."""
    summary = _strip(read_json(run_dir / SUMMARY))
    with np.load(run_dir / EDGE_PROBS) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return _strip(read_records(run_dir / RESULTS)), summary, arrays


def _assert_identical(a, b):
    (rec_a, sum_a, arr_a), (rec_b, sum_b, arr_b) = _outputs(a), _outputs(b)
    assert rec_a == rec_b
    assert sum_a == sum_b
    assert arr_a.keys() == arr_b.keys()
    for key in arr_a:
        assert np.array_equal(arr_a[key], arr_b[key]), key


def _without_new_keys(cfg) -> dict:
    """``cfg`` as a config.json written before ``train.fast_path`` existed."""
    old = {**cfg, "train": {k: v for k, v in cfg["train"].items() if k not in NEW_KEYS}}
    return old


def test_the_new_train_keys_leave_every_runs_identity_unchanged():
    cfg = resolve_config(reg="size,eps-align")
    assert cfg["train"]["fast_path"] is False and cfg["train"]["eval_batch_size"] == 0
    assert cfg["hash"] == config_hash(_without_new_keys(cfg))  # old run directories still match
    fast = resolve_config(reg="size,eps-align", flags={"train.fast_path": True,
                                                       "train.eval_batch_size": 1000})
    assert fast["hash"] == cfg["hash"]  # like train.device: how a run is computed


def test_off_the_trainer_is_todays():
    trainer = Trainer(resolve_config(flags=SMALL), load_dataset("ogbg-molbbbp"), "unused")
    defaults = trainer.optimizer.defaults
    assert not trainer.fast and trainer.device_gen is None
    assert defaults["foreach"] is None and defaults["fused"] is None  # torch's default Adam
    assert trainer.eval_batch_size() == 32


def test_on_the_cpu_it_takes_foreach_adam_and_keeps_the_batch_sizes():
    cfg = resolve_config(flags={**SMALL, "train.fast_path": True})
    trainer = Trainer(cfg, load_dataset("ogbg-molbbbp"), "unused")
    assert trainer.optimizer.defaults["foreach"] is True
    assert not trainer.optimizer.defaults["fused"]
    assert trainer.device_gen is None  # the CPU keeps the DataLoader's shuffle stream
    assert trainer.eval_batch_size() == 32  # a larger one may round differently on the CPU


@pytest.mark.parametrize("fast", [False, True])
def test_the_epochs_batches_are_gathered_before_its_first_step_only_with_it(monkeypatch, fast):
    cfg = resolve_config(flags={**SMALL, "train.fast_path": fast})
    trainer = Trainer(cfg, load_dataset("ogbg-molbbbp"), "unused")
    gathered = []
    batch = trainer.store.batch
    def counted(idx):
        gathered.append(len(idx))
        return batch(idx)

    monkeypatch.setattr(trainer.store, "batch", counted)
    batches = trainer._batches("train", train=True)
    next(batches)
    assert gathered == ([32, 32, 32] if fast else [32])
    assert [b.num_graphs for b in batches] == [32, 32]


@pytest.mark.parametrize("reg,selector", [("size,eps-align", "gumbel-gin"), ("none", "none"),
                                          ("gsat", "gumbel-gin")])
def test_on_the_cpu_a_run_gives_the_same_numbers_bit_for_bit(tmp_path, reg, selector):
    off = resolve_config(reg=reg, selector=selector, flags=SMALL)
    on = resolve_config(reg=reg, selector=selector, flags={**SMALL, "train.fast_path": True})
    execute(off, tmp_path / "off", log=lambda msg: None)
    _, summary = execute(on, tmp_path / "on", log=lambda msg: None)
    assert summary.test is not None and math.isfinite(summary.test)
    _assert_identical(tmp_path / "off", tmp_path / "on")


def test_a_config_json_without_the_new_keys_trains_as_before(tmp_path):
    cfg = resolve_config(reg="size,eps-align", flags=SMALL)
    execute(cfg, tmp_path / "now", log=lambda msg: None)
    old = RunConfig.from_dict(_without_new_keys(cfg))
    execute(old, tmp_path / "old", log=lambda msg: None)
    _assert_identical(tmp_path / "now", tmp_path / "old")


def test_eval_batch_size_batches_each_split_and_scores_alike():
    data = load_dataset("ogbg-molbbbp")
    small = Trainer(resolve_config(flags=SMALL), data, "unused")
    large = Trainer(resolve_config(flags={**SMALL, "train.eval_batch_size": 4096}), data,
                    "unused")
    large.model.load_state_dict(small.model.state_dict())
    for split in ("train", "valid", "test"):
        a, _ = small.evaluate(split)
        b, _ = large.evaluate(split)
        assert len(large._eval_batches[split]) == 1 and len(small._eval_batches[split]) == 3
        # the same scores, up to the last bit of float32 rounding
        np.testing.assert_allclose(a.prob, b.prob, rtol=1e-5, atol=1e-6)
        assert a.metric == pytest.approx(b.metric, abs=1e-6)


def test_the_targets_script_records_a_run_with_the_issues_keys(tmp_path):
    """benchmarks/speed/targets.py (device.sh speed): its command and its JSON object."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "speed" / "targets.py"
    spec = importlib.util.spec_from_file_location("targets", path)
    assert spec is not None and spec.loader is not None
    targets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(targets)
    assert targets.PLAN[0] == "molbbbp-prune-run-100:fast"
    cmd = targets.command("motif-prune-epoch", False, True, "cpu", True, tmp_path / "x")
    assert "train.fast_path=false" in cmd and "train.warmup_epochs=0" in cmd
    assert "data.limit=400" in cmd and cmd[cmd.index("--epochs") + 1] == "2"
    cfg = resolve_config(selector="gumbel-gin", reg="size,eps-align",
                         flags={**SMALL, "train.fast_path": True})
    execute(cfg, tmp_path / "run", log=lambda msg: None)
    rec = targets.record("molbbbp-prune-run-100", tmp_path / "run", 1.5, "abc1234")
    assert rec["what"] == "molbbbp-prune-run-100" and rec["commit"] == "abc1234"
    assert rec["fast_path"] is True and rec["deterministic"] is True
    assert rec["seconds"] > 0 and rec["peak_mib"] > 0 and rec["device"]
    assert rec["epochs"] == 2 and len(rec["train_epoch_s"]) == 2 and rec["train_graphs"] == 96
