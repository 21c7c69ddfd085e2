"""An example grprune plugin: the ``entropy`` regularizer (see README.md)."""

import torch
from torch import Tensor

from grprune.hparams import hparam
from grprune.regularizers import Regularizer, StepContext


class EntropyPenalty(Regularizer):
    """Mean binary entropy of the selector's edge probabilities.

    .. math:: H = -\\frac1E \\sum_{ij} \\big[p_{ij} \\log p_{ij} + (1 - p_{ij}) \\log(1 - p_{ij})\\big]

    Minimising it pushes every keep probability towards 0 or 1.
    """

    requires = frozenset({"selector"})  # grprune adds a learned selector (gumbel-gin)

    class Hparams(Regularizer.Hparams):  # -H reg.entropy.weight=0.05
        weight: float = hparam(0.1, "weight of the entropy term", low=0.0)
        eps: float = hparam(1e-6, "probabilities are clamped to [eps, 1 - eps] before the "
                                  "logs", low=0.0, high=0.5)

    hp: Hparams  # typed: self.hp.eps is a float

    def loss(self, ctx: StepContext) -> Tensor:
        assert ctx.selection is not None  # requires a selector: supports() refuses a run without
        p = ctx.selection.edge_prob.clamp(self.hp.eps, 1 - self.hp.eps)
        if p.numel() == 0:
            return p.sum()  # 0 with a gradient path
        return -(p * torch.log(p) + (1 - p) * torch.log1p(-p)).mean()
