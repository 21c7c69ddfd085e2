"""One training step's loss, eager or through :func:`torch.compile` (``train.compile``).

:func:`step_loss` is the step of the paper's pseudocode (Appendix "Algorithmic
Pseudocode") up to the backward pass: the selector samples a mask, the encoder classifies
the masked graphs, and the loss is :math:`\\mathcal L_{GT} + \\sum_i \\lambda_i R_i`
(Eq. 5). :class:`TrainStep` runs it as it is (``train.compile=none``) or compiled with
``torch.compile(mode=..., dynamic=False)`` (issue 49): one graph per static batch shape
(``train.pad_buckets``' at most 8 buckets) and phase (ERM warm-up or not); AOTAutograd
compiles the backward with it, and ``mode="reduce-overhead"`` replays both as CUDA graphs on
a GPU. Adam's step stays eager (``train.fast_path``: fused on CUDA).

Random draws (the Gumbel noise of :func:`~grprune.selectors.base.gumbel_sigmoid`,
dropout) stay the same method under compile, from another stream: inductor draws them with
its own generator (Philox on CUDA, CUDA-graph safe; seeded from torch's global seed), so a
compiled run's numbers are not an eager run's. With ``fallback_random=True``
(:class:`TrainStep`, for tests) inductor calls torch's own ``rand`` and a step matches the
eager one to rounding (``tests/test_compile.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

import torch
from torch import Tensor

from grprune.batch import GraphBatch
from grprune.errors import GrpruneError
from grprune.losses import cross_entropy
from grprune.regularizers.base import Regularizer, StepContext, sum_terms

if TYPE_CHECKING:
    from grprune.model import GraphClassifier

#: ``train.compile``'s values: ``none`` (eager) and :func:`torch.compile`'s modes
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")
#: graphs kept per compiled frame: 8 buckets (:func:`grprune.batch.choose_buckets`) times
#: two phases (warm-up, selector on), with room for a regularizer whose schedule changes
RECOMPILE_LIMIT = 32

#: :func:`torch.compile`'s backend when :class:`TrainStep` is given none: None = inductor
#: (tests set ``"aot_eager"`` on the CPU, where inductor's C++ build takes minutes)
BACKEND: str | None = None

StepOut = tuple[Tensor, dict[str, Tensor], Any, Tensor | None]


def add_reg_terms(regs: Mapping[str, Regularizer], ctx: StepContext, total: Tensor,
                  log: dict[str, Tensor]) -> Tensor:
    """``total`` plus every regularizer's weighted terms (:meth:`Regularizer.terms`).

    Logs into ``log``: ``<reg>`` the unweighted value :math:`R_i` of a regularizer that
    implements :meth:`Regularizer.loss` (the sum of its weighted terms otherwise), and
    ``<reg>/<term>`` each weighted term.
    """
    for name, reg in regs.items():
        reg_terms = reg.terms(ctx)
        for term, value in reg_terms.items():
            log[f"{name}/{term}"] = value
            total = total + value
        if reg_terms:
            log[name] = (ctx.values[reg.name] if reg.name in ctx.values
                         else sum_terms(reg_terms))
    return total


class StepClock:
    """The epoch and step of the step being taken, one object for all of a run's steps."""

    def __init__(self) -> None:
        self.epoch, self.step = 0, 0


class _ClockedContext(StepContext):
    """A :class:`StepContext` whose ``epoch`` and ``step`` are read from a :class:`StepClock`
    when a regularizer asks for them: a compiled step then guards on them (compiles again
    when they change) only for a regularizer that reads them (IRM's annealing, GSAT's
    schedule), not for every one."""

    clock: StepClock

    @property  # type: ignore[override]
    def epoch(self) -> int:
        return self.clock.epoch

    @epoch.setter
    def epoch(self, value: int) -> None:  # the dataclass's __init__ sets the default
        pass

    @property  # type: ignore[override]
    def step(self) -> int:
        return self.clock.step

    @step.setter
    def step(self, value: int) -> None:
        pass


def step_loss(model: "GraphClassifier", regs: Mapping[str, Regularizer], batch: GraphBatch,
              warm: bool, epoch: int, step: int, clock: StepClock | None = None) -> StepOut:
    """The loss of one training step (Eq. 5; cross-entropy alone during warm-up).

    ``epoch`` and ``step`` go to the regularizers (:class:`StepContext`); with ``clock``
    (the compiled step) they are read from it instead, when asked.

    Returns
    -------
    (total, terms, selection, kept)
        ``total`` a scalar Tensor; ``terms`` the logged scalars by name (``ce``,
        :func:`add_reg_terms`' names, ``total``); the model's
        :class:`~grprune.selectors.base.Selection` (None without a selector in use); and
        ``kept``, the summed edge weights of the real edges (a scalar Tensor; None without
        a selection).
    """
    out = model(batch, use_selector=not warm)
    ce = cross_entropy(out.logits, batch.y, mask=batch.graph_mask)
    terms = {"ce": ce}
    total = ce
    if not warm and regs:
        if clock is None:
            ctx = StepContext(batch=batch, output=out, model=model, epoch=epoch, step=step)
        else:
            ctx = _ClockedContext(batch=batch, output=out, model=model)
            ctx.clock = clock
        total = add_reg_terms(regs, ctx, total, terms)
    terms["total"] = total
    sel = out.selection
    kept = batch.real_edge_sum(sel.edge_weight.detach()) if sel is not None else None
    return total, terms, sel, kept


class TrainStep:
    """:func:`step_loss`, eager (``mode="none"``) or through :func:`torch.compile`.

    Parameters
    ----------
    mode : str
        One of :data:`COMPILE_MODES` (``train.compile``).
    backend : str, optional
        :func:`torch.compile`'s backend (default :data:`BACKEND`, else inductor); a backend
        other than inductor takes no ``mode``.
    fallback_random : bool
        Inductor draws random numbers with torch's own ``rand`` (the eager stream) instead
        of its own generator: for tests that compare with the eager step.

    Raises
    ------
    GrpruneError
        For a mode not in :data:`COMPILE_MODES`.
    """

    def __init__(self, mode: str = "none", backend: str | None = None,
                 fallback_random: bool = False) -> None:
        if mode not in COMPILE_MODES:
            raise GrpruneError(f"train.compile={mode!r}: choose one of "
                               f"{', '.join(COMPILE_MODES)}")
        self.mode, self.fallback_random = mode, fallback_random
        self.clock = StepClock()
        self._fn: Callable[..., StepOut] = step_loss
        backend = backend or BACKEND
        if mode != "none":
            options: dict[str, Any] = {"backend": backend} if backend else {"mode": mode}
            self._fn = torch.compile(step_loss, dynamic=False, **options)

    @property
    def compiled(self) -> bool:
        return self.mode != "none"

    def __call__(self, model: "GraphClassifier", regs: Mapping[str, Regularizer],
                 batch: GraphBatch, warm: bool, epoch: int, step: int) -> StepOut:
        """:func:`step_loss` of one step; compiled, with the recompile limit raised to
        :data:`RECOMPILE_LIMIT` (and inductor's ``fallback_random``) for this call only."""
        if not self.compiled:
            return step_loss(model, regs, batch, warm, epoch, step)
        import torch._dynamo.config as dynamo_config
        import torch._inductor.config as inductor_config
        if self.mode == "reduce-overhead":  # a new step: the last one's CUDA-graph outputs
            torch.compiler.cudagraph_mark_step_begin()  # (read by then) may be overwritten
        with dynamo_config.patch(recompile_limit=RECOMPILE_LIMIT), \
                inductor_config.patch(fallback_random=self.fallback_random):
            self.clock.epoch, self.clock.step = epoch, step
            return self._fn(model, regs, batch, warm, 0, 0, self.clock)
