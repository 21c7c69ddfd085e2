"""Per graph: the share of bonds an evaluation mask keeps, against a per-graph budget.

Reads a run's ``edge_probs.npz`` (the test split at the selected epoch; see
docs/outputs.md) and compares the mask the run was evaluated with (``edge_weight > 0.5``,
e.g. a fresh Gumbel sample with ``selector.eval_mode=sample``) with the budget rule
(``selector.eval_mode=budget``): the ⌈b·U⌉ edges of largest ``edge_prob`` of each graph,
U its edges. Directed edges are counted, as both directions of a bond carry the same
probability and mask. Used in README.md, "η at evaluation: the budget rule".

Usage::

    python benchmarks/accuracy/prune/kept_per_graph.py RUN_DIR [--budget 0.4]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np


def compare(z, budget: float) -> dict[str, float]:
    """Per-graph statistics of ``z`` (the arrays of ``edge_probs.npz``) at ``budget``.

    Returns the mean and the 10/50/90th percentiles of each graph's kept share under the
    run's mask (``kept_*``), the share of graphs within 0.1 of ``budget``, the mean
    per-graph Jaccard index of the two masks, the mean share of the run's kept edges that
    the budget drops, the mean per-graph recall of ground-truth edges (``edge_gt == 1``)
    under each mask where the arrays have them, and Pearson's r of the kept share with the
    ground-truth share. Graphs without edges are skipped.
    """
    ptr, prob, weight = z["edge_ptr"], z["edge_prob"], z["edge_weight"]
    gt = z["edge_gt"] if "edge_gt" in z else None
    kept, jac, dropped, rec_run, rec_budget, gt_share = [], [], [], [], [], []
    for a, b in zip(ptr[:-1], ptr[1:]):
        if b == a:
            continue
        run = weight[a:b] > 0.5
        top = np.zeros(b - a, bool)
        top[np.argsort(-prob[a:b], kind="stable")[:math.ceil(budget * (b - a))]] = True
        kept.append(run.mean())
        jac.append((run & top).sum() / max((run | top).sum(), 1))
        dropped.append((run & ~top).sum() / max(run.sum(), 1))
        if gt is not None:
            motif = gt[a:b] == 1
            gt_share.append(motif.mean())
            if motif.any():
                rec_run.append(run[motif].mean())
                rec_budget.append(top[motif].mean())
    kept = np.array(kept)
    out = {"graphs": len(kept), "kept_mean": float(kept.mean()),
           **{f"kept_q{q}": float(np.quantile(kept, q / 100)) for q in (10, 50, 90)},
           "near_budget": float(np.mean(np.abs(kept - budget) <= 0.1)),
           "jaccard": float(np.mean(jac)), "dropped_by_budget": float(np.mean(dropped))}
    if rec_run:
        out.update(recall_run=float(np.mean(rec_run)), recall_budget=float(np.mean(rec_budget)),
                   r_kept_gt=float(np.corrcoef(kept, gt_share)[0, 1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--budget", type=float, default=0.4, help="fraction of each graph's edges")
    args = ap.parse_args()
    path = args.run_dir / "edge_probs.npz"
    if not path.is_file():
        print(f"kept_per_graph.py: no edge_probs.npz in {args.run_dir}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(compare(np.load(path), args.budget), indent=1))


if __name__ == "__main__":
    main()
