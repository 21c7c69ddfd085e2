"""``train.compile=cuda-graph`` (issue 49, item 3): the whole training step (forward, loss,
backward, Adam) captured once per (bucket, phase) and replayed (:class:`grprune.step.GraphedStep`).

On the CPU the capture backend is :class:`grprune.capture.EagerGraphs`: a replay runs the step
again eagerly on the graph's static buffers, which keep what a CUDA graph keeps from its
capture (the static batch's host integers). So the plumbing is tested here, without a GPU:
a run in this mode gives the eager padded run's numbers bit for bit, resumes as if never
interrupted and follows the learning-rate schedule; a step that reads a value a graph
would bake in (``.item()``, the batch's host integers, a Python ``ctx.step``) stays eager;
IRM's and GSAT's schedules read the step clock's device tensors and are captured.

What a graph captures is the step's ops on its static inputs, and any Python number the
step computes from one batch is baked in. :func:`test_a_traced_step_reused_on_another_batch
_of_its_bucket_gives_that_batchs_numbers` traces the step once with
:func:`torch.fx.experimental.proxy_tensor.make_fx` (every op it runs, Python numbers as
constants) on one batch and runs the trace on another batch of the same bucket: it must give
that batch's eager loss and gradients.

``tests/test_device.py`` runs a run of this mode on each device (``cuda`` where available).
"""

from __future__ import annotations

import warnings
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from grprune import capture
from grprune.step import StepClock, _ClockedContext, _key, optimizer_options, set_lr, step_loss
from grprune.batch import GraphBatch
from grprune.data import load_dataset
from grprune.csr import Segments
from grprune.record.files import LAST_CHECKPOINT, RESULTS, read_records
from grprune.record.epoch import EpochRecord
from grprune.resolve import resolve_config
from grprune.run import execute
from grprune.trainer import Trainer

#: a short PrunE run: 3 epochs, the first an ERM warm-up, 4 batches of 32 graphs an epoch
FLAGS: dict[str, Any] = {"train.epochs": 3, "train.warmup_epochs": 1, "data.limit": 128,
                         "train.batch_size": 32, "train.progress": "none",
                         "train.device": "cpu", "train.pad_buckets": True,
                         "train.save_last": True}


#: steps traced (``make_fx``) as a CUDA graph keeps them (conftest's ``sums_as_on_cuda``)
pytestmark = pytest.mark.usefixtures("sums_as_on_cuda")


@pytest.fixture(scope="module")
def molbbbp():
    return load_dataset("ogbg-molbbbp")


@pytest.fixture
def captures(monkeypatch) -> dict[str, int]:
    """One eager step per key before its capture (more replays in a short run), and the
    stand-in's captures and replays counted."""
    monkeypatch.setattr("grprune.step.EAGER_STEPS", 1)
    counts = {"captures": 0, "replays": 0}
    eager_capture = capture.EagerGraphs.capture

    def counted(self, fn):
        counts["captures"] += 1
        replay = eager_capture(self, fn)

        def run():
            counts["replays"] += 1
            return replay()
        return run
    monkeypatch.setattr(capture.EagerGraphs, "capture", counted)
    return counts


def _cfg(mode: str, reg: str = "size,eps-align", selector: str = "gumbel-gin", **extra: Any):
    return resolve_config(data="ogbg-molbbbp", reg=reg, selector=selector,
                          flags={**FLAGS, "train.compile": mode, **extra})


def _quiet(msg: str) -> None:
    pass


def _numbers(run_dir: Path) -> list[tuple[Any, ...]]:
    """Each epoch's learning rate, loss terms and split scores, timings left out."""
    records = map(EpochRecord.from_dict, read_records(run_dir / RESULTS))
    return [(r.lr, dict(r.loss), {k: dict(v) for k, v in r.scores.items()}) for r in records]


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    """The model after the last epoch (``checkpoint-last.pt``: ``train.save_last``)."""
    return torch.load(run_dir / LAST_CHECKPOINT, map_location="cpu", weights_only=True)


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name, value in a.items():
        assert torch.equal(value, b[name]), name


@pytest.mark.parametrize("extra", [{}, {"train.lr_milestones": "2", "train.lr_gamma": 0.1}],
                         ids=["prune", "lr-milestones"])
def test_a_cuda_graph_run_gives_the_eager_padded_runs_numbers_bit_for_bit(tmp_path, captures,
                                                                          extra):
    """PrunE (Gumbel-GIN, size and eps-align), an ERM warm-up epoch first, on the CPU's
    stand-in backend; with ``train.lr_milestones`` the replayed steps follow the schedule."""
    execute(_cfg("none", **extra), tmp_path / "eager", log=_quiet)
    execute(_cfg("cuda-graph", **extra), tmp_path / "graph", log=_quiet)
    assert captures["captures"] >= 2 and captures["replays"] > captures["captures"]
    eager, graph = _numbers(tmp_path / "eager"), _numbers(tmp_path / "graph")
    assert graph == eager  # == on floats: every bit
    assert len(graph) == 3 and graph[0][1].keys() < graph[1][1].keys()  # warm-up, then PrunE
    if extra:
        assert [lr for lr, *_ in graph] == pytest.approx([1e-3, 1e-3, 1e-4])
    _same(_weights(tmp_path / "graph"), _weights(tmp_path / "eager"))


def _stop_after(epoch: int):
    def on_epoch(record: EpochRecord) -> None:
        if record.epoch == epoch:
            raise KeyboardInterrupt
    return on_epoch


def test_a_cuda_graph_run_resumed_from_its_state_equals_the_uninterrupted_run(tmp_path,
                                                                           captures):
    """Interrupted after the first PrunE epoch (graphs captured, replayed), resumed from
    ``state.pt`` in a new trainer (new graphs)."""
    cfg = _cfg("cuda-graph", **{"train.lr_milestones": "2"})
    execute(cfg, tmp_path / "whole", log=_quiet)
    with pytest.raises(KeyboardInterrupt):
        execute(cfg, tmp_path / "cut", on_epoch=_stop_after(1), log=_quiet)
    assert captures["replays"] > 0
    status, summary = execute(cfg, tmp_path / "cut", log=_quiet)
    assert status == "resumed" and summary.epochs_run == 3
    assert _numbers(tmp_path / "cut") == _numbers(tmp_path / "whole")
    _same(_weights(tmp_path / "cut"), _weights(tmp_path / "whole"))


# without train.pad_buckets: exit 2, one line (tests/test_compile.py, parametrized by mode)


#: regularizers whose weight or prior follows the step count or the epoch, set so that it
#: changes after the graphs are captured: IRM's annealing ends at step 3 of 8, GSAT's r
#: falls each epoch
SCHEDULED: dict[str, dict[str, Any]] = {
    "irm": {"reg": "irm", "selector": "none", "reg.irm.anneal_steps": 3,
            "reg.irm.anneal_weight": 0.5, "reg.irm.weight": 10.0},
    "gsat": {"reg": "gsat", "train.epochs": 4, "reg.gsat.decay_interval": 1,
             "reg.gsat.schedule": "absolute",
             "reg.gsat.decay_r": 0.1, "reg.gsat.final_r": 0.5},
}


@pytest.mark.parametrize("name", sorted(SCHEDULED))
def test_a_scheduled_regularizers_steps_are_captured_and_give_the_eager_numbers(
        tmp_path, captures, name):
    """IRM's annealing and GSAT's r schedule read the clock's device tensors
    (``ctx.step_tensor``, ``ctx.epoch_tensor``) in a captured step: captured without a
    warning, and the run is the eager padded run bit for bit (whose regularizers use the
    Python integers). (GSAT's default ``active`` schedule reads ``ctx.epoch`` once, at its
    first step, which the probe flags when it is a key's only eager step, as here; with the
    default 3 eager steps a run's first step is never a probe.)"""
    extra: dict[str, Any] = dict(SCHEDULED[name])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        execute(_cfg("cuda-graph", **extra), tmp_path / "graph", log=_quiet)
    assert captures["captures"] >= 2 and captures["replays"] > captures["captures"]
    execute(_cfg("none", **extra), tmp_path / "eager", log=_quiet)
    assert _numbers(tmp_path / "graph") == _numbers(tmp_path / "eager")
    _same(_weights(tmp_path / "graph"), _weights(tmp_path / "eager"))


def test_a_traced_schedule_follows_the_clocks_tensors_not_its_capture():
    """What a CUDA graph keeps: a step traced (``make_fx``) at step 0 / epoch 0 and run
    with the clock's tensors at later values gives the later weight and prior."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from grprune.batch import collate
    from grprune.regularizers.env import IRMPenalty
    from grprune.regularizers.gsat import GSAT, gsat_info_loss, gsat_r
    from tests.conftest import make_graph
    irm = IRMPenalty(weight=10.0, anneal_steps=5, anneal_weight=0.5)
    gsat, active = GSAT(decay_interval=2, schedule="absolute"), GSAT(decay_interval=2)
    active.start_epoch = 1  # (set at its first step: a Python constant in the trace)
    batch = collate([(make_graph(9, [(i, i + 1) for i in range(8)]), 0, 0, 0)])  # 16 edges
    att = torch.rand(16, generator=torch.Generator().manual_seed(0))
    selection = type("Sel", (), {"relaxed": att, "edge_prob": att})()
    output = type("Out", (), {"selection": selection})()

    def step(epoch_t: torch.Tensor, step_t: torch.Tensor, value: torch.Tensor):
        clock = StepClock()
        clock.tensors = {"epoch": epoch_t, "step": step_t}
        ctx = _ClockedContext(batch=batch, output=output, model=None)  # type: ignore[arg-type]
        ctx.clock = clock
        return irm.weighted(ctx, value), gsat.loss(ctx), active.loss(ctx)
    value, zero = torch.tensor(2.0), torch.tensor(0)
    traced = make_fx(step)(zero, zero, value)
    for t in (0, 4, 5, 9):
        weighted, kl, kl_active = traced(torch.tensor(t), torch.tensor(t), value)
        assert float(weighted) == (0.5 if t < 5 else 10.0) * 2.0
        assert torch.equal(kl, gsat_info_loss(att, gsat_r(t, decay_interval=2)))
        assert torch.equal(kl_active, gsat_info_loss(att, gsat_r(t - 1, decay_interval=2)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_tensor_schedules_equal_the_python_ones_bit_for_bit(dtype):
    """:func:`gsat_r_tensor` is :func:`gsat_r` to the last bit, and the KL with a Tensor r
    is the KL with the float; IRM's ``where`` is :meth:`weight_at`'s product."""
    from grprune.regularizers.gsat import gsat_info_loss, gsat_r, gsat_r_tensor
    att = torch.rand(50, dtype=dtype, generator=torch.Generator().manual_seed(1))
    for hp in [(0.9, 0.7, 0.1, 20), (0.7, 0.1, 0.03, 3), (0.95, 0.05, 0.0999, 1)]:
        for epoch in range(0, 80, 3):
            want = gsat_r(epoch, *hp)
            got = gsat_r_tensor(torch.tensor(epoch), *hp)
            assert got.dtype == torch.float64 and float(got) == want
            assert torch.equal(gsat_info_loss(att, got), gsat_info_loss(att, want))


def test_a_step_that_reads_a_value_a_graph_would_bake_in_stays_eager(molbbbp, tmp_path,
                                                                     captures):
    """A regularizer whose weight reads the Python ``ctx.step`` (not ``ctx.step_tensor``),
    which a graph would keep from its capture: its steps are never captured (one warning)."""
    no_warmup: dict[str, Any] = {"train.warmup_epochs": 0}
    trainer = Trainer(_cfg("cuda-graph", **no_warmup), molbbbp, tmp_path)
    size: Any = trainer.regs["size"]
    size.weight_at = lambda ctx: 10.0 if ctx.step < 2 else 5.0  # type: ignore[method-assign]
    batch = next(iter(trainer._batches("train", train=True)))
    graphed = trainer.graphed_step
    assert graphed is not None
    with pytest.warns(UserWarning, match=r"cuda-graph: .*\(ctx\.step\); such steps run eagerly"):
        for step in range(3):
            graphed(trainer.model, trainer.regs, trainer.optimizer, batch, False, 0, step)
    assert not graphed.graphs and captures["captures"] == 0
    assert "ctx.step" in " ".join(graphed.eager.values())


def test_a_step_that_puts_a_new_tensor_in_a_module_stays_eager(molbbbp, tmp_path, captures):
    """A regularizer that replaces its buffer each step (``self.count = self.count + 1``)
    instead of writing into it would leave a graph updating the old tensor."""
    no_warmup: dict[str, Any] = {"train.warmup_epochs": 0}
    trainer = Trainer(_cfg("cuda-graph", **no_warmup), molbbbp, tmp_path)
    size: Any = trainer.regs["size"]  # a buffer of its own, set below
    size.register_buffer("count", torch.zeros(()))
    loss = size.loss

    def counting(ctx):
        size.count = size.count + 1
        return loss(ctx)
    size.loss = counting  # type: ignore[method-assign]
    batch = next(iter(trainer._batches("train", train=True)))
    graphed = trainer.graphed_step
    assert graphed is not None
    with pytest.warns(UserWarning, match=r"a new tensor in reg\.size\.count"):
        for step in range(3):
            graphed(trainer.model, trainer.regs, trainer.optimizer, batch, False, 0, step)
    assert not graphed.graphs and captures["captures"] == 0
    assert float(size.count) == 3


def test_a_static_batch_keeps_its_capture_host_integers_and_takes_new_tensors(molbbbp,
                                                                           tmp_path):
    """What the stand-in shares with a CUDA graph: the static batch's tensors are new
    buffers that each replay's batch is copied into; its host integers stay the capture's
    (a step that read them would be wrong, hence the probe); one key per bucket and phase."""
    trainer = Trainer(_cfg("cuda-graph"), molbbbp, tmp_path)
    batches = [b for _ in range(3) for b in trainer._batches("train", train=True)]
    a, b = _same_bucket(batches)
    static = capture.static_copy(a)
    assert all(s is not t for s, t in zip(capture.batch_tensors(static), capture.batch_tensors(a)))
    graph = capture.StaticGraph(static, lambda: (static.src.sum(), {}, None, None))
    graph(capture.batch_tensors(b))
    for s, t in zip(capture.batch_tensors(static), capture.batch_tensors(b)):
        assert torch.equal(s, t)
    assert static.real_edges == a.real_edges != b.real_edges
    assert _key(a, False) == _key(b, False) != _key(a, True)


def test_set_lr_fills_a_tensor_learning_rate_and_the_state_round_trip_keeps_one(tmp_path):
    """``train.compile=cuda-graph`` on CUDA: Adam's learning rate is a Tensor that a captured
    step reads, so a new epoch's rate is written into it; ``state.pt`` holds it, and a
    resumed optimizer gets a tensor beside its parameters again. (On the CPU, here, a
    non-capturable Adam with a Tensor rate stands in for CUDA's fused, capturable one.)"""
    p = nn.Parameter(torch.ones(3))
    opt = torch.optim.Adam([p], lr=torch.tensor(1e-3), foreach=False)
    lr = opt.param_groups[0]["lr"]
    set_lr(opt, 1e-4)
    assert opt.param_groups[0]["lr"] is lr and float(lr) == pytest.approx(1e-4)
    p.grad = torch.ones(3)
    opt.step()
    torch.save(opt.state_dict(), tmp_path / "opt.pt")
    again = torch.optim.Adam([p], lr=torch.tensor(1e-3), foreach=False)
    again.load_state_dict(torch.load(tmp_path / "opt.pt", weights_only=True))
    set_lr(again, 1e-5)
    assert isinstance(again.param_groups[0]["lr"], torch.Tensor)
    assert float(again.param_groups[0]["lr"]) == pytest.approx(1e-5)
    plain = torch.optim.Adam([p], lr=1e-3)
    plain.load_state_dict(opt.state_dict())  # a cuda-graph run resumed without it
    set_lr(plain, 1e-2)
    assert plain.param_groups[0]["lr"] == 1e-2
    options = optimizer_options("cuda-graph", torch.device("cpu"), True, 1e-3)
    assert options == {"lr": 1e-3, "foreach": True, "fused": None}  # the CPU: as eager


# -- item 3: no Python number of one batch baked into the step -------------------------------
def _same_bucket(batches: list[GraphBatch]) -> tuple[GraphBatch, GraphBatch]:
    """Two batches of one bucket with different real edge counts."""
    for i, a in enumerate(batches):
        for b in batches[i + 1:]:
            if _key(a, False) == _key(b, False) and a.real_edges != b.real_edges:
                return a, b
    raise AssertionError("no two batches of one bucket")


def _with_tensors(template: GraphBatch, tensors: list[torch.Tensor]) -> GraphBatch:
    """``template`` with its input tensors (:func:`grprune.capture.batch_tensors`' order)
    replaced by ``tensors``: its host integers kept, its caches empty."""
    it = iter(tensors)
    new: dict[str, Any] = {f.name: next(it) for f in fields(template)
                           if isinstance(getattr(template, f.name), torch.Tensor)}
    csr = {}
    for name in sorted(template.csr):
        seg = template.csr[name]
        csr[name] = Segments(next(it), None if seg.order is None else next(it), next(it))
    return replace(template, **new, csr=csr, row_masks={}, derived={})


class _Step(nn.Module):
    """:func:`grprune.step.step_loss` as a module, for :func:`torch.func.functional_call`."""

    def __init__(self, trainer: Trainer, warm: bool) -> None:
        super().__init__()
        self.model, self.regs, self.warm = trainer.model, nn.ModuleDict(trainer.regs), warm
        self.reg_map = trainer.regs  # (the ModuleDict makes their parameters this module's)

    def forward(self, batch: GraphBatch) -> torch.Tensor:
        return step_loss(self.model, self.reg_map, batch, self.warm, 1, 0)[0]


def _loss_and_grads(module: _Step, params: dict, buffers: dict, batch: GraphBatch):
    total = torch.func.functional_call(module, {**params, **buffers}, (batch,))
    grads = torch.autograd.grad(total, list(params.values()), allow_unused=True)
    return [total] + [torch.zeros_like(p) if g is None else g
                      for p, g in zip(params.values(), grads)]


#: the regularizer settings traced: the paper preset's (size, eps-align in the paper's
#: form), the official eps-align form, and the ERM warm-up (no selector, no regularizer)
TRACED = [("paper", False), ("official", False), ("paper", True)]


@pytest.mark.parametrize("form,warm", TRACED, ids=["paper", "official", "warmup"])
def test_a_traced_step_reused_on_another_batch_of_its_bucket_gives_that_batchs_numbers(
        molbbbp, tmp_path, form, warm):
    from torch.fx.experimental.proxy_tensor import make_fx
    cfg = resolve_config(data="ogbg-molbbbp", reg="size,eps-align", selector="gumbel-gin",
                         flags={**FLAGS, "reg.eps-align.form": form})
    trainer = Trainer(cfg, molbbbp, tmp_path)
    batches = [b for _ in range(3) for b in trainer._batches("train", train=True)]
    a, b = _same_bucket(batches)
    module = _Step(trainer, warm).train()
    params = {k: p.detach().clone().requires_grad_() for k, p in module.named_parameters()}
    buffers = dict(module.named_buffers())

    def step(params, buffers, tensors):
        return _loss_and_grads(module, params, buffers, _with_tensors(a, tensors))

    def fresh() -> dict:  # BatchNorm updates its running statistics in place
        return {k: v.clone() for k, v in buffers.items()}
    torch.manual_seed(3)
    traced = make_fx(step)(params, fresh(), capture.batch_tensors(a))
    torch.manual_seed(5)  # the Gumbel noise (and dropout) from one seeded stream in both
    replayed = traced(params, fresh(), capture.batch_tensors(b))
    torch.manual_seed(5)
    eager = _loss_and_grads(module, params, fresh(), b)
    names = ["total", *params]
    assert len(replayed) == len(eager)
    for name, got, want in zip(names, replayed, eager):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, msg=name)


# -- evaluation's passes as graphs (grprune.evaluation.GraphedForward) ----------------------
@pytest.mark.parametrize("eval_mode", ["threshold", "sample"])
def test_evaluation_passes_are_captured_and_replayed_with_the_eager_numbers(
        tmp_path, molbbbp, captures, eval_mode):
    """The trainer's evaluation batches are the same tensors every epoch: each (batch,
    selector on or off, seed) is probed once, captured, then replayed, and the run's scores
    are the eager padded run's bit for bit (``sample``: the graph-keyed noise, fixed per
    key)."""
    from grprune.evaluation import GraphedForward
    extra = {"selector.eval_mode": eval_mode, "train.epochs": 4}
    (tmp_path / "graph").mkdir()
    trainer = Trainer(_cfg("cuda-graph", **extra), molbbbp, tmp_path / "graph")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        trainer.fit()
    graphed = trainer.graphed_eval
    assert isinstance(graphed, GraphedForward) and not graphed.eager
    assert graphed.graphs and graphed.replays > len(graphed.graphs)
    execute(_cfg("none", **extra), tmp_path / "eager", log=_quiet)
    assert _numbers(tmp_path / "graph") == _numbers(tmp_path / "eager")


def test_an_evaluation_pass_that_reads_the_host_stays_eager(molbbbp, tmp_path, captures):
    """A pass with a host read (here ``.item()`` in the model's forward) is never captured:
    one warning, and the scores are the eager ones."""
    from grprune.evaluation import GraphedForward, evaluate_batches
    trainer = Trainer(_cfg("cuda-graph"), molbbbp, tmp_path)
    model = trainer.model
    forward = model.forward

    def reading(batch, *args, **kwargs):
        out = forward(batch, *args, **kwargs)
        float(out.logits.sum())
        return out
    model.forward = reading  # type: ignore[method-assign]
    graphed = GraphedForward(torch.device("cpu"))
    batches = list(trainer._batches("valid"))
    with pytest.warns(UserWarning, match=r"evaluation pass .*_local_scalar_dense.*eagerly"):
        first = evaluate_batches(model, batches, metric="rocauc", forward=graphed)
    again = evaluate_batches(model, batches, metric="rocauc", forward=graphed)
    assert not graphed.graphs and graphed.eager and captures["captures"] == 0
    plain = evaluate_batches(model, batches, metric="rocauc")
    assert first.metric == again.metric == plain.metric
    np.testing.assert_array_equal(again.prob, plain.prob)
