"""Fidelity of a run's explanations: its model on the explanation and on its complement.

``grprune explain`` calls :func:`part_fidelity` on every graph of the part it explains
(``data.limit`` applied). The explanation :math:`S` of a graph is the bond set its
pictures mark (:func:`grprune.explain_metrics.marked_bonds`): the bonds the evaluation mask
keeps (``edge_weight > 0.5``: the thresholded, sampled or budgeted mask of a Gumbel
selector, GSAT's and CIGA's selectors included; every bond for ``drop-edge``, which
keeps all at evaluation), or with ``--top-k K`` each graph's K bonds of highest logit
(:func:`grprune.explain_metrics.ranking_score`, ties to the lower bond id).

The model is the run's whole model, selector included, scored as the trainer evaluates
it (:meth:`grprune.inference.Run.score`, the part's evaluation seed, each graph keyed by
its dataset index): on :math:`G_S`, the graph with every bond outside :math:`S` removed
(both directions), and on :math:`G_{C \\setminus S}`, the graph with the bonds of
:math:`S` removed. Nodes and their features stay. This is PyG's ``Explainer`` with a hard
edge mask, which zeroes every message along a masked edge in every layer of the model,
for sum-aggregating layers; for a GCN's degree normalisation removing an edge is the
exact form. The prediction on :math:`G` is the run's own score of the graph. The scores
are :mod:`grprune.fidelity`'s.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from grprune.compat import dgl
from grprune.fidelity import EXPLANATION_TYPES, fidelity_scores


def explanation_bonds(scores: Sequence, top_k: int | None = None) -> list[np.ndarray]:
    """Each graph's explanation :math:`S` as a mask over its bonds.

    Parameters
    ----------
    scores : sequence of grprune.evaluation.GraphScore
    top_k : int, optional
        None: the kept bonds; else the ``top_k`` bonds of highest logit.

    Returns
    -------
    list of np.ndarray of bool, each of shape (U,)
        The bonds a picture of the graph marks; index with ``GraphScore.bond_of_edge``
        for a mask of shape (E,) over its directed edges.
    """
    from grprune.explain_metrics import marked_bonds
    return [marked_bonds(s.bond_logits, s.bond_weight, top_k) for s in scores]


def masked_graphs(graphs: Sequence, masks: Sequence[np.ndarray], keep: bool) -> list:
    """The graphs with the edges outside (``keep``) or inside (``not keep``) each mask removed.

    Parameters
    ----------
    graphs : sequence of dgl.DGLGraph
    masks : sequence of np.ndarray of bool, shape (E,) each
    keep : bool
        True: :math:`G_S` (keep the masked edges); False: :math:`G_{C \\setminus S}`.

    Returns
    -------
    list of dgl.DGLGraph
        Same nodes and node features; the remaining edges keep their order and features.
    """
    out = []
    for g, m in zip(graphs, masks):
        drop = np.flatnonzero(~m if keep else m)
        out.append(dgl.remove_edges(g, torch.from_numpy(drop).long()) if len(drop) else g)
    return out


def fidelity_skip_reason(run, dataset) -> str | None:
    """Why a run's explanations have no fidelity, or None: a run without a selector in use
    (ERM, or a reported warm-up model: the explanation would be the whole graph), or a task
    other than single-label classification (multi-task, regression)."""
    if run.model.selector is None or not run.use_selector:
        return "the model uses no selector, so there is no explanation to score"
    if dataset.task != "classification":
        return f"it is defined for single-label classification, not {dataset.task}"
    return None


def part_fidelity(run, dataset, part: str, part_idx: np.ndarray, scores: dict,
                  top_k: int | None, notes: list[str]) -> dict[str, Any] | None:
    """Fidelity+, fidelity−, characterization and sparsity over a part's graphs.

    Parameters
    ----------
    run : grprune.inference.Run
    dataset : grprune.data.GraphDataset
    part : str
    part_idx : np.ndarray of int64, shape (N,)
        The part's dataset indices.
    scores : dict of int to GraphScore
        The run's scores of (at least) those graphs.
    top_k : int, optional
        The explanation is each graph's ``top_k`` bonds instead of the kept ones.
    notes : list of str
        Receives why the scores were skipped.

    Returns
    -------
    dict or None
        ``fidelity.json``'s content: ``graphs``, ``explanation`` (which bonds form
        :math:`S`), ``phenomenon`` and ``model``
        (:meth:`grprune.fidelity.Fidelity.to_dict`); None, with a note, for a graph
        whose edges are not the scores' edges. The caller checks
        :func:`fidelity_skip_reason` first (a run without a selector in use, a task other
        than single-label classification).
    """
    idx = [int(i) for i in part_idx]
    ss = [scores[i] for i in idx]
    graphs = [dataset.graphs[i] for i in idx]
    for i, g, s in zip(idx, graphs, ss):
        src, dst = (e.numpy() for e in g.edges())
        if not (np.array_equal(src, s.src) and np.array_equal(dst, s.dst)):
            notes.append(f"fidelity skipped: graph {i}'s edges differ from the scored ones")
            return None
    bonds = explanation_bonds(ss, top_k)
    masks = [b[s.bond_of_edge] for b, s in zip(bonds, ss)]
    from grprune.determinism import eval_seed
    seed = eval_seed(int(run.cfg.train.seed or 0), part)

    def probs(gs: list) -> torch.Tensor:
        scored = run.score(gs, keys=idx, seed=seed) if gs else []
        return torch.as_tensor(np.asarray([s.prob for s in scored], dtype=np.float64)
                               .reshape(len(gs), run.num_classes))

    prob = torch.as_tensor(np.asarray([s.prob for s in ss], dtype=np.float64)
                           .reshape(len(ss), run.num_classes))
    prob_s, prob_c = probs(masked_graphs(graphs, masks, True)), \
        probs(masked_graphs(graphs, masks, False))
    label = dataset.labels[torch.as_tensor(idx, dtype=torch.long)]
    kept = torch.as_tensor([int(b.sum()) for b in bonds])
    total = torch.as_tensor([s.num_bonds for s in ss])
    out: dict[str, Any] = {
        "graphs": len(idx), "part": part,
        "explanation": (f"per graph the top-{top_k} bonds by selector logit" if top_k
                        else "the bonds the evaluation mask keeps (edge_weight > 0.5)"),
        "model_runs": "the run's model, selector included, on G_S (bonds outside the "
                      "explanation removed) and G_C\\S (its bonds removed)",
        "source": "GraphFramEx (Amara et al. 2022); accuracy forms and characterization "
                  "as torch_geometric.explain.metric"}
    for kind in EXPLANATION_TYPES:
        out[kind] = fidelity_scores(label, prob, prob_s, prob_c, kept, total, kind).to_dict()
    return out


def fidelity_rows(fid: dict) -> list[tuple[str, Any, Any]]:
    """``(name, phenomenon, model)`` rows for a printed table."""
    p, m = fid["phenomenon"], fid["model"]
    names = (("fidelity+ (accuracy)", "fid_plus"), ("fidelity- (accuracy)", "fid_minus"),
             ("fidelity+ (probability)", "fid_plus_prob"),
             ("fidelity- (probability)", "fid_minus_prob"),
             ("characterization", "characterization"), ("sparsity 1 - |S|/|E|", "sparsity"))
    return [(label, p[key], m[key]) for label, key in names]
