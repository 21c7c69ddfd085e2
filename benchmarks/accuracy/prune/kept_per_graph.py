"""Per graph: the share of bonds an evaluation mask keeps, against a per-graph budget.

Reads a run's ``edge_probs.npz`` (the test split at the selected epoch; see
docs/outputs.md) and compares, bond by bond, the mask the run was evaluated with
(``edge_weight > 0.5``, e.g. a fresh Gumbel sample with ``selector.eval_mode=sample``)
with the budget rule (``selector.eval_mode=budget``): the ⌈b·U⌉ bonds of largest logit
of each graph, U its bonds, chosen by :func:`grprune.ops.top_fraction_in_segment` as the
selector does. Used in README.md, "η at evaluation: the budget rule".

Usage::

    python -m benchmarks.accuracy.prune.kept_per_graph RUN_DIR [--budget 0.4]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def compare(scores, budget: float) -> dict[str, float]:
    """Per-graph statistics of ``scores`` (:class:`grprune.evaluation.GraphScore` list,
    e.g. ``edge_scores_from_arrays(RunDir(run_dir).edge_arrays()).graph_scores()``) at ``budget``.

    Returns the mean and the 10/50/90th percentiles of each graph's kept share of bonds
    under the run's mask (``kept_*``), the share of graphs within 0.1 of ``budget``, the
    mean per-graph Jaccard index of the two masks, the mean share of the run's kept bonds
    that the budget drops, the mean per-graph recall of ground-truth bonds under each mask
    where the scores have them, and Pearson's r of the kept share with the ground-truth
    share. Graphs without bonds are skipped.
    """
    import torch

    from grprune.ops import top_fraction_in_segment

    scores = [s for s in scores if s.num_bonds]
    sizes = np.array([s.num_bonds for s in scores])
    graph = np.repeat(np.arange(len(scores)), sizes)
    run = np.concatenate([s.bond_weight for s in scores]) > 0.5
    top = top_fraction_in_segment(torch.from_numpy(np.concatenate([s.bond_logits for s in scores])),
                                  torch.from_numpy(graph), len(scores), budget).numpy()

    def per_graph(mask):
        return np.bincount(graph, weights=mask, minlength=len(scores))

    kept = per_graph(run) / sizes
    out = {"graphs": len(scores), "kept_mean": float(kept.mean()),
           **{f"kept_q{q}": float(np.quantile(kept, q / 100)) for q in (10, 50, 90)},
           "near_budget": float(np.mean(np.abs(kept - budget) <= 0.1)),
           "jaccard": float(np.mean(per_graph(run & top) / np.maximum(per_graph(run | top), 1))),
           "dropped_by_budget": float(np.mean(per_graph(run & ~top)
                                              / np.maximum(per_graph(run), 1)))}
    if all(s.bond_gt is not None for s in scores):
        gt = np.concatenate([s.bond_gt for s in scores]) == 1
        motifs = per_graph(gt)
        has = motifs > 0
        out.update(recall_run=float(np.mean(per_graph(run & gt)[has] / motifs[has])),
                   recall_budget=float(np.mean(per_graph(top & gt)[has] / motifs[has])),
                   r_kept_gt=float(np.corrcoef(kept, motifs / sizes)[0, 1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--budget", type=float, default=0.4, help="fraction of each graph's edges")
    args = ap.parse_args()
    from grprune.evaluation import edge_scores_from_arrays
    from grprune.record.rundir import RunDir
    edges = edge_scores_from_arrays(RunDir(args.run_dir).edge_arrays())
    if edges is None:
        print(f"kept_per_graph.py: no readable edge_probs.npz in {args.run_dir}",
              file=sys.stderr)
        sys.exit(2)
    print(json.dumps(compare(edges.graph_scores(), args.budget), indent=1))


if __name__ == "__main__":
    main()
