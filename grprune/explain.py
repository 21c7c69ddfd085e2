"""Explanations of a run: edge keep probabilities, pictures and explanation metrics.

:func:`explain_run` is ``grprune explain``: it scores graphs of one split part
with a finished run's model (:mod:`grprune.inference`), writes one row per
undirected bond to ``edges.csv``, one picture per chosen graph
(:mod:`grprune.draw`) and, on data with ground-truth motif edges (GOOD-Motif,
SPMotif), the explanation metrics of the paper to ``metrics.json``.

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
descending, ties broken by the lower bond id first (:func:`rank_within_graphs`).
"Top-k" takes the head of that ranking and "the K% lowest" its tail, so the two
are complements. In GOOD-Motif and SPMotif graphs the motif bonds come after
the base bonds, so ties count against the selector in both metrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from grprune.errors import GrpruneError

#: K (percent of each graph's bonds) of Recall@K / Precision@K (paper Table, appendix)
RECALL_KS = (10, 20, 30, 40, 50)
#: factors f of the top-ceil(f |G_c|) counts (paper Figure 2: 1.5, and 5 for the transition)
TOPK_FACTORS = (1.5, 5.0)
#: decimals of the logit kept for ranking bonds (:func:`ranking_score`)
RANK_DECIMALS = 4
#: graphs drawn when --graphs is not given
DEFAULT_GRAPHS = 8
MANIFEST = "explain.json"


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


def graph_of_bonds(ptr: np.ndarray) -> np.ndarray:
    """Graph of each bond: shape (U,), ``g`` repeated ``U_g`` times."""
    ptr = np.asarray(ptr, dtype=np.int64)
    return np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))


def rank_within_graphs(ptr: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Rank of each bond in its graph: 0 = highest score.

    Ties are broken by the bond's position in its graph: the lower id ranks
    first (higher).

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
    g = graph_of_bonds(ptr)
    local = np.arange(len(score)) - ptr[g]
    order = np.lexsort((local, -score, g))
    rank = np.empty(len(score), dtype=np.int64)
    rank[order] = np.arange(len(score)) - ptr[g[order]]
    return rank


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
                  ks: Sequence[float] = RECALL_KS) -> dict[str, dict[str, Any]]:
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
    rank = rank_within_graphs(ptr, score)
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


# -- grprune explain ---------------------------------------------------------
def parse_graph_ids(text: str) -> list[int]:
    """``"3,17,40-45"`` -> ``[3, 17, 40, 41, 42, 43, 44, 45]`` (order kept, duplicates dropped).

    Raises
    ------
    GrpruneError
        On anything but non-negative integers and ``a-b`` ranges with ``a <= b``.
    """
    out: list[int] = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        lo, sep, hi = item.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise GrpruneError(f"bad graph id {item!r} in --graphs {text!r}: expected "
                               f"indices and ranges like 3,17,40-45") from None
        if a < 0 or b < a:
            raise GrpruneError(f"bad graph range {item!r} in --graphs {text!r}")
        out.extend(range(a, b + 1))
    if not out:
        raise GrpruneError(f"--graphs {text!r} names no graph")
    return list(dict.fromkeys(out))


def check_graph_ids(dataset, part: str, ids: Sequence[int]) -> None:
    """Check that every id is a graph of ``part``.

    Raises
    ------
    GrpruneError
        For an id outside the dataset or outside the part (the message says
        which part the graph is in).
    """
    n = len(dataset)
    members = set(np.asarray(dataset.splits[part]).tolist())
    for i in ids:
        if not 0 <= i < n:
            raise GrpruneError(f"graph {i} does not exist: {dataset.name} has {n} graphs "
                               f"(0-{n - 1})")
        if i not in members:
            where = [p for p, idx in dataset.splits.items() if i in set(np.asarray(idx).tolist())]
            hint = (f"it is in {', '.join(where)}; pass --part {where[0]}" if where
                    else "it is in no split part")
            raise GrpruneError(f"graph {i} is not in part {part!r} ({hint})")


@dataclass
class ExplainResult:
    """What :func:`explain_run` wrote.

    Attributes
    ----------
    out_dir : Path
    files : list of str
        File names written under ``out_dir``.
    graphs : list of int
        Dataset indices drawn.
    metrics : dict or None
        ``metrics.json``'s content; None when skipped.
    notes : list of str
        Why metrics were skipped, pictures that could not be drawn, ...
    """

    out_dir: Path
    files: list[str] = field(default_factory=list)
    graphs: list[int] = field(default_factory=list)
    metrics: dict | None = None
    notes: list[str] = field(default_factory=list)


def _csv_bytes(df) -> bytes:
    return df.to_csv(index=False, float_format="%.6g").encode()


def _pred_text(prob: np.ndarray) -> str:
    c = int(np.argmax(prob))
    if len(prob) == 2:
        return f"p(y=1) = {prob[1]:.3f}"
    return f"predicted {c} (p = {prob[c]:.3f})"


def explain_run(run, *, part: str = "test", graph_ids: Sequence[int] | None = None,
                top_k: int | None = None, fmt: str = "png", out_dir: str | Path | None = None,
                log: Callable[[str], None] = lambda msg: None) -> ExplainResult:
    """Explain a finished run: ``edges.csv``, pictures and ``metrics.json``.

    Parameters
    ----------
    run : grprune.inference.Run
        From :func:`grprune.inference.load_run`.
    part : str
        Split part (``test``, ``valid``, ``train``, ``id-test``, ...). The part
        is taken as the run used it (``data.limit`` applied).
    graph_ids : sequence of int, optional
        Dataset indices to draw and list in ``edges.csv``; each must be in
        ``part`` (the full part, ``data.limit`` not applied). Default: the
        first :data:`DEFAULT_GRAPHS` graphs of the part.
    top_k : int, optional
        Mark the top-K bonds by keep probability instead of the kept bonds.
    fmt : {"png", "svg"}
    out_dir : path, optional
        Default ``RUN_DIR/explain``. Files of a previous explanation there
        (listed in its ``explain.json``) that this one does not write are removed.
    log : callable
        Receives progress notes.

    Returns
    -------
    ExplainResult

    Raises
    ------
    GrpruneError
        Unknown part, graph id outside the dataset or the part, bad ``top_k``.
    """
    import pandas as pd

    from grprune import results as R
    from grprune.draw import (draw_graph, draw_molecule, highlight_caption, highlighted_bonds,
                              parse_molecule, rdkit_bond_ids, rdkit_drawing_error)

    if fmt not in ("png", "svg"):
        raise GrpruneError(f"unknown picture format {fmt!r}. Choices: png, svg")
    if top_k is not None and top_k < 1:
        raise GrpruneError(f"--top-k must be at least 1, got {top_k}")
    out = Path(out_dir) if out_dir is not None else run.run_dir / "explain"
    if out.exists() and not out.is_dir():
        raise GrpruneError(f"--out {out} exists and is not a directory")
    dataset = run.load_dataset()
    part_idx = run.part_indices(dataset, part)
    if graph_ids is None:
        ids = [int(i) for i in part_idx[:DEFAULT_GRAPHS]]
    else:
        ids = [int(i) for i in graph_ids]
        check_graph_ids(dataset, part, ids)
    res = ExplainResult(out_dir=out, graphs=ids)
    smiles = getattr(dataset, "smiles", None)
    has_gt = bool(getattr(dataset, "has_edge_gt", False))
    metrics_wanted = has_gt and run.learned_selector
    if not has_gt:
        res.notes.append(f"{dataset.name} has no ground-truth motif edges: explanation "
                         f"metrics skipped (pictures and edges.csv only)")
    elif not run.learned_selector:
        why = ("the run has no learned selector" if run.model.selector is None
               or not getattr(run.model.selector, "learned", False)
               else "the reported model is a warm-up epoch, evaluated without its selector")
        res.notes.append(f"explanation metrics skipped: {why} (every keep probability is 1)")

    # score the whole part for the metrics, or just the chosen graphs
    todo = list(dict.fromkeys([int(i) for i in part_idx] if metrics_wanted else [])
                | dict.fromkeys(ids))
    log(f"scoring {len(todo)} graphs of {dataset.name} ({part}) on {run.device}")
    scores = dict(zip(todo, run.score([dataset.graphs[i] for i in todo])))
    labels = dataset.labels.numpy()
    num_classes = run.num_classes

    # edges.csv: one row per undirected bond of the chosen graphs
    rows = []
    mol_cache: dict[int, tuple[Any, np.ndarray] | None] = {}
    for i in ids:
        s = scores[i]
        bond_ids = np.arange(s.num_bonds)
        if smiles is not None:
            mol = parse_molecule(smiles[i])
            try:
                bond_ids = rdkit_bond_ids(mol, s.bond_src, s.bond_dst, s.num_nodes)
                mol_cache[i] = (mol, bond_ids)
            except (ValueError, AttributeError) as exc:
                mol_cache[i] = None
                res.notes.append(f"graph {i}: SMILES does not match the graph ({exc}); "
                                 f"drawn without chemistry, bonds numbered by graph order")
                bond_ids = np.arange(s.num_bonds)
        rank = np.empty(s.num_bonds, dtype=np.int64)
        rank[np.lexsort((np.arange(s.num_bonds), -ranking_score(s.bond_logits)))] = \
            np.arange(s.num_bonds)
        gt = s.bond_gt
        for k in range(s.num_bonds):
            row = {"graph_index": i, "part": part, "label": int(labels[i]),
                   "pred_label": s.pred}
            row.update({f"prob_{c}": float(s.prob[c]) for c in range(num_classes)})
            if smiles is not None:
                row["smiles"] = smiles[i]
            row.update({"bond": int(bond_ids[k]), "src": int(s.bond_src[k]),
                        "dst": int(s.bond_dst[k]), "edge_prob": float(s.bond_prob[k]),
                        "edge_weight": float(s.bond_weight[k]),
                        "kept": int(s.bond_weight[k] > 0.5), "rank": int(rank[k]) + 1})
            if gt is not None:
                row["edge_gt"] = int(gt[k])
            rows.append(row)
    columns = (["graph_index", "part", "label", "pred_label"]
               + [f"prob_{c}" for c in range(num_classes)]
               + (["smiles"] if smiles is not None else [])
               + ["bond", "src", "dst", "edge_prob", "edge_weight", "kept", "rank"]
               + (["edge_gt"] if has_gt else []))
    df = pd.DataFrame(rows, columns=columns)
    R.atomic_write_bytes(out / "edges.csv", _csv_bytes(df))
    res.files.append("edges.csv")

    # pictures
    draw_error = rdkit_drawing_error() if mol_cache else None
    if draw_error:
        res.notes.append(f"RDKit cannot draw molecules here ({draw_error}); molecules drawn "
                         f"as plain graphs (node = atom index)")
    for i in ids:
        s = scores[i]
        marked = highlighted_bonds(ranking_score(s.bond_logits), s.bond_weight, top_k)
        head = (f"graph {i} ({part}) - label {int(labels[i])}, {_pred_text(s.prob)} - "
                f"{int(marked.sum())}/{s.num_bonds} bonds marked")
        name = f"graph-{i}.{fmt}"
        cached = mol_cache.get(i)
        if cached is not None and not draw_error:
            mol, bond_ids = cached
            data = draw_molecule(mol, bond_ids, s.bond_prob, marked,
                                 legend=f"{head}\n{highlight_caption(top_k)}", fmt=fmt)
        else:
            data = draw_graph(s.num_nodes, s.bond_src, s.bond_dst, s.bond_prob, marked,
                              s.bond_gt, title=head, caption=highlight_caption(top_k, False),
                              top_k=top_k, fmt=fmt)
        R.atomic_write_bytes(out / name, data)
        res.files.append(name)

    # metrics over the whole part
    if metrics_wanted:
        res.metrics = _part_metrics(run, dataset, part, part_idx, scores, labels)
        R.atomic_write_json(out / "metrics.json", res.metrics)
        res.files.append("metrics.json")

    # remove what an earlier explanation wrote here and this one did not
    old = R.read_json(out / MANIFEST)
    if isinstance(old, dict):
        for name in old.get("files", []):
            if name not in res.files and "/" not in name and name != MANIFEST:
                (out / name).unlink(missing_ok=True)
    R.atomic_write_json(out / MANIFEST, {
        "run_dir": str(run.run_dir), "dataset": dataset.name, "part": part, "graphs": ids,
        "top_k": top_k, "format": fmt, "use_selector": run.use_selector,
        "files": res.files, "notes": res.notes})
    return res


def _part_metrics(run, dataset, part: str, part_idx: np.ndarray, scores: dict,
                  labels: np.ndarray) -> dict[str, Any]:
    """``metrics.json``: metrics over all graphs of the part and the correct ones."""
    ss = [scores[int(i)] for i in part_idx]
    ptr = np.concatenate([[0], np.cumsum([s.num_bonds for s in ss])]).astype(np.int64)
    score = ranking_score(np.concatenate([s.bond_logits for s in ss]) if ss else np.zeros(0))
    gt = np.concatenate([s.bond_gt for s in ss]) if ss else np.zeros(0, dtype=np.int64)
    correct = np.asarray([s.pred == int(labels[int(i)]) for s, i in zip(ss, part_idx)],
                         dtype=bool)
    sub = select_graphs(ptr, correct, score, gt)
    return {
        "run_dir": str(run.run_dir), "dataset": dataset.name, "part": part,
        "graphs_in_part": int(len(part_idx)),
        "data_limit": int(run.cfg["data"].get("limit", 0) or 0),
        "accuracy": float(correct.mean()) if len(correct) else None,
        "unit": "undirected bonds (both directions of a bond share one logit)",
        "score": f"selector logit w rounded to {RANK_DECIMALS} decimals (orders bonds like "
                 f"p = sigmoid(w); float rounding noise does not break ties)",
        "ties": "ranked by score descending, ties by lower bond id first",
        "recall_precision_at_k": "per graph, the floor(K% * bonds) lowest-score bonds are "
                                 "predicted spurious; counts summed over graphs (micro-average)",
        "top_k": "per graph with motif bonds, the ceil(f * |G_c|) highest-score bonds; "
                 "mean counts of G_c and G_s bonds among them",
        "all": explanation_metrics(ptr, score, gt),
        "correct": explanation_metrics(*sub),
    }


def metrics_rows(metrics: dict) -> list[tuple[str, Any, Any]]:
    """``(name, all graphs, correctly predicted)`` rows for a printed table."""
    a, c = metrics["all"], metrics["correct"]
    rows: list[tuple[str, Any, Any]] = [
        ("graphs", a["graphs"], c["graphs"]),
        ("bonds (motif bonds)", f"{a['bonds']} ({a['motif_bonds']})",
         f"{c['bonds']} ({c['motif_bonds']})"),
        ("edge ROC-AUC (undirected bonds)", a["rocauc"], c["rocauc"])]
    for k in a["at_k"]:
        rows.append((f"Recall@{k}%", a["at_k"][k]["recall"], c["at_k"][k]["recall"]))
        rows.append((f"Precision@{k}%", a["at_k"][k]["precision"], c["at_k"][k]["precision"]))
    for f in a["top_k"]:
        ta, tc = a["top_k"][f], c["top_k"][f]
        rows.append((f"top-ceil({f}|G_c|): G_c bonds (oracle)", _pair(ta, "gc"), _pair(tc, "gc")))
        rows.append((f"top-ceil({f}|G_c|): G_s bonds (oracle)", _pair(ta, "gs"), _pair(tc, "gs")))
    return rows


def _pair(t: dict, key: str) -> str | None:
    if t[key] is None:
        return None
    return f"{t[key]:.2f} ({t[key + '_oracle']:.2f})"


def format_value(v: Any) -> str:
    """A table cell: 4 decimals for floats, ``-`` for None or NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)
