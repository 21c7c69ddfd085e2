"""Segment reductions, undirected bonds and per-segment ranking: the one place for each.

Everything that sums, averages or ranks per graph (or per bond) calls these, so a
rule (an empty segment gives 0, how ties rank, how bonds are numbered) is decided
once. Torch functions run on any device; the ``*_np`` twins are the same
functions over NumPy arrays, for code that works on saved results
(``edge_probs.npz``, :mod:`grprune.explain_metrics`).

Shapes: ``M`` rows, ``S`` segments, ``E`` directed edges, ``U`` undirected bonds.

**Bonds.** A bond is an unordered node pair ``{u, v}``; the two directed edges
``(u, v)`` and ``(v, u)`` belong to it. :func:`bond_ids` (and
:func:`bond_ids_np`) number the bonds by their (lower node, higher node) pair;
this is the numbering of ``GraphBatch.bond`` that selectors sample on.
:func:`bonds_by_first_edge` keeps the same grouping but numbers the bonds of one
graph in the order of their first directed edge, which is RDKit's bond order for
molecules: the numbering of per-graph outputs (:class:`grprune.evaluation.GraphScore`,
``grprune explain``, ``grprune predict``).

**Ranking and ties.** :func:`rank_in_segment` (and :func:`rank_in_segment_np`)
rank each value within its segment: rank 0 is the lowest value (the highest with
``descending=True``). **Ties rank by position: of equal values, the one earlier
in the input gets the smaller rank, in either direction.** So "the k
highest" (``rank < k``, descending) prefers the earlier of tied values, and the
tail of the same descending ranking ("the K % lowest") takes the later ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


# -- segment reductions ---------------------------------------------------------
def segment_sum(values: Tensor, segment: Tensor, num_segments: int) -> Tensor:
    """Sum rows of ``values`` into ``num_segments`` bins.

    Parameters
    ----------
    values : Tensor of shape (M, ...)
    segment : Tensor of shape (M,), int64 in ``[0, num_segments)``
    num_segments : int

    Returns
    -------
    Tensor of shape (S, ...); an empty bin gives 0.

    Examples
    --------
    >>> segment_sum(torch.tensor([1., 2., 4.]), torch.tensor([0, 2, 0]), 3).tolist()
    [5.0, 0.0, 2.0]
    """
    out = values.new_zeros((num_segments,) + tuple(values.shape[1:]))
    return out.index_add_(0, segment, values)


def segment_mean(values: Tensor, segment: Tensor, num_segments: int) -> Tensor:
    """Mean of rows per bin; an empty bin gives 0 (never NaN).

    Parameters
    ----------
    values : Tensor of shape (M, ...)
    segment : Tensor of shape (M,), int64 in ``[0, num_segments)``
    num_segments : int

    Returns
    -------
    Tensor of shape (S, ...)

    Examples
    --------
    >>> segment_mean(torch.tensor([1., 2., 4.]), torch.tensor([0, 2, 0]), 3).tolist()
    [2.5, 0.0, 2.0]
    """
    total = segment_sum(values, segment, num_segments)
    count = segment_sum(torch.ones_like(segment, dtype=values.dtype), segment, num_segments)
    count = count.clamp_min(1).view((-1,) + (1,) * (values.dim() - 1))
    return total / count


# -- CSR segments: sums and gathers without atomics -----------------------------
@dataclass(frozen=True)
class Segments:
    """A segment index in CSR form: which rows form each segment, and in what order.

    A segment sum over ``index`` adds, for each segment ``s``, the rows ``i`` with
    ``index[i] == s`` in input order. Laid out as CSR (rows reordered by a *stable*
    sort of ``index``, then ``lengths`` rows per segment), the sum is one
    :func:`torch.segment_reduce`: no atomic adds, no sort per call, the same on
    every run. The rows of one segment stay in input order, so on the CPU the sum
    equals ``index_add_`` bit for bit (both add them one after the other, from 0).

    Attributes
    ----------
    index : Tensor of shape (M,), int64 in ``[0, S)``
        Segment of each row.
    order : Tensor of shape (M,), int64, or None
        Stable argsort of ``index`` (row ``order[k]`` is the ``k``-th in CSR order);
        None when ``index`` is already sorted.
    lengths : Tensor of shape (S,), int64
        Rows per segment (an empty segment has 0).

    Examples
    --------
    >>> seg = Segments.of(torch.tensor([1, 0, 1]), 3)
    >>> seg.order.tolist(), seg.lengths.tolist()
    ([1, 0, 2], [1, 2, 0])
    """

    index: Tensor
    order: Tensor | None
    lengths: Tensor

    @classmethod
    def of(cls, index: Tensor, num_segments: int, lengths: Tensor | None = None,
           is_sorted: bool = False) -> "Segments":
        """The CSR layout of ``index`` (shape (M,), int64) over ``num_segments`` segments.

        ``lengths`` (shape (S,)) and ``is_sorted`` may be given when known (a batch's
        per-graph node counts); else the lengths are counted with ``index_add_``, which,
        unlike ``bincount`` on CUDA, does not wait for the device.
        """
        index = index.long()
        if lengths is None:
            lengths = index.new_zeros(num_segments).index_add_(0, index, torch.ones_like(index))
        order = None if is_sorted else torch.sort(index, stable=True).indices
        return cls(index=index, order=order, lengths=lengths.long())

    @property
    def num_segments(self) -> int:
        """``S``."""
        return int(self.lengths.shape[0])

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Segments":
        """A copy on ``device`` (``self`` when it is there already)."""
        if all(t is None or t.device == torch.device(device)
               for t in (self.index, self.order, self.lengths)):
            return self
        order = None if self.order is None else self.order.to(device, non_blocking=non_blocking)
        return Segments(self.index.to(device, non_blocking=non_blocking), order,
                        self.lengths.to(device, non_blocking=non_blocking))


#: ``torch.segment_reduce``, which torch also exports as ``torch._segment_reduce`` (the name
#: it means to keep)
_segment_reduce = getattr(torch, "_segment_reduce", None) or getattr(torch, "segment_reduce")


def _csr_reduce(values: Tensor, seg: Segments) -> Tensor:
    data = values if seg.order is None else values.index_select(0, seg.order)
    if seg.num_segments == 0:
        return values.new_zeros((0,) + tuple(values.shape[1:]))
    # unsafe: the lengths are not checked against M, which would read them back to the host
    return _segment_reduce(data.contiguous(), "sum", lengths=seg.lengths, axis=0, unsafe=True)


class _CSRSum(torch.autograd.Function):
    """:func:`csr_segment_sum` with its gradient, ``grad[index]`` (a gather: no atomics)."""

    @staticmethod
    def forward(ctx, values: Tensor, index: Tensor, order: Tensor | None,  # type: ignore[override]
                lengths: Tensor) -> Tensor:
        ctx.save_for_backward(index)
        return _csr_reduce(values, Segments(index, order, lengths))

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (index,) = ctx.saved_tensors
        return grad.index_select(0, index), None, None, None


class _CSRGather(torch.autograd.Function):
    """:func:`csr_gather` with its gradient, a :func:`csr_segment_sum` (no atomics)."""

    @staticmethod
    def forward(ctx, x: Tensor, index: Tensor, order: Tensor | None,  # type: ignore[override]
                lengths: Tensor) -> Tensor:
        ctx.seg = Segments(index, order, lengths)
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        seg = ctx.seg
        return csr_segment_sum(grad, seg), None, None, None


def csr_segment_sum(values: Tensor, seg: Segments) -> Tensor:
    """:func:`segment_sum` over a :class:`Segments` layout, without atomic adds.

    .. math:: \\mathrm{out}_s = \\sum_{i:\\ \\mathrm{index}_i = s} \\mathrm{values}_i

    Forward: one :func:`torch.segment_reduce` over the rows in CSR order. Backward:
    ``grad_out[index]``, a gather. Neither sorts nor adds atomically, so under
    ``torch.use_deterministic_algorithms(True)`` on CUDA it costs what it costs
    otherwise, while ``index_add_`` there sorts its index on every call. On the CPU the
    values equal :func:`segment_sum`'s bit for bit (the same additions in the same
    order); integer ``values`` go to :func:`segment_sum`.

    Parameters
    ----------
    values : Tensor of shape (M, ...)
    seg : Segments
        Over ``M`` rows and ``S`` segments.

    Returns
    -------
    Tensor of shape (S, ...); an empty segment gives 0.

    Examples
    --------
    >>> seg = Segments.of(torch.tensor([0, 2, 0]), 3)
    >>> csr_segment_sum(torch.tensor([1., 2., 4.]), seg).tolist()
    [5.0, 0.0, 2.0]
    """
    if not values.is_floating_point():
        return segment_sum(values, seg.index, seg.num_segments)
    return _CSRSum.apply(values, seg.index, seg.order, seg.lengths)


def csr_gather(x: Tensor, seg: Segments) -> Tensor:
    """``x[seg.index]`` whose gradient is a :func:`csr_segment_sum` (no atomic adds).

    The gradient of plain indexing, ``x[index]``, is ``index_put_(accumulate=True)``,
    which sorts ``index`` on every call in deterministic mode on CUDA; this one uses the
    sort that ``seg`` holds. Values and (on the CPU) gradients equal plain indexing's.

    Parameters
    ----------
    x : Tensor of shape (S, ...)
    seg : Segments
        ``index`` of shape (M,), values in ``[0, S)``.

    Returns
    -------
    Tensor of shape (M, ...)

    Examples
    --------
    >>> csr_gather(torch.tensor([1., 2.]), Segments.of(torch.tensor([1, 1, 0]), 2)).tolist()
    [2.0, 2.0, 1.0]
    """
    if not x.is_floating_point():
        return x[seg.index]
    return _CSRGather.apply(x, seg.index, seg.order, seg.lengths)


def csr_segment_mean(values: Tensor, seg: Segments) -> Tensor:
    """:func:`segment_mean` over a :class:`Segments` layout (:func:`csr_segment_sum`
    divided by the segment sizes; an empty segment gives 0). Shapes: (M, ...) -> (S, ...)."""
    total = csr_segment_sum(values, seg)
    count = seg.lengths.to(total.dtype).clamp_min(1).view((-1,) + (1,) * (values.dim() - 1))
    return total / count


def csr_segment_np(ptr: np.ndarray) -> np.ndarray:
    """Segment of each row of a CSR layout ``ptr`` (shape (S + 1,)): shape (M,), ``s``
    repeated ``ptr[s + 1] - ptr[s]`` times.

    Examples
    --------
    >>> csr_segment_np(np.array([0, 2, 2, 3])).tolist()
    [0, 0, 2]
    """
    ptr = np.asarray(ptr, dtype=np.int64)
    return np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))


# -- ranking --------------------------------------------------------------------
def rank_in_segment(values: Tensor, segment: Tensor, num_segments: int,
                    descending: bool = False, counts: Tensor | None = None) -> Tensor:
    """Rank of each value among the values of its segment (ties: see the module docstring).

    Rank 0 is the lowest value (the highest with ``descending``); of equal values
    the earlier one gets the smaller rank, in either direction.

    Parameters
    ----------
    values : Tensor of shape (M,), not NaN
    segment : Tensor of shape (M,), int64 in ``[0, num_segments)``
    num_segments : int
    descending : bool
    counts : Tensor of shape (num_segments,), int64, optional
        The rows per segment when known (a batch's ``num_edges`` for ``edge_graph``): they
        are then not counted again.

    Returns
    -------
    Tensor of shape (M,), int64, values in ``[0, size of the segment)``

    No step waits for the device (segment sizes come from ``index_add_``, not
    ``bincount``, whose CUDA kernel reads the data to size its output).

    Examples
    --------
    >>> rank_in_segment(torch.tensor([.5, .1, .9, .3]), torch.tensor([0, 0, 1, 1]), 2).tolist()
    [1, 0, 1, 0]
    >>> rank_in_segment(torch.tensor([.5, .5, .5]), torch.tensor([0, 0, 0]), 1, True).tolist()
    [0, 1, 2]
    """
    order = torch.argsort(values, descending=descending, stable=True)
    order = order[torch.argsort(segment[order], stable=True)]
    if counts is None:
        counts = segment.new_zeros(num_segments).index_add_(0, segment, torch.ones_like(segment))
    offsets = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device) - offsets[segment[order]]
    return rank


def top_fraction_in_segment(values: Tensor, segment: Tensor, num_segments: int,
                            fraction: float) -> Tensor:
    """The :math:`\\lceil f \\cdot n_s \\rceil` highest values of each segment (:math:`n_s`
    its size, :math:`f` = ``fraction``): PrunE's evaluation budget and CIGA's causal
    subgraph. Ties keep the earlier value (:func:`rank_in_segment`); the ceiling allows
    for float error (0.7 * 3 = 2.0999...96 keeps 3).

    Parameters
    ----------
    values : Tensor of shape (M,), not NaN
    segment : Tensor of shape (M,), int64 in ``[0, num_segments)``
    num_segments : int
    fraction : float in [0, 1]

    Returns
    -------
    Tensor of shape (M,), bool

    Examples
    --------
    >>> top_fraction_in_segment(torch.tensor([.1, .9, .5, .3]), torch.tensor([0, 0, 0, 1]),
    ...                         2, 0.5).tolist()
    [False, True, True, True]
    """
    rank = rank_in_segment(values, segment, num_segments, descending=True)
    size = segment.new_zeros(num_segments).index_add_(0, segment, torch.ones_like(segment))
    keep = torch.ceil(size.double() * fraction - 1e-9).long()
    return rank < keep[segment]


def rank_in_segment_np(values: np.ndarray, segment: np.ndarray, num_segments: int,
                       descending: bool = False) -> np.ndarray:
    """:func:`rank_in_segment` over NumPy arrays: the same ranks, the same tie rule.

    Parameters
    ----------
    values : np.ndarray of shape (M,), not NaN (``+-inf`` allowed)
    segment : np.ndarray of int, shape (M,), values in ``[0, num_segments)``
    num_segments : int
    descending : bool

    Returns
    -------
    np.ndarray of int64, shape (M,)

    Raises
    ------
    ValueError
        If ``values`` contains NaN.

    Examples
    --------
    >>> rank_in_segment_np(np.array([.2, .9, .2, .5, .5]), np.array([0, 0, 0, 1, 1]), 2,
    ...                    descending=True).tolist()
    [1, 0, 2, 0, 1]
    """
    values = np.asarray(values).reshape(-1)
    segment = np.asarray(segment, dtype=np.int64).reshape(-1)
    if values.dtype.kind == "f" and np.isnan(values).any():
        raise ValueError("values contain NaN")
    key = -values.astype(np.float64) if descending else values
    order = np.argsort(key, kind="stable")
    order = order[np.argsort(segment[order], kind="stable")]
    counts = np.bincount(segment, minlength=num_segments)
    offsets = np.cumsum(counts) - counts
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = np.arange(len(values)) - offsets[segment[order]]
    return rank


# -- bonds ----------------------------------------------------------------------
def bond_ids(src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """Id of the undirected bond of each directed edge, bonds in (lower, higher) node order.

    Parameters
    ----------
    src, dst : Tensor of shape (E,), int64
    num_nodes : int
        Number of nodes (ids are below it).

    Returns
    -------
    Tensor of shape (E,), int64
        Equal for ``(u, v)`` and ``(v, u)``, consecutive from 0.

    Examples
    --------
    >>> bond_ids(torch.tensor([2, 1, 0, 1]), torch.tensor([1, 2, 1, 0]), 3).tolist()
    [1, 1, 0, 0]
    """
    if src.numel() == 0:
        return torch.zeros(0, dtype=torch.long)
    lo = torch.minimum(src, dst)
    hi = torch.maximum(src, dst)
    _, inverse = torch.unique(lo * num_nodes + hi, return_inverse=True)
    return inverse


def bond_ids_np(src: np.ndarray, dst: np.ndarray, num_nodes: int | None = None) -> np.ndarray:
    """:func:`bond_ids` over NumPy arrays (the same numbering).

    Examples
    --------
    >>> bond_ids_np(np.array([2, 1, 0, 1]), np.array([1, 2, 1, 0])).tolist()
    [1, 1, 0, 0]
    """
    src = np.asarray(src, dtype=np.int64).reshape(-1)
    dst = np.asarray(dst, dtype=np.int64).reshape(-1)
    if src.size == 0:
        return np.zeros(0, dtype=np.int64)
    n = int(max(src.max(), dst.max())) + 1 if num_nodes is None else int(num_nodes)
    key = np.minimum(src, dst) * n + np.maximum(src, dst)
    _, inverse = np.unique(key, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


def bonds_by_first_edge(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bonds of :func:`bond_ids_np`, renumbered in the order of their first directed edge.

    For a molecule featurized by :func:`grprune.data.molecules.smiles_to_graph`
    (edges ``2k, 2k+1`` are RDKit bond ``k`` in both directions) bond ``k`` is
    RDKit bond ``k``.

    Parameters
    ----------
    src, dst : np.ndarray of int, shape (E,)
        Directed edges of one graph (local node ids).

    Returns
    -------
    bond_of_edge : np.ndarray of int64, shape (E,)
        Bond of each directed edge, in ``[0, U)``.
    bond_edge : np.ndarray of int64, shape (U,)
        First directed edge of each bond (its ``src``/``dst`` orient the bond).

    Examples
    --------
    >>> b, first = bonds_by_first_edge(np.array([2, 1, 0, 1]), np.array([1, 2, 1, 0]))
    >>> b.tolist(), first.tolist()
    ([0, 0, 1, 1], [0, 2])
    """
    pair = bond_ids_np(src, dst)
    if pair.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    u = int(pair.max()) + 1
    first = np.full(u, len(pair), dtype=np.int64)
    np.minimum.at(first, pair, np.arange(len(pair)))
    order = np.argsort(first, kind="stable")  # pair order -> first-edge order
    renumber = np.empty(u, dtype=np.int64)
    renumber[order] = np.arange(u)
    return renumber[pair], first[order]


def bond_mean(values: Tensor, bond: Tensor, num_bonds: int) -> Tensor:
    """Mean of each bond's directed-edge values: shape (U,) from (E,) (:func:`segment_mean`)."""
    return segment_mean(values, bond, num_bonds)


def bond_value(values: Tensor, bond: Tensor, num_bonds: int) -> Tensor:
    """One directed edge's value per bond, for values equal on both directions.

    Parameters
    ----------
    values : Tensor of shape (E,)
    bond : Tensor of shape (E,), int64
    num_bonds : int

    Returns
    -------
    Tensor of shape (U,)

    Examples
    --------
    >>> bond_value(torch.tensor([3, 3, 7, 7]), torch.tensor([1, 1, 0, 0]), 2).tolist()
    [7, 3]
    """
    return values.new_zeros(num_bonds).scatter_(0, bond, values)


def bond_max_np(values: np.ndarray, bond_of_edge: np.ndarray, num_bonds: int) -> np.ndarray:
    """Largest directed-edge value per bond (0 for none), e.g. "either direction is a motif edge".

    Examples
    --------
    >>> bond_max_np(np.array([0, 1, 0, 0]), np.array([0, 0, 1, 1]), 2).tolist()
    [1, 0]
    """
    out = np.zeros(num_bonds, dtype=np.int64)
    np.maximum.at(out, np.asarray(bond_of_edge), np.asarray(values).astype(np.int64))
    return out


# -- checks -----------------------------------------------------------------------
def all_finite(tensors: list[Tensor]) -> Tensor:
    """Whether every value of ``tensors`` is finite (no NaN, no ±inf): a bool 0-dim Tensor on
    the first tensor's device, computed there without a host synchronisation.

    The largest absolute value over all tensors (their joint :math:`\\infty`-norm,
    :func:`torch.nn.utils.get_total_norm`, one ``_foreach_norm`` per device and dtype, a
    NaN propagating through the maxima) is finite exactly when every value is; torch
    before 2.6, which lacks it, checks each tensor with :func:`torch.isfinite`.

    Examples
    --------
    >>> all_finite([torch.ones(3), torch.zeros(2, 2)]).item()
    True
    >>> all_finite([torch.ones(3), torch.tensor([1.0, float("nan")])]).item()
    False
    """
    if not tensors:
        return torch.tensor(True)
    total_norm = getattr(torch.nn.utils, "get_total_norm", None)
    if total_norm is not None:
        return torch.isfinite(total_norm(tensors, float("inf")))
    return torch.stack([torch.isfinite(t).all() for t in tensors]).all()
