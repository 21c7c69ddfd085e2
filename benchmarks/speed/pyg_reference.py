"""A plain PyTorch Geometric implementation of ERM and PrunE, the yardstick for grprune's speed.

The same model as grprune's with ``-H selector.symmetrize=sum-input -H
selector.sample_per=edge`` (the official code's edge logit and sampling, which a plain PyG
implementation writes most directly): OGB's atom and bond encoders; a GIN encoder of
``layers`` layers with bond features (OGB's ``GINConv``: ReLU(h_u + e_uv) * w_uv, summed,
then MLP((1 + eps) h_v + sum)), BatchNorm, ReLU between layers and dropout; sum readout and
a 2-layer head. PrunE adds a 2-layer GIN selector with its own encoders, the edge logit
MLP((h_i || h_j || h_i + h_j) + (h_j || h_i || h_i + h_j)), a hard straight-through Gumbel
sample per directed edge, and the paper's L_e and L_s (per graph; Eqs. 3-4).

It uses torch_geometric's ``MessagePassing``, ``global_add_pool``, ``scatter`` and
``DataLoader`` on ``Data`` objects built once from the dataset. Only the benchmarks use it
(``pip install torch_geometric``); grprune never imports it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def pyg_data(dataset) -> list:
    """The dataset's graphs as a list of ``torch_geometric.data.Data`` (x, edge_index,
    edge_attr, y)."""
    from torch_geometric.data import Data
    out = []
    for i in range(len(dataset)):
        g, y, _, _ = dataset[i]
        src, dst = g.edges()
        out.append(Data(x=g.ndata["feat"], edge_index=torch.stack([src, dst]),
                        edge_attr=g.edata["feat"], y=torch.tensor([y])))
    return out


def _conv_class():
    from torch_geometric.nn import MessagePassing

    class GINConv(MessagePassing):
        """OGB's GIN convolution with bond features and an edge weight."""

        def __init__(self, dim: int) -> None:
            super().__init__(aggr="add")
            from ogb.graphproppred.mol_encoder import BondEncoder
            self.bond_encoder = BondEncoder(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.BatchNorm1d(2 * dim), nn.ReLU(),
                                     nn.Linear(2 * dim, dim))
            self.eps = nn.Parameter(torch.zeros(1))

        def forward(self, x, edge_index, edge_attr, edge_weight=None):
            e = self.bond_encoder(edge_attr)
            return self.mlp((1 + self.eps) * x + self.propagate(edge_index, x=x, e=e,
                                                                 w=edge_weight))

        def message(self, x_j, e, w):
            m = F.relu(x_j + e)
            return m if w is None else m * w.view(-1, 1)

    return GINConv


class GNN(nn.Module):
    """Atom encoder, ``layers`` GIN convolutions with BatchNorm, ReLU between, dropout."""

    def __init__(self, layers: int, dim: int, dropout: float) -> None:
        super().__init__()
        from ogb.graphproppred.mol_encoder import AtomEncoder
        conv = _conv_class()
        self.atom_encoder = AtomEncoder(dim)
        self.convs = nn.ModuleList(conv(dim) for _ in range(layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(dim) for _ in range(layers))
        self.dropout = dropout

    def forward(self, data, edge_weight=None):
        h = self.atom_encoder(data.x)
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            h = norm(conv(h, data.edge_index, data.edge_attr, edge_weight))
            if i < len(self.convs) - 1:
                h = F.relu(h)
            h = F.dropout(h, self.dropout, self.training)
        return h


class Model(nn.Module):
    """ERM (``prune=False``) or PrunE: encoder, sum readout, head; with the selector."""

    def __init__(self, prune: bool, layers: int = 4, dim: int = 64, dropout: float = 0.5,
                 selector_layers: int = 2, tau: float = 1.0) -> None:
        super().__init__()
        self.encoder = GNN(layers, dim, dropout)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 2))
        self.prune, self.tau = prune, tau
        if prune:
            self.selector = GNN(selector_layers, dim, 0.0)
            self.edge_mlp = nn.Sequential(nn.Linear(3 * dim, 2 * dim), nn.ReLU(),
                                          nn.Linear(2 * dim, 1))

    def forward(self, data):
        from torch_geometric.nn import global_add_pool
        weight = prob = None
        if self.prune:
            h = self.selector(data)
            s, t = h[data.edge_index[0]], h[data.edge_index[1]]
            logit = self.edge_mlp(torch.cat([s, t, s + t], 1) + torch.cat([t, s, s + t], 1))
            logit = logit.squeeze(-1)
            prob = torch.sigmoid(logit)
            u = torch.rand_like(logit).clamp(1e-10, 1 - 1e-10)
            relaxed = torch.sigmoid((torch.log(u) - torch.log1p(-u) + logit) / self.tau)
            weight = (relaxed > 0.5).float() - relaxed.detach() + relaxed
        node = self.encoder(data, weight)
        return self.head(global_add_pool(node, data.batch)), weight, prob


def prune_losses(data, weight, prob, eta: float = 0.85, k: float = 50.0):
    """The paper's L_e and L_s per graph (Eqs. 3-4) with torch_geometric's ``scatter``."""
    from torch_geometric.utils import scatter
    edge_batch = data.batch[data.edge_index[0]]
    num_graphs = data.num_graphs
    num_edges = scatter(torch.ones_like(prob), edge_batch, dim_size=num_graphs, reduce="sum")
    kept = scatter(weight, edge_batch, dim_size=num_graphs, reduce="sum")
    has = num_edges > 0
    l_e = ((kept / num_edges.clamp_min(1) - eta) ** 2 * has).sum() / has.sum().clamp_min(1)
    order = torch.argsort(edge_batch.double() * 2 + prob.detach().double())
    sorted_batch = edge_batch[order]
    start = torch.cumsum(num_edges, 0) - num_edges
    rank = torch.arange(len(order), device=prob.device) - start[sorted_batch].long()
    k_graph = (num_edges * k / 100.0).floor().clamp_min(1)
    chosen = order[rank < k_graph[sorted_batch]]
    dev = (prob[chosen] - 1.0 / num_edges[edge_batch[chosen]]).abs()
    per_graph = scatter(dev, edge_batch[chosen], dim_size=num_graphs, reduce="sum") / k_graph
    l_s = (per_graph * has).sum() / has.sum().clamp_min(1)
    return l_e, l_s


def train_epoch(model, loader, optimizer, lambda_e: float = 10.0, lambda_s: float = 0.01) -> None:
    """One pass: CE (+ lambda_e L_e + lambda_s L_s for PrunE), Adam."""
    model.train()
    for data in loader:
        logits, weight, prob = model(data)
        loss = F.cross_entropy(logits, data.y)
        if model.prune:
            l_e, l_s = prune_losses(data, weight, prob)
            loss = loss + lambda_e * l_e + lambda_s * l_s
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
