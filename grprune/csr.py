"""CSR segments: segment sums and gathers without atomic adds, the same on every run.

A :class:`Segments` holds a segment index laid out as CSR (its rows stably sorted by
segment, and the rows per segment); :func:`csr_segment_sum`, :func:`csr_segment_mean` and
:func:`csr_gather` compute :func:`grprune.ops.segment_sum`, :func:`grprune.ops.segment_mean`
and plain indexing over it, forward and backward, with no atomic add and no sort per call
(what ``torch.use_deterministic_algorithms(True)`` on CUDA otherwise costs).
:func:`csr_segment_np` is the segment of each row of a NumPy CSR layout.

Shapes: ``M`` rows, ``S`` segments.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from grprune.ops import segment_sum


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


#: torch warns once per process, when the first sparse CSR tensor is made, that they are beta
_csr_warned = False

#: whether the CPU sums through a sparse product (:func:`_sparse_sum`); off, it takes the
#: ``segment_reduce`` path that CUDA takes (tests that trace a step as a CUDA graph keeps it)
SPARSE_ON_CPU = True


def _sparse_sum(values: Tensor, seg: Segments) -> Tensor:
    """The CPU's segment sum: a sparse ``(S, M)`` CSR matrix of ones times the rows.

    Torch's CPU product splits the output rows (the segments) between its threads and adds
    each segment's rows one after the other in CSR order, so the numbers equal
    ``segment_reduce``'s and ``index_add_``'s bit for bit on any thread count, while
    ``segment_reduce`` runs on one thread (3-7x slower on molecule batches,
    ``benchmarks/speed/README.md``)."""
    global _csr_warned
    m, s = values.shape[0], seg.num_segments
    ptr = seg.lengths.new_zeros(s + 1)
    torch.cumsum(seg.lengths, 0, out=ptr[1:])
    cols = seg.order if seg.order is not None else torch.arange(m, device=values.device)
    if _csr_warned:
        ones = torch.sparse_csr_tensor(ptr, cols, values.new_ones(m), (s, m),
                                       check_invariants=False)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ones = torch.sparse_csr_tensor(ptr, cols, values.new_ones(m), (s, m),
                                           check_invariants=False)
        _csr_warned = True
    out = torch.sparse.mm(ones, values.reshape(m, math.prod(values.shape[1:])))
    return out.reshape((s,) + tuple(values.shape[1:]))


def _csr_reduce(values: Tensor, seg: Segments) -> Tensor:
    if seg.num_segments == 0:
        return values.new_zeros((0,) + tuple(values.shape[1:]))
    if (SPARSE_ON_CPU and values.device.type == "cpu"
            and values.dtype in (torch.float32, torch.float64)
            and not torch.compiler.is_compiling()):
        return _sparse_sum(values, seg)
    data = values if seg.order is None else values.index_select(0, seg.order)
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

    Forward: one :func:`torch.segment_reduce` over the rows in CSR order (on the CPU, a
    sparse CSR matrix of ones times the rows, which adds them in the same order on every
    thread count and is parallel where ``segment_reduce`` is not). Backward:
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
