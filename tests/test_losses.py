"""PrunE's losses against hand-computed values (paper Eqs. 3-4 and the official forms)."""

from __future__ import annotations

import pytest
import torch

from grprune.batch import collate
from grprune.regularizers import REGULARIZERS, StepContext
from grprune.selectors import Selection
from tests.conftest import make_graph


def _ctx(weights, probs):
    # graph 0: path 0-1-2 (4 directed edges); graph 1: one atom, no edge;
    # graph 2: one bond (2 directed edges)
    graphs = [make_graph(3, [(0, 1), (1, 2)]), make_graph(1, []), make_graph(2, [(0, 1)])]
    batch = collate([(g, 0, 0, i) for i, g in enumerate(graphs)])
    prob = torch.tensor(probs, dtype=torch.float32, requires_grad=True)
    weight = torch.tensor(weights, dtype=torch.float32, requires_grad=True)
    sel = Selection(edge_logits=torch.logit(prob.detach()), edge_prob=prob, edge_weight=weight)
    out = type("Out", (), {"selection": sel})()
    # a stand-in output (only .selection is read) and no model: the losses read neither
    return StepContext(batch=batch, output=out, model=None), prob, weight  # type: ignore[arg-type]


W = [1, 1, 0, 0, 1, 1]
P = [0.9, 0.9, 0.2, 0.2, 0.6, 0.6]


@pytest.mark.parametrize("eta, form, expected", [
    # per graph (kept/|E| - eta)^2, averaged over graphs with edges: ((0.5-0.5)^2 + (1-0.5)^2)/2
    (0.5, "paper", 0.125),
    (0.85, "paper", ((0.5 - 0.85) ** 2 + (1 - 0.85) ** 2) / 2),
    # official: r = 4/6 over the batch; 4(r - eta) if r >= eta else eta - r
    (0.5, "official", 4 * (4 / 6 - 0.5)),
    (0.9, "official", 0.9 - 4 / 6),
])
def test_size_loss_hand_computed(eta, form, expected):
    ctx, _, weight = _ctx(W, P)
    reg = REGULARIZERS.make("size", eta=eta, form=form)
    value = reg.loss(ctx)
    assert value.item() == pytest.approx(expected, abs=1e-6)
    value.backward()
    assert weight.grad is not None and torch.isfinite(weight.grad).all()


@pytest.mark.parametrize("k, eps, form, expected", [
    # graph 0: k=2 lowest {0.2, 0.2}, eps=1/4 -> 0.05; graph 2: k=1 {0.6}, eps=1/2 -> 0.1
    (50.0, "auto", "paper", (0.05 + 0.1) / 2),
    # fixed eps=0: graph 0 -> 0.2, graph 2 -> 0.6
    (50.0, "0", "paper", (0.2 + 0.6) / 2),
    # K=100: graph 0 all 4 -> mean |p - 1/4| = (0.65*2 + 0.05*2)/4; graph 2 -> 0.1
    (100.0, "auto", "paper", ((0.65 * 2 + 0.05 * 2) / 4 + 0.1) / 2),
    # official: k = floor(0.5*6) = 3 lowest {0.2, 0.2, 0.6}; 0.5 * sum |p - 1/3|
    (50.0, "auto", "official", 0.5 * (2 * (1 / 3 - 0.2) + (0.6 - 1 / 3))),
])
def test_eps_align_hand_computed(k, eps, form, expected):
    ctx, prob, _ = _ctx(W, P)
    reg = REGULARIZERS.make("eps-align", k=k, eps=eps, form=form)
    value = reg.loss(ctx)
    assert value.item() == pytest.approx(expected, abs=1e-6)
    value.backward()
    assert prob.grad is not None and prob.grad.abs().sum() > 0


def test_losses_on_batch_without_edges():
    graphs = [make_graph(1, []), make_graph(2, [])]
    batch = collate([(g, 0, 0, i) for i, g in enumerate(graphs)])
    empty = torch.zeros(0, requires_grad=True)
    sel = Selection(edge_logits=empty, edge_prob=empty, edge_weight=empty)
    out = type("Out", (), {"selection": sel})()
    ctx = StepContext(batch=batch, output=out, model=None)  # type: ignore[arg-type]  # as above
    for name in ("size", "eps-align"):
        for form in ("paper", "official"):
            value = REGULARIZERS.make(name, form=form).loss(ctx)
            assert value.item() == 0.0 and torch.isfinite(value)


def test_paper_defaults_declared_on_classes():
    size, align = REGULARIZERS.get("size"), REGULARIZERS.get("eps-align")
    assert size.defaults == {"weight": 10.0, "eta": 0.85, "form": "paper"}
    assert align.defaults["weight"] == 0.01 and align.defaults["k"] == 50.0
    assert align.defaults["eps"] == "auto"
