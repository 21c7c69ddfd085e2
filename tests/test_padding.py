"""Static shapes (``train.pad_buckets``, issue 49): a training step on a batch padded to a
bucket (:func:`grprune.batch.pad_batch`) equals the step on the batch itself: loss,
gradients, updated parameters and BatchNorm statistics within 1e-6 relative, for ERM,
PrunE and each regularizer that keeps padding out; and the buckets
(:func:`grprune.batch.choose_buckets`) are few and every batch fits one."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from grprune.batch import GraphBatch, bucket_for, choose_buckets, pad_batch
from grprune.data import load_dataset
from grprune.encoders.base import masked_batch_norm
from grprune.step import add_reg_terms
from grprune.errors import GrpruneError
from grprune.losses import cross_entropy
from grprune.regularizers import StepContext
from grprune.resolve import resolve_config
from grprune.run import execute
from grprune.regularizers import REGULARIZERS
from grprune.trainer import Trainer, make_optimizer

#: encoder dropout off: dropout draws one number per row, so a padded batch (more rows)
#: moves the random stream of the layers after the first (the Gumbel noise is drawn
#: before them, for the real bonds first, and stays the same)
FLAGS = {"train.epochs": 1, "data.limit": 160, "train.batch_size": 48, "train.device": "cpu",
         "train.progress": "none", "encoder.dropout": 0.0}
RTOL = 1e-6


@pytest.fixture(scope="module")
def molbbbp():
    return load_dataset("ogbg-molbbbp")


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a - b|| / ||b||`` (0 for two zero tensors)."""
    scale = float(b.double().norm())
    diff = float((a.double() - b.double()).norm())
    return diff / scale if scale > 0 else diff


def _step(trainer: Trainer, batch: GraphBatch, seed: int = 7) -> dict[str, Any]:
    """One training step as :meth:`Trainer.train_epoch` takes it; the loss terms, every
    gradient, and the parameters and buffers after Adam's update."""
    model, regs, opt = trainer.model, trainer.regs, trainer.optimizer
    model.train()
    torch.manual_seed(seed)
    out = model(batch, use_selector=model.selector is not None)
    terms = {"ce": cross_entropy(out.logits, batch.y, mask=batch.graph_mask)}
    total = terms["ce"]
    if regs:
        ctx = StepContext(batch=batch, output=out, model=model, epoch=0, step=0)
        total = add_reg_terms(trainer.regs, ctx, total, terms)
    opt.zero_grad(set_to_none=True)
    total.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    opt.step()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    terms = {k: v.detach().clone() for k, v in terms.items()}
    return {"terms": terms, "grads": grads, "state": state}


def _twin(trainer: Trainer) -> Trainer:
    """A trainer that shares ``trainer``'s data but has copies of its model and
    regularizers, and an optimizer of its own (a deep copy would copy the dataset too)."""
    twin = copy.copy(trainer)
    twin.model, twin.regs = copy.deepcopy(trainer.model), copy.deepcopy(trainer.regs)
    params = list(twin.model.parameters()) + [p for r in twin.regs.values()
                                              for p in r.parameters()]
    twin.optimizer = make_optimizer(params, twin.tc, twin.device)
    return twin


def _compare(trainer: Trainer, batch: GraphBatch, dtype: torch.dtype = torch.float64) -> None:
    trainer.model.to(dtype)
    for reg in trainer.regs.values():
        reg.to(dtype)
    padded_trainer = _twin(trainer)
    n, e = int(batch.node_graph.shape[0]), int(batch.src.shape[0])
    bucket = bucket_for(trainer.buckets, n, e, batch.num_bonds, batch.num_graphs)
    padded = pad_batch(batch, bucket)
    assert padded.src.shape[0] > e and padded.node_graph.shape[0] > n  # padding to check
    plain = _step(trainer, batch.prepare_segments())
    pad = _step(padded_trainer, padded)
    assert plain["terms"].keys() == pad["terms"].keys()
    for k in plain["terms"]:
        assert _rel(pad["terms"][k], plain["terms"][k]) <= RTOL, k
    _compare_grads_and_state(plain, pad, RTOL)


def _compare_grads_and_state(plain: dict, pad: dict, rtol: float, floor: float = 1e-9,
                             state: bool = True) -> None:
    """Gradients and the state after the update within ``rtol`` relative.

    A gradient that is 0 in exact arithmetic (a bias just before BatchNorm, whose mean
    removes it) is rounding noise in both steps; it must be as small in both, and the
    parameter is left out of the state comparison: Adam divides the noise by its own
    magnitude, so the update is +-lr either way."""
    assert plain["grads"].keys() == pad["grads"].keys()
    scale = max(float(g.double().norm()) for g in plain["grads"].values())
    noise = set()
    for k, g in plain["grads"].items():
        if float(g.double().norm()) <= floor * scale:
            assert float(pad["grads"][k].double().norm()) <= floor * scale, k
            noise.add(k)
        else:
            assert _rel(pad["grads"][k], g) <= rtol, k
    assert len(noise) < len(plain["grads"]) / 4
    for k in plain["state"] if state else ():
        if k not in noise:
            assert _rel(pad["state"][k], plain["state"][k]) <= rtol, k


def _trainer(dataset, tmp_path: Path, **kwargs) -> Trainer:
    flags = {**FLAGS, "train.pad_buckets": True, **kwargs.pop("flags", {})}
    return Trainer(resolve_config(flags=flags, **kwargs), dataset, tmp_path)


@pytest.mark.parametrize("parts", [
    {"reg": "size,eps-align", "selector": "gumbel-gin"},  # PrunE
    {"reg": "none", "selector": "none"},  # ERM
    {"reg": "gsat", "selector": "gumbel-gin"},
    {"reg": "size,eps-align", "selector": "gumbel-gin",
     "flags": {"reg.size.form": "official", "reg.eps-align.form": "official",
               "selector.sample_per": "edge"}},
    {"reg": "size", "selector": "gumbel-gcn", "encoder": "gcn",
     "flags": {"encoder.virtual_node": True, "model.readout": "mean"}},
    {"reg": "size,eps-align", "selector": "gumbel-gin",
     "flags": {"encoder.virtual_node": True, "model.readout": "sum-l2"}},
], ids=["prune", "erm", "gsat", "official-forms", "gcn-vn-mean", "gin-vn-sum-l2"])
def test_a_padded_step_equals_the_unpadded_step(molbbbp, tmp_path, parts):
    trainer = _trainer(molbbbp, tmp_path, **parts)
    batch = trainer.store.batch(trainer.splits["train"][:48])
    _compare(trainer, batch)


def test_in_float32_padding_moves_a_step_less_than_float32_rounding_does(molbbbp, tmp_path):
    """float32 rounds the masked statistics differently (matrix-vector products, where
    BatchNorm sums in higher precision), and a gradient that cancels (GIN's eps) moves by a
    few percent of itself; so in float32 the test is that padding moves every loss term and
    gradient less than float32 itself moves them away from float64 (the exact equivalence
    is the float64 test above)."""
    trainer = _trainer(molbbbp, tmp_path, reg="size,eps-align", selector="gumbel-gin")
    batch = trainer.store.batch(trainer.splits["train"][:48])
    padded_trainer, exact_trainer = _twin(trainer), _twin(trainer)
    exact_trainer.model.double()
    n, e = int(batch.node_graph.shape[0]), int(batch.src.shape[0])
    padded = pad_batch(batch, bucket_for(trainer.buckets, n, e, batch.num_bonds, 48))
    plain, pad = _step(trainer, batch), _step(padded_trainer, padded)
    exact = _step(exact_trainer, batch)
    for part in ("terms", "grads"):
        assert plain[part].keys() == pad[part].keys()
        for k in plain[part]:
            own = _rel(plain[part][k], exact[part][k])
            assert _rel(pad[part][k], plain[part][k]) <= max(own, 1e-6), (part, k)


@pytest.fixture(scope="module")
def motif_trainer(tmp_path_factory):
    return _trainer(load_dataset("good-motif"), tmp_path_factory.mktemp("motif"),
                    data="good-motif", reg="vrex",
                    flags={"data.limit": 400, "train.warmup_epochs": 0})


@pytest.mark.parametrize("reg", ["vrex", "irm", "groupdro"])
def test_an_environment_regularizer_ignores_padding_graphs(motif_trainer, reg):
    trainer = _twin(motif_trainer)
    trainer.regs = {reg: REGULARIZERS.make(reg)}
    trainer.optimizer = make_optimizer(list(trainer.model.parameters()), trainer.tc,
                                       trainer.device)
    batch = trainer.store.batch(trainer.splits["train"][:48])
    assert len(torch.unique(batch.env)) >= 2
    _compare(trainer, batch)


def test_padding_refuses_a_regularizer_that_does_not_mask_it(molbbbp, tmp_path):
    with pytest.raises(GrpruneError, match="ciga.*pad_buckets"):
        _trainer(molbbbp, tmp_path, reg="ciga", selector="gumbel-gin")


def test_masked_batch_norm_is_batch_norm_over_the_real_rows():
    torch.manual_seed(0)
    x = torch.randn(10, 3, dtype=torch.float64)
    mask = torch.tensor([True] * 7 + [False] * 3)
    bn = torch.nn.BatchNorm1d(3).double()
    ref = copy.deepcopy(bn)
    out = masked_batch_norm(bn, x * 1e3 * (~mask).unsqueeze(1) + x, mask)
    expected = ref(x[:7])
    torch.testing.assert_close(out[:7], expected)
    assert (out[7:] == 0).all()
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(bn, name), getattr(ref, name))
    bn.eval(), ref.eval()
    torch.testing.assert_close(masked_batch_norm(bn, x, mask)[:7], ref(x[:7]))
    torch.testing.assert_close(masked_batch_norm(bn, x, None), ref(x))


def test_buckets_are_few_and_every_batch_of_an_epoch_fits(molbbbp, tmp_path):
    trainer = _trainer(molbbbp, tmp_path, reg="size,eps-align", selector="gumbel-gin",
                       flags={"data.limit": 0, "train.batch_size": 64})
    assert 1 <= len(trainer.buckets) <= 8
    assert len(set(trainer.buckets)) == len(trainer.buckets)
    seen = set()
    for _ in range(2):
        for batch in trainer._batches("train", train=True):
            assert batch.padded
            shape = (batch.node_graph.shape[0], batch.src.shape[0], batch.num_bonds,
                     batch.num_graphs)
            assert shape in {(b.nodes, b.edges, b.bonds, b.graphs) for b in trainer.buckets}
            assert int(batch.graph_mask.sum()) == batch.num_real_graphs
            seen.add(shape)
    assert seen


@pytest.mark.parametrize("seed", range(3))
def test_choose_buckets_fits_any_batch_even_the_largest_graphs(seed):
    rng = np.random.default_rng(seed)
    nodes = rng.integers(1, 60, size=300)
    edges = 2 * rng.integers(0, 70, size=300)
    bonds = edges // 2
    buckets = choose_buckets(nodes, edges, bonds, batch_size=32, max_buckets=8)
    assert 1 <= len(buckets) <= 8
    top = np.argsort(nodes)[-32:]
    for idx in (top, np.argsort(edges)[-32:], rng.choice(300, 5, replace=False)):
        bucket_for(buckets, int(nodes[idx].sum()), int(edges[idx].sum()),
                   int(bonds[idx].sum()), len(idx))
    with pytest.raises(ValueError, match="fits none"):
        bucket_for(buckets, 10**6, 0, 0, 1)
    with pytest.raises(ValueError):
        choose_buckets([], [], [], batch_size=4)


def test_a_padded_run_trains_and_logs_the_real_graphs(tmp_path):
    cfg = resolve_config(reg="size,eps-align", selector="gumbel-gin",
                         flags={**FLAGS, "train.epochs": 2, "train.pad_buckets": True})
    _, summary = execute(cfg, tmp_path / "run", log=lambda msg: None)
    assert summary.test is not None and np.isfinite(summary.test)
    kept = summary.kept_edge_fraction
    assert kept is not None and 0.0 <= kept <= 1.0
