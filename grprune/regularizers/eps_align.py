"""Epsilon-probability alignment L_s (PrunE, paper Eq. 4)."""

from __future__ import annotations

import torch
from torch import Tensor

from grprune.ops import rank_in_segment
from grprune.hparams import hparam
from grprune.regularizers.base import REGULARIZERS, Regularizer, StepContext


def _parse_eps(text: str) -> float | str:
    return "auto" if text.strip().lower() == "auto" else float(text)


def official_static(prob: Tensor, edge_mask: Tensor, frac: float,
                    eps: float | str) -> Tensor:
    """eps-align's official form over the real edges of a padded batch, in static shapes.

    The same value as the official form on the real edges alone,

    .. math::
        \\tfrac12 \\sum_{j < k} |p_{(j)} - \\epsilon|,\\qquad
        k = \\lfloor K\\% \\cdot E_{real} \\rfloor,\\qquad
        \\epsilon = 1/k \\text{ (``eps="auto"``)}

    (:math:`p_{(j)}` the real probabilities in ascending order), computed so that one
    traced graph serves every batch of one shape (a :func:`torch.compile` graph with
    ``dynamic=False``, a captured CUDA graph): the padding edges are sorted last (as
    :math:`+\\infty`), :math:`E_{real}`, :math:`k` and :math:`\\epsilon` are device
    tensors counted from ``edge_mask`` (:math:`k` in float64, as the host's
    ``int(E * frac)``), and the :math:`k` lowest are chosen by a rank mask, so nothing is
    read back to the host and no shape depends on the values. :math:`k = 0` gives 0 (and a
    zero gradient), with no NaN.

    Parameters
    ----------
    prob : Tensor of shape (E,)
        Edge keep probabilities :math:`p_{ij}` of the padded batch, padding included.
    edge_mask : Tensor of shape (E,), bool
        True for a real edge (``GraphBatch.edge_mask``).
    frac : float
        :math:`K\\%` as a fraction, in (0, 1].
    eps : float or "auto"
        The target probability; ``"auto"``: :math:`1/k`.

    Returns
    -------
    Tensor, a scalar in ``prob``'s dtype.

    Examples
    --------
    >>> prob = torch.tensor([0.2, 0.6, 0.2, 0.9, 0.1, 0.0])  # last two: padding
    >>> mask = torch.tensor([True, True, True, True, False, False])
    >>> round(float(official_static(prob, mask, 0.5, "auto")), 6)  # k=2: 0.5*(0.3+0.3)
    0.3
    """
    real = edge_mask.sum()
    k = torch.floor(real.to(torch.float64) * frac).long()
    lowest_first = torch.sort(torch.where(edge_mask, prob, float("inf")), stable=True).values
    chosen = torch.arange(prob.shape[0], device=prob.device) < k
    if eps == "auto":
        target: Tensor | float = (1.0 / k.clamp_min(1).to(torch.float64)).to(prob.dtype)
    else:
        target = float(eps)
    # where, not a product: the padding's inf - eps is not multiplied by 0
    return 0.5 * torch.where(chosen, (lowest_first - target).abs(), 0.0).sum()


@REGULARIZERS.register("eps-align", aliases=("epsilon-align",))
class EpsilonAlignment(Regularizer):
    """Pulls the lowest-probability edges towards a small probability :math:`\\epsilon`.

    ``form="paper"`` (default), paper Eq. 4, per graph then averaged:

    .. math::
        \\mathcal L_s = \\frac{1}{|\\mathcal B'|} \\sum_{G \\in \\mathcal B'}
        \\frac{1}{|\\mathcal E_s|} \\sum_{e_{ij} \\in \\mathcal E_s} |p_{ij} - \\epsilon|

    where :math:`\\mathcal E_s` holds the :math:`k_G = \\max(1, \\lfloor K\\% \\cdot
    |\\mathcal E_G| \\rfloor)` directed edges of :math:`G` with the lowest
    :math:`p_{ij} = \\sigma(w_{ij})` (``selection.edge_prob``, without Gumbel
    noise), :math:`\\epsilon = 1/|\\mathcal E_G|` by default (``eps="auto"``),
    and :math:`\\mathcal B'` the graphs with at least one edge.

    ``form="official"``, the official PyG code: over the whole batch, the
    :math:`k = \\lfloor K\\% \\cdot E \\rfloor` lowest probabilities,
    :math:`\\tfrac12 \\sum |p - 1/k|` (a sum, not a mean, with
    :math:`\\epsilon = 1/k` unless ``eps`` is a number). On a batch padded to a static
    shape (``train.pad_buckets``) :func:`official_static` computes it over the real edges
    without a host number that changes between batches.

    Defaults are the paper's molbbbp setting: ``k=50`` (percent), ``weight``
    (:math:`\\lambda_2`) = 0.01.
    """

    requires = frozenset({"selector"})
    pads = True
    name_order = 1.0

    class Hparams(Regularizer.Hparams):
        weight: float = hparam(0.01, "lambda_2, weight of L_s", low=0.0,
                               search=(0.1, 0.01, 0.001))
        k: float = hparam(50.0, "K: percent of edges (lowest probability) aligned to eps",
                          low=0.0, high=100.0, low_open=True, search=(50.0, 70.0, 90.0))
        eps: float | str = hparam("auto", "target probability; auto = 1/|E| per graph "
                                          "(paper), 1/k (official)", low=0.0, high=1.0,
                                  parser=_parse_eps)
        form: str = hparam("paper", "paper: per-graph mean (Eq. 4); official: batch-level "
                                    "0.5*sum", choices=("paper", "official"))

    hp: Hparams

    def loss(self, ctx: StepContext) -> Tensor:
        sel = ctx.selection
        assert sel is not None  # requires a selector: supports() refuses a run without one
        batch, prob = ctx.batch, sel.edge_prob
        frac, eps = self.hp.k / 100.0, self.hp.eps
        if prob.numel() == 0:
            return prob.sum()
        if self.hp.form == "official":
            if batch.padded:  # one static graph for every batch of a bucket
                assert batch.edge_mask is not None  # a padded batch masks its edges too
                return official_static(prob, batch.edge_mask, frac, eps)
            k = int(prob.numel() * frac)
            if k == 0:
                return prob.sum() * 0.0
            lowest = torch.sort(prob).values[:k]
            target_p = 1.0 / k if eps == "auto" else float(eps)
            return 0.5 * (lowest - target_p).abs().sum()
        # per-graph lowest-K%, as a mask: no host synchronisation
        g = batch.edge_graph
        rank = rank_in_segment(prob.detach(), g, batch.num_graphs, counts=batch.num_edges)
        k_graph = torch.clamp((batch.num_edges.double() * frac + 1e-9).floor().long(), min=1)
        chosen = (rank < k_graph[g]).to(prob.dtype)
        if eps == "auto":
            target = 1.0 / batch.num_edges[g].to(prob.dtype)
        else:
            target = torch.full_like(prob, float(eps))
        per_graph = batch.segment_sum((prob - target).abs() * chosen, "edge_graph")
        has_edges, count = batch.graphs_with_edges(prob.dtype)  # shared with the size loss
        per_graph = per_graph / k_graph.to(prob.dtype)
        return (per_graph * has_edges).sum() / count
