"""The CUDA path: every part trains on a GPU, and a GPU checkpoint scores the same on the CPU.

Skipped where torch sees no CUDA device (CI). Run on a GPU machine with
``python -m pytest tests/test_device.py`` (``benchmarks/device.sh speed`` runs the
``fast_path`` tests first, ``-k fast_path``, and the others after its timings).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from grprune import results as R
from grprune.resolve import resolve_config
from grprune.data import load_dataset
from grprune.run import execute
from grprune.trainer import FAST_EVAL_BATCH, Trainer
from tests.conftest import steps_without_sync

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.fixture(autouse=True)
def _prepared_data(monkeypatch):
    """``benchmarks/device.sh`` prepares the datasets once (``GRPRUNE_TEST_DATA_ROOT``): read
    them there rather than featurize them again in the test session's fresh data root."""
    if os.environ.get("GRPRUNE_TEST_DATA_ROOT"):
        monkeypatch.setenv("GRPRUNE_DATA_ROOT", os.environ["GRPRUNE_TEST_DATA_ROOT"])

SMALL = ["data.limit=96", "train.batch_size=32", "train.progress=none"]

#: (dataset, regularizers, selector, extra overrides): every built-in part once
CASES = [
    ("ogbg-molbbbp", "none", "none", []),
    ("ogbg-molbbbp", "size,eps-align", "gumbel-gin", []),
    ("ogbg-molbbbp", "size,eps-align", "gumbel-gcn", []),
    ("ogbg-molbbbp", "gsat", "gumbel-gin", []),
    ("ogbg-molbbbp", "ciga", "gumbel-gin", ["reg.ciga.spurious_weight=0.5"]),
    ("ogbg-molbbbp", "irm", "none", []),
    ("ogbg-molbbbp", "vrex", "none", []),
    ("ogbg-molbbbp", "groupdro", "none", []),
    ("ogbg-molbbbp", "none", "drop-edge", []),
    ("good-motif", "size,eps-align", "gumbel-gin", ["train.warmup_epochs=0"]),
]


def _cfg(data, reg, selector, extra, device, epochs=2):
    return resolve_config(data=data, reg=reg, selector=selector,
                          flags={"train.epochs": epochs, "train.device": device},
                          overrides=SMALL + extra)


@pytest.mark.parametrize("data,reg,selector,extra", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_every_part_trains_on_cuda(tmp_path, data, reg, selector, extra):
    status, summary = execute(_cfg(data, reg, selector, extra, "cuda"), tmp_path / "run",
                              log=lambda msg: None)
    assert status == "completed"
    assert summary.device.startswith("cuda")
    assert summary.peak_mem_mib > 0
    assert summary.test == summary.test  # not NaN


def test_cuda_checkpoint_scores_the_same_on_cpu(tmp_path):
    cfg = _cfg("ogbg-molbbbp", "size,eps-align", "gumbel-gin", [], "cuda", epochs=3)
    _, summary = execute(cfg, tmp_path / "run", log=lambda msg: None)
    cpu_cfg = {**cfg, "train": {**cfg["train"], "device": "cpu"}}
    dataset = load_dataset("ogbg-molbbbp")
    trainer = Trainer(cpu_cfg, dataset, tmp_path / "cpu")
    state = torch.load(tmp_path / "run" / R.CHECKPOINT, map_location="cpu", weights_only=True)
    trainer.model.load_state_dict(state)
    ev, _ = trainer.evaluate("test")
    assert ev.metric == pytest.approx(summary.test, abs=1e-3)


def test_interrupted_cuda_run_resumes(tmp_path):
    cfg = _cfg("ogbg-molbbbp", "size,eps-align", "gumbel-gin", [], "cuda", epochs=3)

    def stop_after_first(record):
        if record["epoch"] == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(cfg, tmp_path / "run", on_epoch=stop_after_first, log=lambda msg: None)
    assert (tmp_path / "run" / R.STATE).is_file()
    status, summary = execute(cfg, tmp_path / "run", log=lambda msg: None)
    assert status == "resumed" and summary.epochs_run == 3
    assert summary.device.startswith("cuda")


@pytest.mark.parametrize("data,reg,selector,extra", [CASES[1], CASES[4], CASES[-1]],
                         ids=["prune", "ciga", "good-motif"])
def test_deterministic_cuda_runs_of_one_seed_repeat_exactly(tmp_path, data, reg, selector, extra):
    """train.deterministic (the default): deterministic kernels, CUBLAS_WORKSPACE_CONFIG."""
    cfg = _cfg(data, reg, selector, extra, "cuda", epochs=3)
    runs = [execute(cfg, tmp_path / f"r{i}", log=lambda msg: None)[1] for i in range(2)]
    numbers = [[{k: rec[k] for k in ("loss", "train", "valid", "test")}
                for rec in R.read_records(tmp_path / f"r{i}" / R.RESULTS)] for i in range(2)]
    assert numbers[0] == numbers[1]
    assert runs[0]["test"] == runs[1]["test"]
    assert runs[0]["determinism"]["deterministic_algorithms"] is True


# -- train.fast_path on CUDA (tests/test_fast_path.py has the CPU side) --------------------
FAST = ["train.fast_path=true"]


def _numbers(run_dir):
    return [{k: rec[k] for k in ("loss", "train", "valid", "test")}
            for rec in R.read_records(run_dir / R.RESULTS)]


def test_fast_path_trains_with_fused_adam_and_repeats_exactly(tmp_path):
    """Fused Adam, the shuffle drawn on the device, evaluation in one batch per split; with
    train.deterministic (the default) two runs of one seed give the same numbers."""
    cfg = _cfg("ogbg-molbbbp", "size,eps-align", "gumbel-gin", FAST, "cuda", epochs=3)
    trainer = Trainer(cfg, load_dataset("ogbg-molbbbp"), tmp_path / "t")
    assert trainer.optimizer.defaults["fused"] is True
    assert trainer.device_gen is not None and trainer.eval_batch_size() == FAST_EVAL_BATCH
    order = trainer.train_order()
    assert sorted(order.tolist()) == list(range(len(trainer.splits["train"])))
    runs = [execute(cfg, tmp_path / f"r{i}", log=lambda msg: None)[1] for i in range(2)]
    assert math.isfinite(runs[0]["test"]) and runs[0]["device"].startswith("cuda")
    assert _numbers(tmp_path / "r0") == _numbers(tmp_path / "r1")


def test_fast_path_interrupted_cuda_run_resumes_as_if_uninterrupted(tmp_path):
    """state.pt keeps the device shuffle's generator (``rng.loader_device``)."""
    cfg = _cfg("ogbg-molbbbp", "size,eps-align", "gumbel-gin", FAST, "cuda", epochs=3)
    execute(cfg, tmp_path / "whole", log=lambda msg: None)

    def stop_after_first(record):
        if record["epoch"] == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(cfg, tmp_path / "cut", on_epoch=stop_after_first, log=lambda msg: None)
    state = torch.load(tmp_path / "cut" / R.STATE, map_location="cpu", weights_only=True)
    assert "loader_device" in state["rng"]
    status, _ = execute(cfg, tmp_path / "cut", log=lambda msg: None)
    assert status == "resumed"
    assert _numbers(tmp_path / "whole") == _numbers(tmp_path / "cut")


@pytest.mark.parametrize("deterministic", [True, False], ids=["deterministic", "default-kernels"])
def test_fast_path_training_steps_make_no_host_sync(tmp_path, deterministic):
    """The epoch's batches are gathered before its first step (each gather copies its index
    to the device and waits); the steps themselves never wait for the device, with
    deterministic kernels too."""
    cfg = _cfg("ogbg-molbbbp", "size,eps-align", "gumbel-gin",
               [*FAST, f"train.deterministic={str(deterministic).lower()}"], "cuda")
    trainer = Trainer(cfg, load_dataset("ogbg-molbbbp"), tmp_path / "t")
    trainer.train_epoch(0)  # warm-up: lazy CUDA initialisation, the first selection's check
    batches = list(trainer._batches("train", train=True))
    torch.cuda.synchronize()
    steps_without_sync(trainer, batches)


def test_fast_path_evaluation_in_one_batch_scores_like_small_batches(tmp_path):
    """ERM (no random evaluation mask): the same probabilities up to float rounding."""
    data = load_dataset("ogbg-molbbbp")
    small = Trainer(_cfg("ogbg-molbbbp", "none", "none", [], "cuda"), data, tmp_path / "s")
    fast = Trainer(_cfg("ogbg-molbbbp", "none", "none", FAST, "cuda"), data, tmp_path / "f")
    fast.model.load_state_dict(small.model.state_dict())
    for split in ("valid", "test"):
        a, _ = small.evaluate(split)
        b, _ = fast.evaluate(split)
        assert len(fast._eval_batches[split]) == 1 < len(small._eval_batches[split])
        np.testing.assert_allclose(a.prob, b.prob, rtol=1e-4, atol=1e-5)
        assert a.metric == pytest.approx(b.metric, abs=1e-4)
