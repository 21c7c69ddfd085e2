"""Base graphs, motifs and graph assembly shared by the synthetic datasets.

Both GOOD-Motif (:mod:`grprune.data.synthetic.good_motif`) and SPMotif
(:mod:`grprune.data.synthetic.spmotif`) build a graph the same way, following
the ``build_graph`` + ``perturb`` recipe of GNNExplainer's synthetic data
(reused by DIR and GOOD):

1. a *base* graph (wheel, tree, ladder, star or path) on nodes
   ``0 .. n_base-1``;
2. one (or more) 5-node *motifs* (house, cycle, crane) on the following node
   ids; node 0 of each motif is joined by one edge to a base node drawn
   uniformly at random (distinct base nodes for distinct motifs whenever the
   base has enough nodes);
3. ``int(ratio * E)`` attempts to add a random extra edge, ``E`` counting the
   undirected edges after step 2. Each attempt draws a node pair uniformly
   among the pairs that are not yet joined; the edge is added only if at least
   one end is an *open* base node (every base node except the leaves of a
   star and the two ends of a path, which carry a different role id in the
   original code). Motif nodes are never open, so an extra edge never joins
   two motif nodes, and a failed attempt is not retried.

The ground truth ``edge_gt`` marks the edges whose two ends are motif nodes:
exactly the motif edges. The edge joining a motif to the base and the extra
edges are 0.

Shapes (``size`` is the GNNExplainer "width"):

========  =====================  ===============================================
base      nodes                  edges
========  =====================  ===============================================
wheel     ``size``               hub 0 joined to rim ``1..size-1``; rim cycle
tree      ``(r^(h+1)-1)/(r-1)``  balanced ``r``-ary tree of height ``h = size``,
                                 node ``i``'s children ``r*i+1 .. r*i+r``
ladder    ``2*size``             rails ``0..size-1`` and ``size..2*size-1``,
                                 rungs ``(i, i+size)``
star      ``size + 1``           centre 0 joined to leaves ``1..size``
path      ``size``               ``(i, i+1)``
========  =====================  ===============================================

The wheel, ladder, star and path match networkx's ``wheel_graph``,
``ladder_graph``, ``star_graph`` and ``path_graph`` node for node (a rim of two
nodes is one edge, like networkx); the tree matches ``balanced_tree``.

Motifs (5 nodes each; node 0 is the one joined to the base):

* house: square ``1-2-3-4`` and roof node 0 on the adjacent corners 1 and 4
  (6 edges, one triangle);
* cycle: the 5-cycle ``0-1-2-3-4`` (5 edges; GOOD and DIR call it ``dircycle``);
* crane: square ``1-2-3-4`` and node 0 on the opposite corners 1 and 3, i.e.
  the complete bipartite graph K(2,3) (6 edges, no triangle).

House and crane share the degree sequence (2, 2, 2, 3, 3); they differ in
whether the two degree-3 nodes are adjacent. :func:`identify_motif` uses this.

Graphs are stored with both directions of every undirected edge, interleaved:
edge ``2k`` is ``(u, v)`` and edge ``2k+1`` is ``(v, u)``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import numpy as np
import torch

BASES = ("wheel", "tree", "ladder", "star", "path")
MOTIFS = ("house", "cycle", "crane")

#: undirected edges of each motif on its local node ids 0..4
MOTIF_EDGES: dict[str, tuple[tuple[int, int], ...]] = {
    "house": ((0, 1), (0, 4), (1, 2), (2, 3), (3, 4), (1, 4)),
    "cycle": ((0, 1), (1, 2), (2, 3), (3, 4), (0, 4)),
    "crane": ((0, 1), (0, 3), (1, 2), (2, 3), (3, 4), (1, 4)),
}
MOTIF_NODES = 5

#: split part names and their integer codes in the cache (-1: in no part)
PART_NAMES = ("train", "valid", "test", "id-valid", "id-test")
PART_CODES = {name: i for i, name in enumerate(PART_NAMES)}


class Shape(NamedTuple):
    """An undirected graph without features.

    Attributes
    ----------
    num_nodes : int
    edges : np.ndarray of int64, shape (E, 2)
        Each undirected edge once, ``u < v`` not required.
    open_nodes : np.ndarray of bool, shape (num_nodes,)
        Nodes a random extra edge may touch (see the module docstring).
    """

    num_nodes: int
    edges: np.ndarray
    open_nodes: np.ndarray


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _edges(pairs: Sequence[tuple[int, int]] | np.ndarray) -> np.ndarray:
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


@functools.lru_cache(maxsize=None)
def base_graph(kind: str, size: int, branching: int = 2) -> Shape:
    """A base graph of the GNNExplainer family.

    Parameters
    ----------
    kind : str
        One of :data:`BASES`.
    size : int
        Width for wheel, ladder, star and path; height for tree (see the table
        in the module docstring). At least 1 (0 allowed for a tree: one node).
    branching : int
        Children per inner node of a tree; ignored by other bases.

    Returns
    -------
    Shape
        Read-only arrays (cached per argument tuple).

    Raises
    ------
    ValueError
        On an unknown kind or a size out of range.
    """
    size = int(size)
    if kind == "tree":
        if size < 0 or branching < 1:
            raise ValueError(f"tree needs height >= 0 and branching >= 1, got {size}, {branching}")
        n = sum(branching ** d for d in range(size + 1))
        parents = np.arange(1, n) - 1
        edges = np.stack([parents // branching, np.arange(1, n)], axis=1)
        open_nodes = np.ones(n, dtype=bool)
    elif size < 1:
        raise ValueError(f"{kind} needs size >= 1, got {size}")
    elif kind == "wheel":
        n = size
        rim = np.arange(1, n)
        spokes = np.stack([np.zeros_like(rim), rim], axis=1)
        if len(rim) >= 3:
            ring = np.stack([rim, np.roll(rim, -1)], axis=1)
        elif len(rim) == 2:
            ring = _edges([(1, 2)])
        else:
            ring = _edges([])
        edges = np.concatenate([spokes, ring])
        open_nodes = np.ones(n, dtype=bool)
    elif kind == "ladder":
        n = 2 * size
        i = np.arange(size)
        edges = np.concatenate([
            np.stack([i[:-1], i[1:]], axis=1),
            np.stack([i[:-1] + size, i[1:] + size], axis=1),
            np.stack([i, i + size], axis=1),
        ])
        open_nodes = np.ones(n, dtype=bool)
    elif kind == "star":
        n = size + 1
        leaves = np.arange(1, n)
        edges = np.stack([np.zeros_like(leaves), leaves], axis=1)
        open_nodes = np.zeros(n, dtype=bool)
        open_nodes[0] = True
    elif kind == "path":
        n = size
        i = np.arange(n - 1)
        edges = np.stack([i, i + 1], axis=1)
        open_nodes = np.ones(n, dtype=bool)
        open_nodes[[0, n - 1]] = False
    else:
        raise ValueError(f"unknown base graph {kind!r}; choices: {', '.join(BASES)}")
    return Shape(n, _frozen(_edges(edges)), _frozen(open_nodes))


def attach_motifs(base: Shape, motifs: Sequence[str], rng: np.random.Generator
                  ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Attach motifs to a base graph (steps 1-2 of the module docstring).

    Parameters
    ----------
    base : Shape
    motifs : sequence of str
        Motif names (:data:`MOTIFS`), attached in order.
    rng : np.random.Generator
        Draws the base node each motif is joined to: distinct nodes, uniform
        without replacement, or with replacement when the base has fewer
        nodes than there are motifs.

    Returns
    -------
    num_nodes : int
    edges : np.ndarray of int64, shape (E, 2)
        Base edges, then for each motif its edges and the joining edge.
    edge_gt : np.ndarray of bool, shape (E,)
        True for motif edges.
    open_nodes : np.ndarray of bool, shape (num_nodes,)
        The base's open nodes; motif nodes are never open.
    """
    k = len(motifs)
    plugins = rng.choice(base.num_nodes, size=k, replace=base.num_nodes < k)
    parts, gts = [base.edges], [np.zeros(len(base.edges), dtype=bool)]
    start = base.num_nodes
    for name, plug in zip(motifs, plugins):
        local = MOTIF_EDGES[name]
        parts.append(_edges(local) + start)
        parts.append(_edges([(start, int(plug))]))
        gts.append(np.ones(len(local), dtype=bool))
        gts.append(np.zeros(1, dtype=bool))
        start += MOTIF_NODES
    open_nodes = np.zeros(start, dtype=bool)
    open_nodes[: base.num_nodes] = base.open_nodes
    return start, np.concatenate(parts), np.concatenate(gts), open_nodes


def add_random_edges(num_nodes: int, edges: np.ndarray, open_nodes: np.ndarray,
                     ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Step 3 of the module docstring: GNNExplainer's ``perturb``.

    Parameters
    ----------
    num_nodes : int
    edges : np.ndarray of int64, shape (E, 2)
        Undirected edges, each once.
    open_nodes : np.ndarray of bool, shape (num_nodes,)
    ratio : float
        ``int(ratio * E)`` attempts are made.
    rng : np.random.Generator

    Returns
    -------
    np.ndarray of int64, shape (A, 2)
        The added edges (``A <= int(ratio * E)``), in the order they were added.
    """
    attempts = int(ratio * len(edges))
    free = num_nodes * (num_nodes - 1) // 2 - len(edges)
    if attempts <= 0 or free <= 0 or not open_nodes.any():
        return _edges([])
    taken = {(int(min(u, v)), int(max(u, v))) for u, v in edges}
    added: list[tuple[int, int]] = []
    pool = rng.integers(0, num_nodes, size=(8 * attempts + 8, 2))
    pos = 0
    for _ in range(attempts):
        if free <= 0:
            break
        while True:  # a uniform pair among the pairs not yet joined
            if pos == len(pool):
                pool, pos = rng.integers(0, num_nodes, size=(8 * attempts + 8, 2)), 0
            u, v = int(pool[pos, 0]), int(pool[pos, 1])
            pos += 1
            key = (min(u, v), max(u, v))
            if u != v and key not in taken:
                break
        if open_nodes[u] or open_nodes[v]:
            taken.add(key)
            added.append(key)
            free -= 1
    return _edges(added)


def identify_motif(edges: np.ndarray) -> str | None:
    """Name of the motif an undirected 5-node edge set is isomorphic to.

    Parameters
    ----------
    edges : np.ndarray of int, shape (E, 2)
        Undirected edges, each once, on any node ids.

    Returns
    -------
    str or None
        ``"house"``, ``"cycle"``, ``"crane"``, or None if it is none of them.
    """
    edges = np.asarray(edges).reshape(-1, 2)
    nodes, inverse = np.unique(edges, return_inverse=True)
    if len(nodes) != MOTIF_NODES:
        return None
    e = inverse.reshape(-1, 2)
    if (e[:, 0] == e[:, 1]).any() or len({(min(a, b), max(a, b)) for a, b in e}) != len(e):
        return None
    degree = np.bincount(e.ravel(), minlength=MOTIF_NODES)
    if len(e) == 5 and (degree == 2).all():
        return "cycle"  # 2-regular on 5 nodes: only C5
    if len(e) == 6 and sorted(degree.tolist()) == [2, 2, 2, 3, 3]:
        a, b = np.flatnonzero(degree == 3)
        joined = any({int(x), int(y)} == {int(a), int(b)} for x, y in e)
        return "house" if joined else "crane"  # unique graphs with that degree sequence
    return None


def motif_components(src: np.ndarray, dst: np.ndarray, edge_gt: np.ndarray) -> list[str | None]:
    """The motifs formed by a graph's ground-truth edges, one per connected component.

    Parameters
    ----------
    src, dst : np.ndarray of int, shape (E,)
        Directed edges (both directions of each undirected edge).
    edge_gt : np.ndarray of int or bool, shape (E,)

    Returns
    -------
    list of (str or None)
        :func:`identify_motif` of each component of the ``edge_gt`` edges,
        ordered by the smallest node id of the component.
    """
    mask = np.asarray(edge_gt).astype(bool)
    u, v = np.asarray(src)[mask], np.asarray(dst)[mask]
    pairs = sorted({(int(min(a, b)), int(max(a, b))) for a, b in zip(u, v)})
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[tuple[int, int]]] = {}
    for a, b in pairs:
        groups.setdefault(find(a), []).append((a, b))
    return [identify_motif(np.asarray(groups[r])) for r in sorted(groups)]


@dataclass
class SyntheticGraphs:
    """Generated graphs before conversion to DGL.

    Attributes
    ----------
    num_nodes : np.ndarray of int64, shape (G,)
    edges : list of np.ndarray of int64, each shape (E_i, 2)
        Undirected edges of graph ``i``, each once.
    edge_gt : list of np.ndarray of bool, each shape (E_i,)
        True for motif edges.
    feat : list of np.ndarray of float32, each shape (N_i, F), or None
        Node features; None means all-ones of width 1.
    labels, motifs, bases, sizes, envs, part : np.ndarray of int64, shape (G,)
        Class, motif id, base id, base size (width, or tree height), environment
        id and split part (index into :data:`PART_NAMES`, -1 for none).
    """

    num_nodes: np.ndarray
    edges: list[np.ndarray]
    edge_gt: list[np.ndarray]
    labels: np.ndarray
    motifs: np.ndarray
    bases: np.ndarray
    sizes: np.ndarray
    envs: np.ndarray
    part: np.ndarray
    feat: list[np.ndarray] | None = field(default=None)

    def __len__(self) -> int:
        return len(self.num_nodes)

    def split_indices(self, parts: Sequence[str] = PART_NAMES) -> dict[str, np.ndarray]:
        """``{part: sorted int64 graph indices}`` for each part in ``parts``."""
        return split_indices(self.part, parts)

    def to_dgl(self) -> list:
        """The graphs as DGL graphs (see :func:`to_dgl_graph`)."""
        feats = self.feat if self.feat is not None else [None] * len(self)
        return [to_dgl_graph(int(n), e, gt, f)
                for n, e, gt, f in zip(self.num_nodes, self.edges, self.edge_gt, feats)]


def split_indices(part: np.ndarray | torch.Tensor, parts: Sequence[str] = PART_NAMES
                  ) -> dict[str, np.ndarray]:
    """``{name: sorted int64 indices}`` of the graphs whose part code is ``name``'s."""
    part = np.asarray(part)
    return {name: np.flatnonzero(part == PART_CODES[name]).astype(np.int64) for name in parts}


def to_dgl_graph(num_nodes: int, edges: np.ndarray, edge_gt: np.ndarray,
                 feat: np.ndarray | None = None):
    """One DGL graph with both edge directions, ``feat`` and ``edge_gt``.

    Parameters
    ----------
    num_nodes : int
    edges : np.ndarray of int64, shape (E, 2)
    edge_gt : np.ndarray of bool, shape (E,)
    feat : np.ndarray of float32, shape (num_nodes, F), optional
        Default: all ones, shape (num_nodes, 1).

    Returns
    -------
    dgl.DGLGraph
        ``2E`` edges, interleaved (edge ``2k+1`` reverses edge ``2k``);
        ``ndata['feat']`` float32 (N, F); ``edata['edge_gt']`` int64 (2E,).
    """
    from grprune.compat import dgl

    both = torch.from_numpy(np.stack([edges, edges[:, ::-1]], axis=1).reshape(-1, 2))
    g = dgl.graph((both[:, 0], both[:, 1]), num_nodes=num_nodes)
    g.ndata["feat"] = (torch.ones(num_nodes, 1) if feat is None
                       else torch.from_numpy(np.ascontiguousarray(feat, dtype=np.float32)))
    g.edata["edge_gt"] = torch.from_numpy(np.repeat(edge_gt.astype(np.int64), 2))
    return g
