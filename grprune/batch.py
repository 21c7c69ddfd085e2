"""A batch of graphs as plain tensors, so training runs on any device.

PyPI's DGL is a CPU build: a ``DGLGraph`` cannot move to CUDA. grprune keeps
DGL graphs as the data model and batches them with :func:`dgl.batch` on the CPU,
then :func:`collate` extracts the tensors the layers need (edge index,
features, per-graph ids) into a :class:`GraphBatch`, which :meth:`GraphBatch.to`
moves to the training device. Message passing is written with
``Tensor.index_add_`` and therefore runs wherever the tensors are.

Shapes: ``N`` nodes, ``E`` directed edges, ``B`` graphs, ``U`` undirected bonds
in the batch.

:func:`segment_sum`, :func:`segment_mean`, :func:`rank_in_segment` and
:func:`bond_ids` are defined in :mod:`grprune.ops` and re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Sequence

import torch
from torch import Tensor

from grprune.compat import dgl
# the segment, bond and ranking helpers live in grprune.ops; importable from here too
from grprune.ops import (bond_ids, rank_in_segment, segment_mean,  # noqa: F401
                         segment_sum)


@dataclass
class GraphBatch:
    """Tensors of a batch of ``B`` graphs.

    Attributes
    ----------
    src, dst : Tensor of shape (E,), int64
        Source and destination node of each directed edge (batch-global ids).
    node_feat : Tensor of shape (N, F)
        Node features (int64 categorical OGB features, or float).
    edge_feat : Tensor of shape (E, F_e)
        Edge features (``F_e`` may be 0).
    node_graph : Tensor of shape (N,), int64
        Graph (position in the batch) of each node.
    edge_graph : Tensor of shape (E,), int64
        Graph of each edge.
    num_nodes, num_edges : Tensor of shape (B,), int64
        Nodes and directed edges per graph (a graph may have zero edges).
    bond : Tensor of shape (E,), int64
        Undirected bond of each directed edge, in ``[0, U)``: both directions
        of one bond share an id, so a selector can give them one score.
    y : Tensor of shape (B,), int64
        Class label per graph.
    env : Tensor of shape (B,), int64
        Environment (domain) id per graph.
    index : Tensor of shape (B,), int64
        Index of each graph in its dataset.
    edge_gt : Tensor of shape (E,) or None
        Ground-truth edge label (1 = edge of the invariant motif), synthetic data only.
    bonds : int or None
        ``U`` as a host integer, when the batch was built knowing it (then
        :attr:`num_bonds` does not ask the device).
    """

    src: Tensor
    dst: Tensor
    node_feat: Tensor
    edge_feat: Tensor
    node_graph: Tensor
    edge_graph: Tensor
    num_nodes: Tensor
    num_edges: Tensor
    bond: Tensor
    y: Tensor
    env: Tensor
    index: Tensor
    edge_gt: Tensor | None = None
    bonds: int | None = None

    @property
    def num_graphs(self) -> int:
        """``B``, the number of graphs."""
        return int(self.num_nodes.shape[0])

    @property
    def num_bonds(self) -> int:
        """``U``, the number of undirected bonds."""
        if self.bonds is not None:
            return self.bonds
        return int(self.bond.max().item()) + 1 if self.bond.numel() else 0

    @property
    def device(self) -> torch.device:
        return self.src.device

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "GraphBatch":
        """A copy with every tensor on ``device``."""
        moved = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor):
                value = value.to(device, non_blocking=non_blocking)
            moved[f.name] = value
        return replace(self, **moved)

    def local_edges(self) -> tuple[Tensor, Tensor]:
        """``src`` and ``dst`` as node ids inside each edge's own graph, two (E,) int64 tensors."""
        node_offset = torch.cumsum(self.num_nodes, 0) - self.num_nodes
        shift = node_offset[self.edge_graph]
        return self.src - shift, self.dst - shift

    def pin_memory(self) -> "GraphBatch":
        """Pinned copy (used by ``DataLoader(pin_memory=True)`` for CUDA)."""
        pinned = {f.name: getattr(self, f.name).pin_memory()
                  for f in fields(self) if isinstance(getattr(self, f.name), Tensor)}
        return replace(self, **pinned)


def collate(samples: Sequence[tuple]) -> GraphBatch:
    """Batch ``(graph, label, env, index)`` samples with :func:`dgl.batch`.

    Graphs carry ``ndata['feat']`` and optionally ``edata['feat']`` and
    ``edata['edge_gt']``.
    """
    graphs, labels, envs, index = zip(*samples)
    g = dgl.batch(list(graphs))
    src, dst = g.edges()
    num_nodes = g.batch_num_nodes()
    num_edges = g.batch_num_edges()
    n, b = g.num_nodes(), len(graphs)
    node_graph = torch.repeat_interleave(torch.arange(b), num_nodes)
    edge_graph = torch.repeat_interleave(torch.arange(b), num_edges)
    if "feat" in g.edata:
        edge_feat = g.edata["feat"]
    else:
        edge_feat = torch.zeros(g.num_edges(), 0)
    edge_gt = g.edata["edge_gt"] if "edge_gt" in g.edata else None
    bond = bond_ids(src, dst, n)
    return GraphBatch(
        src=src, dst=dst, node_feat=g.ndata["feat"], edge_feat=edge_feat,
        node_graph=node_graph, edge_graph=edge_graph,
        num_nodes=num_nodes, num_edges=num_edges,
        bond=bond,
        y=torch.as_tensor(labels, dtype=torch.long),
        env=torch.as_tensor(envs, dtype=torch.long),
        index=torch.as_tensor(index, dtype=torch.long),
        edge_gt=edge_gt,
        bonds=int(bond.max()) + 1 if bond.numel() else 0,
    )
