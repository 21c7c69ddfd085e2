"""The device path: every part trains on the training device, a device checkpoint scores the
same on the CPU, runs repeat and resume, and ``train.fast_path`` keeps its promises.

Each test takes the device as a parameter: ``cpu`` always (CI runs these bodies, so an API
change that breaks them fails there), ``cuda`` where torch sees a CUDA device. What only a
GPU has (fused Adam, the shuffle drawn on the device, one evaluation batch by default, CUDA's
sync debug mode) is asserted on ``cuda``; the ``cpu`` run asserts the CPU's side of the same
rule, with fewer graphs and epochs. On a GPU machine, ``python -m pytest
tests/test_device.py`` runs both; ``benchmarks/device.sh speed`` runs the ``cuda`` ones
(``-k "fast_path and cuda"`` first, the others after its timings).
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from grprune import step
from grprune.determinism import seed_everything
from grprune.record.files import CHECKPOINT, RESULTS, STATE, read_records
from grprune.record.epoch import EpochRecord
from grprune.resolve import resolve_config
from grprune.data import load_dataset
from grprune.run import execute
from grprune.record.runconfig import RunConfig
from grprune.trainer import FAST_EVAL_BATCH, Trainer
from tests.conftest import steps_without_sync, train_steps

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.fixture(params=[pytest.param("cpu", id="cpu"),
                        pytest.param("cuda", id="cuda", marks=CUDA)])
def device(request) -> str:
    """The training device: ``cpu`` always, ``cuda`` where available."""
    return request.param


@pytest.fixture(autouse=True)
def _prepared_data(monkeypatch):
    """``benchmarks/device.sh`` prepares the datasets once (``GRPRUNE_TEST_DATA_ROOT``): read
    them there rather than featurize them again in the test session's fresh data root."""
    if os.environ.get("GRPRUNE_TEST_DATA_ROOT"):
        monkeypatch.setenv("GRPRUNE_DATA_ROOT", os.environ["GRPRUNE_TEST_DATA_ROOT"])


#: per device: graphs (data.limit, per split) and batch size. The CPU's are CI's cost.
SIZE = {"cuda": ["data.limit=96", "train.batch_size=32"],
        "cpu": ["data.limit=48", "train.batch_size=16"]}

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
PRUNE = CASES[1]


def _cfg(data: str, reg: str, selector: str, extra: list[str], device: str,
         epochs: int = 2, preset: str | None = None) -> RunConfig:
    return resolve_config(data=data, reg=reg, selector=selector, preset=preset,
                          flags={"train.epochs": epochs, "train.device": device},
                          overrides=[*SIZE[device], "train.progress=none", *extra])


def _quiet(msg: str) -> None:
    pass


def _numbers(run_dir: Path) -> list[tuple[Any, Any]]:
    """Each epoch's loss terms and split scores (``results.jsonl``), timings left out."""
    records = map(EpochRecord.from_dict, read_records(run_dir / RESULTS))
    return [(dict(r.loss), {k: dict(v) for k, v in r.scores.items()}) for r in records]


def _stop_after_first(record: EpochRecord) -> None:
    """An ``on_epoch`` callback: interrupt the run after its first epoch."""
    if EpochRecord.from_dict(record).epoch == 0:
        raise KeyboardInterrupt


@pytest.mark.parametrize("data,reg,selector,extra", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_every_part_trains_on_the_device(tmp_path, device, data, reg, selector, extra):
    epochs = 2 if device == "cuda" else 1
    status, summary = execute(_cfg(data, reg, selector, extra, device, epochs),
                              tmp_path / "run", log=_quiet)
    assert status == "completed"
    assert summary.device is not None and summary.device.startswith(device)
    assert summary.epochs_run == epochs
    assert summary.peak_mem_mib is not None and summary.peak_mem_mib > 0
    assert summary.test is not None and math.isfinite(summary.test)


def test_a_device_checkpoint_scores_the_same_on_cpu(tmp_path, device):
    # paper: its selector trains from the first epoch, so the checkpoint is scored with it
    cfg = _cfg(*PRUNE, device, epochs=2, preset="paper")
    _, summary = execute(cfg, tmp_path / "run", log=_quiet)
    cpu_cfg = RunConfig.from_dict({**cfg, "train": {**cfg["train"], "device": "cpu"}})
    trainer = Trainer(cpu_cfg, load_dataset("ogbg-molbbbp"), tmp_path / "cpu")
    state = torch.load(tmp_path / "run" / CHECKPOINT, map_location="cpu", weights_only=True)
    trainer.model.load_state_dict(state)
    ev, _ = trainer.evaluate("test")
    assert summary.test is not None
    assert ev.metric == pytest.approx(summary.test, abs=1e-3)


def test_an_interrupted_device_run_resumes(tmp_path, device):
    cfg = _cfg(*PRUNE, device, epochs=2)
    with pytest.raises(KeyboardInterrupt):
        execute(cfg, tmp_path / "run", on_epoch=_stop_after_first, log=_quiet)
    assert (tmp_path / "run" / STATE).is_file()
    status, summary = execute(cfg, tmp_path / "run", log=_quiet)
    assert status == "resumed" and summary.epochs_run == 2
    assert summary.device is not None and summary.device.startswith(device)


@pytest.mark.parametrize("data,reg,selector,extra", [PRUNE, CASES[4], CASES[-1]],
                         ids=["prune", "ciga", "good-motif"])
def test_deterministic_runs_of_one_seed_repeat_exactly(tmp_path, device, data, reg, selector,
                                                       extra):
    """train.deterministic (the default): on CUDA deterministic kernels and
    CUBLAS_WORKSPACE_CONFIG; on the CPU torch's thread count, kept (issue 67)."""
    cfg = _cfg(data, reg, selector, extra, device, epochs=2)
    runs = [execute(cfg, tmp_path / f"r{i}", log=_quiet)[1] for i in range(2)]
    assert _numbers(tmp_path / "r0") == _numbers(tmp_path / "r1")
    assert runs[0].test == runs[1].test
    assert runs[0].determinism["deterministic"] is True
    if device == "cuda":
        assert runs[0].determinism["deterministic_algorithms"] is True
    else:
        assert runs[0].determinism["threads"] == torch.get_num_threads()


# -- train.fast_path (tests/test_fast_path.py has more of the CPU side) ----------------------
FAST = ["train.fast_path=true"]


def test_fast_path_trains_with_fused_adam_and_repeats_exactly(tmp_path, device):
    """Fused Adam, the shuffle drawn on the device, evaluation in one batch per split on
    CUDA (the CPU: foreach Adam, the CPU's shuffle, the batch size kept); with
    train.deterministic (the default) two runs of one seed give the same numbers."""
    cfg = _cfg(*PRUNE[:3], FAST, device, epochs=2)
    trainer = Trainer(cfg, load_dataset("ogbg-molbbbp"), tmp_path / "t")
    cuda = device == "cuda"
    assert trainer.optimizer.defaults["fused"] is (True if cuda else None)
    assert trainer.optimizer.defaults["foreach"] is (None if cuda else True)
    assert (trainer.device_gen is not None) is cuda
    assert trainer.eval_batch_size() == (FAST_EVAL_BATCH if cuda else cfg.train.batch_size)
    order = trainer.train_order()
    assert sorted(order.tolist()) == list(range(len(trainer.splits["train"])))
    runs = [execute(cfg, tmp_path / f"r{i}", log=_quiet)[1] for i in range(2)]
    assert runs[0].test is not None and math.isfinite(runs[0].test)
    assert runs[0].device is not None and runs[0].device.startswith(device)
    assert _numbers(tmp_path / "r0") == _numbers(tmp_path / "r1")


def test_fast_path_interrupted_run_resumes_as_if_uninterrupted(tmp_path, device):
    """state.pt keeps the device shuffle's generator (``rng.loader_device``) on CUDA; the
    CPU's shuffle is the loader's generator (``rng.loader``)."""
    cfg = _cfg(*PRUNE[:3], FAST, device, epochs=2)
    execute(cfg, tmp_path / "whole", log=_quiet)
    with pytest.raises(KeyboardInterrupt):
        execute(cfg, tmp_path / "cut", on_epoch=_stop_after_first, log=_quiet)
    state = torch.load(tmp_path / "cut" / STATE, map_location="cpu", weights_only=True)
    assert "loader" in state["rng"]
    assert ("loader_device" in state["rng"]) is (device == "cuda")
    status, _ = execute(cfg, tmp_path / "cut", log=_quiet)
    assert status == "resumed"
    assert _numbers(tmp_path / "whole") == _numbers(tmp_path / "cut")


@pytest.mark.parametrize("deterministic", [True, False], ids=["deterministic", "default-kernels"])
def test_fast_path_training_steps_make_no_host_sync(tmp_path, device, deterministic):
    """The epoch's batches are gathered before its first step (each gather copies its index
    to the device and waits); the steps themselves never wait for the device, with
    deterministic kernels too. On the CPU there is no device to wait for: the same steps run
    (the loop :func:`tests.conftest.train_steps` repeats stays the trainer's) without the
    sync check, which exists only on CUDA."""
    cfg = _cfg(*PRUNE[:3], [*FAST, f"train.deterministic={str(deterministic).lower()}"], device)
    trainer = Trainer(cfg, load_dataset("ogbg-molbbbp"), tmp_path / "t")
    trainer.train_epoch(0)  # warm-up: lazy CUDA initialisation, the first selection's check
    batches = list(trainer._batches("train", train=True))
    assert batches and all(b.device.type == device for b in batches)
    if device == "cuda":
        torch.cuda.synchronize()
        steps_without_sync(trainer, batches)
    else:
        before = [p.detach().clone() for p in trainer.model.parameters()]
        train_steps(trainer, batches)
        assert any(not torch.equal(a, p) for a, p in zip(before, trainer.model.parameters()))


def test_fast_path_evaluation_in_one_batch_scores_like_small_batches(tmp_path, device):
    """ERM (no random evaluation mask): the same probabilities up to float rounding. On the
    CPU the fast path keeps the batch size, so the one batch is asked for
    (``train.eval_batch_size``)."""
    data = load_dataset("ogbg-molbbbp")
    one = FAST if device == "cuda" else [*FAST, f"train.eval_batch_size={FAST_EVAL_BATCH}"]
    small = Trainer(_cfg("ogbg-molbbbp", "none", "none", [], device), data, tmp_path / "s")
    fast = Trainer(_cfg("ogbg-molbbbp", "none", "none", one, device), data, tmp_path / "f")
    fast.model.load_state_dict(small.model.state_dict())
    for split in ("valid", "test"):
        a, _ = small.evaluate(split)
        b, _ = fast.evaluate(split)
        assert len(fast._eval_batches[split]) == 1 < len(small._eval_batches[split])
        np.testing.assert_allclose(a.prob, b.prob, rtol=1e-4, atol=1e-5)
        assert a.metric == pytest.approx(b.metric, abs=1e-4)


# -- train.compile=cuda-graph (tests/test_cuda_graph.py has more of the CPU side) -----------
def test_captured_steps_replay_and_train_as_the_eager_padded_steps(tmp_path, device,
                                                                  monkeypatch):
    """The whole PrunE step captured per bucket after one eager step (``EAGER_STEPS``) and
    replayed: on CUDA by ``torch.cuda.CUDAGraph`` (Adam fused, capturable, a device Tensor
    learning rate; the probe finds nothing a graph cannot hold), on the CPU by the eager
    stand-in. The epochs' loss terms are the eager padded run's: bit for bit on the CPU,
    to 1e-4 on CUDA (another Adam: capturable, a float32 learning rate)."""
    monkeypatch.setattr(step, "EAGER_STEPS", 1)
    pad = ["train.pad_buckets=true", "train.warmup_epochs=0"]
    data = load_dataset("ogbg-molbbbp")
    graphed = Trainer(_cfg(*PRUNE[:3], [*pad, "train.compile=cuda-graph"], device), data,
                      tmp_path / "g")
    eager = Trainer(_cfg(*PRUNE[:3], pad, device), data, tmp_path / "e")
    eager.model.load_state_dict(graphed.model.state_dict())
    assert graphed.graphed_step is not None and eager.graphed_step is None
    lr = graphed.optimizer.param_groups[0]["lr"]
    if device == "cuda":
        assert graphed.optimizer.defaults["capturable"] and graphed.optimizer.defaults["fused"]
        assert isinstance(lr, torch.Tensor) and lr.device.type == "cuda"
    else:
        assert lr == graphed.tc.lr
    losses = []
    for trainer in (graphed, eager):
        seed_everything(trainer.tc.seed)  # the same Gumbel noise
        losses.append([trainer.train_epoch(epoch) for epoch in range(2)])
    runs = graphed.graphed_step
    assert runs.graphs and runs.replays > 0 and not runs.eager, runs.eager
    if device == "cpu":
        assert losses[0] == losses[1]
    else:
        for got, want in zip(*losses):
            assert got == pytest.approx(want, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("eval_mode", ["threshold", "sample"])
def test_captured_evaluation_passes_score_as_the_eager_ones(tmp_path, device, eval_mode):
    """The trainer's evaluation passes under ``train.compile=cuda-graph``
    (:class:`grprune.evaluation.GraphedForward`): probed, captured, replayed; after a
    training epoch (parameters and BatchNorm statistics written in place) a replay scores
    the trained model. Each evaluation equals the eager one: bit for bit on the CPU, to
    1e-5 on CUDA (``sample``: the graph-keyed noise)."""
    flags = ["train.compile=cuda-graph", "train.pad_buckets=true",
             f"selector.eval_mode={eval_mode}"]
    trainer = Trainer(_cfg(*PRUNE[:3], flags, device), load_dataset("ogbg-molbbbp"),
                      tmp_path)
    graphed = trainer.graphed_eval
    assert graphed is not None
    for epoch in range(2):
        got = [trainer.evaluate("valid")[0] for _ in range(3)]  # probe, capture, replay
        trainer.graphed_eval = None
        want = trainer.evaluate("valid")[0]
        trainer.graphed_eval = graphed
        for ev in got:
            if device == "cpu":
                np.testing.assert_array_equal(ev.prob, want.prob)
                assert (ev.metric, ev.kept) == (want.metric, want.kept)
            else:
                np.testing.assert_allclose(ev.prob, want.prob, rtol=1e-5, atol=1e-6)
                assert ev.metric == pytest.approx(want.metric, abs=1e-5)
        trainer.train_epoch(epoch)
    assert graphed.graphs and graphed.replays >= 4 and not graphed.eager, graphed.eager


# -- the device script's helpers (benchmarks/device.sh speed), on the CPU ------------------
def _script(name: str):
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "speed" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_op_count_script_counts_a_step_and_skips_an_unknown_setting(tmp_path, capsys):
    """benchmarks/speed/opcount.py: ops per training step, the optimizer's apart; a setting
    this tree does not know skips the case with one line (device.sh's padding A/B)."""
    opcount = _script("opcount")
    row = opcount.count_case("molbbbp-erm-step", "cpu", 2, 16, True, [],
                             frozenset({"_local_scalar_dense"}))
    assert row["steps"] == 2 and row["batch_size"] == 16 and row["train_graphs"] == 32
    # --where: the only host reads are Adam's, of its step counters (issue 49)
    assert row["where"] and all("torch/optim" in site for site in row["where"])
    assert 0 < row["dispatched_model"] < row["dispatched"] < row["aten"]
    assert row["aten_model"] < row["aten"] and row["ops"]["empty"] > 0
    assert row["top_model"] and "launches" not in row
    out = tmp_path / "ops.jsonl"
    assert opcount.main(["--only", "molbbbp-erm", "--steps", "1", "--out", str(out),
                         "-H", "train.no_such_switch=true"]) == 0
    assert "skipped" in capsys.readouterr().out and not out.exists()


def test_the_drift_script_compares_two_runs_epoch_by_epoch():
    """benchmarks/speed/drift.py: the largest score differences over the epochs both runs
    finished, each run's best-validation epoch and whether it moved."""
    drift = _script("drift")
    a = [{"loss": {"total": 1.0}, "valid": 0.5, "test": 0.6},
         {"loss": {"total": 0.9}, "valid": 0.7, "test": 0.65},
         {"loss": {"total": 0.8}, "valid": 0.7, "test": 0.7}]
    b = [{"loss": {"total": 1.0}, "valid": 0.5, "test": 0.6},
         {"loss": {"total": 0.9}, "valid": 0.69, "test": 0.61},
         {"loss": {"total": 0.8}, "valid": 0.72, "test": 0.7}]
    got = drift.compare(a, b)
    assert got["epochs_compared"] == 3 and got["identical"] is False
    assert got["max_abs_delta_test"] == pytest.approx(0.04)
    assert got["max_abs_delta_valid"] == pytest.approx(0.02)
    assert got["best_epoch"] == [1, 2] and got["best_epoch_moved"] is True
    assert got["test_at_best"] == [0.65, 0.7]
    same = drift.compare(a, a[:2])  # one run cut after two epochs
    assert same["epochs_compared"] == 2 and same["identical"] is True
    assert same["best_epoch_moved"] is False and same["max_abs_delta_test"] == 0.0
    cmd = drift.run_command("cpu", 3, 200, True, Path("x"))
    assert "--no-deterministic" in cmd and "data.limit=200" in cmd
