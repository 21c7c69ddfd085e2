"""GSAT: stochastic-attention information bottleneck (Miao et al., ICML 2022).

"Interpretable and Generalizable Graph Learning via Stochastic Attention
Mechanism". GSAT samples an attention mask for every edge from the selector,
runs the classifier on the graph weighted by that mask, and penalises the KL
divergence between the attention's Bernoulli distribution and an uninformative
Bernoulli(r) prior, so that only the edges the label needs keep a high
attention.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from grprune.errors import GrpruneError
from grprune.hparams import hparam
from grprune.regularizers.base import REGULARIZERS, Regularizer, StepContext


def gsat_r(epoch: int, init_r: float = 0.9, final_r: float = 0.7, decay_r: float = 0.1,
           decay_interval: int = 20) -> float:
    """GSAT's prior keep-probability at an epoch (a step schedule).

    .. math:: r(t) = \\max\\big(r_{final},\\; r_{init} - \\lfloor t / T \\rfloor \\cdot \\delta\\big)

    with :math:`T` = ``decay_interval`` and :math:`\\delta` = ``decay_r``.

    Examples
    --------
    >>> [round(gsat_r(t, decay_interval=10), 6) for t in (0, 9, 10, 25, 80)]
    [0.9, 0.9, 0.8, 0.7, 0.7]
    """
    r = init_r - (max(int(epoch), 0) // int(decay_interval)) * decay_r
    return max(r, final_r)


def gsat_r_tensor(epoch: Tensor, init_r: float = 0.9, final_r: float = 0.7,
                  decay_r: float = 0.1, decay_interval: int = 20) -> Tensor:
    """:func:`gsat_r` of a 0-dim integer Tensor (a compiled or captured step's epoch,
    ``StepContext.epoch_tensor``), in float64 on its device: the same operations as the
    Python version in the same precision, so the same value to the last bit."""
    steps = torch.div(epoch.clamp_min(0), int(decay_interval), rounding_mode="floor")
    return (init_r - steps.to(torch.float64) * decay_r).clamp_min(final_r)


def gsat_info_loss(att: Tensor, r: float | Tensor, eps: float = 1e-6,
                   mask: Tensor | None = None) -> Tensor:
    """Mean KL divergence KL(Bernoulli(att) || Bernoulli(r)) over the entries of ``att``.

    Per entry, with GSAT's guards against ``log 0`` (``eps`` inside the logs,
    and added to ``1 - r``):

    .. math::
        a \\log\\Big(\\frac{a}{r} + \\epsilon\\Big)
        + (1 - a) \\log\\Big(\\frac{1 - a}{1 - r + \\epsilon} + \\epsilon\\Big)

    An empty ``att`` gives 0 (with a gradient path).

    Parameters
    ----------
    att : Tensor of shape (M,), values in [0, 1]
    r : float or Tensor
        Prior keep-probability in (0, 1]; a Tensor is a 0-dim float64 one
        (:func:`gsat_r_tensor`), rounded to ``att``'s dtype as a float would be.
    eps : float
    mask : Tensor of shape (M,), bool, optional
        Entries that count (False: padding edges); the mean is over them.
    """
    if att.numel() == 0:
        return att.sum()
    below: float | Tensor = 1 - r + eps  # in double, as the float's Python arithmetic
    if isinstance(r, Tensor):  # then rounded to att's dtype once, as a Python scalar is
        r, below = r.to(att.dtype), below.to(att.dtype)  # type: ignore[union-attr]
    kl = (att * torch.log(att / r + eps)
          + (1 - att) * torch.log((1 - att) / below + eps))
    if mask is not None:
        m = mask.to(kl.dtype)
        return (kl * m).sum() / m.sum().clamp_min(1)
    return kl.mean()


@REGULARIZERS.register("gsat")
class GSAT(Regularizer):
    """GSAT's information loss on the selector's edge attention.

    .. math::
        R_{GSAT} = \\frac{1}{|\\mathcal E|} \\sum_{(u,v) \\in \\mathcal E}
        \\mathrm{KL}\\big(\\mathrm{Bern}(\\alpha_{uv}) \\,\\|\\, \\mathrm{Bern}(r)\\big)

    averaged over all directed edges of the batch (GSAT's ``info_loss``, a
    batch-level mean), with the eps handling of :func:`gsat_info_loss`.

    * :math:`\\alpha_{uv}` (``att="sample"``, default, as GSAT's code): the
      relaxed concrete sample of the step (``selection.relaxed``,
      :math:`\\sigma((w + \\log u - \\log(1-u))/\\tau)`), which is also what the
      encoder consumes under this method's selector defaults; GSAT passes the
      sampled attention, not :math:`\\sigma(w)`, to its KL in training.
      ``att="prob"`` uses :math:`p = \\sigma(w)` (the paper's Bernoulli
      parameter; noise-free).
    * :math:`r` follows GSAT's step schedule :func:`gsat_r`; ``schedule``
      picks the epoch it counts: ``active`` (default) counts from the first
      epoch this term is on, i.e. after ``train.warmup_epochs`` of ERM (like
      GSAT's epochs after its optional classifier pre-training; GSAT itself
      has no warm-up), ``absolute`` uses the trainer's epoch (warm-up included).
      ``decay_r=0`` keeps :math:`r = r_{init}` (GSAT's ``fix_r``).

    Selector: GSAT trains with soft concrete samples and evaluates with the
    attention probability, hence ``selector_defaults = {"hard": False,
    "eval_mode": "soft"}`` (override with ``-H selector.hard=true``). GSAT
    samples each direction of an undirected edge and averages the two
    attentions; grprune's selector already gives one score and one sample per
    undirected bond (the two directions' logits averaged), so both directions
    carry the same attention. The classifier is the same GNN, with the
    attention as ``edge_weight`` (as in grprune's model).

    Defaults: GSAT's ``info_loss_coef`` = 1 (``weight``), ``init_r`` = 0.9
    (GSAT's code default), and its ``GIN-ogbg_mol`` config ``decay_r`` = 0.1,
    ``decay_interval`` = 20, ``final_r`` = 0.7 (its SPMotif / BA-2Motifs
    configs use ``decay_interval`` = 10; MUTAG ``final_r`` = 0.5).

    Differences from GSAT's code: GSAT's molecular config learns node
    attention and lifts it to edges (:math:`\\alpha_u \\alpha_v`), with the KL
    on the node attention; grprune's selectors score edges, so this is GSAT's
    edge-attention form (``learn_edge_att``) on every dataset.

    Examples
    --------
    Attention 0.5 on every edge against r = 0.5 costs about 0 (equal
    distributions); attention near 1 against r = 0.7 costs about log(1/0.7).
    """

    requires = frozenset({"selector"})
    pads = True
    display_name, table_order, name_order = "GSAT", 50.0, 2.0
    selector_defaults = {"hard": False, "eval_mode": "soft"}

    class Hparams(Regularizer.Hparams):
        weight: float = hparam(1.0, "GSAT's info_loss_coef, weight of the KL term", low=0.0)
        init_r: float = hparam(0.9, "prior keep-probability r at the start of the schedule",
                               low=0.0, high=1.0, low_open=True)
        final_r: float = hparam(0.7, "lowest r of the schedule", low=0.0, high=1.0,
                                low_open=True, search=(0.3, 0.5, 0.7))
        decay_r: float = hparam(0.1, "r decreases by this every decay_interval epochs (0 = "
                                     "fixed r)", low=0.0)
        decay_interval: int = hparam(20, "epochs between two decreases of r", low=1)
        eps: float = hparam(1e-6, "stabiliser inside the logs of the KL (GSAT: 1e-6)", low=0.0)
        att: str = hparam("sample", "sample: KL of the relaxed concrete sample (GSAT's code); "
                                    "prob: of sigmoid(logit)", choices=("sample", "prob"))
        schedule: str = hparam("active", "active: the r schedule counts epochs since this "
                                         "term switched on (after warm-up); absolute: the "
                                         "trainer's epoch", choices=("active", "absolute"))

    hp: Hparams

    def __init__(self, **hparams: Any) -> None:
        super().__init__(**hparams)
        hp = self.hp
        if hp.final_r > hp.init_r:
            raise GrpruneError(f"reg.gsat.final_r ({hp.final_r}) must not exceed "
                               f"init_r ({hp.init_r})")
        #: the first epoch this term was computed (schedule="active"); kept in
        #: the state dict so a resumed run continues the same schedule
        self.start_epoch: int | None = None

    def get_extra_state(self) -> dict:
        return {"start_epoch": self.start_epoch}

    def set_extra_state(self, state: dict) -> None:
        self.start_epoch = state.get("start_epoch")

    def schedule_epoch(self, epoch: int) -> int:
        """The epoch the r schedule sees for trainer epoch ``epoch``."""
        if self.hp.schedule == "absolute":
            return epoch
        if self.start_epoch is None:
            self.start_epoch = int(epoch)
        return max(int(epoch) - self.start_epoch, 0)

    def r(self, epoch: int) -> float:
        """Prior keep-probability at schedule epoch ``epoch``."""
        hp = self.hp
        return gsat_r(epoch, hp.init_r, hp.final_r, hp.decay_r, hp.decay_interval)

    def loss(self, ctx: StepContext) -> Tensor:
        sel = ctx.selection
        assert sel is not None  # requires a selector: supports() refuses a run without one
        if self.hp.att == "sample" and sel.relaxed is not None:
            att = sel.relaxed
        else:  # att="prob", or no sample (evaluation)
            att = sel.edge_prob
        epoch = ctx.epoch_tensor
        if epoch is None:
            r: float | Tensor = self.r(self.schedule_epoch(ctx.epoch))
        else:  # compiled or captured: the schedule from the device's epoch ("active"
            hp = self.hp  # reads ctx.epoch once, at its first, eager step)
            active = hp.schedule == "active"
            if active and self.start_epoch is None:
                self.start_epoch = int(ctx.epoch)
            start = self.start_epoch if active and self.start_epoch is not None else 0
            r = gsat_r_tensor(epoch - start, hp.init_r, hp.final_r, hp.decay_r,
                              hp.decay_interval)
        return gsat_info_loss(att, r, self.hp.eps, ctx.batch.edge_mask)
