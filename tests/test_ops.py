"""``grprune.ops`` and ``grprune.csr``: segment reductions, bond numbering and the one per-segment
ranking rule."""

from __future__ import annotations

from typing import Any, Callable
import numpy as np
import pytest
import torch

from grprune.csr import csr_segment_np
from grprune.ops import (bond_ids, bond_ids_np, bond_max_np, bond_mean, bond_value,
                         bonds_by_first_edge, rank_in_segment, rank_in_segment_np,
                         segment_mean, segment_sum)


def test_rank_in_segment_by_hand_and_ties_by_position():
    # segment 0: values 0.5, 0.9, 0.5, 0.5 (three ties); segment 1: 0.1, 0.1; segment 2 empty
    values = [0.5, 0.9, 0.1, 0.5, 0.5, 0.1]
    segment = [0, 0, 1, 0, 0, 1]
    # ascending: 0 = lowest; of the tied 0.5s the earliest (position 0) ranks first
    asc = [0, 3, 0, 1, 2, 1]
    # descending: 0 = highest (0.9); then the tied 0.5s in input order
    desc = [1, 0, 0, 2, 3, 1]
    cases: list[tuple[Callable[..., Any], Callable[..., Any]]] = [
        (rank_in_segment, torch.tensor), (rank_in_segment_np, np.array)]
    for fn, conv in cases:
        v, s = conv(values), conv(segment)
        assert fn(v, s, 3).tolist() == asc
        assert fn(v, s, 3, descending=True).tolist() == desc


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("descending", [False, True])
def test_rank_in_segment_torch_and_numpy_agree(seed, descending):
    rng = np.random.default_rng(seed)
    m, s = 200, 7
    values = np.round(rng.normal(size=m), 1).astype(np.float32)  # many ties
    values[rng.integers(0, m, 5)] = np.inf
    values[rng.integers(0, m, 5)] = -np.inf
    segment = rng.integers(0, s, m)  # not sorted
    t = rank_in_segment(torch.from_numpy(values), torch.from_numpy(segment), s, descending)
    n = rank_in_segment_np(values, segment, s, descending)
    assert t.tolist() == n.tolist()
    # a permutation of 0 .. size-1 inside each segment, in value order, ties by position
    for g in range(s):
        pos = np.flatnonzero(segment == g)
        r = n[pos]
        assert sorted(r.tolist()) == list(range(len(pos)))
        key = -values[pos].astype(np.float64) if descending else values[pos]
        assert r.tolist() == np.argsort(np.argsort(key, kind="stable"), kind="stable").tolist()


def test_rank_in_segment_np_rejects_nan():
    with pytest.raises(ValueError):
        rank_in_segment_np(np.array([0.1, np.nan]), np.array([0, 0]), 1)


def test_explain_ranking_is_ops_ranking():
    from grprune.explain_metrics import marked_bonds, rank_within_graphs
    ptr = np.array([0, 4, 4, 7])
    score = np.array([0.5, 0.9, 0.5, 0.5, 0.1, 0.1, 0.1])
    g = csr_segment_np(ptr)
    assert rank_within_graphs(ptr, score).tolist() == \
        rank_in_segment_np(score, g, 3, descending=True).tolist() == [1, 0, 2, 3, 0, 1, 2]
    # the drawing marks the head of the same ranking
    assert marked_bonds(score[:4], np.zeros(4), top_k=2).tolist() == [True, True, False, False]


def test_segment_sum_and_mean():
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    s = torch.tensor([0, 2, 0])
    assert segment_sum(v, s, 3).tolist() == [[6.0, 8.0], [0.0, 0.0], [3.0, 4.0]]
    assert segment_mean(v, s, 3).tolist() == [[3.0, 4.0], [0.0, 0.0], [3.0, 4.0]]
    from grprune import batch
    assert batch.segment_mean is segment_mean and batch.rank_in_segment is rank_in_segment


def test_bond_numberings():
    # edges of one graph: (2,1) (1,2) (0,1) (1,0) (2,0)
    src, dst = np.array([2, 1, 0, 1, 2]), np.array([1, 2, 1, 0, 0])
    # (lower, higher) order: {0,1} = 0, {0,2} = 1, {1,2} = 2
    assert bond_ids_np(src, dst).tolist() == [2, 2, 0, 0, 1]
    assert bond_ids(torch.from_numpy(src), torch.from_numpy(dst), 3).tolist() == [2, 2, 0, 0, 1]
    # first-edge order: {1,2} first (edge 0), {0,1} (edge 2), {0,2} (edge 4)
    b, first = bonds_by_first_edge(src, dst)
    assert b.tolist() == [0, 0, 1, 1, 2] and first.tolist() == [0, 2, 4]
    assert bond_max_np(np.array([0, 1, 0, 0, 1]), b, 3).tolist() == [1, 0, 1]
    bond = torch.tensor([2, 2, 0, 0, 1])
    assert bond_value(torch.tensor([7, 7, 3, 3, 5]), bond, 3).tolist() == [3, 5, 7]
    assert bond_mean(torch.tensor([1.0, 3.0, 2.0, 2.0, 5.0]), bond, 3).tolist() == [2.0, 5.0, 2.0]
    empty = np.zeros(0, dtype=np.int64)
    assert [a.tolist() for a in bonds_by_first_edge(empty, empty)] == [[], []]


# -- CSR segments (issue 49): sums and gathers without atomics --------------------------
def _csr_case(seed: int, rows: int = 300, segments: int = 120, width: int = 16,
              dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(seed)
    index = torch.randint(0, segments, (rows,), generator=g)
    values = torch.randn(rows, width, generator=g, dtype=dtype)
    return index, values, segments


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("seed", range(3))
def test_csr_segment_sum_equals_index_add_bit_for_bit_on_one_and_two_threads(seed, threads):
    """The CPU's sums (a sparse CSR product, parallel over segments) equal ``index_add_``'s
    on any thread count, and torch's one-time "beta" warning about sparse CSR tensors
    never reaches the user."""
    import warnings

    from grprune.csr import Segments, csr_gather, csr_segment_mean, csr_segment_sum
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        index, values, s = _csr_case(seed)
        seg = Segments.of(index, s)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert torch.equal(csr_segment_sum(values, seg), segment_sum(values, index, s))
        # long segments, more dimensions, one and no row
        for rows, segments, shape in ((4000, 2, (3,)), (300, 7, (2, 5)), (1, 3, ()),
                                      (0, 3, (4,))):
            at, rows_values = torch.randint(0, segments, (rows,)), torch.randn((rows, *shape))
            assert torch.equal(csr_segment_sum(rows_values, Segments.of(at, segments)),
                               segment_sum(rows_values, at, segments))
        assert torch.equal(csr_segment_mean(values, seg), segment_mean(values, index, s))
        # the gradient of a gather is the segment sum: as plain indexing's, bit for bit
        x = torch.randn(s, values.shape[1], requires_grad=True)
        y = x.detach().clone().requires_grad_(True)
        (csr_gather(x, seg) * values).sum().backward()
        (y[index] * values).sum().backward()
        assert torch.equal(csr_gather(x, seg), y[index])
        assert x.grad is not None and y.grad is not None and torch.equal(x.grad, y.grad)
    finally:
        torch.set_num_threads(before)


def test_csr_segment_sum_and_gather_gradients_by_gradcheck():
    from grprune.csr import Segments, csr_gather, csr_segment_sum
    index, values, s = _csr_case(0, rows=40, segments=15, width=3, dtype=torch.float64)
    seg = Segments.of(index, s)  # some of the 15 segments are empty
    assert (seg.lengths == 0).any()
    values.requires_grad_(True)
    x = torch.randn(s, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: csr_segment_sum(v, seg), (values,))
    assert torch.autograd.gradcheck(lambda t: csr_gather(t, seg), (x,))
    assert torch.autograd.gradgradcheck(lambda t: csr_gather(t, seg) ** 2, (x,))
    assert torch.autograd.gradgradcheck(lambda v: csr_segment_sum(v, seg) ** 2, (values,))


def test_csr_segments_by_hand_sorted_empty_and_integer():
    from grprune.csr import Segments, csr_gather, csr_segment_sum
    seg = Segments.of(torch.tensor([2, 0, 2, 0]), 4)
    assert seg.order is not None and seg.order.tolist() == [1, 3, 0, 2]
    assert seg.lengths.tolist() == [2, 0, 2, 0]
    v = torch.tensor([1.0, 2.0, 4.0, 8.0])
    assert csr_segment_sum(v, seg).tolist() == [10.0, 0.0, 5.0, 0.0]
    assert csr_segment_sum(torch.tensor([1, 2, 4, 8]), seg).tolist() == [10, 0, 5, 0]
    assert csr_gather(torch.tensor([1.0, 2.0, 3.0, 4.0]), seg).tolist() == [3.0, 1.0, 3.0, 1.0]
    ordered = Segments.of(torch.tensor([0, 0, 1]), 3, lengths=torch.tensor([2, 1, 0]),
                          is_sorted=True)
    assert ordered.order is None
    assert csr_segment_sum(torch.tensor([1.0, 2.0, 4.0]), ordered).tolist() == [3.0, 4.0, 0.0]
    nothing = Segments.of(torch.zeros(0, dtype=torch.long), 2)
    assert csr_segment_sum(torch.zeros(0, 5), nothing).tolist() == [[0.0] * 5] * 2
    assert csr_segment_sum(torch.zeros(0), Segments.of(torch.zeros(0, dtype=torch.long), 0)) \
        .shape == (0,)


def test_a_batch_keeps_its_segments_and_moves_them_along():
    from grprune.batch import SEGMENT_NAMES
    from grprune.compat import dgl
    from grprune.batch import collate
    graphs = []
    for n, edges in ((3, [(0, 1), (1, 0), (1, 2), (2, 1)]), (1, []), (2, [(1, 0), (0, 1)])):
        g = dgl.graph(([u for u, _ in edges], [v for _, v in edges]), num_nodes=n)
        g.ndata["feat"] = torch.ones(n, 2)
        graphs.append(g)
    batch = collate([(g, 0, 0, i) for i, g in enumerate(graphs)])
    batch.prepare_segments()
    assert set(batch.csr) == set(SEGMENT_NAMES)
    assert batch.segments("dst") is batch.csr["dst"]  # computed once
    assert batch.segments("node_graph").lengths.tolist() == [3, 1, 2]
    dst = batch.segments("dst")
    assert dst.order is not None and torch.equal(batch.dst[dst.order], batch.dst.sort().values)
    moved = batch.to("cpu")
    assert set(moved.csr) == set(SEGMENT_NAMES) and moved.csr is not batch.csr
    h = torch.arange(6.0).unsqueeze(1)
    assert batch.segment_sum(batch.gather(h, "src"), "dst").squeeze(1).tolist() == \
        segment_sum(h[batch.src], batch.dst, 6).squeeze(1).tolist()
    with pytest.raises(KeyError, match="choose from"):
        batch.segments("nodes")
