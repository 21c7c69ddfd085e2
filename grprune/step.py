"""One training step: its loss, eager or through :func:`torch.compile`, or the whole step as
one CUDA graph (``train.compile``).

:func:`step_loss` is the step of the paper's pseudocode (Appendix "Algorithmic
Pseudocode") up to the backward pass: the selector samples a mask, the encoder classifies
the masked graphs, and the loss is :math:`\\mathcal L_{GT} + \\sum_i \\lambda_i R_i`
(Eq. 5). :class:`TrainStep` runs it as it is (``train.compile=none``) or compiled with
``torch.compile(mode=..., dynamic=False)``: one graph per static batch shape
(``train.pad_buckets``' at most 8 buckets) and phase (ERM warm-up or not); AOTAutograd
compiles the backward with it, and ``mode="reduce-overhead"`` replays both as CUDA graphs on
a GPU. Adam's step stays eager (``train.fast_path``: fused on CUDA).

Under compile, inductor draws the Gumbel noise and dropout from its own generator (Philox
on CUDA), so a compiled run's numbers are not an eager run's; with ``fallback_random=True``
(tests) a step matches the eager one to rounding (``tests/test_compile.py``).

``train.compile=cuda-graph`` (:class:`GraphedStep`) goes further: the whole step, Adam's
update included, is captured as one :class:`torch.cuda.CUDAGraph` per bucket and phase and
replayed (its docstring has the recipe and what keeps a step eager). The capture is behind a
small seam (:mod:`grprune.capture`: :class:`~grprune.capture.CudaGraphs`; on the CPU
:class:`~grprune.capture.EagerGraphs`, whose replay runs the step eagerly), so the CPU tests
the plumbing bit for bit (``tests/test_cuda_graph.py``). A
schedule computed from the clock's device tensors (``ctx.epoch_tensor``/``ctx.step_tensor``:
IRM, VREx, GSAT) is captured; one that reads the Python ``ctx.epoch``/``ctx.step`` is not.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Mapping

import torch
from torch import Tensor

from grprune.batch import GraphBatch
from grprune.capture import (CudaGraphs, EagerGraphs, StaticGraph, WatchedBatch, batch_tensors,
                             mark_eager, static_copy, watch_capture_hazards,
                             watch_replaced_tensors)
from grprune.errors import GrpruneError
from grprune.regularizers.base import Regularizer, StepContext, sum_terms

if TYPE_CHECKING:
    from grprune.model import GraphClassifier

#: ``train.compile``'s values: ``none`` (eager), :func:`torch.compile`'s modes, and
#: ``cuda-graph`` (:class:`GraphedStep`: the whole step, Adam's included, as one CUDA graph)
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune", "cuda-graph")
#: the modes that go through :func:`torch.compile`
TORCH_COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
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
    """The epoch and step of the step being taken, one object for all of a run's steps: as
    Python integers, and as 0-dim int64 device Tensors (:attr:`tensors`, filled in place by
    :meth:`set`), which a captured graph reads at each replay."""

    def __init__(self) -> None:
        self.epoch, self.step = 0, 0
        self.tensors: dict[str, Tensor] = {}

    def set(self, epoch: int, step: int, device: torch.device) -> None:
        """The step about to be taken: the integers, and the tensors on ``device`` (made on
        the first call, filled in place after: two fills, no host read)."""
        self.epoch, self.step = epoch, step
        for name, value in (("epoch", epoch), ("step", step)):
            held = self.tensors.get(name)
            if held is None or held.device != device:
                self.tensors[name] = torch.full((), value, dtype=torch.int64, device=device)
            else:
                held.fill_(value)


class _ClockedContext(StepContext):
    """A :class:`StepContext` whose ``epoch`` and ``step`` are read from a :class:`StepClock`
    when a regularizer asks for them (a compiled step guards on them only then), and whose
    ``epoch_tensor``/``step_tensor`` are the clock's device tensors."""

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

    epoch_tensor = property(lambda self: self.clock.tensors.get("epoch"))  # type: ignore
    step_tensor = property(lambda self: self.clock.tensors.get("step"))  # type: ignore


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
    ce = model.loss(out, batch.y, mask=batch.graph_mask)  # cross-entropy on classes
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
        One of :data:`COMPILE_MODES` (``train.compile``; ``none`` and ``cuda-graph`` run
        :func:`step_loss` as it is).
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
        if self.compiled:
            options: dict[str, Any] = {"backend": backend} if backend else {"mode": mode}
            self._fn = torch.compile(step_loss, dynamic=False, **options)

    @property
    def compiled(self) -> bool:
        """Whether the step goes through :func:`torch.compile` (``cuda-graph``'s loss is the
        eager :func:`step_loss`: :class:`GraphedStep` captures it with the update)."""
        return self.mode in TORCH_COMPILE_MODES

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
            self.clock.set(epoch, step, batch.y.device)
            return self._fn(model, regs, batch, warm, 0, 0, self.clock)


# -- train.compile=cuda-graph: the whole step (forward, loss, backward, Adam) as one graph ----
#: ``train.compile=cuda-graph``: eager steps of a (bucket, phase) before its graph is captured
#: (PyTorch's recipe warms up three; the last one is also the capture-safety probe)
EAGER_STEPS = 3
#: graphs one :class:`GraphedStep` keeps at most (8 buckets x 2 phases, with room); a key
#: beyond them runs eagerly
MAX_GRAPHS = 32
def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set every parameter group's learning rate to ``lr``.

    An optimizer made with a Tensor learning rate (``train.compile=cuda-graph`` on CUDA,
    :func:`optimizer_options`) keeps one: the group's tensor is filled in place, so a
    captured optimizer step, which reads that memory, sees the new value. A group whose
    learning rate is not such a tensor beside its parameters (as
    :meth:`~torch.optim.Optimizer.load_state_dict` leaves a resumed run's: read to the CPU,
    or a float from a run without ``cuda-graph``) gets a new one, before anything is
    captured. An optimizer made with a float learning rate gets the float.
    """
    tensor = isinstance(optimizer.defaults.get("lr"), Tensor)
    for group in optimizer.param_groups:
        old = group["lr"]
        device = group["params"][0].device if group["params"] else torch.device("cpu")
        if not tensor:
            group["lr"] = lr
        elif isinstance(old, Tensor) and old.device == device:
            old.fill_(lr)
        else:
            group["lr"] = torch.tensor(lr, device=device)


def optimizer_options(mode: str, device: torch.device, fast: bool,
                      lr: float) -> dict[str, Any]:
    """:class:`torch.optim.Adam`'s ``lr``, ``foreach``, ``fused`` and ``capturable`` for
    ``train.compile=mode`` on ``device`` (``fast``: ``train.fast_path``).

    ``cuda-graph`` on CUDA: fused and ``capturable`` (its step counters on the device, no
    host read, as a captured step needs) with the learning rate a device Tensor, which
    :func:`set_lr` fills in place (a float would be baked into the graph). Elsewhere
    ``train.fast_path``'s choice: fused on CUDA, ``foreach`` on the CPU, else torch's
    default; a float learning rate.
    """
    cuda = device.type == "cuda"
    if mode == "cuda-graph" and cuda:
        return {"lr": torch.tensor(lr, device=device), "fused": True, "capturable": True}
    return {"lr": lr, "foreach": True if fast and not cuda else None,
            "fused": True if fast and cuda else None}


class _WatchedClock(StepClock):
    """A :class:`StepClock` that records which of its values a step read (a captured step
    would keep the value it read at capture)."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        super().__init__()

    def __getattribute__(self, name: str) -> Any:
        if name in ("epoch", "step"):
            object.__getattribute__(self, "reads").add(name)
        return object.__getattribute__(self, name)


def _key(batch: GraphBatch, warm: bool, tensors: list[Tensor] | None = None) -> tuple:
    """What a graph is captured for: the phase, ``bonds`` and every input tensor's name,
    shape and dtype (for a padded batch: its bucket); ``tensors``: the batch's
    :func:`~grprune.capture.batch_tensors`, when the caller has them."""
    tensors = batch_tensors(batch) if tensors is None else tensors
    shapes = tuple((tuple(t.shape), t.dtype) for t in tensors)
    return (warm, batch.bonds, tuple(sorted(batch.csr)), shapes)


def _update(model: "GraphClassifier", regs: Mapping[str, Regularizer],
            optimizer: torch.optim.Optimizer, batch: GraphBatch, warm: bool,
            clock: StepClock, watch: contextlib.AbstractContextManager | None = None
            ) -> StepOut:
    """One whole training step, as :meth:`grprune.trainer.Trainer.train_epoch` takes it
    eagerly: gradients set to None, :func:`step_loss`, backward, the optimizer's step
    (``watch``, e.g. :func:`~grprune.capture.watch_capture_hazards`, around the loss and
    backward)."""
    optimizer.zero_grad(set_to_none=True)
    with watch if watch is not None else contextlib.nullcontext():
        out = step_loss(model, regs, batch, warm, 0, 0, clock)
        out[0].backward()
    optimizer.step()
    return out


class GraphedStep:
    """The whole training step (forward, loss, backward, Adam) captured as one graph per
    (bucket, phase) and replayed (``train.compile=cuda-graph``).

    The first :data:`EAGER_STEPS` steps of a key (:func:`_key`: the batch's shapes, i.e. its
    ``train.pad_buckets`` bucket, and the phase, ERM warm-up or not) run eagerly (on a side
    stream on CUDA). The last of them is also a probe: a step that reads a value a graph
    would keep from its capture (``.item()``, an op sized by tensor values, a device-to-host
    copy, the batch's host integers ``real_graphs``/``real_edges``, the regularizers'
    ``ctx.epoch``/``ctx.step``, a new tensor put in a module's parameter, buffer or
    attribute) is never captured; its key stays eager, with one warning.
    The next step of the key copies its batch into static buffers and captures
    :func:`_update` over them (``backend.capture``), then replays; later steps copy their
    batch in (one ``_foreach_copy_``) and replay. The returned tensors are the graph's
    static outputs: read them before the next step. Random draws (the Gumbel noise, dropout)
    come from torch's default generator, which CUDA graphs advance at each replay.

    The optimizer must be capturable on CUDA, with a Tensor learning rate that :func:`set_lr`
    fills (:func:`optimizer_options`). On the CPU the backend is :class:`~grprune.capture.EagerGraphs`, whose
    replays run the same step eagerly on the static buffers: a run gives the eager padded
    run's numbers bit for bit (``tests/test_cuda_graph.py``).

    Parameters
    ----------
    device : torch.device
        The training device: :class:`~grprune.capture.CudaGraphs` on CUDA,
        :class:`~grprune.capture.EagerGraphs` elsewhere.
    eager_steps : int, optional
        Eager steps of a key before its capture (>= 1; default :data:`EAGER_STEPS`).
    backend : EagerGraphs or CudaGraphs, optional
        Instead of the device's.

    Raises
    ------
    GrpruneError
        On a call, when CUDA refuses to capture a step (the message names the key).
    """

    def __init__(self, device: torch.device, eager_steps: int | None = None,
                 backend: EagerGraphs | CudaGraphs | None = None) -> None:
        if backend is None:
            backend = CudaGraphs(device) if device.type == "cuda" else EagerGraphs()
        self.backend, self.device = backend, device
        self.eager_steps = max(int(EAGER_STEPS if eager_steps is None else eager_steps), 1)
        self.replays = 0  # steps run as a graph
        self.clock = _WatchedClock()
        self.graphs: dict[tuple, StaticGraph] = {}
        self.seen: Counter[tuple] = Counter()
        self.eager: dict[tuple, str] = {}  # key -> why its steps are not captured

    def __call__(self, model: "GraphClassifier", regs: Mapping[str, Regularizer],
                 optimizer: torch.optim.Optimizer, batch: GraphBatch, warm: bool,
                 epoch: int, step: int) -> StepOut:
        """One training step on ``batch``, the parameters updated; returns
        :func:`step_loss`'s ``(total, terms, selection, kept)``."""
        tensors = batch_tensors(batch)  # once a step: for the key and for the copy
        key = _key(batch, warm, tensors)
        graph = self.graphs.get(key)
        self.clock.set(epoch, step, batch.y.device)
        if graph is not None:
            self.replays += 1
            return graph(tensors)
        self.seen[key] += 1
        if key not in self.eager and len(self.graphs) >= MAX_GRAPHS:
            self.eager[key] = f"more than {MAX_GRAPHS} batch shapes"
        if key in self.eager or self.seen[key] <= self.eager_steps:
            with self.backend.warmup():
                if key in self.eager or self.seen[key] < self.eager_steps:
                    return _update(model, regs, optimizer, batch, warm, self.clock)
                return self._probe(model, regs, optimizer, batch, warm, key)
        static = static_copy(batch)

        def fn() -> StepOut:  # what the graph holds: the static batch's caches made in it
            static.derived.clear()
            static.row_masks.clear()
            return _update(model, regs, optimizer, static, warm, self.clock)
        try:
            replay = self.backend.capture(fn)
        except RuntimeError as err:
            raise GrpruneError(f"train.compile=cuda-graph: the step of a batch of "
                               f"{batch.num_graphs} graphs ({'warm-up' if warm else 'train'})"
                               f" could not be captured ({str(err).splitlines()[0]}); run "
                               f"with -H train.compile=none") from err
        self.graphs[key] = StaticGraph(static, replay)
        self.replays += 1
        return replay()  # the static batch holds this batch: nothing to copy

    def _probe(self, model: "GraphClassifier", regs: Mapping[str, Regularizer],
               optimizer: torch.optim.Optimizer, batch: GraphBatch, warm: bool,
               key: tuple) -> StepOut:
        """The last eager step of ``key``, watched for what a graph would keep from its
        capture; such a key stays eager (:attr:`eager`), with a warning the first time."""
        view, reads = WatchedBatch.of(batch), set[str]()
        self.clock.reads.clear()
        modules = {"model": model, **{f"reg.{k}": r for k, r in regs.items()}}
        with watch_replaced_tensors(modules, reads):
            out = _update(model, regs, optimizer, view, warm, self.clock,
                          watch_capture_hazards(reads, self.device))
        found = sorted(reads) + sorted(f"batch.{r}" for r in view.reads)
        mark_eager(self.eager, key, found + sorted(f"ctx.{r}" for r in self.clock.reads),
                   "the training step", "such steps run")
        return out
