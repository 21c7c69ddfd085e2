"""Every registered selector, encoder and regularizer, checked for free (parametrized)."""

from __future__ import annotations

import pytest
import torch

from grprune.encoders import ENCODERS
from grprune.model import GraphClassifier
from grprune.regularizers import REGULARIZERS, StepContext
from grprune.selectors import SELECTORS, concrete_sample


def _model(toy_dataset, selector="gumbel-gin", encoder="gin", **sel_hp):
    enc = ENCODERS.make(encoder, feature_kind="ogb", layers=2, hidden=16, virtual_node=True)
    sel = SELECTORS.make(selector, feature_kind="ogb", hidden=16, **sel_hp) if selector else None
    return GraphClassifier(enc, 2, sel)


@pytest.mark.parametrize("name", REGULARIZERS.names())
def test_regularizer_finite_and_reaches_selector(name, toy_batch, toy_dataset):
    torch.manual_seed(0)
    model = _model(toy_dataset).train()
    reg = REGULARIZERS.make(name)
    out = model(toy_batch)
    out.selection.edge_logits.retain_grad()
    value = reg.loss(StepContext(batch=toy_batch, output=out, model=model))
    assert value.dim() == 0 and torch.isfinite(value)
    value.backward()
    grads = [p.grad for p in model.selector.parameters() if p.grad is not None]
    assert grads and sum(g.abs().sum() for g in grads) > 0


@pytest.mark.parametrize("name", SELECTORS.names())
def test_selector_selection_is_valid_and_symmetric(name, toy_batch):
    torch.manual_seed(0)
    hp = {"hidden": 16} if "hidden" in SELECTORS.get(name).defaults else {}
    sel = SELECTORS.make(name, feature_kind="ogb", **hp).train()
    s = sel(toy_batch).validate(toy_batch.src.numel())
    assert set(s.edge_weight.detach().unique().tolist()) <= {0.0, 1.0}  # hard samples
    for bond in range(toy_batch.num_bonds):
        both = toy_batch.bond == bond
        assert both.sum() == 2
        assert s.edge_weight[both].unique().numel() == 1
        assert s.edge_logits[both].unique().numel() == 1


@pytest.mark.parametrize("name", [n for n in SELECTORS.names() if SELECTORS.get(n).learned])
def test_straight_through_gradient_reaches_selector(name, toy_batch, toy_dataset):
    torch.manual_seed(0)
    model = _model(toy_dataset, selector=name).train()
    out = model(toy_batch)
    torch.nn.functional.cross_entropy(out.logits, toy_batch.y).backward()
    grads = [p.grad for p in model.selector.parameters() if p.grad is not None]
    assert grads and sum(g.abs().sum() for g in grads) > 0


def test_eval_modes(toy_batch):
    torch.manual_seed(0)
    for mode in ("threshold", "soft", "sample"):
        sel = SELECTORS.make("gumbel-gin", feature_kind="ogb", hidden=16, eval_mode=mode).eval()
        s = sel(toy_batch)
        if mode == "threshold":
            assert torch.equal(s.edge_weight, (s.edge_prob > 0.5).float())
        elif mode == "soft":
            assert torch.equal(s.edge_weight, s.edge_prob)
        else:
            assert set(s.edge_weight.unique().tolist()) <= {0.0, 1.0}
    sel = SELECTORS.make("gumbel-gin", feature_kind="ogb", hidden=16).eval()
    assert torch.equal(sel(toy_batch).edge_weight, sel(toy_batch).edge_weight)  # deterministic


def test_concrete_sample_matches_eq2():
    logits = torch.tensor([0.0, 2.0, -2.0], requires_grad=True)
    noise = torch.tensor([0.7, 0.1, 0.95])
    hard, relaxed = concrete_sample(logits, tau=0.5, hard=True, noise=noise)
    expected = torch.sigmoid((torch.log(noise) - torch.log1p(-noise) + logits.detach()) / 0.5)
    assert torch.allclose(relaxed, expected)
    assert torch.equal(hard.detach(), (expected > 0.5).float())
    hard.sum().backward()  # straight-through: gradient of the relaxed sample
    assert logits.grad is not None
    assert torch.allclose(logits.grad, expected * (1 - expected) / 0.5)


@pytest.mark.parametrize("name", ENCODERS.names())
def test_encoder_handles_zero_edge_graph_and_mask(name, toy_batch):
    enc = ENCODERS.make(name, feature_kind="ogb", layers=2, hidden=16, virtual_node=True).eval()
    h_full = enc(toy_batch)
    h_none = enc(toy_batch, torch.zeros(toy_batch.src.numel()))
    assert h_full.shape == (toy_batch.node_feat.shape[0], 16)
    assert torch.isfinite(h_full).all() and torch.isfinite(h_none).all()
    assert torch.allclose(enc(toy_batch, torch.ones(toy_batch.src.numel())), h_full, atol=1e-6)
    assert not torch.allclose(h_none, h_full)


@pytest.mark.parametrize("which", ["node", "edge"])
def test_ogb_embedding_matches_ogb_modules(which, toy_batch):
    """The multi-hot product gives OGB's AtomEncoder/BondEncoder values and gradients."""
    from grprune.encoders.base import EdgeEmbedding, NodeEmbedding

    torch.manual_seed(0)
    emb = NodeEmbedding("ogb", 16) if which == "node" else EdgeEmbedding("ogb", 16)
    feat = toy_batch.node_feat if which == "node" else toy_batch.edge_feat
    ours, reference = emb(feat), emb.net(feat)  # emb.net is OGB's own module
    assert torch.allclose(ours, reference, atol=1e-6)
    grad_ours = torch.autograd.grad(ours.square().sum(), list(emb.parameters()))
    grad_ref = torch.autograd.grad(reference.square().sum(), list(emb.parameters()))
    for a, b in zip(grad_ours, grad_ref):
        assert torch.allclose(a, b, atol=1e-5)
    assert set(emb.state_dict()) == set(emb.net.state_dict(prefix="net."))  # checkpoint keys
