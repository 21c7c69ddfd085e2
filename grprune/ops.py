"""Segment reductions, undirected bonds and per-segment ranking: the one place for each.

Everything that sums, averages or ranks per graph (or per bond) calls these, so a
rule (an empty segment gives 0, how ties rank, how bonds are numbered) is decided
once. Torch functions run on any device; the ``*_np`` twins are the same
functions over NumPy arrays, for code that works on saved results
(``edge_probs.npz``, :mod:`grprune.explain_metrics`). The same sums over a CSR layout,
without atomic adds, are :mod:`grprune.csr`'s.

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
    total_norm = getattr(torch.nn.utils, "get_total_norm", None)  # torch >= 2.6 only
    if total_norm is not None:
        return torch.isfinite(total_norm(tensors, float("inf")))
    return torch.stack([torch.isfinite(t).all() for t in tensors]).all()
