"""DropEdge (Rong et al., ICLR 2020): random edge dropping, a selector without parameters."""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import Tensor

from grprune.batch import GraphBatch
from grprune.hparams import hparam
from grprune.selectors.base import SELECTORS, Selection, Selector


@SELECTORS.register("drop-edge", aliases=("dropedge",))
class DropEdgeSelector(Selector):
    """Drops each bond independently with probability ``rate`` in training; keeps all in evaluation.

    In training, per undirected bond :math:`b` (both directions together, via
    ``batch.bond``), a fresh draw every step:

    .. math::
        \\tilde A_{ij} = m_b, \\quad m_b \\sim \\mathrm{Bernoulli}(1 - \\text{rate})

    In evaluation (``eval_mode="full"``, default) every edge is kept, as
    DropEdge does; ``eval_mode="sample"`` drops edges as in training and the
    trainer averages predictions over ``eval_samples`` draws.

    The :class:`Selection` has constant ``edge_prob`` :math:`= 1 - \\text{rate}`
    and ``edge_logits`` :math:`= \\mathrm{logit}(1 - \\text{rate})` (clamped to
    :math:`\\pm 13.8` so that rate 0 stays finite), ``edge_weight`` the {0, 1}
    mask and ``relaxed`` None. No parameters and no gradient: ``learned`` is
    False, so regularizers that need a learned selector refuse it. Randomness
    comes from the global torch RNG (``torch.rand`` on the batch's device), so
    ``train.seed`` fixes the masks on CPU.

    Differences from the official code (DropEdge/DropEdge ``src/sample.py``
    ``randomedge_sampler``): it keeps exactly ``int(nnz * sampling_percent)``
    nonzeros of the adjacency chosen by a permutation, each direction on its
    own, once per epoch for the whole (node-classification) graph; here each
    bond is dropped independently with both directions together, per batch.
    The GCN encoder renormalises degrees from the mask, as DropEdge
    renormalises the adjacency. ``rate`` = 0.2 is our default for small
    molecules; the official scripts keep 30-40 % of the edges of citation
    graphs (``--sampling_percent 0.3``/``0.4``, i.e. rate 0.6-0.7).
    """

    learned: ClassVar[bool] = False
    display_name = "DropEdge"
    table_order = 40.0
    # DropEdge keeps every edge at evaluation; a preset's eval_mode describes PrunE's selector
    method_keys = frozenset({"eval_mode", "eval_samples"})

    class Hparams(Selector.Hparams):
        rate: float = hparam(0.2, "probability of dropping each bond in training", low=0.0,
                             high=1.0, high_open=True, search=(0.1, 0.2, 0.3))
        eval_mode: str = hparam("full", "full: keep every edge at evaluation (DropEdge); "
                                        "sample: drop as in training and average "
                                        "eval_samples draws", choices=("full", "sample"))
        eval_samples: int = hparam(1, "with eval_mode=sample: predictions averaged over this "
                                      "many draws", low=1)

    hp: Hparams

    @property
    def eval_draws(self) -> int:
        """``eval_samples`` with ``eval_mode=sample``, else 1."""
        return max(1, self.hp.eval_samples) if self.hp.eval_mode == "sample" else 1

    def edge_logits(self, batch: GraphBatch) -> Tensor:
        """The constant logit of the keep probability, shape (E,)."""
        p = 1.0 - self.hp.rate
        logit = math.log(p / (1.0 - p)) if p < 1.0 else math.inf
        logit = max(-13.8, min(13.8, logit))
        return torch.full((batch.src.numel(),), logit, device=batch.device)

    def forward(self, batch: GraphBatch) -> Selection:
        """Bernoulli bond mask in training (or ``eval_mode="sample"``), all ones otherwise."""
        logits = self.edge_logits(batch)
        prob = torch.full_like(logits, 1.0 - self.hp.rate)
        if self.training or self.hp.eval_mode == "sample":
            keep = torch.rand(batch.num_bonds, device=batch.device) >= self.hp.rate
            weight = keep.to(logits.dtype)[batch.bond]
        else:
            weight = torch.ones_like(logits)
        return Selection(edge_logits=logits, edge_prob=prob, edge_weight=weight)
