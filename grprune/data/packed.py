"""Many small graphs stored as one batched DGL graph, built one by one on demand.

Creating a ``DGLGraph`` object costs about 0.1 ms, so reading 40,000 cached
graphs one object at a time (``dgl.load_graphs`` on a list) takes seconds.
:class:`PackedGraphs` keeps the graphs of a dataset as one batched graph (one
load, a fraction of a second) plus per-graph node and edge counts, and builds
graph ``i`` the first time it is asked for (then keeps it). It is a read-only
sequence of ``DGLGraph`` and can stand wherever a list of graphs is expected.

Integer features may be stored narrower than int64 (the molecule CSV featurizer
stores OGB's categorical features as uint8, :mod:`grprune.data.featurize`); a graph
built from the batch gets them as int64 (:func:`widen`), so it equals one made by
:func:`~grprune.data.molecules.smiles_to_graph`.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch

from grprune.compat import dgl


class PackedGraphs(Sequence):
    """A read-only sequence of G graphs backed by one batched graph.

    Parameters
    ----------
    batched : dgl.DGLGraph
        All graphs batched (``dgl.batch``): nodes and edges of graph ``k`` follow
        those of graph ``k - 1``; ``ndata``/``edata`` hold every feature.
    num_nodes, num_edges : Tensor of shape (G,), int64
        Nodes and edges of each stored graph.
    order : np.ndarray of int64, shape (G',), optional
        Stored graph shown at each position (a view; default ``arange(G)``).

    Examples
    --------
    >>> import torch
    >>> from grprune.compat import dgl
    >>> gs = [dgl.graph(([0], [1]), num_nodes=2), dgl.graph(([], []), num_nodes=3)]
    >>> packed = PackedGraphs.from_graphs(gs)
    >>> len(packed), packed[1].num_nodes(), packed.num_nodes_array().tolist()
    (2, 3, [2, 3])
    """

    def __init__(self, batched: dgl.DGLGraph, num_nodes: torch.Tensor, num_edges: torch.Tensor,
                 order: np.ndarray | None = None, _memo: dict | None = None) -> None:
        self.batched = batched
        self.num_nodes = torch.as_tensor(num_nodes, dtype=torch.int64).reshape(-1)
        self.num_edges = torch.as_tensor(num_edges, dtype=torch.int64).reshape(-1)
        if int(self.num_nodes.sum()) != batched.num_nodes() or \
                int(self.num_edges.sum()) != batched.num_edges():
            raise ValueError("node/edge counts do not add up to the batched graph")
        self._node_ptr = np.concatenate([[0], np.cumsum(self.num_nodes.numpy())])
        self._edge_ptr = np.concatenate([[0], np.cumsum(self.num_edges.numpy())])
        self.order = (np.arange(len(self.num_nodes), dtype=np.int64) if order is None
                      else np.asarray(order, dtype=np.int64).reshape(-1))
        self._edges: tuple[torch.Tensor, torch.Tensor] | None = None  # batched.edges(), lazily
        self._memo = {} if _memo is None else _memo

    @classmethod
    def from_graphs(cls, graphs: Sequence[dgl.DGLGraph]) -> "PackedGraphs":
        """Pack a list of graphs (with the same ``ndata``/``edata`` keys)."""
        if isinstance(graphs, PackedGraphs):
            return graphs
        graphs = list(graphs)
        batched = dgl.batch(graphs)
        packed = cls(batched, batched.batch_num_nodes(), batched.batch_num_edges())
        packed._memo.update(enumerate(graphs))
        return packed

    def __len__(self) -> int:
        return len(self.order)

    def _build(self, k: int) -> dgl.DGLGraph:
        n0, n1 = int(self._node_ptr[k]), int(self._node_ptr[k + 1])
        e0, e1 = int(self._edge_ptr[k]), int(self._edge_ptr[k + 1])
        if self._edges is None:
            self._edges = self.batched.edges()
        src, dst = self._edges
        g = dgl.graph((src[e0:e1] - n0, dst[e0:e1] - n0), num_nodes=n1 - n0)
        for key, value in self.batched.ndata.items():
            g.ndata[key] = widen(value[n0:n1])
        for key, value in self.batched.edata.items():
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
        return PackedGraphs(self.batched, self.num_nodes, self.num_edges,
                            order=self.order[idx], _memo=self._memo)

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
        """An equivalent packed sequence whose storage holds exactly its graphs."""
        return self if self.is_identity() else PackedGraphs.from_graphs(list(self))


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
