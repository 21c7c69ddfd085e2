"""``grprune.ops``: segment reductions, bond numbering and the one per-segment ranking rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grprune.ops import (bond_ids, bond_ids_np, bond_max_np, bond_mean, bond_value,
                         bonds_by_first_edge, csr_segment_np, rank_in_segment, rank_in_segment_np,
                         segment_mean, segment_sum)


def test_rank_in_segment_by_hand_and_ties_by_position():
    # segment 0: values 0.5, 0.9, 0.5, 0.5 (three ties); segment 1: 0.1, 0.1; segment 2 empty
    values = [0.5, 0.9, 0.1, 0.5, 0.5, 0.1]
    segment = [0, 0, 1, 0, 0, 1]
    # ascending: 0 = lowest; of the tied 0.5s the earliest (position 0) ranks first
    asc = [0, 3, 0, 1, 2, 1]
    # descending: 0 = highest (0.9); then the tied 0.5s in input order
    desc = [1, 0, 0, 2, 3, 1]
    for fn, conv in ((rank_in_segment, torch.tensor), (rank_in_segment_np, np.array)):
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
    from grprune.draw import highlighted_bonds
    from grprune.explain_metrics import rank_within_graphs
    ptr = np.array([0, 4, 4, 7])
    score = np.array([0.5, 0.9, 0.5, 0.5, 0.1, 0.1, 0.1])
    g = csr_segment_np(ptr)
    assert rank_within_graphs(ptr, score).tolist() == \
        rank_in_segment_np(score, g, 3, descending=True).tolist() == [1, 0, 2, 3, 0, 1, 2]
    # the drawing marks the head of the same ranking
    assert highlighted_bonds(score[:4], np.zeros(4), top_k=2).tolist() == [True, True, False, False]


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
