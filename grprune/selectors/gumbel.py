"""Gumbel selectors: edge logits -> binary concrete samples (paper Eq. 2), and the GNN
edge scorers of ``gumbel-gin`` / ``gumbel-gcn`` (paper Eq. 1)."""

from __future__ import annotations

from abc import abstractmethod
from typing import cast

import torch
from torch import Tensor, nn

from grprune.batch import GraphBatch
from grprune.encoders.base import ENCODERS
from grprune.hparams import hparam
from grprune.selectors.base import (EVAL_MODES, SAMPLE_UNITS, SELECTORS, Selection, Selector,
                                    budget_mask, concrete_sample, graph_noise)


class GumbelSelector(Selector):
    """A learned selector sampling one Gumbel (binary concrete) mask per bond.

    Subclasses implement :meth:`edge_logits`; :meth:`forward` turns logits into a
    :class:`Selection` with one score and one sample per undirected bond.

    Hyperparameters (``selector.*``): ``tau`` temperature; ``hard``
    straight-through hard samples (PrunE) or soft concrete samples (GSAT);
    ``sample_per``: one sample per undirected bond, shared by its two directed
    edges (``bond``, default), or one per directed edge (``edge``, the official
    code's ``F.gumbel_softmax`` over all of ``edge_index``); ``eval_mode`` the
    evaluation rule:

    * ``threshold`` (default): keep an edge iff :math:`p_{ij} > 0.5`, the most
      likely mask under the selector's Bernoulli model. Deterministic.
    * ``soft``: ``edge_weight = p``. Deterministic.
    * ``sample``: a hard sample as in training (the official code's
      evaluation), predictions averaged over ``eval_samples`` draws. Its noise
      is not the global RNG's but :func:`~grprune.selectors.base.graph_noise`:
      a counter-based hash of (evaluation seed, graph identity
      ``batch.index``, the edge's local node pair, draw), so a graph's mask
      and score do not depend on the other graphs of the batch, the batch
      size or the order.
    * ``budget``: keep the :math:`\\lceil \\eta\\, U_G \\rceil` most probable
      bonds of each graph (:math:`U_G` its bonds, :math:`\\eta` =
      ``eval_budget``, by default the size constraint's ``reg.size.eta``), so that
      the budget of L_e (Eq. 3) also decides what evaluation keeps.
      Deterministic (ties: the earlier bond).
    """


    class Hparams(Selector.Hparams):
        tau: float = hparam(1.0, "temperature of the Gumbel (binary concrete) relaxation, "
                                 "paper Eq. 2", low=0.0, low_open=True)
        hard: bool = hparam(True, "straight-through hard samples (true) or soft concrete "
                                  "samples")
        sample_per: str = hparam("bond", "one Gumbel sample per bond (both directions) or per "
                                         "directed edge (official code)", choices=SAMPLE_UNITS)
        eval_mode: str = hparam("threshold", "edge mask at evaluation (official code: sample)",
                                choices=EVAL_MODES)
        eval_samples: int = hparam(1, "with eval_mode=sample: predictions averaged over this "
                                      "many draws", low=1)
        eval_budget: float = hparam(0.0, "with eval_mode=budget: fraction of each graph's "
                                         "bonds kept (0 = reg.size.eta)", low=0.0, high=1.0)

    hp: Hparams

    @property
    def eval_draws(self) -> int:
        """``eval_samples`` with ``eval_mode=sample``, else 1."""
        return max(1, self.hp.eval_samples) if self.hp.eval_mode == "sample" else 1

    @abstractmethod
    def edge_logits(self, batch: GraphBatch) -> Tensor:
        """Per-directed-edge logits, shape (E,). Need not be symmetric."""

    def forward(self, batch: GraphBatch) -> Selection:
        """Score, symmetrise per bond and sample (training) or apply ``eval_mode``."""
        raw = self.edge_logits(batch)
        # one score per undirected bond: mean of its two directions
        bond_logits = batch.segment_mean(raw, "bond")
        logits = batch.gather(bond_logits, "bond")
        prob = torch.sigmoid(logits)
        tau, mode = self.hp.tau, self.hp.eval_mode
        relaxed = None
        if self.training or mode == "sample":
            hard = self.hp.hard
            per_bond = self.hp.sample_per != "edge"
            noise = None  # training: the global RNG
            if not self.training:  # evaluation: noise keyed by (seed, graph, edge, draw)
                noise = graph_noise(batch, per_bond, self.eval_seed, self.eval_draw(batch),
                                    num_bonds=bond_logits.shape[0])
            if not per_bond:
                weight, relaxed = concrete_sample(logits, tau, hard, noise)
            else:
                bond_sample, bond_relaxed = concrete_sample(bond_logits, tau, hard, noise)
                weight = batch.gather(bond_sample, "bond")
                relaxed = batch.gather(bond_relaxed, "bond")
        elif mode == "threshold":
            weight = (prob > 0.5).to(prob.dtype)
        elif mode == "budget":
            weight = budget_mask(bond_logits, batch, self.hp.eval_budget)[batch.bond]
            weight = weight.to(prob.dtype)
        else:
            weight = prob
        return Selection(edge_logits=logits, edge_prob=prob, edge_weight=weight,
                         relaxed=relaxed, tau=tau)


class GNNGumbelSelector(GumbelSelector):
    """Node embeddings from a GNN, an edge MLP on them, Gumbel sampling.

    .. math::
        h_v = \\mathrm{GNN}(v \\mid G),\\qquad
        w_{ij} = \\tfrac12\\big(\\mathrm{MLP}(h_i \\| h_j \\| h_i{+}h_j)
                 + \\mathrm{MLP}(h_j \\| h_i \\| h_i{+}h_j)\\big)

    (paper Eq. 1, ``symmetrize="mean-logit"``: averaging the two directions gives
    both directions of a bond one logit), or, with ``symmetrize="sum-input"``, the
    official code's :math:`w_{ij} = \\mathrm{MLP}\\big((h_i \\| h_j \\| h_i{+}h_j) +
    (h_j \\| h_i \\| h_i{+}h_j)\\big)` (``modelNew/prune.py``, ``learn_edge_weight``;
    its two-logit softmax is this one logit's sigmoid). The GNN is the registered
    encoder ``encoder_name`` with its own atom/bond embeddings, ``layers`` layers,
    ``hidden`` width, ``dropout``, ``layer_relu`` and ``init`` as in the encoder.
    """

    encoder_name = "gin"

    class Hparams(GumbelSelector.Hparams):
        layers: int = hparam(2, "GNN layers of the selector (paper: 2 or 3)", low=1, high=64,
                             search=(2, 3))
        hidden: int = hparam(64, "hidden width of the selector", low=1, high=8192)
        dropout: float = hparam(0.0, "dropout inside the selector GNN", low=0.0, high=1.0,
                                high_open=True)
        virtual_node: bool = hparam(False, "virtual node in the selector GNN")
        symmetrize: str = hparam("mean-logit", "one logit per bond: mean of the MLP on both "
                                               "orders (paper Eq. 1) or the MLP of their sum "
                                               "(sum-input, official code)",
                                 choices=("mean-logit", "sum-input"))
        layer_relu: bool = hparam(True, "ReLU between the selector GNN's layers (official "
                                        "code: none)")
        init: str = hparam("torch", "Linear initialisation of the selector GNN: torch or "
                                    "xavier (official)", choices=("torch", "xavier"))

    hp: Hparams

    def __init__(self, feature_kind: str = "ogb", node_dim: int = 0, edge_dim: int = 0,
                 **hparams) -> None:
        super().__init__(feature_kind, node_dim, edge_dim, **hparams)
        hp = self.hp
        self.gnn = ENCODERS.make(self.encoder_name, feature_kind=feature_kind,
                                 node_dim=node_dim, edge_dim=edge_dim,
                                 layers=hp.layers, hidden=hp.hidden,
                                 dropout=hp.dropout, virtual_node=hp.virtual_node,
                                 layer_relu=hp.layer_relu, init=hp.init)
        d = hp.hidden
        self.edge_mlp = nn.Sequential(nn.Linear(3 * d, 2 * d), nn.ReLU(), nn.Linear(2 * d, 1))

    def edge_logits(self, batch: GraphBatch) -> Tensor:
        """Directed-edge logits ``MLP(h_src || h_dst || h_src + h_dst)``, shape (E,).

        The first linear layer is applied per node, not per edge: with its weight
        split as ``[W_s | W_d | W_+]``,
        ``W_s h_i + W_d h_j + W_+ (h_i + h_j) = (W_s + W_+) h_i + (W_d + W_+) h_j``,
        so one (N, D) x (D, 4D) product and a gather replace an (E, 3D) x (3D, 2D)
        product on the concatenation (same function and gradients; E is about twice N
        on molecules, and this layer was the selector's largest cost).
        """
        h = self.gnn(batch)
        first, act, last = self.edge_mlp
        w_src, w_dst, w_sum = cast(Tensor, first.weight).chunk(3, dim=1)  # each (2D, D)
        bias = cast(Tensor, first.bias)
        if self.hp.symmetrize == "sum-input":
            # MLP((h_i||h_j||h_i+h_j) + (h_j||h_i||h_i+h_j)) = MLP(u||u||2u), u = h_i + h_j
            proj = h @ (w_src + w_dst + 2 * w_sum).t()  # (N, 2D)
            z = batch.gather(proj, "src") + batch.gather(proj, "dst") + bias
        else:
            proj = h @ torch.cat([w_src + w_sum, w_dst + w_sum], dim=0).t()  # (N, 4D)
            from_src, from_dst = proj.chunk(2, dim=1)
            z = batch.gather(from_src, "src") + batch.gather(from_dst, "dst") + bias
        return last(act(z)).squeeze(-1)


@SELECTORS.register("gumbel-gin")
class GumbelGINSelector(GNNGumbelSelector):
    """PrunE's selector t(.) with a GIN (paper default)."""

    encoder_name = "gin"


@SELECTORS.register("gumbel-gcn")
class GumbelGCNSelector(GNNGumbelSelector):
    """PrunE's selector t(.) with a GCN (the paper's search includes it)."""

    encoder_name = "gcn"
