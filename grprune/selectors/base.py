"""Subgraph selector interface: edge logits -> probabilities -> sampled edge mask."""

from __future__ import annotations

from typing import ClassVar

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from grprune.batch import GraphBatch, rank_in_segment
from grprune.hparams import Configurable, Param
from grprune.registry import Registry

SELECTORS = Registry("selector", entry_point_group="grprune.selectors")

#: evaluation rules for the edge mask, see :meth:`Selector.forward`
EVAL_MODES = ("threshold", "soft", "sample", "budget")
#: what one Gumbel sample covers, ``selector.sample_per``
SAMPLE_UNITS = ("bond", "edge")


@dataclass
class Selection:
    """What a selector chose for one batch.

    Attributes
    ----------
    edge_logits : Tensor of shape (E,)
        Logit :math:`w_{ij}` (paper Eq. 1); both directions of a bond share it.
    edge_prob : Tensor of shape (E,), values in (0, 1)
        Keep probability :math:`p_{ij} = \\sigma(w_{ij})`.
    edge_weight : Tensor of shape (E,), values in [0, 1]
        The mask the encoder consumes (1 = edge kept). In training a hard
        straight-through sample (values exactly 0 or 1, gradient of the relaxed
        sample); in evaluation per the selector's ``eval_mode``.
    relaxed : Tensor of shape (E,) or None
        The relaxed (soft) concrete sample behind ``edge_weight`` in training.
    tau : float
        Temperature of the concrete relaxation.
    """

    edge_logits: Tensor
    edge_prob: Tensor
    edge_weight: Tensor
    relaxed: Tensor | None = None
    tau: float = 1.0

    def validate(self, num_edges: int | None = None) -> "Selection":
        """Check shapes and ranges; returns ``self``.

        Raises
        ------
        ValueError
            On a shape mismatch, a non-finite logit or a value outside [0, 1].
        """
        e = self.edge_logits.shape
        for name in ("edge_prob", "edge_weight"):
            if getattr(self, name).shape != e:
                raise ValueError(f"{name} has shape {tuple(getattr(self, name).shape)}, "
                                 f"edge_logits {tuple(e)}")
        if num_edges is not None and e != (num_edges,):
            raise ValueError(f"selection covers {tuple(e)} edges, the batch has {num_edges}")
        if not torch.isfinite(self.edge_logits).all():
            raise ValueError("edge_logits contain NaN or inf")
        for name in ("edge_prob", "edge_weight"):
            t = getattr(self, name)
            if t.numel() and (t.min() < 0 or t.max() > 1):
                raise ValueError(f"{name} outside [0, 1]")
        return self


def concrete_sample(logits: Tensor, tau: float, hard: bool, noise: Tensor | None = None
                    ) -> tuple[Tensor, Tensor]:
    """Binary concrete (Gumbel) sample, paper Eq. 2.

    .. math::
        \\tilde p = \\sigma\\big((\\log u - \\log(1-u) + w) / \\tau\\big),\\quad
        u \\sim \\mathcal U(0, 1), \\qquad
        \\tilde A = \\mathbb 1[\\tilde p > 0.5] - \\mathrm{sg}(\\tilde p) + \\tilde p

    (the paper prints :math:`1 - \\mathrm{sg}(p) + p`; the hard indicator is the
    standard straight-through form and what the official code does.)

    Parameters
    ----------
    logits : Tensor of shape (M,)
    tau : float
        Temperature (> 0). It does not change the hard sample, only its gradient.
    hard : bool
        Straight-through hard sample if True, relaxed sample otherwise.
    noise : Tensor of shape (M,), optional
        Uniform noise ``u``; drawn from the global RNG if omitted.

    Returns
    -------
    (sample, relaxed) : two Tensors of shape (M,)
    """
    if noise is None:
        noise = torch.rand_like(logits)
    noise = noise.clamp(1e-10, 1 - 1e-10)
    relaxed = torch.sigmoid((torch.log(noise) - torch.log1p(-noise) + logits) / tau)
    if not hard:
        return relaxed, relaxed
    hard_sample = (relaxed > 0.5).to(relaxed.dtype)
    return hard_sample - relaxed.detach() + relaxed, relaxed


class Selector(nn.Module, Configurable, ABC):
    """Learned subgraph selector :math:`t(\\cdot)` (paper Section 4).

    Subclasses implement :meth:`edge_logits`; this class turns logits into a
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
    * ``sample``: a fresh hard sample as in training (the official code's
      evaluation); stochastic, so predictions are averaged over
      ``eval_samples`` draws by the trainer.
    * ``budget``: keep the :math:`\\lceil \\eta\\, U_G \\rceil` most probable
      bonds of each graph (:math:`U_G` its bonds, :math:`\\eta` =
      ``eval_budget``, by default the size constraint's ``reg.size.eta``), so that
      the budget of L_e (Eq. 3) also decides what evaluation keeps.
      Deterministic (ties: the earlier bond).
    """

    #: False for selectors without learned edge scores (e.g. random dropping);
    #: regularizers that require a selector refuse them
    learned: ClassVar[bool] = True
    params = {
        "tau": Param(1.0, "temperature of the Gumbel (binary concrete) relaxation, paper Eq. 2",
                     low=0.0, low_open=True),
        "hard": Param(True, "straight-through hard samples (true) or soft concrete samples"),
        "sample_per": Param("bond", "one Gumbel sample per bond (both directions) or per "
                                    "directed edge (official code)", choices=SAMPLE_UNITS),
        "eval_mode": Param("threshold", "edge mask at evaluation (official code: sample)",
                           choices=EVAL_MODES),
        "eval_samples": Param(1, "with eval_mode=sample: predictions averaged over this many "
                                 "draws", low=1),
        "eval_budget": Param(0.0, "with eval_mode=budget: fraction of each graph's bonds kept "
                                  "(0 = reg.size.eta)", low=0.0, high=1.0),
    }

    def __init__(self, feature_kind: str = "ogb", node_dim: int = 0, edge_dim: int = 0,
                 **hparams) -> None:
        super().__init__()
        self.hparams = self.resolve_hparams(hparams, prefix="selector.")

    @abstractmethod
    def edge_logits(self, batch: GraphBatch) -> Tensor:
        """Per-directed-edge logits, shape (E,). Need not be symmetric."""

    def forward(self, batch: GraphBatch) -> Selection:
        """Score, symmetrise per bond and sample (training) or apply ``eval_mode``."""
        raw = self.edge_logits(batch)
        num_bonds = batch.num_bonds
        # one score per undirected bond: mean of its two directions
        bond_logits = raw.new_zeros(num_bonds).index_add_(0, batch.bond, raw)
        count = raw.new_zeros(num_bonds).index_add_(0, batch.bond, torch.ones_like(raw))
        bond_logits = bond_logits / count.clamp_min(1)
        logits = bond_logits[batch.bond]
        prob = torch.sigmoid(logits)
        tau, mode = self.hparams["tau"], self.hparams["eval_mode"]
        relaxed = None
        if self.training or mode == "sample":
            hard = self.hparams["hard"]
            if self.hparams["sample_per"] == "edge":
                weight, relaxed = concrete_sample(logits, tau, hard)
            else:
                bond_sample, bond_relaxed = concrete_sample(bond_logits, tau, hard)
                weight, relaxed = bond_sample[batch.bond], bond_relaxed[batch.bond]
        elif mode == "threshold":
            weight = (prob > 0.5).to(prob.dtype)
        elif mode == "budget":
            weight = budget_mask(bond_logits, batch, self.hparams["eval_budget"])[batch.bond]
            weight = weight.to(prob.dtype)
        else:
            weight = prob
        return Selection(edge_logits=logits, edge_prob=prob, edge_weight=weight,
                         relaxed=relaxed, tau=tau)


def budget_mask(bond_score: Tensor, batch: GraphBatch, budget: float) -> Tensor:
    """Keep the :math:`\\lceil \\eta\\, U_G \\rceil` highest-scored bonds of each graph.

    Parameters
    ----------
    bond_score : Tensor of shape (U,)
        A score per bond of the batch (the logit; any increasing function of
        :math:`p` ranks the same).
    batch : GraphBatch
    budget : float
        :math:`\\eta` in [0, 1].

    Returns
    -------
    Tensor of shape (U,), bool
        True for a kept bond. Ties keep the earlier bond.
    """
    bond_graph = batch.edge_graph.new_zeros(bond_score.shape[0]).scatter_(
        0, batch.bond, batch.edge_graph)
    rank = rank_in_segment(bond_score, bond_graph, batch.num_graphs, descending=True)
    per_graph = bond_graph.new_zeros(batch.num_graphs).index_add_(
        0, bond_graph, torch.ones_like(bond_graph))
    keep = torch.ceil(per_graph.double() * budget - 1e-9).long()
    return rank < keep[bond_graph]
