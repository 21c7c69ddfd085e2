"""Graph size constraint L_e (PrunE, paper Eq. 3)."""

from __future__ import annotations

import torch
from torch import Tensor

from grprune.hparams import hparam
from grprune.regularizers.base import REGULARIZERS, Regularizer, StepContext


@REGULARIZERS.register("size", aliases=("edge-budget",))
class SizeConstraint(Regularizer):
    """Keeps the selected fraction of edges near the budget :math:`\\eta`.

    ``form="paper"`` (default), paper Eq. 3, per graph then averaged:

    .. math::
        \\mathcal L_e = \\frac{1}{|\\mathcal B'|} \\sum_{G \\in \\mathcal B'}
        \\Big(\\frac{\\sum_{(i,j) \\in \\mathcal E_G} \\tilde A_{ij}}{|\\mathcal E_G|} - \\eta\\Big)^2

    over the graphs :math:`\\mathcal B'` of the batch that have edges (a graph
    without edges has no kept fraction and is left out; a batch of such graphs
    gives 0). :math:`\\tilde A` is the sampled mask ``selection.edge_weight``
    and :math:`|\\mathcal E_G|` counts directed edges.

    ``form="official"``, the official PyG code: with :math:`r` the kept fraction
    of all directed edges of the batch,
    :math:`4(r - \\eta)` if :math:`r \\ge \\eta` else :math:`\\eta - r`
    (asymmetric and linear: keeping too much costs 4x more than too little).

    Defaults are the paper's molbbbp setting: ``eta=0.85``, ``weight``
    (:math:`\\lambda_1`) = 10.

    Examples
    --------
    One graph keeps 1 of 2 edges, eta = 0.5 -> 0.
    """

    requires = frozenset({"selector"})
    pads = True
    name_order = 0.0

    class Hparams(Regularizer.Hparams):
        weight: float = hparam(10.0, "lambda_1, weight of L_e", low=0.0, search=(10.0, 40.0))
        eta: float = hparam(0.85, "edge budget: target fraction of kept edges", low=0.0,
                            high=1.0, search=(0.5, 0.75, 0.85))
        form: str = hparam("paper", "paper: per-graph squared error (Eq. 3); official: "
                                    "batch-level asymmetric linear",
                           choices=("paper", "official"))

    hp: Hparams

    def loss(self, ctx: StepContext) -> Tensor:
        sel = ctx.selection
        assert sel is not None  # requires a selector: supports() refuses a run without one
        batch, weight = ctx.batch, sel.edge_weight
        eta = self.hp.eta
        if self.hp.form == "official":
            if weight.numel() == 0:
                return weight.sum()
            r = (weight.mean() if batch.edge_mask is None
                 else (weight * batch.edge_mask).sum() / batch.edge_mask.sum().clamp_min(1))
            return torch.where(r >= eta, 4.0 * (r - eta), eta - r)
        # masked mean over the graphs with edges, written without a host synchronisation
        kept = batch.segment_sum(weight, "edge_graph")
        has_edges, count = batch.graphs_with_edges(weight.dtype)  # shared with eps-align
        ratio = kept / batch.num_edges.clamp_min(1).to(weight.dtype)
        return (((ratio - eta) ** 2) * has_edges).sum() / count
