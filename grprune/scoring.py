"""Scoring graphs with a model exactly as the trainer evaluates it.

:func:`score_graphs` (:meth:`grprune.inference.Run.score`), :func:`score_batch` and
:func:`score_batches` run :func:`grprune.evaluation.evaluate_batches`, the evaluation of
:meth:`grprune.trainer.Trainer.evaluate`, and return, per graph, the class probabilities
and every edge's keep probability :math:`p_{ij} = \\sigma(w_{ij})` and evaluation mask
(:class:`~grprune.evaluation.GraphScore`). They import nothing of training.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from grprune.batch import GraphBatch, collate
from grprune.evaluation import GraphScore, evaluate_batches
from grprune.model import GraphClassifier

#: graphs per batch when scoring
BATCH_SIZE = 256


def score_batches(model: GraphClassifier, batches: Iterable[GraphBatch], *,
                  use_selector: bool = True, seed: int = 0) -> list[GraphScore]:
    """Score batches with :func:`grprune.evaluation.evaluate_batches`, the trainer's evaluation.

    A selector that samples its mask at evaluation (``selector.eval_mode=sample``) draws
    from a stream seeded with ``seed`` (:func:`~grprune.evaluation.evaluate_batches`), so
    the same graphs score the same on every call and the caller's RNG is left as it was.

    Returns
    -------
    list of GraphScore
        One per graph, in batch order.
    """
    ev = evaluate_batches(model, batches, use_selector=use_selector, diagnostics=False,
                          collect_edges=True, seed=seed)
    assert ev.edges is not None  # collect_edges=True always collects
    return ev.edges.graph_scores()


def score_batch(model: GraphClassifier, batch: GraphBatch, *, use_selector: bool = True
                ) -> list[GraphScore]:
    """Score one batch exactly as :meth:`grprune.trainer.Trainer.evaluate` does.

    Parameters
    ----------
    model : GraphClassifier
        Put in eval mode here; scoring happens on the model's device.
    batch : GraphBatch
        ``B`` graphs (moved to the model's device here).
    use_selector : bool
        False evaluates the full graphs (ERM warm-up; all edges kept).

    Returns
    -------
    list of GraphScore, length B
    """
    return score_batches(model, [batch], use_selector=use_selector)


def score_graphs(model: GraphClassifier, graphs: Sequence | GraphBatch, *,
                 use_selector: bool = True, batch_size: int = BATCH_SIZE,
                 keys: Sequence[int] | None = None, seed: int = 0) -> list[GraphScore]:
    """Score graphs with a model, as the trainer evaluates it.

    Parameters
    ----------
    model : GraphClassifier
        Scoring runs on the model's device (CPU or CUDA); graphs are batched on
        the CPU with :func:`grprune.batch.collate` and their tensors moved.
    graphs : sequence of dgl.DGLGraph, or GraphBatch
        Graphs with the features the model was trained on (``ndata['feat']``,
        ``edata['feat']``; ``edata['edge_gt']`` is passed through).
    use_selector : bool
        False evaluates the full graphs (ERM warm-up).
    batch_size : int
        Graphs per batch. In eval mode the result does not depend on it (batch
        norm uses its running statistics) up to float rounding.
    keys : sequence of int, optional
        Each graph's identity (its dataset index, or :func:`grprune.predict.memory.smiles_key`):
        the key of its evaluation noise (``batch.index``,
        :func:`grprune.selectors.base.graph_noise`); default its position in ``graphs``.
    seed : int
        The evaluation seed (:func:`grprune.evaluation.evaluate_batches`).

    Returns
    -------
    list of GraphScore
        One per graph, in input order.
    """
    if isinstance(graphs, GraphBatch):
        return score_batches(model, [graphs], use_selector=use_selector, seed=seed)
    graphs = list(graphs)
    key = list(range(len(graphs))) if keys is None else [int(k) for k in keys]
    batches = (collate([(g, 0, 0, key[start + i])
                        for i, g in enumerate(graphs[start:start + batch_size])])
               for start in range(0, len(graphs), batch_size))
    return score_batches(model, batches, use_selector=use_selector, seed=seed)
