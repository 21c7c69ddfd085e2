"""Gumbel selectors: a small GNN scores each edge, paper Eqs. 1-2."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from grprune.batch import GraphBatch
from grprune.encoders.base import ENCODERS
from grprune.hparams import Param
from grprune.selectors.base import SELECTORS, Selector


class GumbelSelector(Selector):
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
    params = {
        **Selector.params,
        "layers": Param(2, "GNN layers of the selector (paper: 2 or 3)", low=1),
        "hidden": Param(64, "hidden width of the selector", low=1),
        "dropout": Param(0.0, "dropout inside the selector GNN", low=0.0, high=1.0,
                         high_open=True),
        "virtual_node": Param(False, "virtual node in the selector GNN"),
        "symmetrize": Param("mean-logit", "one logit per bond: mean of the MLP on both orders "
                                          "(paper Eq. 1) or the MLP of their sum (sum-input, "
                                          "official code)",
                            choices=("mean-logit", "sum-input")),
        "layer_relu": Param(True, "ReLU between the selector GNN's layers (official code: "
                                  "none)"),
        "init": Param("torch", "Linear initialisation of the selector GNN: torch or xavier "
                               "(official)", choices=("torch", "xavier")),
    }

    def __init__(self, feature_kind: str = "ogb", node_dim: int = 0, edge_dim: int = 0,
                 **hparams) -> None:
        super().__init__(feature_kind, node_dim, edge_dim, **hparams)
        hp = self.hparams
        self.gnn = ENCODERS.make(self.encoder_name, feature_kind=feature_kind,
                                 node_dim=node_dim, edge_dim=edge_dim,
                                 layers=hp["layers"], hidden=hp["hidden"],
                                 dropout=hp["dropout"], virtual_node=hp["virtual_node"],
                                 layer_relu=hp["layer_relu"], init=hp["init"])
        d = hp["hidden"]
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
        w_src, w_dst, w_sum = first.weight.chunk(3, dim=1)  # each (2D, D)
        if self.hparams["symmetrize"] == "sum-input":
            # MLP((h_i||h_j||h_i+h_j) + (h_j||h_i||h_i+h_j)) = MLP(u||u||2u), u = h_i + h_j
            proj = h @ (w_src + w_dst + 2 * w_sum).t()  # (N, 2D)
            z = proj[batch.src] + proj[batch.dst] + first.bias
        else:
            proj = h @ torch.cat([w_src + w_sum, w_dst + w_sum], dim=0).t()  # (N, 4D)
            from_src, from_dst = proj.chunk(2, dim=1)
            z = from_src[batch.src] + from_dst[batch.dst] + first.bias
        return last(act(z)).squeeze(-1)


@SELECTORS.register("gumbel-gin")
class GumbelGINSelector(GumbelSelector):
    """PrunE's selector t(.) with a GIN (paper default)."""

    encoder_name = "gin"


@SELECTORS.register("gumbel-gcn")
class GumbelGCNSelector(GumbelSelector):
    """PrunE's selector t(.) with a GCN (the paper's search includes it)."""

    encoder_name = "gcn"
