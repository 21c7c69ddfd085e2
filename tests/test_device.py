"""The CUDA path: every part trains on a GPU, and a GPU checkpoint scores the same on the CPU.

Skipped where torch sees no CUDA device (CI). Run on a GPU machine with
``python -m pytest tests/test_device.py``.
"""

from __future__ import annotations

import pytest
import torch

from grprune import results as R
from grprune.config import resolve_config
from grprune.data import load_dataset
from grprune.run import execute
from grprune.trainer import Trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

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
    assert summary["device"].startswith("cuda")
    assert summary["peak_mem_mib"] > 0
    assert summary["test"] == summary["test"]  # not NaN


def test_cuda_checkpoint_scores_the_same_on_cpu(tmp_path):
    cfg = _cfg("ogbg-molbbbp", "size,eps-align", "gumbel-gin", [], "cuda", epochs=3)
    _, summary = execute(cfg, tmp_path / "run", log=lambda msg: None)
    cpu_cfg = {**cfg, "train": {**cfg["train"], "device": "cpu"}}
    dataset = load_dataset("ogbg-molbbbp")
    trainer = Trainer(cpu_cfg, dataset, tmp_path / "cpu")
    state = torch.load(tmp_path / "run" / R.CHECKPOINT, map_location="cpu", weights_only=True)
    trainer.model.load_state_dict(state)
    ev, _ = trainer.evaluate("test")
    assert ev.metric == pytest.approx(summary["test"], abs=1e-3)


def test_interrupted_cuda_run_resumes(tmp_path):
    cfg = _cfg("ogbg-molbbbp", "size,eps-align", "gumbel-gin", [], "cuda", epochs=3)

    def stop_after_first(record):
        if record["epoch"] == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(cfg, tmp_path / "run", on_epoch=stop_after_first, log=lambda msg: None)
    assert (tmp_path / "run" / R.STATE).is_file()
    status, summary = execute(cfg, tmp_path / "run", log=lambda msg: None)
    assert status == "resumed" and summary["epochs_run"] == 3
    assert summary["device"].startswith("cuda")


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
