"""Environment-based OOD objectives: ``irm``, ``vrex`` and ``groupdro``.

All three compare the classification risk across the training environments
present in a batch (``batch.env``, one id per graph; graphs with an id below 0,
i.e. outside the training environments, are ignored). For environment
:math:`e` with the :math:`n_e` graphs :math:`\\mathcal B_e` of the batch, logits
:math:`z_i` (``ctx.output.logits``) and labels :math:`y_i`,

.. math:: R_e = \\frac{1}{n_e} \\sum_{i \\in \\mathcal B_e} \\mathrm{CE}(z_i, y_i).

They declare ``requires = {"env"}``: a dataset with a single environment is
refused before training. With many small environments (ogbg-molbbbp's scaffold
domains: a batch of 64 training graphs holds about 52 environments, about 5 of
them with two graphs or more), most environments contribute one graph per batch.

Sources: DomainBed (facebookresearch/DomainBed, ``domainbed/algorithms.py``
``IRM``, ``VREx``, ``GroupDRO``; defaults from ``domainbed/hparams_registry.py``)
and GOOD (divelab/GOOD, ``GOOD/ood_algorithms/algorithms/{IRM,VREx,GroupDRO}.py``).
The trainer always adds the plain cross-entropy on the whole batch; each class
returns only its penalty, weighted by ``weight``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from grprune.ops import rank_in_segment, segment_sum
from grprune.losses import cross_entropy
from grprune.hparams import Param
from grprune.regularizers.base import REGULARIZERS, Regularizer, StepContext


def env_groups(ctx: StepContext) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Logits and labels of the graphs with an environment id >= 0, grouped.

    Returns
    -------
    logits : Tensor of shape (B', C)
    y : Tensor of shape (B',)
    ids : Tensor of shape (M,)
        The distinct environment ids of the batch, sorted.
    group : Tensor of shape (B',)
        Position of each graph's environment in ``ids``.
    counts : Tensor of shape (M,)
        Graphs per environment.
    """
    logits, y, env = ctx.output.logits, ctx.batch.y, ctx.batch.env.to(ctx.output.logits.device)
    keep = env >= 0
    if not bool(keep.all()):
        logits, y, env = logits[keep], y[keep], env[keep]
    ids, group, counts = torch.unique(env, return_inverse=True, return_counts=True)
    return logits, y, ids, group, counts


def env_risks(logits: Tensor, y: Tensor, group: Tensor, counts: Tensor) -> Tensor:
    """Mean cross-entropy :math:`R_e` per environment, shape (M,)."""
    per_graph = cross_entropy(logits, y, reduction="none")
    return segment_sum(per_graph, group, counts.numel()) / counts.to(per_graph.dtype)


def _zero(ctx: StepContext) -> Tensor:
    """0 with a gradient path to the logits (an undefined penalty)."""
    return ctx.output.logits.sum() * 0.0


class AnnealedPenalty(Regularizer):
    """A penalty weighted ``anneal_weight`` for its first ``anneal_steps`` steps, then ``weight``.

    DomainBed's IRM and VREx weight their penalty 1.0 for the first 500 updates
    (``irm_penalty_anneal_iters``, ``vrex_penalty_anneal_iters``) and
    ``irm_lambda`` / ``vrex_lambda`` after. The weight of a step is a function of
    ``ctx.step``, the trainer's count of training steps since the regularizers
    switched on (after ``train.warmup_epochs``; a resumed run continues it):

    .. math:: \\lambda(t) = \\text{anneal\\_weight} \\text{ if } t < \\text{anneal\\_steps}
              \\text{ else weight}

    DomainBed also resets Adam at the switch; the trainer does not (a
    regularizer has no access to the optimizer).
    """

    params = {
        "weight": Param(1.0, "weight lambda of this term in the loss", low=0.0),
        "anneal_steps": Param(500, "first training steps weighted anneal_weight instead of "
                                   "weight (DomainBed: 500; 0 = off)", low=0),
        "anneal_weight": Param(1.0, "weight during the anneal steps (DomainBed: 1.0)", low=0.0),
    }

    def weight_at(self, ctx: StepContext) -> float:
        """``anneal_weight`` while ``ctx.step < anneal_steps``, ``weight`` after."""
        annealing = ctx.step < self.hparams["anneal_steps"]
        return float(self.hparams["anneal_weight" if annealing else "weight"])

    def get_extra_state(self) -> dict:
        return {}

    def set_extra_state(self, state: dict) -> None:
        """Checkpoints from before ``ctx.step`` hold a step count here; the trainer
        now counts steps, so it is not needed."""

    def loss(self, ctx: StepContext) -> Tensor:
        return self.penalty(ctx)

    def penalty(self, ctx: StepContext) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


@REGULARIZERS.register("irm", aliases=("irmv1",))
class IRMPenalty(AnnealedPenalty):
    """IRMv1 (Arjovsky et al. 2019): squared gradient of each environment's risk w.r.t. a dummy scale.

    ``estimator="full"`` (default; GOOD's ``IRM`` and the IRM authors'
    Colored-MNIST code), the mean over the :math:`M` environments of the batch:

    .. math::
        \\mathcal L_{IRM} = \\frac1M \\sum_e \\Big(\\frac{\\partial}{\\partial w}
        R_e(w \\cdot z)\\Big|_{w=1}\\Big)^2,\\qquad
        \\frac{\\partial R_e}{\\partial w}\\Big|_{w=1}
        = \\frac1{n_e} \\sum_{i \\in \\mathcal B_e} (\\mathrm{softmax}(z_i) - \\mathbb 1_{y_i})^\\top z_i

    ``estimator="halves"`` (DomainBed's ``_irm_penalty``, the IRM paper's
    appendix code): the product of the gradients on the even and odd graphs of
    each environment (in batch order), an unbiased estimate of the squared
    gradient, averaged over the environments with at least 2 graphs (others
    have no estimate and are left out; no such environment gives 0).
    ``full`` is the default because it is defined for single-graph
    environments, which most scaffold environments are in a batch.

    The gradient w.r.t. the scale is computed with
    ``torch.autograd.grad(..., create_graph=True)`` (one scale per environment,
    one call). Defaults (DomainBed): ``weight`` = 100 (``irm_lambda``) after
    ``anneal_steps`` = 500 steps at ``anneal_weight`` = 1.0. A batch with one
    environment gives that environment's squared gradient (not 0: IRMv1 is
    defined per environment).
    """

    requires = frozenset({"env"})
    pads = True  # padding graphs have environment -1, which env_groups leaves out
    display_name, table_order, name_order = "IRM", 10.0, 4.0
    params = {
        **AnnealedPenalty.params,
        "weight": Param(100.0, "IRM penalty weight (DomainBed irm_lambda: 100)", low=0.0,
                        search=(0.01, 0.1, 1.0, 10.0)),
        "estimator": Param("full", "full: squared gradient per environment (GOOD); halves: "
                                   "product of the gradients on two halves (DomainBed, "
                                   "unbiased)", choices=("full", "halves")),
    }

    def penalty(self, ctx: StepContext) -> Tensor:
        logits, y, _, group, counts = env_groups(ctx)
        m = counts.numel()
        if m == 0:
            return _zero(ctx)
        halves = self.hparams["estimator"] == "halves"
        if halves:
            if not bool((counts >= 2).any()):
                return _zero(ctx)
            # rank of each graph inside its environment, in batch order
            rank = rank_in_segment(torch.arange(group.numel(), device=group.device), group, m)
            group = 2 * group + rank % 2
            counts = torch.bincount(group, minlength=2 * m)
            m = 2 * m
        with torch.enable_grad():
            scale = torch.ones(m, dtype=logits.dtype, device=logits.device, requires_grad=True)
            scaled = logits * scale[group].unsqueeze(-1)
            per_graph = cross_entropy(scaled, y, reduction="none")
            risks = segment_sum(per_graph, group, m) / counts.clamp_min(1).to(logits.dtype)
            grad = torch.autograd.grad(risks.sum(), scale, create_graph=True)[0]
        if not halves:
            return (grad ** 2).mean()
        both = counts.view(-1, 2).min(dim=1).values > 0
        return (grad[0::2] * grad[1::2])[both].mean()


@REGULARIZERS.register("vrex", aliases=("v-rex",))
class VRExPenalty(AnnealedPenalty):
    """V-REx (Krueger et al. 2021): variance of the environments' risks.

    .. math::
        \\mathcal L_{VREx} = \\frac1M \\sum_e \\big(R_e - \\bar R\\big)^2,\\qquad
        \\bar R = \\frac1M \\sum_e R_e

    over the :math:`M` environments of the batch (DomainBed: the mean of squared
    deviations; GOOD's ``torch.var`` divides by :math:`M-1`, i.e. is
    :math:`M/(M-1)` times larger). One environment gives 0. Defaults:
    ``weight`` = 10 (DomainBed ``vrex_lambda``; GOOD-HIV scaffold/concept
    ``ood_param``) after ``anneal_steps`` = 500 steps at ``anneal_weight`` = 1.0
    (DomainBed ``vrex_penalty_anneal_iters``).
    """

    requires = frozenset({"env"})
    pads = True  # padding graphs have environment -1, which env_groups leaves out
    display_name, table_order, name_order = "VREx", 30.0, 5.0
    params = {**AnnealedPenalty.params,
              "weight": Param(10.0, "V-REx penalty weight (DomainBed vrex_lambda: 10)", low=0.0,
                              search=(0.01, 0.1, 1.0, 10.0))}

    def penalty(self, ctx: StepContext) -> Tensor:
        logits, y, _, group, counts = env_groups(ctx)
        if counts.numel() == 0:
            return _zero(ctx)
        risks = env_risks(logits, y, group, counts)
        return ((risks - risks.mean()) ** 2).mean()


@REGULARIZERS.register("groupdro", aliases=("group-dro",))
class GroupDRO(Regularizer):
    """GroupDRO (Sagawa et al. 2020, Algorithm 1): risks weighted by adversarial environment weights.

    A persistent weight :math:`q_e` per environment id seen in training
    (a buffer grown as new ids appear; a new id starts with the same
    unnormalised weight 1 as every id had at the start). Each training step,
    for the environments :math:`e` of the batch,

    .. math::
        q_e \\leftarrow q_e \\exp(\\eta\\, \\mathrm{sg}(R_e)), \\qquad
        q \\leftarrow q / \\textstyle\\sum_{e'} q_{e'}, \\qquad
        \\mathcal L_{DRO} = \\sum_{e \\in \\text{batch}} \\frac{q_e}
                            {\\sum_{e' \\in \\text{batch}} q_{e'}} R_e

    (update first, then the loss, as DomainBed and the authors' code; kept in
    log space, :math:`\\log q_e = \\eta \\sum_t R_{e,t}`, so it cannot
    overflow). The weights are renormalised over the environments of the batch
    so that the term is on the scale of a risk: with every environment in every
    batch (DomainBed's setting) this is DomainBed's ``torch.dot(losses, q)``;
    with :math:`\\eta = 0` it is the mean of the environments' risks. Outside
    training mode ``q`` is not updated.

    ``weight``: the trainer minimises :math:`\\mathrm{CE} + w\\,\\mathcal L_{DRO}`,
    the cross-entropy on the whole batch stays in. DomainBed's GroupDRO
    minimises :math:`\\mathcal L_{DRO}` alone; as Adam is invariant to the scale
    of the loss (without weight decay), a large weight (e.g. 1000) makes the
    CE's share negligible and approximates it. Defaults: ``weight`` = 1,
    ``step_size`` :math:`\\eta` = 0.01 (DomainBed ``groupdro_eta``; the paper
    searched {1, 0.1, 0.01}).
    """

    requires = frozenset({"env"})
    pads = True  # padding graphs have environment -1, which env_groups leaves out
    display_name, table_order, name_order = "GroupDRO", 20.0, 6.0
    params = {
        "weight": Param(1.0, "weight of the q-weighted risk, added to the CE (see docs)",
                        low=0.0),
        "step_size": Param(0.01, "eta of the exponentiated-gradient update of q (DomainBed: "
                                 "0.01; 0 = the mean of the environments' risks)", low=0.0,
                           search=(1.0, 0.1, 0.01)),
    }

    log_q: Tensor  # buffers, grown as environment ids appear
    seen: Tensor

    def __init__(self, **hparams: Any) -> None:
        super().__init__(**hparams)
        self.register_buffer("log_q", torch.zeros(0, dtype=torch.float64))
        self.register_buffer("seen", torch.zeros(0, dtype=torch.bool))

    @property
    def q(self) -> Tensor:
        """Normalised weights over every environment id, 0 for ids not seen yet."""
        q = torch.zeros_like(self.log_q)
        if bool(self.seen.any()):
            q[self.seen] = torch.softmax(self.log_q[self.seen], 0)
        return q

    def _grow(self, size: int) -> None:
        if size > self.log_q.numel():
            extra = size - self.log_q.numel()
            self.log_q = torch.cat([self.log_q, self.log_q.new_zeros(extra)])
            self.seen = torch.cat([self.seen, self.seen.new_zeros(extra)])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        saved = state_dict.get(prefix + "log_q")
        if saved is not None:  # buffers grow in training: take the saved size
            self.log_q = self.log_q.new_zeros(saved.shape)
            self.seen = self.seen.new_zeros(saved.shape)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def loss(self, ctx: StepContext) -> Tensor:
        logits, y, ids, group, counts = env_groups(ctx)
        if counts.numel() == 0:
            return _zero(ctx)
        risks = env_risks(logits, y, group, counts)
        self._grow(int(ids.max()) + 1)
        ids = ids.to(self.log_q.device)
        if self.training:
            self.seen[ids] = True
            self.log_q[ids] += self.hparams["step_size"] * risks.detach().to(self.log_q.dtype)
        weights = torch.softmax(self.log_q[ids], 0).to(risks.dtype).to(risks.device)
        return (weights * risks).sum()
