"""Subgraph selector interface: a batch in, a :class:`Selection` (edge logits, keep
probabilities, the edge mask the encoder consumes) out."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from grprune.batch import GraphBatch
from grprune.errors import GrpruneError
from grprune.hparams import Configurable
from grprune.ops import bond_value, top_fraction_in_segment
from grprune.registry import Registry

SELECTORS = Registry("selector", entry_point_group="grprune.selectors")

#: evaluation rules for the edge mask, see :class:`~grprune.selectors.gumbel.GumbelSelector`
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
    """A subgraph selector :math:`t(\\cdot)` (paper Section 4): a batch in, a :class:`Selection` out.

    Subclasses implement :meth:`forward` and declare their hyperparameters in
    ``params`` (``selector.*`` keys); :class:`~grprune.selectors.gumbel.GumbelSelector`
    adds the Gumbel (binary concrete) sampling of PrunE, so that a learned
    selector only scores edges.

    Attributes
    ----------
    learned : bool
        False for selectors without learned edge scores (e.g. random dropping);
        regularizers that need edge logits refuse them (``Regularizer.supports``).
    display_name : str or None
        The method's name in tables when this selector runs without regularizers
        (``DropEdge``); None: the registered name.
    table_order : float
        Position of that method among the rows of a results table (smaller first).
    """

    learned: ClassVar[bool] = True
    display_name: ClassVar[str | None] = None
    table_order: ClassVar[float] = math.inf
    params: ClassVar[dict] = {}

    def __init__(self, feature_kind: str = "ogb", node_dim: int = 0, edge_dim: int = 0,
                 **hparams) -> None:
        super().__init__()
        self.hparams = self.resolve_hparams(hparams, prefix="selector.")

    @abstractmethod
    def forward(self, batch: GraphBatch) -> Selection:
        """The selection for ``batch``: one entry per directed edge (E,)."""

    @property
    def eval_draws(self) -> int:
        """Forward passes whose predictions evaluation averages: ``eval_samples`` with
        ``eval_mode=sample``, else 1."""
        if self.hparams.get("eval_mode") != "sample":
            return 1
        return max(1, int(self.hparams.get("eval_samples", 1)))


def check_selection(selection: Any, batch: GraphBatch, name: str) -> Selection:
    """:meth:`Selection.validate` for the selector ``name``'s output on ``batch``.

    Raises
    ------
    GrpruneError
        If it is not a :class:`Selection` or fails validation; the message names
        the selector.
    """
    if not isinstance(selection, Selection):
        raise GrpruneError(f"selector {name!r} returned {type(selection).__name__}, "
                           f"not a Selection")
    try:
        return selection.validate(batch.src.numel())
    except (ValueError, TypeError, AttributeError, RuntimeError) as exc:
        raise GrpruneError(f"selector {name!r} returned an invalid Selection: {exc}") from None


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
    bond_graph = bond_value(batch.edge_graph, batch.bond, bond_score.shape[0])
    return top_fraction_in_segment(bond_score, bond_graph, batch.num_graphs, budget)
