"""Explanation metrics of the paper: pure functions over per-graph CSR arrays of bonds.

They are computed by ``grprune explain`` (:mod:`grprune.explain`, over a split
part and over its correctly predicted graphs) and, per epoch, by the trainer's
selector diagnostics (:mod:`grprune.diagnostics`).

The metrics are pure functions of three arrays over the bonds of ``G`` graphs:

* ``ptr`` : int array of shape (G + 1,), CSR offsets: graph ``g`` owns bonds
  ``ptr[g] : ptr[g + 1]`` (``U_g = ptr[g + 1] - ptr[g]`` of them);
* ``score`` : float array of shape (U,), the keep probability
  :math:`p = \\sigma(w)` of each bond, or any score increasing in it. ``grprune
  explain`` passes :func:`ranking_score`: the logit :math:`w` (it orders bonds
  like ``p`` but does not saturate to ties at ``p = 1.0`` in float32) rounded
  to :data:`RANK_DECIMALS` decimals, so that bonds the model cannot tell apart
  (the symmetric bonds of a cycle have equal logits up to float rounding, which
  differs between CPU and CUDA) tie instead of being ordered by rounding noise;
* ``gt`` : int array of shape (U,), 1 for a bond of the invariant motif
  :math:`G_c`, 0 for a spurious bond (:math:`G_s`).

All metrics count undirected bonds, not directed edges: both directions of a
bond share one logit, so counting them twice would only double every count
(ROC-AUC is the same either way).

**Ranking and ties.** Within each graph the bonds are ranked once, by score
descending, with :func:`grprune.ops.rank_in_segment_np` and its one tie rule:
of equal scores the lower bond id ranks first (:func:`rank_within_graphs`).
"Top-k" takes the head of that ranking and "the K% lowest" its tail, so the two
are complements. In GOOD-Motif and SPMotif graphs the motif bonds come after
the base bonds, so ties count against the selector in both metrics.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from grprune.csr import csr_segment_np
from grprune.ops import rank_in_segment_np

#: K (percent of each graph's bonds) of Recall@K / Precision@K (paper Table, appendix)
RECALL_KS = (10, 20, 30, 40, 50)
#: factors f of the top-ceil(f |G_c|) counts (paper Figure 2: 1.5, 3, 4 and 5, the transition)
TOPK_FACTORS = (1.5, 3.0, 4.0, 5.0)
#: decimals of the logit kept for ranking bonds (:func:`ranking_score`)
RANK_DECIMALS = 4


# -- metrics ------------------------------------------------------------------
def _check(ptr: np.ndarray, *arrays: np.ndarray) -> np.ndarray:
    ptr = np.asarray(ptr, dtype=np.int64).reshape(-1)
    if len(ptr) == 0 or ptr[0] != 0 or np.any(np.diff(ptr) < 0):
        raise ValueError("ptr must start at 0 and be non-decreasing")
    for a in arrays:
        if len(a) != ptr[-1]:
            raise ValueError(f"array of length {len(a)} for ptr[-1] = {ptr[-1]} bonds")
    return ptr


def ranking_score(logits: np.ndarray) -> np.ndarray:
    """The score bonds are ranked by: the logit rounded to :data:`RANK_DECIMALS` decimals.

    Logits that differ only by float32 rounding (about 1e-7; CPU and CUDA sum
    in different orders) become equal, so structurally identical bonds tie
    and the tie rule decides, the same on every device.

    Parameters
    ----------
    logits : np.ndarray of float, shape (U,)
        Selector logits :math:`w` (``+inf`` without a selector).

    Returns
    -------
    np.ndarray of float64, shape (U,)

    Examples
    --------
    >>> ranking_score(np.array([0.25000003, 0.25, -1.23456])).tolist()
    [0.25, 0.25, -1.2346]
    """
    return np.round(np.asarray(logits, dtype=np.float64), RANK_DECIMALS)


def marked_bonds(bond_logits: np.ndarray, bond_weight: np.ndarray,
                 top_k: int | None = None) -> np.ndarray:
    """Which bonds of one graph a picture marks (``explain``, ``predict --draw``) and
    fidelity removes.

    Parameters
    ----------
    bond_logits : np.ndarray of float, shape (U,)
        Selector logit of each bond (``+inf`` without a selector), ranked by
        :func:`ranking_score`.
    bond_weight : np.ndarray of float, shape (U,)
        Evaluation mask of each bond (1 = kept).
    top_k : int, optional
        None: the kept bonds, ``bond_weight > 0.5``. Otherwise the ``top_k`` bonds of
        highest score (all of them if there are fewer), ties broken by the lower bond id
        as in :func:`rank_within_graphs`.

    Returns
    -------
    np.ndarray of bool, shape (U,)

    Examples
    --------
    >>> marked_bonds(np.array([-1., 2., 2., -3.]), np.array([0., 1., 1., 0.]), top_k=1).tolist()
    [False, True, False, False]
    >>> marked_bonds(np.array([-1., 2., 2., -3.]), np.array([0., 1., 1., 0.])).tolist()
    [False, True, True, False]
    """
    if top_k is None:
        return np.asarray(bond_weight) > 0.5
    score = ranking_score(bond_logits)
    rank = rank_in_segment_np(score, np.zeros(len(score), dtype=np.int64), 1, descending=True)
    return rank < max(int(top_k), 0)


def graph_of_bonds(ptr: np.ndarray) -> np.ndarray:
    """Graph of each bond: shape (U,), ``g`` repeated ``U_g`` times."""
    return csr_segment_np(ptr)


def rank_within_graphs(ptr: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Rank of each bond in its graph: 0 = highest score.

    :func:`grprune.ops.rank_in_segment_np` with ``descending=True``: ties are
    broken by the bond's position in its graph, the lower id ranks first (higher).

    Parameters
    ----------
    ptr : np.ndarray of int, shape (G + 1,)
    score : np.ndarray of float, shape (U,), finite or +-inf (not NaN)

    Returns
    -------
    np.ndarray of int64, shape (U,), values in ``[0, U_g)``

    Examples
    --------
    >>> rank_within_graphs(np.array([0, 3, 5]), np.array([.2, .9, .2, .5, .5])).tolist()
    [1, 0, 2, 0, 1]
    """
    score = np.asarray(score, dtype=np.float64).reshape(-1)
    ptr = _check(ptr, score)
    if np.isnan(score).any():
        raise ValueError("score contains NaN")
    return rank_in_segment_np(score, graph_of_bonds(ptr), len(ptr) - 1, descending=True)


def edge_rocauc(score: np.ndarray, gt: np.ndarray) -> float | None:
    """ROC-AUC of bond scores against ground-truth motif bonds, pooled over graphs.

    .. math::
        \\mathrm{AUC} = P(s_i > s_j) + \\tfrac12 P(s_i = s_j),\\quad
        i \\in G_c,\\ j \\in G_s

    over all pairs of a motif bond and a spurious bond of the given graphs
    (ties count one half; :func:`sklearn.metrics.roc_auc_score`). Paper
    Figure 4b reports it over the correctly predicted test graphs.

    Parameters
    ----------
    score : np.ndarray of float, shape (U,)
    gt : np.ndarray of int, shape (U,)

    Returns
    -------
    float or None
        None when there are no bonds or only one class.

    Examples
    --------
    >>> edge_rocauc(np.array([.9, .8, .1, .8]), np.array([1, 1, 0, 0]))
    0.875
    """
    gt = np.asarray(gt).reshape(-1)
    if len(gt) == 0 or gt.min() == gt.max():
        return None
    from sklearn.metrics import roc_auc_score
    # ranks, not raw values: roc_auc_score rejects +-inf; ties stay ties
    s = np.asarray(score, dtype=np.float64).reshape(-1)
    _, dense = np.unique(s, return_inverse=True)
    return float(roc_auc_score(gt, dense.reshape(-1)))


def spurious_at_k(ptr: np.ndarray, score: np.ndarray, gt: np.ndarray,
                  ks: Sequence[float] = RECALL_KS,
                  rank: np.ndarray | None = None) -> dict[str, dict[str, Any]]:
    """Recall@K and Precision@K of "the K% lowest bonds are spurious" (paper appendix).

    Per graph, the :math:`n_g = \\lfloor K \\cdot U_g / 100 \\rfloor` bonds of
    lowest score (the tail of :func:`rank_within_graphs`; ties: the higher bond
    id counts as lower) are predicted spurious. Counts are then summed over the
    graphs (micro-average):

    .. math::
        \\mathrm{Precision@K} = \\frac{\\sum_g |S_g \\cap G_{s,g}|}{\\sum_g n_g},\\qquad
        \\mathrm{Recall@K} = \\frac{\\sum_g |S_g \\cap G_{s,g}|}{\\sum_g |G_{s,g}|}

    where :math:`S_g` is the predicted set and :math:`G_{s,g}` the spurious
    bonds (``gt == 0``) of graph ``g``. A graph with :math:`n_g = 0` (fewer
    than 100/K bonds) predicts nothing; a graph without spurious bonds adds
    its predictions (all wrong) to the precision denominator only.

    Parameters
    ----------
    ptr : np.ndarray of int, shape (G + 1,)
    score : np.ndarray of float, shape (U,)
    gt : np.ndarray of int, shape (U,)
    ks : sequence of numbers in [0, 100]
        K in percent.
    rank : np.ndarray of int, shape (U,), optional
        :func:`rank_within_graphs` of ``ptr`` and ``score``, when the caller has it.

    Returns
    -------
    dict
        ``str(K)`` -> ``{"recall", "precision"}`` (fractions in [0, 1]; None
        when the denominator is 0) and the counts ``"predicted"``
        (:math:`\\sum n_g`), ``"spurious"`` (:math:`\\sum |G_{s,g}|`),
        ``"hits"``.

    Examples
    --------
    >>> r = spurious_at_k(np.array([0, 4]), np.array([.9, .8, .1, .3]),
    ...                   np.array([1, 1, 0, 1]), ks=[50])["50"]
    >>> r["precision"], r["recall"], r["predicted"]
    (0.5, 1.0, 2)
    """
    score = np.asarray(score, dtype=np.float64).reshape(-1)
    gt = np.asarray(gt).reshape(-1)
    ptr = _check(ptr, score, gt)
    rank = rank_within_graphs(ptr, score) if rank is None else rank
    g = graph_of_bonds(ptr)
    size = np.diff(ptr)
    spurious = gt == 0
    out: dict[str, dict[str, Any]] = {}
    for k in ks:
        if not 0 <= k <= 100:
            raise ValueError(f"K must be a percentage in [0, 100], got {k}")
        n = np.floor(np.float64(k) * size / 100.0 + 1e-9).astype(np.int64)
        predicted = rank >= (size - n)[g]
        hits = int(np.sum(predicted & spurious))
        n_pred, n_spur = int(n.sum()), int(spurious.sum())
        out[_key(k)] = {"recall": hits / n_spur if n_spur else None,
                        "precision": hits / n_pred if n_pred else None,
                        "predicted": n_pred, "spurious": n_spur, "hits": hits}
    return out


def top_k_counts(ptr: np.ndarray, score: np.ndarray, gt: np.ndarray,
                 factor: float = 1.5) -> dict[str, Any]:
    """Motif and spurious bonds among each graph's top-scored bonds (paper Figure 2).

    Per graph with :math:`|G_c| > 0` motif bonds, take the
    :math:`k_g = \\min(\\lceil f \\cdot |G_c| \\rceil, U_g)` bonds of highest
    score (head of :func:`rank_within_graphs`; ties: lower bond id first) and
    count those in :math:`G_c` and in :math:`G_s`; report the means over those
    graphs. The oracle (motif first) has :math:`|G_c|` and
    :math:`k_g - |G_c|`.

    Parameters
    ----------
    ptr : np.ndarray of int, shape (G + 1,)
    score : np.ndarray of float, shape (U,)
    gt : np.ndarray of int, shape (U,)
    factor : float
        ``f``; the paper uses 1.5 and shows 5 for comparison.

    Returns
    -------
    dict
        ``factor``; ``graphs`` (graphs with motif bonds) and
        ``graphs_without_motif`` (left out); means ``k``, ``gc``, ``gs``,
        ``gc_oracle``, ``gs_oracle`` (None without graphs).

    Examples
    --------
    >>> c = top_k_counts(np.array([0, 4]), np.array([.9, .8, .7, .1]),
    ...                  np.array([1, 0, 0, 1]), factor=1.5)
    >>> c["k"], c["gc"], c["gs"], c["gc_oracle"], c["gs_oracle"]
    (3.0, 1.0, 2.0, 2.0, 1.0)
    """
    score = np.asarray(score, dtype=np.float64).reshape(-1)
    gt = np.asarray(gt).reshape(-1)
    ptr = _check(ptr, score, gt)
    ng = len(ptr) - 1
    rank = rank_within_graphs(ptr, score)
    g = graph_of_bonds(ptr)
    size = np.diff(ptr)
    motif = gt == 1
    gc = np.bincount(g, weights=motif, minlength=ng).astype(np.int64)
    k = np.minimum(np.ceil(float(factor) * gc - 1e-9).astype(np.int64), size)
    top = rank < k[g]
    gc_top = np.bincount(g, weights=top & motif, minlength=ng)
    gs_top = np.bincount(g, weights=top & ~motif, minlength=ng)
    has = gc > 0
    n = int(has.sum())

    def mean(a):
        return float(np.mean(a[has])) if n else None

    return {"factor": float(factor), "graphs": n, "graphs_without_motif": int(ng - n),
            "k": mean(k), "gc": mean(gc_top), "gs": mean(gs_top),
            "gc_oracle": mean(np.minimum(gc, k)), "gs_oracle": mean(k - np.minimum(gc, k))}


def select_graphs(ptr: np.ndarray, keep: np.ndarray, *arrays: np.ndarray
                  ) -> tuple[np.ndarray, ...]:
    """The bonds of a subset of graphs.

    Parameters
    ----------
    ptr : np.ndarray of int, shape (G + 1,)
    keep : np.ndarray of bool, shape (G,)
    *arrays : np.ndarray of shape (U, ...)

    Returns
    -------
    (ptr', *arrays')
        CSR offsets of the kept graphs, shape (G' + 1,), and each array
        restricted to their bonds.
    """
    ptr = _check(ptr, *arrays)
    keep = np.asarray(keep, dtype=bool)
    size = np.diff(ptr)[keep]
    bond_keep = keep[graph_of_bonds(ptr)]
    new_ptr = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
    return (new_ptr, *(np.asarray(a)[bond_keep] for a in arrays))


def explanation_metrics(ptr: np.ndarray, score: np.ndarray, gt: np.ndarray,
                        ks: Sequence[float] = RECALL_KS,
                        factors: Sequence[float] = TOPK_FACTORS) -> dict[str, Any]:
    """Every explanation metric of one set of graphs.

    Parameters
    ----------
    ptr, score, gt : see the module docstring.
    ks : percentages of :func:`spurious_at_k`.
    factors : factors of :func:`top_k_counts`.

    Returns
    -------
    dict
        ``graphs``, ``bonds``, ``motif_bonds``, ``rocauc`` (:func:`edge_rocauc`),
        ``at_k`` (:func:`spurious_at_k`), ``top_k`` (``str(f)`` ->
        :func:`top_k_counts`).
    """
    ptr = _check(ptr, score, gt)
    return {"graphs": int(len(ptr) - 1), "bonds": int(ptr[-1]),
            "motif_bonds": int(np.sum(np.asarray(gt) == 1)),
            "rocauc": edge_rocauc(score, gt),
            "at_k": spurious_at_k(ptr, score, gt, ks),
            "top_k": {_key(f): top_k_counts(ptr, score, gt, f) for f in factors}}


def _key(x: float) -> str:
    """``10 -> "10"``, ``1.5 -> "1.5"``, ``5.0 -> "5"``."""
    return str(int(x)) if float(x) == int(x) else str(x)

