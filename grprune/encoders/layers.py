"""Message-passing layers that take an explicit ``edge_weight`` (edge mask)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from grprune.batch import GraphBatch
from grprune.determinism import serial
from grprune.encoders.base import EdgeEmbedding, mlp, run_masked


#: where the edge mask multiplies a message, ``encoder.edge_mask``
EDGE_MASKS = ("after-relu", "before-relu")


def masked_relu(msg: Tensor, edge_weight: Tensor | None, edge_mask: str) -> Tensor:
    """``ReLU(msg) * w`` (``after-relu``) or ``ReLU(msg * w)`` (``before-relu``).

    The two are equal for ``w >= 0``; their gradients with respect to ``w`` differ where
    ``w = 0``: :math:`\\mathrm{ReLU}(x)` after the ReLU, 0 before it (a pruned edge then
    gets no gradient from the loss). ``before-relu`` is the official PrunE code
    (``modelNew/conv.py``, ``GINConv.message``).

    Shapes: ``msg (E, D)``, ``edge_weight (E,)`` or None -> ``(E, D)``.
    """
    if edge_weight is None:
        return torch.relu(msg)
    w = edge_weight.unsqueeze(-1)
    return torch.relu(msg * w) if edge_mask == "before-relu" else torch.relu(msg) * w


class WeightedGINEConv(nn.Module):
    """GIN convolution with bond features and an edge mask (OGB's ``GINConv``).

    .. math::
        h_v' = \\mathrm{MLP}\\Big((1+\\epsilon) h_v + \\sum_{u \\in N(v)}
               \\tilde A_{uv}\\, \\mathrm{ReLU}(h_u + e_{uv})\\Big)

    where :math:`\\tilde A_{uv}` is ``edge_weight`` (paper Eq. 2's sampled
    adjacency) and :math:`e_{uv}` the bond embedding; with ``edge_mask="before-relu"``
    the message is :math:`\\mathrm{ReLU}(\\tilde A_{uv}(h_u + e_{uv}))` (see
    :func:`masked_relu`).

    Shapes: ``h (N, D)``, ``edge_weight (E,)`` -> ``(N, D)``.
    """

    def __init__(self, dim: int, edge_kind: str, edge_dim: int = 0,
                 edge_mask: str = "after-relu") -> None:
        super().__init__()
        self.edge_embedding = EdgeEmbedding(edge_kind, dim, edge_dim)
        self.mlp = mlp([dim, 2 * dim, dim])
        self.eps = nn.Parameter(torch.zeros(1))
        self.edge_mask = edge_mask

    def forward(self, h: Tensor, batch: GraphBatch, edge_weight: Tensor | None) -> Tensor:
        msg = batch.gather(h, "src")
        e = self.edge_embedding(batch)
        if e is not None:
            msg = msg + e
        msg = masked_relu(msg, edge_weight, self.edge_mask)
        agg = batch.segment_sum(msg, "dst")
        # eps's gradient sums all N x D products to one number, a sum whose order depends on
        # the thread count (two-pass reduction): its backward node runs on one thread
        own = serial((1 + self.eps) * h)
        return run_masked(self.mlp, own + agg, batch.row_mask("node", h.dtype))


class WeightedGCNConv(nn.Module):
    """GCN convolution with bond features and an edge mask (OGB's ``GCNConv``).

    .. math::
        h_v' = \\sum_{u \\in N(v)} \\frac{\\tilde A_{uv}}{\\sqrt{d_u d_v}}
               \\mathrm{ReLU}(W h_u + e_{uv}) + \\frac{\\mathrm{ReLU}(W h_v + r)}{d_v},
        \\quad d_v = 1 + \\sum_{u} \\tilde A_{uv}

    Shapes: ``h (N, D)``, ``edge_weight (E,)`` -> ``(N, D)``.
    """

    def __init__(self, dim: int, edge_kind: str, edge_dim: int = 0,
                 edge_mask: str = "after-relu") -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        self.root = nn.Parameter(torch.zeros(1, dim))
        self.edge_embedding = EdgeEmbedding(edge_kind, dim, edge_dim)
        self.edge_mask = edge_mask

    def forward(self, h: Tensor, batch: GraphBatch, edge_weight: Tensor | None) -> Tensor:
        x = self.linear(h)
        w = edge_weight if edge_weight is not None else x.new_ones(batch.src.shape[0])
        deg = 1.0 + batch.segment_sum(w, "dst")
        msg = batch.gather(x, "src")
        e = self.edge_embedding(batch)
        if e is not None:
            msg = msg + e
        msg = masked_relu(msg, edge_weight, self.edge_mask)
        norm = batch.gather(deg, "src").rsqrt() * batch.gather(deg, "dst").rsqrt()
        msg = msg * norm.unsqueeze(-1)
        return batch.segment_sum(msg, "dst") + torch.relu(x + self.root) / deg.unsqueeze(-1)
