"""Many small graphs stored as flat arrays, each built as a ``DGLGraph`` only on demand.

Creating a ``DGLGraph`` object costs about 0.1 ms, and holding a million of them costs
gigabytes. :class:`PackedGraphs` keeps the graphs of a dataset as a few flat arrays (the
edge index numbered inside each graph, the node and edge features of all graphs one
after the other, the per-graph node and edge counts) and builds graph ``i`` the first time
it is asked for (then keeps it). It is a read-only sequence of ``DGLGraph`` and can stand
wherever a list of graphs is expected; training reads the arrays directly
(:class:`~grprune.data.store.GraphStore`) and builds no graph.

The arrays may be memory-mapped from the dataset cache (:mod:`grprune.data.cache`), so a
cached dataset of a million molecules opens without reading it into memory.

Integer features may be stored narrower than int64 (the molecule CSV featurizer
stores OGB's categorical features as uint8, :mod:`grprune.data.featurize`); a graph
built from the arrays gets them as int64 (:func:`widen`), so it equals one made by
:func:`~grprune.data.molecules.smiles_to_graph`.
"""

from __future__ import annotations

from typing import Iterator, Mapping, Sequence

import numpy as np
import torch

from grprune.compat import dgl


class PackedGraphs(Sequence):
    """A read-only sequence of G graphs backed by flat arrays.

    Parameters
    ----------
    edge_index : Tensor of shape (2, E), integer
        Source and destination of every directed edge, numbered inside its own graph;
        graph ``k``'s edges follow those of graph ``k - 1``.
    num_nodes, num_edges : Tensor of shape (G,), int64
        Nodes and edges of each stored graph.
    ndata, edata : mapping of str to Tensor, optional
        Node features (first dimension N, the sum of ``num_nodes``) and edge features
        (first dimension E), graph ``k``'s rows after those of graph ``k - 1``.
    order : np.ndarray of int64, shape (G',), optional
        Stored graph shown at each position (a view; default ``arange(G)``).

    Raises
    ------
    ValueError
        If the counts do not add up to the arrays.

    Examples
    --------
    >>> from grprune.compat import dgl
    >>> gs = [dgl.graph(([0], [1]), num_nodes=2), dgl.graph(([], []), num_nodes=3)]
    >>> packed = PackedGraphs.from_graphs(gs)
    >>> len(packed), packed[1].num_nodes(), packed.num_nodes_array().tolist()
    (2, 3, [2, 3])
    """

    def __init__(self, edge_index: torch.Tensor, num_nodes: torch.Tensor,
                 num_edges: torch.Tensor, ndata: Mapping[str, torch.Tensor] | None = None,
                 edata: Mapping[str, torch.Tensor] | None = None,
                 order: np.ndarray | None = None, _memo: dict | None = None) -> None:
        self.edge_index = torch.as_tensor(edge_index)
        self.num_nodes = torch.as_tensor(num_nodes, dtype=torch.int64).reshape(-1)
        self.num_edges = torch.as_tensor(num_edges, dtype=torch.int64).reshape(-1)
        self.ndata, self.edata = dict(ndata or {}), dict(edata or {})
        self._node_ptr = np.concatenate([[0], np.cumsum(self.num_nodes.numpy())]).astype(np.int64)
        self._edge_ptr = np.concatenate([[0], np.cumsum(self.num_edges.numpy())]).astype(np.int64)
        nodes, edges = int(self._node_ptr[-1]), int(self._edge_ptr[-1])
        if (len(self.num_nodes) != len(self.num_edges) or self.edge_index.dim() != 2
                or tuple(self.edge_index.shape) != (2, edges)
                or any(len(v) != nodes for v in self.ndata.values())
                or any(len(v) != edges for v in self.edata.values())):
            raise ValueError("node/edge counts do not add up to the packed arrays")
        self.order = (np.arange(len(self.num_nodes), dtype=np.int64) if order is None
                      else np.asarray(order, dtype=np.int64).reshape(-1))
        self._memo = {} if _memo is None else _memo

    @classmethod
    def from_graphs(cls, graphs: Sequence[dgl.DGLGraph]) -> "PackedGraphs":
        """Pack a list of graphs (with the same ``ndata``/``edata`` keys)."""
        if isinstance(graphs, PackedGraphs):
            return graphs
        graphs = list(graphs)
        if not graphs:
            return cls(torch.zeros((2, 0), dtype=torch.int64), torch.zeros(0, dtype=torch.int64),
                       torch.zeros(0, dtype=torch.int64))
        batched = dgl.batch(graphs)
        num_nodes, num_edges = batched.batch_num_nodes(), batched.batch_num_edges()
        src, dst = batched.edges()
        first = torch.repeat_interleave(torch.cumsum(num_nodes, 0) - num_nodes, num_edges)
        packed = cls(torch.stack([src - first, dst - first]), num_nodes, num_edges,
                     dict(batched.ndata), dict(batched.edata))
        packed._memo.update(enumerate(graphs))
        return packed

    def __len__(self) -> int:
        return len(self.order)

    @property
    def total_nodes(self) -> int:
        """Nodes of all stored graphs (N)."""
        return int(self._node_ptr[-1])

    def _build(self, k: int) -> dgl.DGLGraph:
        n0, n1 = int(self._node_ptr[k]), int(self._node_ptr[k + 1])
        e0, e1 = int(self._edge_ptr[k]), int(self._edge_ptr[k + 1])
        local = self.edge_index[:, e0:e1].long()
        g = dgl.graph((local[0], local[1]), num_nodes=n1 - n0)
        for key, value in self.ndata.items():
            g.ndata[key] = widen(value[n0:n1])
        for key, value in self.edata.items():
            g.edata[key] = widen(value[e0:e1])
        return g

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        k = int(self.order[i])
        g = self._memo.get(k)
        if g is None:
            g = self._memo[k] = self._build(k)
        return g

    def __iter__(self) -> Iterator[dgl.DGLGraph]:
        for i in range(len(self)):
            yield self[i]

    def take(self, index: Sequence[int] | np.ndarray) -> "PackedGraphs":
        """A view of the graphs at positions ``index`` (no copy; graphs shared)."""
        idx = np.asarray(index, dtype=np.int64).reshape(-1)
        return PackedGraphs(self.edge_index, self.num_nodes, self.num_edges, self.ndata,
                            self.edata, order=self.order[idx], _memo=self._memo)

    def num_nodes_array(self) -> np.ndarray:
        """Nodes of each graph, shape (G,), int64, without building graphs."""
        return self.num_nodes.numpy()[self.order]

    def num_edges_array(self) -> np.ndarray:
        """Directed edges of each graph, shape (G,), int64, without building graphs."""
        return self.num_edges.numpy()[self.order]

    def is_identity(self) -> bool:
        """Whether positions are the stored graphs in stored order."""
        return len(self.order) == len(self.num_nodes) and \
            bool(np.array_equal(self.order, np.arange(len(self.num_nodes))))

    def pack(self) -> "PackedGraphs":
        """An equivalent packed sequence whose arrays hold exactly its graphs, in its
        order (gathered from the arrays; no graph is built)."""
        if self.is_identity():
            return self
        nodes, edges = self.num_nodes_array(), self.num_edges_array()
        node_at = torch.from_numpy(ranges(self._node_ptr[self.order], nodes))
        edge_at = torch.from_numpy(ranges(self._edge_ptr[self.order], edges))
        return PackedGraphs(self.edge_index[:, edge_at], torch.from_numpy(nodes),
                            torch.from_numpy(edges),
                            {k: v[node_at] for k, v in self.ndata.items()},
                            {k: v[edge_at] for k, v in self.edata.items()})


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concat(arange(s, s + c) for s, c in zip(starts, counts))``, int64.

    Examples
    --------
    >>> ranges(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(counts) - counts
    return np.repeat(np.asarray(starts, dtype=np.int64) - offsets, counts) + \
        np.arange(total, dtype=np.int64)


#: integer dtypes stored narrow and handed out as int64
NARROW_INTS = (torch.uint8, torch.int8, torch.int16, torch.int32)


def widen(values: torch.Tensor) -> torch.Tensor:
    """``values`` as int64 if they are a narrower integer type (uint8, int8, int16,
    int32), else unchanged (float, bool and int64 tensors are returned as they are)."""
    return values.long() if values.dtype in NARROW_INTS else values


def graph_sizes(graphs: Sequence[dgl.DGLGraph]) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and directed edges of each graph, two int64 arrays of shape (G,).

    Reads :class:`PackedGraphs` counts directly (no graph is built).
    """
    if isinstance(graphs, PackedGraphs):
        return graphs.num_nodes_array(), graphs.num_edges_array()
    nodes = np.fromiter((g.num_nodes() for g in graphs), dtype=np.int64, count=len(graphs))
    edges = np.fromiter((g.num_edges() for g in graphs), dtype=np.int64, count=len(graphs))
    return nodes, edges
