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

On a batch padded to a static shape (``train.pad_buckets``) the three take a
static form over :class:`EnvSlots` (the environments in ``B`` slots instead of
``torch.unique``'s ``M``): the same values to rounding (``tests/test_static_regs.py``: within
1e-6 relative, GroupDRO's bit for bit in that test), no read back to the host (GroupDRO:
after :meth:`GroupDRO.reserve`), and one :func:`torch.compile` graph without a break per
batch shape (IRM: the closed-form gradient :func:`irm_graph_grad` instead of
``torch.autograd.grad``). A batch without padding keeps :func:`env_groups`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from grprune.ops import rank_in_segment, segment_sum
from grprune.losses import cross_entropy
from grprune.hparams import hparam
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


@dataclass(frozen=True)
class EnvSlots:
    """The environments of a batch of ``B`` graphs in ``B`` slots: static shapes, on the device.

    :func:`env_groups` gives the ``M`` distinct environments of a batch, a shape that depends
    on the values (``torch.unique``, a read back to the host); here the environments take
    the first ``M`` of ``B`` slots, in ascending id order (slot ``s < M`` is ``env_groups``'
    group ``s``), and the slots after them are empty. Graphs with an id below 0 (outside the
    training environments; the padding of a padded batch) are left out: their slot is an
    empty one. Every shape is ``B``, nothing is read back, so one traced graph
    (:func:`torch.compile` with ``dynamic=False``, a captured CUDA graph) serves every batch
    of one static shape.

    Attributes
    ----------
    slot : Tensor of shape (B,), int64 in ``[0, B)``
        Slot of each graph's environment.
    keep : Tensor of shape (B,), bool
        True for a graph with an environment id >= 0.
    ids : Tensor of shape (B,), int64
        Environment id of each slot (meaningful where ``valid``).
    counts : Tensor of shape (B,), int64
        Kept graphs per slot (0 for an empty slot).
    valid : Tensor of shape (B,), bool
        True for the ``M`` slots that hold an environment: the first ``M``.
    num : Tensor, a scalar, int64
        ``M``.
    """

    slot: Tensor
    keep: Tensor
    ids: Tensor
    counts: Tensor
    valid: Tensor
    num: Tensor

    @classmethod
    def of(cls, env: Tensor) -> "EnvSlots":
        """From the environment id of each graph, shape (B,), int64 (below 0: left out).

        Examples
        --------
        >>> s = EnvSlots.of(torch.tensor([3, -1, 1, 3]))
        >>> s.slot.tolist(), s.ids[s.valid].tolist(), s.counts.tolist(), int(s.num)
        ([1, 2, 0, 1], [1, 3], [1, 2, 0, 0], 2)
        """
        env = env.long()
        b = env.shape[0]
        keep = env >= 0
        # left-out graphs sort last, as one group of their own
        key = torch.where(keep, env, torch.iinfo(torch.int64).max)
        sorted_key, order = torch.sort(key, stable=True)
        starts = torch.ones_like(keep)
        starts[1:] = sorted_key[1:] != sorted_key[:-1]
        slot_sorted = torch.cumsum(starts, 0) - 1  # slot of the k-th graph in id order
        slot = torch.empty_like(slot_sorted).scatter_(0, order, slot_sorted)
        slots = torch.arange(b, device=env.device)
        first = torch.searchsorted(slot_sorted, slots)  # first graph of each slot (id order)
        size = torch.searchsorted(slot_sorted, slots, right=True) - first
        first = first.clamp_max(max(b - 1, 0))
        ids = sorted_key.gather(0, first)
        valid = (size > 0) & keep.gather(0, order.gather(0, first))
        counts = torch.where(valid, size, 0)
        return cls(slot=slot, keep=keep, ids=ids, counts=counts, valid=valid, num=valid.sum())

    def risks(self, per_graph: Tensor) -> Tensor:
        """Mean of ``per_graph`` (shape (B,)) over the kept graphs of each slot, shape (B,)
        (0 for an empty slot): :func:`env_risks`' :math:`R_e` in slot ``e``, added in the
        same order."""
        kept = torch.where(self.keep, per_graph, 0.0)
        return (segment_sum(kept, self.slot, self.slot.shape[0])
                / self.counts.clamp_min(1).to(per_graph.dtype))

    def mean(self, values: Tensor, where: Tensor | None = None) -> Tensor:
        """Mean of ``values`` (shape (B,)) over the slots ``where`` (default ``valid``); 0 if
        there is none."""
        where = self.valid if where is None else where
        count = where.sum().clamp_min(1).to(values.dtype)
        return torch.where(where, values, 0.0).sum() / count


def _zero(ctx: StepContext) -> Tensor:
    """0 with a gradient path to the logits (an undefined penalty)."""
    return ctx.output.logits.sum() * 0.0


def static_slots(ctx: StepContext) -> EnvSlots | None:
    """:class:`EnvSlots` of a batch padded to a static shape (``train.pad_buckets``), whose
    penalties then take their static form; None for a batch without padding, which keeps
    :func:`env_groups` (the records of unpadded runs do not move)."""
    if ctx.batch.graph_mask is None:
        return None
    return EnvSlots.of(ctx.batch.env.to(ctx.output.logits.device))


def irm_graph_grad(logits: Tensor, y: Tensor) -> Tensor:
    """Each graph's :math:`\\partial\\, \\mathrm{CE}(w z_i, y_i) / \\partial w` at
    :math:`w = 1`, i.e. :math:`(\\mathrm{softmax}(z_i) - \\mathbb 1_{y_i})^\\top z_i`:
    shape (B, C), (B,) -> (B,). The closed form of what ``torch.autograd.grad`` gives
    IRM, differentiable in ``logits`` (no double backward, no graph break under
    :func:`torch.compile`)."""
    # not one_hot, which reads the labels' range back to the host
    hot = (y.unsqueeze(-1) == torch.arange(logits.shape[-1], device=y.device)).to(logits.dtype)
    return ((torch.softmax(logits, dim=-1) - hot) * logits).sum(-1)


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


    class Hparams(Regularizer.Hparams):
        anneal_steps: int = hparam(500, "first training steps weighted anneal_weight instead "
                                        "of weight (DomainBed: 500; 0 = off)", low=0)
        anneal_weight: float = hparam(1.0, "weight during the anneal steps (DomainBed: 1.0)",
                                      low=0.0)

    hp: Hparams

    def weight_at(self, ctx: StepContext) -> float:
        """``anneal_weight`` while ``ctx.step < anneal_steps``, ``weight`` after (with
        ``anneal_steps=0`` ``ctx.step`` is not read: a compiled step does not guard on it)."""
        steps = self.hp.anneal_steps
        annealing = steps > 0 and ctx.step < steps
        return self.hp.anneal_weight if annealing else self.hp.weight

    def weighted(self, ctx: StepContext, value: Tensor) -> Tensor:
        """:math:`\\lambda(t) R`; in a compiled or captured step (``ctx.step_tensor`` set)
        the choice of :math:`\\lambda(t)` is a ``torch.where`` on the device's step count,
        which a replayed graph follows: bit for bit :meth:`weight_at`'s product, and the same
        gradient (the other branch gets zeros)."""
        steps, step = self.hp.anneal_steps, ctx.step_tensor
        if step is None or steps <= 0:
            return self.weight_at(ctx) * value
        return torch.where(step < steps, self.hp.anneal_weight * value, self.hp.weight * value)

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
    one call); on a padded batch from its closed form (:func:`irm_graph_grad`,
    the second formula above), whose own gradient is the same. Defaults (DomainBed): ``weight`` = 100 (``irm_lambda``) after
    ``anneal_steps`` = 500 steps at ``anneal_weight`` = 1.0. A batch with one
    environment gives that environment's squared gradient (not 0: IRMv1 is
    defined per environment).
    """

    requires = frozenset({"env", "classes"})
    pads = True  # padding graphs have environment -1, which env_groups leaves out
    display_name, table_order, name_order = "IRM", 10.0, 4.0

    class Hparams(AnnealedPenalty.Hparams):
        weight: float = hparam(100.0, "IRM penalty weight (DomainBed irm_lambda: 100)",
                               low=0.0, search=(0.01, 0.1, 1.0, 10.0))
        estimator: str = hparam("full", "full: squared gradient per environment (GOOD); "
                                        "halves: product of the gradients on two halves "
                                        "(DomainBed, unbiased)", choices=("full", "halves"))

    hp: Hparams

    def penalty(self, ctx: StepContext) -> Tensor:
        slots = static_slots(ctx)
        if slots is not None:
            return self._static_penalty(ctx, slots)
        logits, y, _, group, counts = env_groups(ctx)
        m = counts.numel()
        if m == 0:
            return _zero(ctx)
        halves = self.hp.estimator == "halves"
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

    def _static_penalty(self, ctx: StepContext, slots: EnvSlots) -> Tensor:
        """The penalty of a padded batch: the same value (to rounding), in static shapes,
        with the closed-form gradient :func:`irm_graph_grad` instead of
        ``torch.autograd.grad``."""
        per_graph = irm_graph_grad(ctx.output.logits, ctx.batch.y)
        if self.hp.estimator == "full":
            return slots.mean(slots.risks(per_graph) ** 2)
        b = per_graph.shape[0]
        rank = rank_in_segment(torch.arange(b, device=per_graph.device), slots.slot, b)
        half = 2 * slots.slot + rank % 2  # the even and the odd graphs of each environment
        counts = segment_sum(slots.keep.long(), half, 2 * b)
        kept = torch.where(slots.keep, per_graph, 0.0)
        grad = segment_sum(kept, half, 2 * b) / counts.clamp_min(1).to(per_graph.dtype)
        both = counts.view(-1, 2).min(dim=1).values > 0
        return slots.mean(grad[0::2] * grad[1::2], where=both)


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

    requires = frozenset({"env", "classes"})
    pads = True  # padding graphs have environment -1, which env_groups leaves out
    display_name, table_order, name_order = "VREx", 30.0, 5.0

    class Hparams(AnnealedPenalty.Hparams):
        weight: float = hparam(10.0, "V-REx penalty weight (DomainBed vrex_lambda: 10)",
                               low=0.0, search=(0.01, 0.1, 1.0, 10.0))

    hp: Hparams

    def penalty(self, ctx: StepContext) -> Tensor:
        slots = static_slots(ctx)
        if slots is not None:  # padded: the same value, to rounding, in static shapes
            risks = slots.risks(cross_entropy(ctx.output.logits, ctx.batch.y,
                                              reduction="none"))
            return slots.mean((risks - slots.mean(risks)) ** 2)
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
    training mode ``q`` is not updated. On a padded batch (static shapes) a step reads
    the batch's largest id back to grow the buffers unless :meth:`reserve` made room for
    the dataset's ids first.

    ``weight``: the trainer minimises :math:`\\mathrm{CE} + w\\,\\mathcal L_{DRO}`,
    the cross-entropy on the whole batch stays in. DomainBed's GroupDRO
    minimises :math:`\\mathcal L_{DRO}` alone; as Adam is invariant to the scale
    of the loss (without weight decay), a large weight (e.g. 1000) makes the
    CE's share negligible and approximates it. Defaults: ``weight`` = 1,
    ``step_size`` :math:`\\eta` = 0.01 (DomainBed ``groupdro_eta``; the paper
    searched {1, 0.1, 0.01}).
    """

    requires = frozenset({"env", "classes"})
    pads = True  # padding graphs have environment -1, which env_groups leaves out
    display_name, table_order, name_order = "GroupDRO", 20.0, 6.0

    class Hparams(Regularizer.Hparams):
        weight: float = hparam(1.0, "weight of the q-weighted risk, added to the CE (see "
                                    "docs)", low=0.0)
        step_size: float = hparam(0.01, "eta of the exponentiated-gradient update of q "
                                        "(DomainBed: 0.01; 0 = the mean of the environments' "
                                        "risks)", low=0.0, search=(1.0, 0.1, 0.01))

    hp: Hparams

    log_q: Tensor  # buffers, grown as environment ids appear
    seen: Tensor

    def __init__(self, **hparams: Any) -> None:
        super().__init__(**hparams)
        self.register_buffer("log_q", torch.zeros(0, dtype=torch.float64))
        self.register_buffer("seen", torch.zeros(0, dtype=torch.bool))
        self.reserved = 0

    def reserve(self, num_envs: int) -> None:
        """Make room for the environment ids ``[0, num_envs)`` now (the dataset's, e.g.
        ``int(dataset.envs.max()) + 1``): a padded batch's step then does not read its
        largest id back to the host to grow the buffers, and reads nothing back at all.
        Kept through :meth:`load_state_dict`. An id of ``num_envs`` or more in a padded
        batch is then an indexing error.

        Raises
        ------
        ValueError
            If ``num_envs`` is below 1.
        """
        if num_envs < 1:
            raise ValueError(f"GroupDRO.reserve needs num_envs >= 1, got {num_envs}")
        self.reserved = max(self.reserved, int(num_envs))
        self._grow(self.reserved)

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
        self._grow(self.reserved)

    def loss(self, ctx: StepContext) -> Tensor:
        slots = static_slots(ctx)
        if slots is not None:
            return self._static_loss(ctx, slots)
        logits, y, ids, group, counts = env_groups(ctx)
        if counts.numel() == 0:
            return _zero(ctx)
        risks = env_risks(logits, y, group, counts)
        self._grow(int(ids.max()) + 1)
        ids = ids.to(self.log_q.device)
        if self.training:
            self.seen[ids] = True
            self.log_q[ids] += self.hp.step_size * risks.detach().to(self.log_q.dtype)
        weights = torch.softmax(self.log_q[ids], 0).to(risks.dtype).to(risks.device)
        return (weights * risks).sum()

    def _static_loss(self, ctx: StepContext, slots: EnvSlots) -> Tensor:
        """The loss of a padded batch: the same update and value (to rounding), in static
        shapes; with :meth:`reserve` called, nothing is read back."""
        risks = slots.risks(cross_entropy(ctx.output.logits, ctx.batch.y, reduction="none"))
        if not self.reserved:  # the largest id, read back, to grow the buffers
            top = int(torch.where(slots.valid, slots.ids, -1).max())
            if top < 0:  # no environment in the batch
                return _zero(ctx)
            self._grow(top + 1)
        ids = torch.where(slots.valid, slots.ids, 0).to(self.log_q.device)
        valid = slots.valid.to(self.log_q.device)
        if self.training:  # an empty slot adds 0 to id 0 (after the batch's own, if any)
            step = self.hp.step_size * risks.detach().to(self.log_q.dtype)
            self.log_q.index_add_(0, ids, torch.where(valid, step.to(valid.device), 0.0))
            hits = torch.zeros_like(self.log_q, dtype=torch.long).index_add_(0, ids, valid.long())
            self.seen.logical_or_(hits > 0)
        log_q = torch.where(valid, self.log_q.gather(0, ids), -torch.inf)
        # no environment: softmax of -inf only is NaN, and every weight is taken as 0
        weights = torch.where(valid, torch.softmax(log_q, 0), 0.0)
        return (weights.to(risks.dtype).to(risks.device) * risks).sum()
