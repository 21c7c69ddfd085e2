"""What a learned selector does, per split and epoch: the spread of its keep probabilities
and, on data with ground-truth motif edges, whether it ranks the motif above the rest.

Counted over undirected bonds (both directions of a bond share one logit), like
``grprune explain``, whose metric functions (:mod:`grprune.explain_metrics`) this module
applies to every graph of a split, and the motif ROC-AUC also over the correctly
predicted graphs alone, as the paper's Figure 4b reports it. Bonds are in the batch's numbering
(:func:`grprune.ops.bond_ids`), so ties among equal logits may fall differently from
``grprune explain``'s per-graph numbering (:func:`grprune.ops.bonds_by_first_edge`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from grprune.batch import GraphBatch
from grprune.explain_metrics import (edge_rocauc, graph_of_bonds, rank_within_graphs,
                                     ranking_score, spurious_at_k)
from grprune.ops import bond_value

#: quantiles of p = sigmoid(w) recorded per split and epoch
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
#: K (percent of each graph's bonds, the lowest-scored) of Precision@K / Recall@K
PRECISION_K = 50


class SelectorStats:
    """Accumulates one split's bond logits batch by batch; :meth:`result` summarises them."""

    def __init__(self) -> None:
        self.logits: list[np.ndarray] = []
        self.gt: list[np.ndarray] = []
        self.sizes: list[np.ndarray] = []
        self.correct: list[np.ndarray] = []

    def add(self, batch: GraphBatch, edge_logits: torch.Tensor,
            correct: torch.Tensor | None = None) -> None:
        """Add one evaluated batch.

        Parameters
        ----------
        batch : GraphBatch
        edge_logits : Tensor of shape (E,)
            Selector logits, equal on both directions of a bond.
        correct : Tensor of bool, shape (B,), optional
            Whether each graph of the batch was predicted correctly; with ground truth,
            :meth:`result` then also reports ``motif_rocauc_correct``.
        """
        u = batch.num_bonds
        bond_logits = bond_value(edge_logits, batch.bond, u)
        bond_graph = bond_value(batch.edge_graph, batch.bond, u)
        self.logits.append(bond_logits.detach().double().cpu().numpy())
        self.sizes.append(torch.bincount(bond_graph, minlength=batch.num_graphs).cpu().numpy())
        if batch.edge_gt is not None:
            gt = bond_value(batch.edge_gt, batch.bond, u)
            self.gt.append(gt.cpu().numpy())
            if correct is not None:
                self.correct.append(correct[bond_graph].cpu().numpy())

    def result(self) -> dict[str, Any]:
        """The split's summary.

        Returns
        -------
        dict
            ``bonds``; ``p_quantiles`` (``"0.1"`` ... ``"0.9"`` -> quantile of
            :math:`p`); ``p_below_0.1`` and ``p_above_0.9`` (fractions of bonds); with
            ground truth also ``motif_rocauc`` (:func:`~grprune.explain.edge_rocauc`),
            ``precision@50`` and ``recall@50`` (:func:`~grprune.explain.spurious_at_k`:
            the share of spurious bonds among each graph's lowest 50 %, and the share of
            spurious bonds found there) and, when every batch came with ``correct``,
            ``motif_rocauc_correct`` (the ROC-AUC over the bonds of correctly predicted
            graphs only, paper Figure 4b); with ground truth also ``gc_p_mean`` (the mean
            keep probability :math:`p` of the invariant subgraph's bonds, :math:`G_c`) and
            ``gc_rank_mean`` (the mean, over :math:`G_c`'s bonds, of the fraction of its
            graph's bonds ranked above it, :func:`~grprune.explain_metrics.rank_within_graphs`
            of the same score as the ROC-AUC: 0 is the top, under 0.5 the top half), paper
            Figure 5a; None where undefined.
        """
        logits = np.concatenate(self.logits) if self.logits else np.zeros(0)
        out: dict[str, Any] = {"bonds": int(len(logits))}
        if not len(logits):
            return out
        p = 1.0 / (1.0 + np.exp(-logits))
        out["p_quantiles"] = {str(q): float(v) for q, v in zip(QUANTILES, np.quantile(p, QUANTILES))}
        out["p_below_0.1"] = float(np.mean(p < 0.1))
        out["p_above_0.9"] = float(np.mean(p > 0.9))
        if self.gt and sum(len(g) for g in self.gt) == len(logits):
            gt = np.concatenate(self.gt).astype(np.int64)
            score = ranking_score(logits)
            ptr = np.concatenate([[0], np.cumsum(np.concatenate(self.sizes))]).astype(np.int64)
            rank = rank_within_graphs(ptr, score)  # shared by Precision@K and Figure 5a
            at = spurious_at_k(ptr, score, gt, ks=(PRECISION_K,), rank=rank)[str(PRECISION_K)]
            out["motif_rocauc"] = edge_rocauc(score, gt)
            out[f"precision@{PRECISION_K}"] = at["precision"]
            out[f"recall@{PRECISION_K}"] = at["recall"]
            inv = gt == 1
            if inv.any():  # Figure 5a: where the invariant bonds stand
                frac = rank / np.diff(ptr)[graph_of_bonds(ptr)]
                out["gc_p_mean"] = float(p[inv].mean())
                out["gc_rank_mean"] = float(frac[inv].mean())
            if len(self.correct) == len(self.gt):
                right = np.concatenate(self.correct).astype(bool)
                out["motif_rocauc_correct"] = edge_rocauc(score[right], gt[right])
        return out
