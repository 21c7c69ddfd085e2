"""Epsilon-probability alignment L_s (PrunE, paper Eq. 4)."""

from __future__ import annotations

import torch
from torch import Tensor

from grprune.ops import rank_in_segment
from grprune.hparams import Param
from grprune.regularizers.base import REGULARIZERS, Regularizer, StepContext


def _parse_eps(text: str) -> float | str:
    return "auto" if text.strip().lower() == "auto" else float(text)


@REGULARIZERS.register("eps-align", aliases=("epsilon-align",))
class EpsilonAlignment(Regularizer):
    """Pulls the lowest-probability edges towards a small probability :math:`\\epsilon`.

    ``form="paper"`` (default), paper Eq. 4, per graph then averaged:

    .. math::
        \\mathcal L_s = \\frac{1}{|\\mathcal B'|} \\sum_{G \\in \\mathcal B'}
        \\frac{1}{|\\mathcal E_s|} \\sum_{e_{ij} \\in \\mathcal E_s} |p_{ij} - \\epsilon|

    where :math:`\\mathcal E_s` holds the :math:`k_G = \\max(1, \\lfloor K\\% \\cdot
    |\\mathcal E_G| \\rfloor)` directed edges of :math:`G` with the lowest
    :math:`p_{ij} = \\sigma(w_{ij})` (``selection.edge_prob``, without Gumbel
    noise), :math:`\\epsilon = 1/|\\mathcal E_G|` by default (``eps="auto"``),
    and :math:`\\mathcal B'` the graphs with at least one edge.

    ``form="official"``, the official PyG code: over the whole batch, the
    :math:`k = \\lfloor K\\% \\cdot E \\rfloor` lowest probabilities,
    :math:`\\tfrac12 \\sum |p - 1/k|` (a sum, not a mean, with
    :math:`\\epsilon = 1/k` unless ``eps`` is a number).

    Defaults are the paper's molbbbp setting: ``k=50`` (percent), ``weight``
    (:math:`\\lambda_2`) = 0.01.
    """

    requires = frozenset({"selector"})
    pads = True
    name_order = 1.0
    params = {
        "weight": Param(0.01, "lambda_2, weight of L_s", low=0.0, search=(0.1, 0.01, 0.001)),
        "k": Param(50.0, "K: percent of edges (lowest probability) aligned to eps", low=0.0,
                   high=100.0, low_open=True, search=(50.0, 70.0, 90.0)),
        "eps": Param("auto", "target probability; auto = 1/|E| per graph (paper), 1/k "
                             "(official)", low=0.0, high=1.0, parser=_parse_eps),
        "form": Param("paper", "paper: per-graph mean (Eq. 4); official: batch-level 0.5*sum",
                      choices=("paper", "official")),
    }

    def loss(self, ctx: StepContext) -> Tensor:
        sel = ctx.selection
        assert sel is not None  # requires a selector: supports() refuses a run without one
        batch, prob = ctx.batch, sel.edge_prob
        frac, eps = self.hparams["k"] / 100.0, self.hparams["eps"]
        if prob.numel() == 0:
            return prob.sum()
        if self.hparams["form"] == "official":
            prob = prob[:batch.num_real_edges]  # a padded batch's real edges come first
            k = int(prob.numel() * frac)
            if k == 0:
                return prob.sum() * 0.0
            lowest = torch.sort(prob).values[:k]
            target_p = 1.0 / k if eps == "auto" else float(eps)
            return 0.5 * (lowest - target_p).abs().sum()
        # per-graph lowest-K%, as a mask: no host synchronisation
        g = batch.edge_graph
        rank = rank_in_segment(prob.detach(), g, batch.num_graphs, counts=batch.num_edges)
        k_graph = torch.clamp((batch.num_edges.double() * frac + 1e-9).floor().long(), min=1)
        chosen = (rank < k_graph[g]).to(prob.dtype)
        if eps == "auto":
            target = 1.0 / batch.num_edges[g].to(prob.dtype)
        else:
            target = torch.full_like(prob, float(eps))
        per_graph = batch.segment_sum((prob - target).abs() * chosen, "edge_graph")
        has_edges, count = batch.graphs_with_edges(prob.dtype)  # shared with the size loss
        per_graph = per_graph / k_graph.to(prob.dtype)
        return (per_graph * has_edges).sum() / count
