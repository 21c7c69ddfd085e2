"""``train.compile`` (issue 49): a training step through :func:`torch.compile`
(:class:`grprune.step.TrainStep`) gives the eager step's loss and updated parameters, a
compiled run trains end to end from the CLI, and compile without ``train.pad_buckets`` is
refused (exit 2, one line).

On the CPU the step compiles with ``backend="aot_eager"`` (AOTAutograd's forward and backward
graphs run op by op: inductor's C++ build takes minutes on a busy machine); on CUDA with
inductor. Random draws: the encoder's dropout is off here (AOTAutograd decomposes
``dropout`` into another draw than eager's ``bernoulli_``), and the Gumbel noise comes from
torch's global ``rand`` in both steps (``fallback_random=True`` for inductor), so the two
steps see the same numbers. What is left is rounding: the compiled graphs decompose
log-softmax, BatchNorm and their backwards into other ops, and fuse them on CUDA, which
moves a value by a few ulps; the loss is compared to 1e-5 relative, and each updated
parameter to 1e-6 absolute (Adam's first update is ``lr * g / (|g| + eps)``, about ``lr =
1e-3`` per element, so a gradient that moves in its last bits moves it by far less).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from grprune.step import (COMPILE_MODES, StepClock, TORCH_COMPILE_MODES, TrainStep, _ClockedContext,
                          step_loss)
from grprune.cli import main
from grprune.data import load_dataset
from grprune.record.files import CONFIG, SUMMARY, read_json
from grprune.regularizers.base import StepContext
from grprune.resolve import resolve_config
from grprune.trainer import Trainer

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
FLAGS = {"train.epochs": 1, "data.limit": 64, "train.batch_size": 32, "train.progress": "none",
         "encoder.dropout": 0.0, "train.pad_buckets": True}


@pytest.fixture(scope="module")
def molbbbp():
    return load_dataset("ogbg-molbbbp")


def _backend(device: str) -> str | None:
    return "aot_eager" if device == "cpu" else None


def _step(trainer: Trainer, train_step: TrainStep, batch, warm: bool) -> dict:
    """One step as :meth:`Trainer.train_epoch` takes it, from a copy of the model."""
    model = copy.deepcopy(trainer.model)
    opt = torch.optim.Adam(model.parameters(), lr=trainer.tc.lr)
    torch.manual_seed(11)
    total, terms, _, kept = train_step(model, trainer.regs, batch, warm, 1, 0)
    opt.zero_grad(set_to_none=True)
    total.backward()
    opt.step()
    return {"terms": {k: float(v.detach()) for k, v in terms.items()}, "kept": kept,
            "params": {k: p.detach().clone() for k, p in model.named_parameters()}}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("warm", [False, True], ids=["prune", "warmup"])
def test_a_compiled_step_gives_the_eager_loss_and_update(molbbbp, tmp_path, device, warm):
    cfg = resolve_config(reg="size,eps-align", selector="gumbel-gin",
                         flags={**FLAGS, "train.device": device})
    trainer = Trainer(cfg, molbbbp, tmp_path)
    batch = next(iter(trainer._batches("train", train=True)))
    assert batch.padded
    eager = _step(trainer, TrainStep("none"), batch, warm)
    compiled = _step(trainer, TrainStep("default", backend=_backend(device),
                                          fallback_random=True), batch, warm)
    assert eager["terms"].keys() == compiled["terms"].keys()
    for name, value in eager["terms"].items():
        assert compiled["terms"][name] == pytest.approx(value, rel=1e-5, abs=1e-7), name
    if not warm:
        assert float(compiled["kept"]) == pytest.approx(float(eager["kept"]), rel=1e-6)
    for name, p in eager["params"].items():
        torch.testing.assert_close(compiled["params"][name], p, rtol=0, atol=1e-6, msg=name)


def test_the_step_compiles_without_a_graph_break(molbbbp, tmp_path):
    """PrunE's step (Gumbel-GIN selector, GIN encoder, size and eps-align) is one graph."""
    cfg = resolve_config(reg="size,eps-align", selector="gumbel-gin",
                         flags={**FLAGS, "train.device": "cpu"})
    trainer = Trainer(cfg, molbbbp, tmp_path)
    batch = next(iter(trainer._batches("train", train=True)))
    explained = torch._dynamo.explain(step_loss)(trainer.model, trainer.regs, batch,
                                                   False, 1, 0)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def _cli(args: list[str]):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_a_compiled_run_trains_from_the_cli(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("grprune.step.BACKEND", "aot_eager")
    out = tmp_path / "run"
    # the first epoch's compilation (minutes on a real run) is announced before it starts
    with pytest.warns(UserWarning, match="compiles the step"):
        result = _cli(["run", "--data", "ogbg-molbbbp", "--selector", "gumbel-gin", "--reg",
                       "size,eps-align", "--epochs", "2", "--device", "cpu", "--out",
                       str(out), "--progress", "none", "-H", "data.limit=64",
                       "-H", "train.batch_size=32", "-H", "train.warmup_epochs=1",
                       "-H", "train.pad_buckets=true", "-H", "train.compile=default"])
    assert result.exit_code == 0, result.output
    summary, config = read_json(out / SUMMARY), read_json(out / CONFIG)
    assert summary is not None and config is not None
    assert summary["epochs_run"] == 2 and summary["test"] is not None
    assert config["train"]["compile"] == "default"
    plain = resolve_config(reg="size,eps-align", selector="gumbel-gin")
    assert config["hash"] != "" and plain["hash"] == resolve_config(
        reg="size,eps-align", selector="gumbel-gin",
        flags={"train.compile": "default", "train.pad_buckets": True})["hash"]


@pytest.mark.parametrize("mode", ["default", "cuda-graph"])
def test_compile_without_static_shapes_exits_2_with_one_line(tmp_path: Path, mode):
    result = CliRunner().invoke(main, [
        "run", "--data", "ogbg-molbbbp", "--epochs", "1", "--device", "cpu",
        "--out", str(tmp_path / "run"), "--progress", "none", "-H", "data.limit=64",
        "-H", f"train.compile={mode}"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "train.pad_buckets" in lines[0], result.output
    assert "Traceback" not in result.output


def test_the_compiled_steps_context_reads_epoch_and_step_from_the_clock():
    """What a regularizer's schedule reads (``ctx.step``, ``ctx.epoch``, or their device
    tensors, which IRM and GSAT read) is the step's own epoch and step under compile too;
    the tensors are made once and filled in place after (a graph keeps their memory)."""
    clock = StepClock()
    ctx = _ClockedContext(batch=None, output=None, model=None)  # type: ignore[arg-type]
    ctx.clock = clock
    assert ctx.step_tensor is None and ctx.epoch_tensor is None
    clock.set(3, 17, torch.device("cpu"))
    assert (ctx.epoch, ctx.step) == (3, 17)
    held = ctx.step_tensor
    assert held is not None and held.dtype == torch.int64 and int(held) == 17
    clock.set(4, 18, torch.device("cpu"))
    assert ctx.step_tensor is held and (int(held), int(ctx.epoch_tensor)) == (18, 4)
    eager = StepContext(batch=None, output=None, model=None)  # type: ignore[arg-type]
    assert eager.step_tensor is None and eager.epoch_tensor is None


def test_cuda_graph_is_a_mode_whose_loss_is_not_compiled():
    """``train.compile=cuda-graph`` captures the whole step (``grprune.step.GraphedStep``,
    ``tests/test_cuda_graph.py``); its loss is the eager :func:`step_loss`."""
    assert "cuda-graph" in COMPILE_MODES and "cuda-graph" not in TORCH_COMPILE_MODES
    step = TrainStep("cuda-graph")
    assert not step.compiled and step._fn is step_loss
