"""Regularizers of static shape (issue 49): on a batch padded to a bucket
(:func:`grprune.batch.pad_batch`) a regularizer's loss is a function of the batch's tensors
alone, with no Python number that differs between batches of one bucket and no read back
to the host, so that one graph per bucket serves every batch of it, whether
:func:`torch.compile` (``dynamic=False``) or a captured CUDA graph runs it.

Checked here on the CPU, for eps-align's official form (``reg.eps-align.form=official``,
the ``official`` preset):

- the padded batch gives the unpadded batch's value (1e-6 relative) and gradients (1e-6),
  for several ``K``, a ``k`` of 0 (a tiny batch, a batch without edges) and a fixed ``eps``;
- :func:`torch.compile` (``backend="aot_eager"``, ``dynamic=False``) compiles it once for
  several batches of one bucket (before issue 49's static form: once per batch);
- a graph traced once (:func:`~torch.fx.experimental.proxy_tensor.make_fx`, as a CUDA-graph
  capture records it) on batch A gives, run on batch B of the same bucket, the eager value
  and gradient on B;
- no read-back (``tests/test_no_readback.py``'s :class:`ReadBacks`).

and the same for IRM (both estimators), VREx and GroupDRO (``regularizers/env.py``: their
static form over :class:`~grprune.regularizers.env.EnvSlots`; GroupDRO's weights updated
alike, and with :meth:`~grprune.regularizers.env.GroupDRO.reserve`), including batches with
one environment, none, single-graph environments and graphs outside the training
environments (id -1); a whole padded step with each is one graph without a break.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, Callable

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from grprune.batch import Bucket, GraphBatch, collate, pad_batch
from grprune.csr import Segments
from grprune.regularizers import REGULARIZERS, Regularizer, StepContext
from grprune.regularizers.env import EnvSlots
from grprune.selectors import Selection
from tests.conftest import make_graph
from tests.test_no_readback import ReadBacks

#: one bucket that every batch of :func:`_batch` fits
BUCKET = Bucket(nodes=96, edges=192, bonds=96, graphs=9)


#: steps traced (``make_fx``) as a CUDA graph keeps them (conftest's ``sums_as_on_cuda``)
pytestmark = pytest.mark.usefixtures("sums_as_on_cuda")


def _batch(seed: int, graphs: int = 8, max_atoms: int = 9) -> GraphBatch:
    """``graphs`` random molecules-like graphs (a random tree plus a few ring bonds; some
    single atoms, without edges), collated, unpadded."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(graphs):
        n = int(torch.randint(1, max_atoms + 1, (), generator=gen))
        bonds = [(int(torch.randint(0, v, (), generator=gen)), v) for v in range(1, n)]
        if n > 3 and bool(torch.rand((), generator=gen) < 0.5):
            bonds.append((0, n - 1))
        out.append((make_graph(n, bonds), i % 2, i % 3, i))
    return collate(out)


def _prob(batch: GraphBatch, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Edge probabilities of shape (E,), one per bond (both directions share it, as the
    selectors' are: many ties), some bonds with equal probabilities across bonds too."""
    gen = torch.Generator().manual_seed(seed + 1000)
    per_bond = torch.rand(batch.num_bonds, generator=gen, dtype=torch.float64)
    per_bond[::5] = 0.25  # ties across bonds
    return per_bond[batch.bond].to(dtype)


class _Output:
    """A stand-in for the model's output: eps-align reads only its ``selection``."""

    def __init__(self, selection: Selection) -> None:
        self.selection = selection


def _ctx(batch: GraphBatch, prob: torch.Tensor) -> StepContext:
    sel = Selection(edge_logits=prob.detach(), edge_prob=prob, edge_weight=prob)
    # no model: eps-align does not read it
    return StepContext(batch=batch, output=_Output(sel), model=None)  # type: ignore[arg-type]


def _padded_prob(real: torch.Tensor, padded: GraphBatch, seed: int) -> torch.Tensor:
    """``real`` followed by probabilities for the padding edges (the selector gives them
    some; the loss must ignore them), a new leaf."""
    gen = torch.Generator().manual_seed(seed + 2000)
    extra = int(padded.src.shape[0]) - real.numel()
    pad = torch.rand(extra, generator=gen, dtype=torch.float64).to(real.dtype)
    return torch.cat([real.detach(), pad]).requires_grad_(True)


def _value_and_grad(reg: Regularizer, batch: GraphBatch,
                    prob: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    prob = prob.detach().requires_grad_(True)
    value = reg.loss(_ctx(batch, prob))
    (grad,) = torch.autograd.grad(value, prob, allow_unused=True)
    return value.detach(), torch.zeros_like(prob) if grad is None else grad


def _official(k: float, eps: str = "auto") -> Regularizer:
    return REGULARIZERS.make("eps-align", form="official", k=k, eps=eps)


CASES = [  # (seed, graphs, K percent, eps)
    (0, 8, 50.0, "auto"), (1, 8, 90.0, "auto"), (2, 8, 10.0, "auto"), (3, 8, 100.0, "auto"),
    (4, 8, 33.3, "auto"), (5, 8, 50.0, "0.05"), (6, 8, 70.0, "0"),
    (7, 1, 30.0, "auto"),  # tiny: k = floor(0.3 * E) is 0 for E <= 3 directed edges
    (8, 2, 1.0, "auto"),  # k = 0: fewer than 100 edges
    (9, 3, 1.0, "0.05"),  # k = 0 with eps a number
]


@pytest.mark.parametrize("seed, graphs, k, eps", CASES)
def test_the_official_form_on_a_padded_batch_equals_the_unpadded_batch(seed, graphs, k, eps):
    batch = _batch(seed, graphs, max_atoms=9 if graphs > 2 else 2)
    padded = pad_batch(batch, BUCKET)
    reg = _official(k, eps)
    prob = _prob(batch, seed)
    plain_value, plain_grad = _value_and_grad(reg, batch, prob)
    pad_value, pad_grad = _value_and_grad(reg, padded, _padded_prob(prob, padded, seed))
    assert torch.isfinite(pad_value) and torch.isfinite(pad_grad).all()
    assert float(pad_value) == pytest.approx(float(plain_value), rel=1e-6, abs=1e-9)
    e = batch.src.shape[0]
    torch.testing.assert_close(pad_grad[:e], plain_grad, rtol=0, atol=1e-6)
    assert torch.equal(pad_grad[e:], torch.zeros_like(pad_grad[e:]))  # padding: no gradient
    if int(e * k / 100.0) == 0:
        assert float(pad_value) == 0.0 and not pad_grad.any()


def test_a_padded_batch_without_real_edges_gives_0():
    batch = collate([(make_graph(1, []), 0, 0, 0), (make_graph(2, []), 1, 1, 1)])
    padded = pad_batch(batch, BUCKET)
    for eps in ("auto", "0.1"):
        value, grad = _value_and_grad(_official(50.0, eps), padded,
                                      _padded_prob(torch.zeros(0), padded, 0))
        assert float(value) == 0.0 and not grad.any() and torch.isfinite(grad).all()


def _count_graphs() -> tuple[list[int], Callable[..., Any]]:
    """A backend that counts the graphs dynamo hands it, then compiles like ``aot_eager``."""
    aot_eager = torch._dynamo.lookup_backend("aot_eager")
    calls: list[int] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
        calls.append(1)
        return aot_eager(gm, example_inputs)
    return calls, backend


@pytest.mark.parametrize("form", ["official", "paper"])
def test_the_loss_compiles_once_for_the_batches_of_one_bucket(form):
    batches = [pad_batch(_batch(seed), BUCKET) for seed in range(5)]
    assert len({b.num_real_edges for b in batches}) == 5  # five different slices, before
    reg = REGULARIZERS.make("eps-align", form=form, k=90.0)
    torch._dynamo.reset()
    calls, backend = _count_graphs()
    compiled = torch.compile(lambda ctx: reg.loss(ctx), backend=backend, dynamic=False)
    try:
        for seed, batch in enumerate(batches):
            prob = _padded_prob(_prob(_batch(seed), seed), batch, seed)
            value = compiled(_ctx(batch, prob))
            value.backward()
            eager, grad = _value_and_grad(reg, batch, prob)
            assert float(value.detach()) == pytest.approx(float(eager), rel=1e-6, abs=1e-9)
            assert prob.grad is not None
            torch.testing.assert_close(prob.grad, grad, rtol=0, atol=1e-6)
    finally:
        torch._dynamo.reset()
    assert len(calls) == 1, f"{len(calls)} graphs for {len(batches)} batches of one bucket"


def _tensors(batch: GraphBatch) -> tuple[list[str], list[torch.Tensor]]:
    """The batch's tensors (fields and CSR layouts), by name, in one order."""
    names, out = [], []
    for f in fields(batch):
        value = getattr(batch, f.name)
        if isinstance(value, torch.Tensor):
            names.append(f.name)
            out.append(value)
    for key in sorted(batch.csr):
        seg = batch.csr[key]
        for part in ("index", "order", "lengths"):
            if getattr(seg, part) is not None:
                names.append(f"csr.{key}.{part}")
                out.append(getattr(seg, part))
    return names, out


def _rebuilt(template: GraphBatch, names: list[str], tensors: tuple) -> GraphBatch:
    """``template`` (its host numbers included) with the tensors ``tensors``: what a graph
    captured on ``template`` sees when it is replayed on another batch's tensors."""
    given = dict(zip(names, tensors))
    csr = {}
    for key, seg in template.csr.items():
        parts = {p: given.get(f"csr.{key}.{p}") for p in ("index", "order", "lengths")}
        csr[key] = Segments(parts["index"], parts["order"], parts["lengths"])  # type: ignore
    plain = {k: v for k, v in given.items() if not k.startswith("csr.")}
    return replace(template, **plain, csr=csr, row_masks={}, derived={})


@pytest.mark.parametrize("form, k, eps", [("official", 90.0, "auto"), ("official", 50.0, "0.05"),
                                          ("paper", 50.0, "auto")])
def test_a_loss_traced_on_one_batch_is_right_on_another_of_its_bucket(form, k, eps):
    """What a CUDA graph captures: the ops of one call, replayed on new tensors. A host
    number of batch A (a slice length, a ``k``) would be baked into the trace."""
    reg = REGULARIZERS.make("eps-align", form=form, k=k, eps=eps)
    a, b = pad_batch(_batch(20), BUCKET), pad_batch(_batch(21), BUCKET)
    assert a.num_real_edges != b.num_real_edges
    names, tensors_a = _tensors(a)
    names_b, tensors_b = _tensors(b)
    assert names == names_b

    def loss_and_grad(prob: torch.Tensor, *tensors: torch.Tensor):
        prob = prob.detach().requires_grad_(True)
        value = reg.loss(_ctx(_rebuilt(a, names, tensors), prob))
        (grad,) = torch.autograd.grad(value, prob)
        return value, grad

    prob_a = _padded_prob(_prob(_batch(20), 20), a, 20)
    prob_b = _padded_prob(_prob(_batch(21), 21), b, 21)
    traced = make_fx(loss_and_grad)(prob_a, *tensors_a)
    value, grad = traced(prob_b, *tensors_b)
    eager_value, eager_grad = _value_and_grad(reg, b, prob_b)
    assert float(value) == pytest.approx(float(eager_value), rel=1e-6, abs=1e-9)
    torch.testing.assert_close(grad, eager_grad, rtol=0, atol=1e-6)


@pytest.mark.parametrize("eps", ["auto", "0.05"])
def test_the_official_form_on_a_padded_batch_reads_nothing_back(eps):
    padded = pad_batch(_batch(3), BUCKET)
    prob = _padded_prob(_prob(_batch(3), 3), padded, 3)
    reg = _official(50.0, eps)
    mode = ReadBacks(set())
    with mode:
        value = reg.loss(_ctx(padded, prob))
        value.backward()
    assert not mode.reads, mode.reads


# -- the environment objectives: irm, vrex, groupdro -----------------------------------------
ENV_REGS = [("irm", {}), ("irm", {"estimator": "halves"}), ("vrex", {}),
            ("groupdro", {"step_size": 0.5})]
ENV_IDS = ["irm", "irm-halves", "vrex", "groupdro"]


class _Logits:
    """A stand-in for the model's output: the environment objectives read its ``logits``."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits, self.selection = logits, None


def _env_batch(envs: list[int], seed: int = 0) -> GraphBatch:
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for i, env in enumerate(envs):
        n = int(torch.randint(1, 6, (), generator=gen))
        graphs.append((make_graph(n, [(v - 1, v) for v in range(1, n)]), i % 2, env, i))
    return collate(graphs)


def _env_case(envs: list[int], seed: int, classes: int = 2):
    """An unpadded batch with ``envs``, the same padded, and logits of shape (B, C) for
    each (the padded: the real ones, then random ones for the padding graphs)."""
    batch = _env_batch(envs, seed)
    padded = pad_batch(batch, BUCKET)
    gen = torch.Generator().manual_seed(seed + 3000)
    logits = torch.randn(len(envs), classes, generator=gen, dtype=torch.float64) * 2
    extra = torch.randn(BUCKET.graphs - len(envs), classes, generator=gen, dtype=torch.float64)
    return batch, padded, logits, torch.cat([logits, extra])


def _env_value_and_grad(reg: Regularizer, batch: GraphBatch, logits: torch.Tensor):
    logits = logits.detach().requires_grad_(True)
    ctx = StepContext(batch=batch, output=_Logits(logits), model=None)  # type: ignore[arg-type]
    value = reg.loss(ctx)
    (grad,) = torch.autograd.grad(value, logits, allow_unused=True)
    return value.detach(), torch.zeros_like(logits) if grad is None else grad


ENV_CASES = [[0, 0, 1, 1, 1, 2, 0, 1], [4, 1, 4, -1, 7, 1, 1, 4], [3] * 8, [0, 1, 2, 3, 4, 5],
             [-1, -1, 2, 2, 2], [-1, -1, -1], [5, 6], [2]]


@pytest.mark.parametrize("envs", ENV_CASES)
def test_env_slots_are_torch_unique_in_static_shapes(envs):
    env = torch.tensor(envs)
    slots = EnvSlots.of(env)
    keep = env >= 0
    ids, group, counts = torch.unique(env[keep], return_inverse=True, return_counts=True)
    m = ids.numel()
    assert int(slots.num) == m
    assert slots.valid.tolist() == [s < m for s in range(len(envs))]
    assert torch.equal(slots.ids[:m], ids) and torch.equal(slots.counts[:m], counts)
    assert not slots.counts[m:].any()
    assert torch.equal(slots.slot[keep], group) and torch.equal(slots.keep, keep)


@pytest.mark.parametrize("envs", ENV_CASES)
@pytest.mark.parametrize("name, hp", ENV_REGS, ids=ENV_IDS)
def test_an_env_objective_on_a_padded_batch_equals_the_unpadded_batch(name, hp, envs):
    batch, padded, logits, padded_logits = _env_case(envs, seed=len(envs))
    plain_reg, pad_reg = REGULARIZERS.make(name, **hp), REGULARIZERS.make(name, **hp)
    for step in range(2):  # groupdro: its weights move at the first step
        plain_value, plain_grad = _env_value_and_grad(plain_reg, batch, logits)
        pad_value, pad_grad = _env_value_and_grad(pad_reg, padded, padded_logits)
        assert torch.isfinite(pad_value) and torch.isfinite(pad_grad).all()
        assert float(pad_value) == pytest.approx(float(plain_value), rel=1e-6, abs=1e-12)
        b = len(envs)
        torch.testing.assert_close(pad_grad[:b], plain_grad, rtol=1e-6, atol=1e-12)
        assert not pad_grad[b:].any()  # no gradient to the padding graphs
        if name == "groupdro":
            torch.testing.assert_close(pad_reg.log_q, plain_reg.log_q, rtol=1e-12, atol=0)
            assert torch.equal(pad_reg.seen, plain_reg.seen)
            torch.testing.assert_close(pad_reg.q, plain_reg.q, rtol=1e-12, atol=0)


def test_groupdro_reserved_keeps_its_room_through_a_checkpoint():
    reg = REGULARIZERS.make("groupdro")
    reg.reserve(9)
    batch, padded, logits, padded_logits = _env_case([4, 1, 4, -1, 7, 1, 1, 4], seed=1)
    _env_value_and_grad(reg, padded, padded_logits)
    assert reg.log_q.shape == (9,) and reg.seen.tolist() == [i in (1, 4, 7) for i in range(9)]
    old = REGULARIZERS.make("groupdro")  # a checkpoint from before, 8 ids
    _env_value_and_grad(old, batch, logits)
    fresh = REGULARIZERS.make("groupdro")
    fresh.reserve(9)
    fresh.load_state_dict(old.state_dict())
    assert fresh.log_q.shape == (9,) and torch.equal(fresh.log_q[:8], old.log_q)


def _env_fn(reg: Regularizer) -> Callable[[torch.Tensor, GraphBatch], torch.Tensor]:
    def loss(logits: torch.Tensor, batch: GraphBatch) -> torch.Tensor:
        return reg.loss(StepContext(batch=batch, output=_Logits(logits),  # type: ignore[arg-type]
                                    model=None))  # type: ignore[arg-type]
    return loss


def _two(name: str, hp: dict):
    """Two fresh instances of one env objective (GroupDRO's room reserved for 8 ids)."""
    regs = REGULARIZERS.make(name, **hp), REGULARIZERS.make(name, **hp)
    if name == "groupdro":
        for reg in regs:
            reg.reserve(8)
    return regs


ENV_ROUNDS = [[0, 0, 1, 1, 1, 2, 0, 1], [4, 1, 4, -1, 7, 1, 1, 4], [3] * 8, [0, 1, 2, 3, 4, 5],
              [-1, -1, 2, 2, 2]]


@pytest.mark.parametrize("name, hp", ENV_REGS, ids=ENV_IDS)
def test_an_env_objective_compiles_once_without_a_break_for_one_bucket(name, hp):
    reg, eager = _two(name, hp)
    torch._dynamo.reset()
    calls, backend = _count_graphs()
    compiled = torch.compile(_env_fn(reg), backend=backend, dynamic=False)
    try:
        for seed, envs in enumerate(ENV_ROUNDS):
            _, padded, _, logits = _env_case(envs, seed)
            leaf = logits.clone().requires_grad_(True)
            value = compiled(leaf, padded)
            value.backward()
            want, grad = _env_value_and_grad(eager, padded, logits)
            assert float(value.detach()) == pytest.approx(float(want), rel=1e-9, abs=1e-12)
            assert leaf.grad is not None
            torch.testing.assert_close(leaf.grad, grad, rtol=1e-9, atol=1e-12)
        if name == "groupdro":
            torch.testing.assert_close(reg.log_q, eager.log_q, rtol=1e-12, atol=0)
    finally:
        torch._dynamo.reset()
    assert len(calls) == 1, f"{len(calls)} graphs for {len(ENV_ROUNDS)} batches of one bucket"


@pytest.mark.parametrize("name, hp", ENV_REGS, ids=ENV_IDS)
def test_an_env_objective_traced_on_one_batch_is_right_on_another(name, hp):
    reg, eager = _two(name, hp)
    (_, a, _, logits_a), (_, b, _, logits_b) = (_env_case(ENV_ROUNDS[1], 1),
                                                _env_case(ENV_ROUNDS[0], 0))
    names, tensors_a = _tensors(a)
    _, tensors_b = _tensors(b)

    def loss_and_grad(logits: torch.Tensor, *tensors: torch.Tensor):
        logits = logits.detach().requires_grad_(True)
        value = _env_fn(reg)(logits, _rebuilt(a, names, tensors))
        (grad,) = torch.autograd.grad(value, logits)
        return value, grad

    traced = make_fx(loss_and_grad)(logits_a, *tensors_a)
    if name == "groupdro":  # tracing took batch A's update of q: so does the eager one
        _env_value_and_grad(eager, a, logits_a)
    value, grad = traced(logits_b, *tensors_b)
    want, want_grad = _env_value_and_grad(eager, b, logits_b)
    assert float(value) == pytest.approx(float(want), rel=1e-9, abs=1e-12)
    torch.testing.assert_close(grad, want_grad, rtol=1e-9, atol=1e-12)
    if name == "groupdro":  # the replay updated the module's own q, as eager did
        torch.testing.assert_close(reg.log_q, eager.log_q, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name, hp", ENV_REGS, ids=ENV_IDS)
def test_an_env_objective_on_a_padded_batch_reads_nothing_back(name, hp):
    reg = REGULARIZERS.make(name, **hp)
    if name == "groupdro":
        reg.reserve(8)
    _, padded, _, logits = _env_case(ENV_ROUNDS[1], 1)
    logits.requires_grad_(True)
    mode = ReadBacks(set())
    with mode:
        value = reg.loss(StepContext(batch=padded, output=_Logits(logits),  # type: ignore[arg-type]
                                     model=None))  # type: ignore[arg-type]
        value.backward()
    assert not mode.reads, mode.reads


@pytest.mark.parametrize("reg", ["irm", "vrex", "groupdro"])
def test_a_padded_step_with_an_env_objective_is_one_graph(reg, tmp_path):
    """The whole step (:func:`grprune.step.step_loss`, GIN on ogbg-molbbbp) compiles without
    a break; GroupDRO with :meth:`~grprune.regularizers.env.GroupDRO.reserve` (without, it
    reads the batch's largest id back)."""
    from grprune.step import StepClock, step_loss
    from grprune.data import load_dataset
    from grprune.regularizers.env import GroupDRO
    from grprune.resolve import resolve_config
    from grprune.trainer import Trainer

    data = load_dataset("ogbg-molbbbp")
    flags = {"train.epochs": 1, "data.limit": 64, "train.batch_size": 32, "train.device": "cpu",
             "train.progress": "none", "encoder.dropout": 0.0, "train.pad_buckets": True}
    trainer = Trainer(resolve_config(reg=reg, flags=flags), data, tmp_path)
    dro = trainer.regs[reg]
    if isinstance(dro, GroupDRO):
        dro.reserve(int(torch.as_tensor(data.envs).max()) + 1)
    batch = next(iter(trainer._batches("train", train=True)))
    assert batch.padded
    clock = StepClock()
    explained = torch._dynamo.explain(step_loss)(trainer.model, trainer.regs, batch, False, 1,
                                                   0, clock)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


@pytest.mark.parametrize("reg,flags", [
    ("irm", {"reg.irm.anneal_steps": 2, "reg.irm.anneal_weight": 0.5, "reg.irm.weight": 10.0}),
    ("gsat", {"reg.gsat.decay_interval": 1, "reg.gsat.schedule": "absolute"})],
    ids=["irm-annealing", "gsat-schedule"])
def test_a_compiled_step_follows_a_schedule_without_compiling_again(reg, flags, tmp_path):
    """IRM's annealing and GSAT's r read the step clock's device tensors under
    :func:`torch.compile`: one graph for steps 0-4 / epochs 0-4, each step's total the
    eager step's (whose regularizers read the Python integers)."""
    from torch._dynamo.utils import counters

    from grprune.step import TrainStep, step_loss
    from grprune.data import load_dataset
    from grprune.resolve import resolve_config
    from grprune.trainer import Trainer

    data = load_dataset("ogbg-molbbbp")
    base = {"train.epochs": 1, "data.limit": 64, "train.batch_size": 32, "train.device": "cpu",
            "train.progress": "none", "encoder.dropout": 0.0, "train.pad_buckets": True}
    selector = "none" if reg == "irm" else "gumbel-gin"
    trainer = Trainer(resolve_config(reg=reg, selector=selector, flags={**base, **flags}),
                      data, tmp_path)
    batch = next(iter(trainer._batches("train", train=True)))
    compiled = TrainStep("default", backend="eager")
    torch._dynamo.reset()
    counters.clear()
    for t in range(5):
        batch.row_masks.clear()  # (as a new batch comes: its caches empty)
        batch.derived.clear()
        torch.manual_seed(t)
        got = compiled(trainer.model, trainer.regs, batch, False, t, t)[0]
        torch.manual_seed(t)
        want = step_loss(trainer.model, trainer.regs, batch, False, t, t)[0]
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    assert counters["stats"]["unique_graphs"] == 1
