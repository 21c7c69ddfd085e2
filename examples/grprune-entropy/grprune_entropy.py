"""An example grprune plugin: the ``entropy`` regularizer (see README.md)."""

import torch
from torch import Tensor

from grprune.regularizers import Regularizer, StepContext


class EntropyPenalty(Regularizer):
    """Mean binary entropy of the selector's edge probabilities.

    .. math:: H = -\\frac1E \\sum_{ij} \\big[p_{ij} \\log p_{ij} + (1 - p_{ij}) \\log(1 - p_{ij})\\big]

    Minimising it pushes every keep probability towards 0 or 1.
    """

    requires = frozenset({"selector"})  # grprune adds a learned selector (gumbel-gin)
    defaults = {"weight": 0.1, "eps": 1e-6}
    help = {"weight": "weight of the entropy term",
            "eps": "probabilities are clamped to [eps, 1 - eps] before the logs"}

    def loss(self, ctx: StepContext) -> Tensor:
        p = ctx.selection.edge_prob.clamp(self.hparams["eps"], 1 - self.hparams["eps"])
        if p.numel() == 0:
            return p.sum()  # 0 with a gradient path
        return -(p * torch.log(p) + (1 - p) * torch.log1p(-p)).mean()
