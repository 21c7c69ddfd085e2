"""CIGA: causally invariant subgraphs by contrast (Chen et al., NeurIPS 2022).

"Learning Causally Invariant Representations for Out-of-Distribution
Generalization on Graphs". Per graph, the top-scored fraction ``r`` of the edges
forms the estimated causal subgraph :math:`\\hat G_c`, the rest the spurious
subgraph :math:`\\hat G_s`. CIGAv1 pulls together the representations of the
causal subgraphs of graphs with the same label (a supervised contrastive loss,
maximising :math:`I(\\hat G_c; \\tilde G_c \\mid Y)`); CIGAv2 also makes
:math:`\\hat G_s` predictive of the label, but never more than :math:`\\hat G_c`
(a hinge), so spurious edges are pushed out of :math:`\\hat G_c`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import UninitializedParameter

from grprune.losses import cross_entropy
from grprune.ops import bond_mean, bond_value, top_fraction_in_segment
from grprune.hparams import hparam
from grprune.regularizers.base import REGULARIZERS, Regularizer, StepContext


def causal_edge_mask(edge_score: Tensor, bond: Tensor, edge_graph: Tensor, num_graphs: int,
                     ratio: float) -> Tensor:
    """Edges of the per-graph top-``ratio`` undirected bonds by score.

    In each graph :math:`G` the :math:`k_G = \\lceil r \\cdot U_G \\rceil`
    bonds with the highest score are kept, :math:`U_G` being the number of
    undirected bonds of :math:`G` (a graph without edges keeps none). Both
    directions of a bond go together. Ties are broken by the lower bond id
    (deterministic).

    Parameters
    ----------
    edge_score : Tensor of shape (E,)
        Score per directed edge; the two directions of a bond are averaged.
    bond : Tensor of shape (E,), int64
        Undirected bond id of each edge (``GraphBatch.bond``).
    edge_graph : Tensor of shape (E,), int64
        Graph of each edge.
    num_graphs : int
    ratio : float
        :math:`r` in (0, 1].

    Returns
    -------
    Tensor of shape (E,), bool
        True on the edges of the causal subgraph.

    Examples
    --------
    One graph, bonds scored 0.1, 0.9, 0.5 and r = 0.5: ceil(1.5) = 2 bonds
    kept, those scored 0.9 and 0.5.
    """
    if edge_score.numel() == 0:
        return torch.zeros(0, dtype=torch.bool, device=edge_score.device)
    num_bonds = int(bond.max()) + 1
    bond_score = bond_mean(edge_score.detach().to(torch.float64), bond, num_bonds)
    bond_graph = bond_value(edge_graph, bond, num_bonds)
    return top_fraction_in_segment(bond_score, bond_graph, num_graphs, ratio)[bond]


def sup_contrast_loss(rep: Tensor, labels: Tensor, temperature: float = 1.0,
                      normalize: bool = True) -> Tensor:
    """Supervised contrastive loss (Khosla et al. 2020), CIGA's ``get_contrast_loss``.

    With :math:`z_i` the (L2-normalised) representations, :math:`P(i)` the
    other graphs of the batch with the label of :math:`i` and :math:`A(i)` all
    other graphs:

    .. math::
        \\mathcal L = -\\frac{1}{|V|} \\sum_{i \\in V} \\frac{1}{|P(i)|}
        \\sum_{p \\in P(i)} \\log \\frac{\\exp(z_i \\cdot z_p / t)}
        {\\sum_{a \\in A(i)} \\exp(z_i \\cdot z_a / t)}

    over the anchors :math:`V` that have at least one positive. A batch
    without any same-label pair gives 0 (with a gradient path).

    Parameters
    ----------
    rep : Tensor of shape (B, D)
    labels : Tensor of shape (B,)
    temperature : float
        :math:`t` (CIGA: 1).
    normalize : bool
        L2-normalise ``rep`` first (CIGA's default).
    """
    z = F.normalize(rep, dim=1) if normalize else rep
    b = z.shape[0]
    eye = torch.eye(b, dtype=torch.bool, device=z.device)
    pos = (labels.view(-1, 1) == labels.view(1, -1)) & ~eye
    valid = pos.any(1)
    if not bool(valid.any()):
        return rep.sum() * 0.0
    logits = (z[valid] @ z.T) / temperature
    others = ~eye[valid]
    log_denom = torch.logsumexp(logits.masked_fill(~others, float("-inf")), dim=1, keepdim=True)
    pos_v = pos[valid].to(logits.dtype)
    mean_log_prob_pos = ((logits - log_denom) * pos_v).sum(1) / pos_v.sum(1)
    return -mean_log_prob_pos.mean()


def ciga_hinge(spurious_loss: Tensor, causal_loss: Tensor, eps: float = 1e-6) -> Tensor:
    """CIGAv2's hinge: mean spurious loss over the graphs where it exceeds the causal one.

    .. math::
        \\mathcal L_{hinge} = \\frac{\\sum_i \\ell^s_i \\, \\mathbb 1[\\ell^s_i > \\ell^c_i]}
        {\\sum_i \\mathbb 1[\\ell^s_i > \\ell^c_i] + \\epsilon}

    with per-graph losses :math:`\\ell^s` (prediction from :math:`\\hat G_s`)
    and :math:`\\ell^c` (from :math:`\\hat G_c`). Minimising it raises
    :math:`I(\\hat G_s; Y)` only while :math:`\\hat G_s` predicts worse than
    :math:`\\hat G_c`, i.e. it enforces :math:`I(\\hat G_s;Y) \\le I(\\hat G_c;Y)`
    as a hinge. The indicator carries no gradient.

    Parameters
    ----------
    spurious_loss, causal_loss : Tensor of shape (B,)
    eps : float
        CIGA's 1e-6 in the denominator.
    """
    active = (spurious_loss > causal_loss).to(spurious_loss.dtype).detach()
    return (spurious_loss * active).sum() / (active.sum() + eps)


class SpuriousHead(LazyModuleMixin, nn.Module):
    """CIGA's spurious predictor ``spu_fw``: MLP D -> 2D -> C, then a C -> C linear map.

    ``D`` and ``C`` are taken from the first call (the regularizer does not
    know the encoder width or the number of classes when it is built).
    """

    cls_to_become = None

    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Lazy modules")
            super().__init__()
        # registered directly on this module (not in a ParameterList) so that
        # LazyModuleMixin's state-dict hooks materialise them when loading
        for i in range(3):
            setattr(self, f"weight{i}", UninitializedParameter())
            setattr(self, f"bias{i}", UninitializedParameter())

    def _layers(self) -> list[tuple[Tensor, Tensor]]:
        return [(getattr(self, f"weight{i}"), getattr(self, f"bias{i}")) for i in range(3)]

    def reset_parameters(self) -> None:
        if self.has_uninitialized_params():
            return
        for w, b in self._layers():  # nn.Linear's initialisation
            nn.init.kaiming_uniform_(w, a=math.sqrt(5))
            bound = 1 / math.sqrt(w.shape[1]) if w.shape[1] > 0 else 0
            nn.init.uniform_(b, -bound, bound)

    def initialize_parameters(self, rep: Tensor, num_classes: int) -> None:
        if not self.has_uninitialized_params():
            return
        d = rep.shape[-1]
        shapes = [(2 * d, d), (num_classes, 2 * d), (num_classes, num_classes)]
        with torch.no_grad():
            for (w, b), (out, inp) in zip(self._layers(), shapes):
                cast(UninitializedParameter, w).materialize((out, inp), device=rep.device,
                                                            dtype=rep.dtype)
                cast(UninitializedParameter, b).materialize((out,), device=rep.device,
                                                            dtype=rep.dtype)
            self.reset_parameters()

    def forward(self, rep: Tensor, num_classes: int) -> Tensor:
        (w0, b0), (w1, b1), (w2, b2) = self._layers()
        h = F.relu(F.linear(rep, w0, b0))
        return F.linear(F.linear(h, w1, b1), w2, b2)


@REGULARIZERS.register("ciga")
class CIGA(Regularizer):
    """CIGA's invariance terms on the per-graph top-``ratio`` subgraph of the selector.

    :math:`\\hat G_c`: in each graph the :math:`\\lceil r \\cdot U_G \\rceil`
    undirected bonds with the highest selector score (:func:`causal_edge_mask`;
    CIGA ranks directed edges with their own scores, grprune's selector gives
    one score per bond, so both directions are kept or dropped together). It is
    encoded with ``ctx.encode`` where the causal edges carry their probability
    :math:`p = \\sigma(w)` and all other edges 0 (CIGA passes the causal scores
    through a sigmoid edge mask), so the gradient reaches the selector.
    :math:`\\hat G_s` is the complement, weighted :math:`1 - p` (CIGA:
    :math:`\\sigma(-w)`).

    :meth:`terms` returns CIGA's three terms, each with its own weight, so that
    the training loss is CIGA's

    .. math::
        \\mathrm{CE}(t(G)) + \\alpha\\,\\mathcal L_{con}
        + \\gamma\\,\\mathrm{CE}(\\hat G_c) + \\beta\\,\\mathcal L_{hinge}

    as ``contrast`` (:math:`\\alpha` = ``weight``), ``causal_ce``
    (:math:`\\gamma` = ``causal_ce``) and ``hinge`` (:math:`\\beta` =
    ``spurious_weight``); a term whose weight is 0 is left out (and not
    computed). ``loss.ciga`` in ``results.jsonl`` is their sum, and
    ``loss.ciga/contrast`` etc. each term.

    * :math:`\\mathcal L_{con}` (CIGAv1): :func:`sup_contrast_loss` of the
      graph representations (readout, before the head) of :math:`\\hat G_c`,
      L2-normalised, temperature ``temperature``; all graphs of the batch take
      part (a graph without edges is represented by its nodes alone).
    * :math:`\\mathrm{CE}(\\hat G_c)` (``causal_ce`` :math:`= \\gamma`, default
      1): CIGA trains its classifier on :math:`\\hat G_c`; grprune's trainer
      trains on the selector's own sampled mask :math:`t(G)`, and a regularizer
      cannot change that mask, so this term also trains the shared encoder and
      head on :math:`\\hat G_c`. ``causal_ce=0`` leaves classification to the
      trainer's mask. Evaluation uses the selector's ``eval_mode`` mask, not
      :math:`\\hat G_c`.
    * :math:`\\mathcal L_{hinge}` (CIGAv2, on when ``spurious_weight``
      :math:`= \\beta > 0`): :func:`ciga_hinge` of the per-graph cross-entropy
      of a separate spurious head (:class:`SpuriousHead`, trained with the
      model) on the representation of :math:`\\hat G_s` against the per-graph
      cross-entropy of :math:`\\hat G_c`. With ``spurious_detach=false``
      (default) its gradient also reaches the encoder and the selector (as
      CIGA's ``-s_rep conv`` variant); ``true`` detaches the representation as
      CIGA's default ``-s_rep rep`` does, so that the term only trains the head.

    Defaults from CIGA's code: ``temperature`` 1 (``--contrast_t``),
    normalised representations (``--not_norm`` off), ``spurious_weight`` 0
    (``--spu_coe``, CIGAv1). ``ratio`` 0.8 is CIGA's setting for the DrugOOD
    molecules (its scripts; the argparse default 0.25 is for SPMotif, NCI1/109
    use 0.6/0.7). CIGA's ``--contrast`` defaults to 0 (off); ``weight`` = 1
    here, in CIGA's search space {0.5, 1, 2, 4, 8, 16, 32} (its scripts use
    0.5-32); β was searched in {0.5, 1, 2}.

    Differences from CIGA's code: CIGA drops the nodes not touched by a causal
    edge before encoding; ``ctx.encode`` keeps every node and zeroes the other
    edges. CIGA's spurious head reads the classifier's representation of
    :math:`\\hat G_s`; here it is the shared encoder's.
    """

    requires = frozenset({"selector", "classes"})
    display_name, table_order, name_order = "CIGA", 60.0, 3.0

    class Hparams(Regularizer.Hparams):
        weight: float = hparam(1.0, "alpha, weight of the supervised contrastive loss (CIGA "
                                    "--contrast)", low=0.0, search=(0.5, 1.0, 2.0, 4.0, 8.0))
        ratio: float = hparam(0.8, "r: fraction of each graph's bonds in the causal subgraph "
                                   "(CIGA --r)", low=0.0, high=1.0, low_open=True)
        temperature: float = hparam(1.0, "temperature of the contrastive loss (CIGA "
                                         "--contrast_t)", low=0.0, low_open=True)
        normalize: bool = hparam(True, "L2-normalise the representations before contrasting")
        causal_ce: float = hparam(1.0, "gamma: weight of the cross-entropy on the causal "
                                       "subgraph (CIGA trains its classifier on it; 0 = off)",
                                  low=0.0)
        spurious_weight: float = hparam(0.0, "beta: weight of the CIGAv2 hinge on the "
                                             "spurious subgraph (CIGA --spu_coe; 0 = CIGAv1)",
                                        low=0.0, search=(0.5, 1.0, 2.0, 4.0, 8.0))
        spurious_detach: bool = hparam(False, "detach the spurious representation: the hinge "
                                              "then only trains the spurious head (CIGA "
                                              "-s_rep rep)")

    hp: Hparams

    def __init__(self, **hparams: Any) -> None:
        super().__init__(**hparams)
        self.spurious_head = SpuriousHead() if self.hp.spurious_weight > 0 else None

    def split(self, ctx: StepContext) -> tuple[Tensor, Tensor, Tensor]:
        """Causal mask (E,) bool and the edge weights of :math:`\\hat G_c` and :math:`\\hat G_s`."""
        batch, sel = ctx.batch, ctx.selection
        assert sel is not None  # requires a selector: supports() refuses a run without one
        keep = causal_edge_mask(sel.edge_logits, batch.bond, batch.edge_graph,
                                batch.num_graphs, self.hp.ratio)
        prob = sel.edge_prob
        zero = torch.zeros_like(prob)
        return keep, torch.where(keep, prob, zero), torch.where(keep, zero, 1 - prob)

    def terms(self, ctx: StepContext) -> dict[str, Tensor]:
        """``contrast`` :math:`\\alpha \\mathcal L_{con}`, ``causal_ce``
        :math:`\\gamma\\,\\mathrm{CE}(\\hat G_c)` and ``hinge`` :math:`\\beta
        \\mathcal L_{hinge}`, the last two only when their weight is > 0."""
        hp, y = self.hp, ctx.batch.y
        _, causal_w, spurious_w = self.split(ctx)
        causal = ctx.encode(causal_w)
        out = {"contrast": hp.weight * sup_contrast_loss(
            causal.graph_repr, y, hp.temperature, hp.normalize)}
        if hp.causal_ce == 0 and hp.spurious_weight == 0:
            return out
        causal_ce = cross_entropy(causal.logits, y, reduction="none")
        if hp.causal_ce > 0:
            out["causal_ce"] = hp.causal_ce * causal_ce.mean()
        if hp.spurious_weight > 0:
            rep = ctx.encode(spurious_w).graph_repr
            if hp.spurious_detach:
                rep = rep.detach()
            assert self.spurious_head is not None  # built when spurious_weight > 0
            logits = self.spurious_head(rep, causal.logits.shape[1])
            spurious_ce = cross_entropy(logits, y, reduction="none")
            out["hinge"] = hp.spurious_weight * ciga_hinge(spurious_ce, causal_ce.detach())
        return out
