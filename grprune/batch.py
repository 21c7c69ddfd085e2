"""A batch of graphs as plain tensors, so training runs on any device.

PyPI's DGL is a CPU build: a ``DGLGraph`` cannot move to CUDA. grprune keeps
DGL graphs as the data model and batches them with :func:`dgl.batch` on the CPU,
then :func:`collate` extracts the tensors the layers need (edge index,
features, per-graph ids) into a :class:`GraphBatch`, which :meth:`GraphBatch.to`
moves to the training device. Message passing is written with
CSR segment sums and gathers (:meth:`GraphBatch.segment_sum`, :meth:`GraphBatch.gather`)
and therefore runs wherever the tensors are, deterministically and without atomics.

Shapes: ``N`` nodes, ``E`` directed edges, ``B`` graphs, ``U`` undirected bonds
in the batch.

:func:`segment_sum`, :func:`segment_mean`, :func:`rank_in_segment` and
:func:`bond_ids` are defined in :mod:`grprune.ops` and re-exported here.

**Static shapes** (``train.pad_buckets``): :func:`choose_buckets` picks at most 8 batch
shapes from a dataset's graph sizes, and :func:`pad_batch` pads a batch to one with a
padding graph whose nodes, edges and graphs the masks (``node_mask``, ``edge_mask``,
``graph_mask``) keep out of the computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Callable, Sequence

import torch
from torch import Tensor

from grprune.compat import dgl
from grprune.csr import Segments, csr_gather, csr_segment_mean, csr_segment_sum
# the segment, bond and ranking helpers live in grprune.ops; importable from here too
from grprune.ops import bond_ids, rank_in_segment, segment_mean, segment_sum  # noqa: F401

#: the segment indices of a batch (:meth:`GraphBatch.segments`)
SEGMENT_NAMES = ("src", "dst", "bond", "node_graph", "edge_graph")


@dataclass(frozen=True)
class RowMask:
    """The real rows of a padded tensor, in the forms masked reductions use.

    Attributes
    ----------
    keep : Tensor of shape (M, 1)
        1 for a real row, 0 for padding.
    weight : Tensor of shape (M,)
        ``keep / n`` (``n`` real rows): ``weight @ x`` is the mean of the real rows of ``x``.
    unbias : Tensor, a scalar
        ``n / (n - 1)``, from a biased variance to the unbiased one (``n = 1``: 1).
    """

    keep: Tensor
    weight: Tensor
    unbias: Tensor

    @classmethod
    def of(cls, mask: Tensor, dtype: torch.dtype) -> "RowMask":
        """From a bool mask of shape (M,) (True = real row), in ``dtype``."""
        keep = mask.to(dtype)
        count = keep.sum()
        return cls(keep=keep.unsqueeze(-1), weight=keep / count,
                   unbias=count / (count - 1).clamp_min(1))


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
    y : Tensor of shape (B,), int64; or of shape (B, T), float32 (multi-label or regression
        labels, NaN where missing)
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
    node_mask, edge_mask, graph_mask : Tensor of shape (N,), (E,), (B,), bool, or None
        True for a real node, edge or graph, False for the padding of a batch padded to a
        static shape (:func:`pad_batch`); None for a batch without padding.
    real_graphs, real_edges : int or None
        Real graphs and edges of a padded batch (they come first), host integers.
    csr : dict of str to Segments
        :meth:`segments` computed so far (moved along by :meth:`to`).
    derived : dict
        What :meth:`derive` made from this batch so far (dropped by :meth:`to`).
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
    node_mask: Tensor | None = None
    edge_mask: Tensor | None = None
    graph_mask: Tensor | None = None
    real_graphs: int | None = None
    real_edges: int | None = None
    csr: dict[str, Segments] = field(default_factory=dict, repr=False, compare=False)
    row_masks: dict[tuple[str, torch.dtype], RowMask] = field(default_factory=dict, repr=False,
                                                              compare=False)
    derived: dict[tuple, Tensor] = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_graphs(self) -> int:
        """``B``, the number of graphs."""
        return int(self.num_nodes.shape[0])

    @property
    def padded(self) -> bool:
        """Whether the batch carries padding (:attr:`graph_mask` is set)."""
        return self.graph_mask is not None

    @property
    def num_real_graphs(self) -> int:
        """Graphs that are not padding (``B`` for a batch without padding)."""
        return self.num_graphs if self.real_graphs is None else self.real_graphs

    def row_mask(self, kind: str, dtype: torch.dtype) -> RowMask | None:
        """The real ``"node"`` or ``"graph"`` rows of a padded batch as a :class:`RowMask` in
        ``dtype`` (made once per batch and kept); None for a batch without padding."""
        mask = self.node_mask if kind == "node" else self.graph_mask
        if mask is None:
            return None
        key = (kind, dtype)
        rows = self.row_masks.get(key)
        if rows is None:
            rows = self.row_masks[key] = RowMask.of(mask, dtype)
        return rows

    def derive(self, key: tuple, make: Callable[[], Tensor]) -> Tensor:
        """``make()``, a tensor computed from this batch alone (no parameter: it needs no
        gradient), made on the first call for ``key`` and kept for the batch: the parts of a
        step that need it (e.g. two regularizers, :meth:`graphs_with_edges`) make it once.
        ``key`` names what and in which dtype, e.g. ``("graphs_with_edges", torch.float32)``;
        nobody may write into the result. Under :func:`torch.inference_mode` it is made and
        not kept (an inference tensor could not be saved for a later backward), nor under
        :func:`torch.compile` (``train.compile``), whose graph makes it once anyway."""
        if torch.compiler.is_compiling() or torch.is_inference_mode_enabled():
            return make()
        value = self.derived.get(key)
        if value is None:
            value = self.derived[key] = make()
        return value

    def graphs_with_edges(self, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """The real graphs with at least one edge, as a (B,) mask in ``dtype`` (1 = such a
        graph, 0 = none or padding), and their number clamped to at least 1 (a scalar in
        ``dtype``): the graphs over which the size and eps-align regularizers average."""
        def make() -> Tensor:
            has_edges = self.num_edges > 0
            if self.graph_mask is not None:  # padding graphs do not count
                has_edges = has_edges & self.graph_mask
            return has_edges.to(dtype)
        mask = self.derive(("graphs_with_edges", dtype), make)
        count = self.derive(("graphs_with_edges/count", dtype),
                            lambda: mask.sum().clamp_min(1))
        return mask, count

    def segments(self, name: str) -> Segments:
        """The CSR layout (:class:`~grprune.csr.Segments`) of the index ``name``, one of
        :data:`SEGMENT_NAMES`: computed once per batch and kept (a stable sort for ``src``,
        ``dst`` and ``bond``; the per-graph counts for ``node_graph`` and ``edge_graph``,
        which are sorted).

        Raises
        ------
        KeyError
            For another name.
        """
        seg = self.csr.get(name)
        if seg is None:
            if name not in SEGMENT_NAMES:
                raise KeyError(f"no segment index {name!r}; choose from {SEGMENT_NAMES}")
            if name == "node_graph":
                seg = Segments.of(self.node_graph, self.num_graphs, self.num_nodes, True)
            elif name == "edge_graph":
                seg = Segments.of(self.edge_graph, self.num_graphs, self.num_edges, True)
            else:
                size = self.num_bonds if name == "bond" else int(self.node_graph.shape[0])
                seg = Segments.of(getattr(self, name), size)
            self.csr[name] = seg
        return seg

    def prepare_segments(self) -> "GraphBatch":
        """Compute every :meth:`segments` layout now (where the batch is formed, not in
        the step); returns ``self``."""
        for name in SEGMENT_NAMES:
            self.segments(name)
        return self

    def segment_sum(self, values: Tensor, by: str) -> Tensor:
        """Sum of the rows of ``values`` per segment of the index ``by``
        (:func:`~grprune.csr.csr_segment_sum` over :meth:`segments`): shape (M, ...) ->
        (S, ...), e.g. ``by="dst"`` sums edge messages into their destination nodes."""
        return csr_segment_sum(values, self.segments(by))

    def segment_mean(self, values: Tensor, by: str) -> Tensor:
        """:meth:`segment_sum` divided by the segment sizes (an empty one gives 0)."""
        return csr_segment_mean(values, self.segments(by))

    def gather(self, x: Tensor, by: str) -> Tensor:
        """``x[index]`` for the index ``by`` (e.g. ``x[src]``), shape (S, ...) -> (M, ...),
        whose gradient is a CSR segment sum (:func:`~grprune.csr.csr_gather`)."""
        return csr_gather(x, self.segments(by))

    def real_edge_sum(self, values: Tensor) -> Tensor:
        """Sum of ``values`` (shape (E,)) over the real edges (all, without padding)."""
        return values.sum() if self.edge_mask is None else (values * self.edge_mask).sum()

    @property
    def num_real_edges(self) -> int:
        """Directed edges that are not padding (``E`` for a batch without padding)."""
        return int(self.src.shape[0]) if self.real_edges is None else self.real_edges

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
        """A copy with every tensor on ``device`` (a tensor already there is not asked to
        move: on the CPU, ``Trainer`` moving its CPU batches dispatches no ``to``)."""
        target = torch.device(device)
        moved: dict = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor) and value.device != target:
                value = value.to(target, non_blocking=non_blocking)
            moved[f.name] = value
        moved["csr"] = {k: v.to(device, non_blocking=non_blocking) for k, v in self.csr.items()}
        moved["row_masks"], moved["derived"] = {}, {}
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
        return replace(self, **pinned, csr={}, row_masks={}, derived={})


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
        y=(torch.stack(labels) if isinstance(labels[0], torch.Tensor)  # (B, T) float
           else torch.as_tensor(labels, dtype=torch.long)),
        env=torch.as_tensor(envs, dtype=torch.long),
        index=torch.as_tensor(index, dtype=torch.long),
        edge_gt=edge_gt,
        bonds=int(bond.max()) + 1 if bond.numel() else 0,
    )


# -- static shapes: batches padded to a few buckets -----------------------------------
@dataclass(frozen=True)
class Bucket:
    """A static batch shape: ``nodes`` (N), directed ``edges`` (E), ``bonds`` (U) and
    ``graphs`` (B) of a padded batch (:func:`pad_batch`).

    A batch of ``n`` nodes, ``e`` edges, ``u`` bonds and ``b`` graphs fits when
    ``n < nodes``, ``e <= edges``, ``u < bonds`` and ``b < graphs``: the padding always
    holds at least one node, one bond and one graph.
    """

    nodes: int
    edges: int
    bonds: int
    graphs: int

    def fits(self, nodes: int, edges: int, bonds: int, graphs: int) -> bool:
        """Whether a batch of these sizes fits (see the class docstring)."""
        return (nodes < self.nodes and edges <= self.edges and bonds < self.bonds
                and graphs < self.graphs)


def choose_buckets(num_nodes, num_edges, num_bonds, *, batch_size: int, max_buckets: int = 8,
                   samples: int = 2000, seed: int = 0) -> tuple[Bucket, ...]:
    """At most ``max_buckets`` static shapes that every batch of ``batch_size`` graphs
    of a dataset fits, chosen from its size distribution.

    The sizes of ``samples`` random batches (drawn from a NumPy generator of its own, so
    no random stream of training moves) give ``max_buckets - 1`` buckets at evenly spaced
    quantiles of the batch totals (nodes, edges and bonds, each at the same quantile);
    the last bucket holds the ``batch_size`` largest graphs of every count, so that any
    batch fits. Each size is rounded up to a multiple of 8. The padding overhead this
    gives on ogbg-molbbbp and GOOD-Motif is in ``benchmarks/speed/README.md``.

    Parameters
    ----------
    num_nodes, num_edges, num_bonds : array of int, shape (G,)
        Nodes, directed edges and undirected bonds of each graph of the training split.
    batch_size : int
        Graphs per batch (the last batch of an epoch may have fewer; it fits too).
    max_buckets : int
        At most this many shapes (>= 1).

    Returns
    -------
    tuple of Bucket, smallest first, no two equal.

    Raises
    ------
    ValueError
        If there is no graph, or ``batch_size`` or ``max_buckets`` is below 1.

    Examples
    --------
    >>> buckets = choose_buckets([3, 5, 4, 6], [4, 8, 6, 10], [2, 4, 3, 5], batch_size=2)
    >>> buckets[-1].fits(11, 18, 9, 2), len(buckets) <= 8
    (True, True)
    """
    import numpy as np

    sizes = np.stack([np.asarray(num_nodes, dtype=np.int64), np.asarray(num_edges, np.int64),
                      np.asarray(num_bonds, np.int64)])
    g = sizes.shape[1]
    if g == 0 or batch_size < 1 or max_buckets < 1:
        raise ValueError(f"choose_buckets needs graphs (got {g}), batch_size >= 1 "
                         f"(got {batch_size}) and max_buckets >= 1 (got {max_buckets})")
    b = min(batch_size, g)

    def up(x: float) -> int:
        return int(-(-int(np.ceil(x)) // 8) * 8)

    def bucket(n: float, e: float, u: float) -> Bucket:
        return Bucket(nodes=up(n + 1), edges=up(e), bonds=up(u + 1), graphs=batch_size + 1)

    worst = np.sort(sizes, axis=1)[:, g - b:].sum(axis=1)
    out = [bucket(*worst)]
    if max_buckets > 1 and g > b:
        rng = np.random.default_rng(seed)
        totals = np.stack([sizes[:, rng.choice(g, b, replace=False)].sum(axis=1)
                           for _ in range(samples)], axis=1)
        levels = np.linspace(0, 1, max_buckets)[1:]  # max_buckets - 1 quantiles, 1 included
        for q in levels:
            out.append(bucket(*np.quantile(totals, q, axis=1)))
    return tuple(sorted(set(out), key=lambda k: (k.nodes, k.edges, k.bonds)))


def bucket_for(buckets: Sequence[Bucket], nodes: int, edges: int, bonds: int,
               graphs: int) -> Bucket:
    """The first (smallest) bucket a batch of these sizes fits.

    Raises
    ------
    ValueError
        If none does (the buckets were chosen for other data or another batch size).
    """
    for bucket in buckets:
        if bucket.fits(nodes, edges, bonds, graphs):
            return bucket
    raise ValueError(f"a batch of {graphs} graphs, {nodes} nodes, {edges} edges and {bonds} "
                     f"bonds fits none of the {len(buckets)} buckets")


def pad_to_bucket(batch: GraphBatch, buckets: Sequence[Bucket]) -> GraphBatch:
    """``batch`` padded (:func:`pad_batch`) to the first of ``buckets`` that it fits
    (:func:`bucket_for`, whose ValueError it raises when none does)."""
    n, e = int(batch.node_graph.shape[0]), int(batch.src.shape[0])
    return pad_batch(batch, bucket_for(buckets, n, e, batch.num_bonds, batch.num_graphs))


def pad_batch(batch: GraphBatch, bucket: Bucket) -> GraphBatch:
    """``batch`` padded to the static shape ``bucket``, computing the same thing.

    As jraph's ``pad_with_graphs`` and PyG's ``transforms.Pad`` do, the padding is a graph
    of its own (the first padding graph holds every padding node and edge; the others are
    empty), so no real node exchanges a message with it. Padding nodes and edges come
    after the real ones, with zero features; padding edges are self-loops on the first
    padding node and belong to the last bond; padding graphs have label 0, environment
    -1 (no environment) and index -1. The masks (``node_mask``, ``edge_mask``,
    ``graph_mask``) keep the padding out of batch-norm statistics
    (:func:`grprune.encoders.base.masked_batch_norm`), the losses, the regularizers and
    the logged metrics; the readout of a real graph never sees it. Real bonds keep their
    ids and come first, so Gumbel noise drawn for the ``U`` bonds gives the real ones the
    values it gives them unpadded (CPU generators fill a tensor in order).

    Parameters
    ----------
    batch : GraphBatch
        Without padding; ``n`` nodes, ``e`` edges, ``u`` bonds, ``b`` graphs.
    bucket : Bucket
        One the batch :meth:`Bucket.fits`.

    Returns
    -------
    GraphBatch
        ``bucket.nodes`` nodes, ``bucket.edges`` edges, ``bucket.bonds`` bonds and
        ``bucket.graphs`` graphs, with its :meth:`GraphBatch.segments` computed.

    Raises
    ------
    ValueError
        If the batch is already padded or does not fit.
    """
    n, e, u, b = int(batch.node_graph.shape[0]), int(batch.src.shape[0]), batch.num_bonds, \
        batch.num_graphs
    if batch.padded or not bucket.fits(n, e, u, b):
        raise ValueError(f"cannot pad a batch of {b} graphs, {n} nodes, {e} edges, {u} bonds "
                         f"{'(already padded) ' if batch.padded else ''}to {bucket}")
    pn, pe, pb = bucket.nodes - n, bucket.edges - e, bucket.graphs - b
    dev = batch.device

    def grow(t: Tensor, extra: int, fill: int = 0) -> Tensor:
        pad = t.new_full((extra,) + tuple(t.shape[1:]), fill)
        return torch.cat([t, pad])

    def mask(real: int, total: int) -> Tensor:
        return torch.arange(total, device=dev) < real

    loop = torch.full((pe,), n, dtype=batch.src.dtype, device=dev)
    counts = torch.zeros(pb, dtype=batch.num_nodes.dtype, device=dev)
    pad_nodes, pad_edges = counts.clone(), counts.clone()
    pad_nodes[0], pad_edges[0] = pn, pe
    return GraphBatch(
        src=torch.cat([batch.src, loop]), dst=torch.cat([batch.dst, loop]),
        node_feat=grow(batch.node_feat, pn), edge_feat=grow(batch.edge_feat, pe),
        node_graph=grow(batch.node_graph, pn, b), edge_graph=grow(batch.edge_graph, pe, b),
        num_nodes=torch.cat([batch.num_nodes, pad_nodes]),
        num_edges=torch.cat([batch.num_edges, pad_edges]),
        bond=grow(batch.bond, pe, bucket.bonds - 1),
        y=grow(batch.y, pb), env=grow(batch.env, pb, -1), index=grow(batch.index, pb, -1),
        edge_gt=None if batch.edge_gt is None else grow(batch.edge_gt, pe),
        bonds=bucket.bonds, node_mask=mask(n, bucket.nodes), edge_mask=mask(e, bucket.edges),
        graph_mask=mask(b, bucket.graphs), real_graphs=b, real_edges=e,
    ).prepare_segments()
