"""A dataset's graphs as flat tensors, batched by index: the training data path.

``DGLGraph`` stays the type users see and bring (``dataset[i]``, ``dgl.save_graphs``);
training does not build one. :class:`GraphStore` holds every graph of a
:class:`~grprune.data.dataset.GraphDataset` as concatenated tensors with per-graph offsets,
and the undirected bond id of every edge computed once, and :meth:`GraphStore.batch`
gathers a :class:`~grprune.batch.GraphBatch` for any list of graph indices with one
gather per field. It can live on the training device, so that batches are formed there;
sizes come from host-side copies of the per-graph counts, so forming a batch makes no
device-to-host synchronisation.

The batch equals :func:`grprune.batch.collate` on the same graphs field for field (bond ids
included: both order a graph's bonds by their (lower, higher) node id), so training on
either gives the same numbers (``tests/test_store.py``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from grprune.batch import GraphBatch
from grprune.ops import bond_ids
from grprune.data.packed import PackedGraphs, widen


def _offsets(counts: Tensor) -> Tensor:
    """Exclusive prefix sum: ``[0, c0, c0 + c1, ...]`` of shape (len(counts),)."""
    return torch.cumsum(counts, 0) - counts


class GraphStore:
    """Every graph of a dataset as flat tensors (``N`` nodes, ``E`` edges, ``G`` graphs).

    Attributes
    ----------
    node_feat : Tensor of shape (N, F)
        As stored: categorical features may be uint8 (molecule CSVs); :meth:`batch`
        hands them out as int64 (:func:`~grprune.data.packed.widen`).
    edge_feat : Tensor of shape (E, F_e), ``F_e`` may be 0
    src, dst : Tensor of shape (E,), int64
        Node ids inside each edge's own graph.
    bond : Tensor of shape (E,), int64
        Undirected bond id inside each edge's own graph (both directions share it;
        bonds ordered by their (lower, higher) node id, as :func:`~grprune.batch.bond_ids`).
    node_ptr, edge_ptr : Tensor of shape (G + 1,), int64
        CSR offsets of each graph's nodes and edges.
    num_nodes, num_edges, num_bonds : Tensor of shape (G,), int64
    labels, envs : Tensor of shape (G,), int64
    edge_gt : Tensor of shape (E,) or None
        Ground-truth motif edges (synthetic data).
    device : torch.device
    """

    FIELDS = ("node_feat", "edge_feat", "src", "dst", "bond", "node_ptr", "edge_ptr",
              "num_nodes", "num_edges", "num_bonds", "labels", "envs", "edge_gt")
    # the FIELDS, set by __init__
    node_feat: Tensor
    edge_feat: Tensor
    src: Tensor
    dst: Tensor
    bond: Tensor
    node_ptr: Tensor
    edge_ptr: Tensor
    num_nodes: Tensor
    num_edges: Tensor
    num_bonds: Tensor
    labels: Tensor
    envs: Tensor
    edge_gt: Tensor | None

    def __init__(self, **tensors: Tensor | None) -> None:
        for name in self.FIELDS:
            setattr(self, name, tensors.get(name))
        # host copies of the counts: batch sizes without asking the device
        self._host = {k: getattr(self, k).cpu().numpy()
                      for k in ("num_nodes", "num_edges", "num_bonds")}

    @classmethod
    def from_dataset(cls, dataset) -> "GraphStore":
        """The store of a :class:`~grprune.data.dataset.GraphDataset` (CPU tensors).

        The graphs are packed once (:class:`~grprune.data.packed.PackedGraphs`; a cached
        dataset's arrays are used as they are, features without a copy).
        """
        packed = PackedGraphs.from_graphs(dataset.graphs).pack()
        num_nodes, num_edges = packed.num_nodes, packed.num_edges
        src, dst = packed.edge_index.long()  # numbered inside each graph
        edge_graph = torch.repeat_interleave(torch.arange(len(num_edges)), num_edges)
        node_ptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(num_nodes, 0)])
        edge_ptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(num_edges, 0)])
        shift = node_ptr[:-1][edge_graph]
        # bond ids over the whole dataset are ordered by graph, then (lower, higher) node
        global_bond = bond_ids(src + shift, dst + shift, packed.total_nodes)
        num_bonds = torch.zeros(len(num_edges), dtype=torch.long)
        if global_bond.numel():
            bond_graph = torch.zeros(int(global_bond.max()) + 1, dtype=torch.long)
            bond_graph[global_bond] = edge_graph
            num_bonds = torch.bincount(bond_graph, minlength=len(num_edges))
        bond = global_bond - _offsets(num_bonds)[edge_graph]
        edge_feat = packed.edata.get("feat", torch.zeros(len(src), 0))
        return cls(node_feat=packed.ndata["feat"], edge_feat=edge_feat, src=src, dst=dst,
                   bond=bond, node_ptr=node_ptr, edge_ptr=edge_ptr, num_nodes=num_nodes,
                   num_edges=num_edges, num_bonds=num_bonds, labels=dataset.labels,
                   envs=dataset.envs, edge_gt=packed.edata.get("edge_gt"))

    @property
    def device(self) -> torch.device:
        return self.src.device

    def nbytes(self) -> int:
        """Bytes of all tensors."""
        return sum(t.numel() * t.element_size() for t in
                   (getattr(self, n) for n in self.FIELDS) if t is not None)

    def to(self, device: torch.device | str) -> "GraphStore":
        """A copy with every tensor on ``device`` (self if already there)."""
        if torch.device(device) == self.device:
            return self
        return GraphStore(**{n: (None if getattr(self, n) is None
                                 else getattr(self, n).to(device)) for n in self.FIELDS})

    def batch(self, index: Sequence[int] | np.ndarray) -> GraphBatch:
        """The graphs at ``index`` (dataset positions, in this order) as a GraphBatch.

        Every tensor is on :attr:`device`. Sizes are taken from the host copies of
        the counts, so nothing waits for the device.

        Parameters
        ----------
        index : sequence of int, length B

        Returns
        -------
        GraphBatch
            Equal to :func:`grprune.batch.collate` of ``dataset[i] for i in index``.
        """
        idx_np = np.asarray(index, dtype=np.int64).reshape(-1)
        dev = self.device
        idx = torch.from_numpy(idx_np).to(dev)
        total_n = int(self._host["num_nodes"][idx_np].sum())
        total_e = int(self._host["num_edges"][idx_np].sum())
        total_b = int(self._host["num_bonds"][idx_np].sum())
        num_nodes, num_edges = self.num_nodes[idx], self.num_edges[idx]
        node_off, edge_off = _offsets(num_nodes), _offsets(num_edges)
        bond_off = _offsets(self.num_bonds[idx])
        b = torch.arange(len(idx_np), device=dev)
        node_graph = torch.repeat_interleave(b, num_nodes, output_size=total_n)
        edge_graph = torch.repeat_interleave(b, num_edges, output_size=total_e)
        node_at = (self.node_ptr[idx] - node_off)[node_graph] + torch.arange(total_n, device=dev)
        edge_at = (self.edge_ptr[idx] - edge_off)[edge_graph] + torch.arange(total_e, device=dev)
        shift = node_off[edge_graph]
        return GraphBatch(
            src=self.src[edge_at] + shift, dst=self.dst[edge_at] + shift,
            node_feat=widen(self.node_feat[node_at]), edge_feat=widen(self.edge_feat[edge_at]),
            node_graph=node_graph, edge_graph=edge_graph, num_nodes=num_nodes,
            num_edges=num_edges, bond=self.bond[edge_at] + bond_off[edge_graph],
            y=self.labels[idx], env=self.envs[idx], index=idx,
            edge_gt=None if self.edge_gt is None else self.edge_gt[edge_at],
            bonds=total_b)
