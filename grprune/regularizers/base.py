"""Regularizer interface: named, weighted penalty terms per training step.

The trainer minimises (paper Eq. 5)

.. math:: \\mathcal L = \\mathcal L_{GT} + \\sum_i \\lambda_i R_i

where each :math:`R_i` is a registered :class:`Regularizer` and
:math:`\\lambda_i` its ``weight`` hyperparameter; a regularizer with several
terms (CIGA) returns each with its own weight from :meth:`Regularizer.terms`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping

import torch
from torch import Tensor, nn

from grprune.batch import GraphBatch
from grprune.errors import GrpruneError
from grprune.hparams import Configurable, hparam
from grprune.registry import Registry

if TYPE_CHECKING:
    from grprune.model import GraphClassifier, ModelOutput
    from grprune.selectors.base import Selection, Selector

REGULARIZERS = Registry("regularizer", entry_point_group="grprune.regularizers")


@dataclass
class StepContext:
    """Everything a regularizer may look at in one training step.

    Attributes
    ----------
    batch : GraphBatch
        The batch (labels ``batch.y`` (B,), environments ``batch.env`` (B,)).
    output : ModelOutput
        The model's output on the (masked) batch: ``logits`` (B, C),
        ``graph_repr`` (B, D), ``node_repr`` (N, D), ``selection``.
    model : GraphClassifier
        The model, e.g. to :meth:`encode` another mask.
    epoch : int
        Current epoch (0-based).
    step : int
        Training steps since the regularizers switched on (0-based; the first step
        after ``train.warmup_epochs``), counted by the trainer, so that a schedule
        over steps (IRM's annealing) depends on it and not on how often a method
        was called. A resumed run continues the count.
    extras : dict
        Scratch space shared by the regularizers of one step.
    values : dict of str to Tensor
        Unweighted values the regularizers report for the log, by regularizer name
        (:meth:`Regularizer.terms` fills it from :meth:`Regularizer.loss`).
    """

    batch: GraphBatch
    output: "ModelOutput"
    model: "GraphClassifier"
    epoch: int = 0
    step: int = 0
    extras: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Tensor] = field(default_factory=dict)

    @property
    def selection(self) -> "Selection | None":
        return self.output.selection

    @property
    def epoch_tensor(self) -> Tensor | None:
        """``epoch`` as a 0-dim int64 Tensor on the batch's device where the step runs
        compiled or captured (``train.compile``), else None (read ``epoch``).

        A schedule computed from it with tensor ops follows the epoch in a replayed CUDA
        graph, and a compiled step does not compile again when it changes; one computed
        from ``epoch`` keeps the value of its capture (such a step is never captured:
        :class:`grprune.step.GraphedStep`).
        """
        return None

    @property
    def step_tensor(self) -> Tensor | None:
        """``step`` as a 0-dim int64 Tensor on the batch's device, as :attr:`epoch_tensor`
        (None in an eager step)."""
        return None

    def encode(self, edge_weight: Tensor | None) -> "ModelOutput":
        """Run encoder, readout and head on the batch with another edge mask.

        Parameters
        ----------
        edge_weight : Tensor of shape (E,), values in [0, 1], or None
        """
        return self.model.encode(self.batch, edge_weight)


class Unsupported(GrpruneError):
    """Raised by :meth:`Regularizer.supports` to say why a combination cannot run."""


class Regularizer(nn.Module, Configurable):
    """A penalty added to the classification loss: named terms, each with its weight.

    Subclasses declare their hyperparameters in a nested ``Hparams`` class that
    subclasses ``Regularizer.Hparams`` (which holds ``weight``, the paper's
    :math:`\\lambda`), read them as ``self.hp.<name>`` (annotate ``hp: Hparams``), and
    implement :meth:`loss` (one unweighted penalty,
    weighted by ``weight``) or, for several terms or scheduled weights,
    :meth:`terms`. :meth:`supports` says whether the regularizer can run with a
    selector and a dataset; by default it reads ``requires``, what the
    regularizer needs: ``"selector"`` (a learned subgraph selector's output:
    edge logits, probabilities and samples), ``"env"`` (environment ids from
    the dataset) or ``"classes"`` (one class label per graph: it computes a
    cross-entropy over classes, so a ``regression`` or ``multilabel`` dataset,
    :attr:`grprune.data.dataset.GraphDataset.task`, is refused). An unmet need stops the run before training with one message
    naming both parts (exit code 2). ``selector_defaults`` are selector
    hyperparameters the method's source uses (GSAT: soft concrete samples,
    ``{"hard": False, "eval_mode": "soft"}``); they apply unless the user sets
    those keys. ``display_name`` is the method's name in tables when it runs
    alone (``GSAT``), ``table_order`` the position of that method among the rows
    of a table and ``name_order`` the regularizer's position when several are
    named together (``size+eps-align``). ``reserve``, where a regularizer has it
    (GroupDRO), is a method ``reserve(num_envs)`` that the trainer calls with the
    dataset's number of environment ids before a padded run; None otherwise.

    A regularizer is an ``nn.Module``: parameters it creates (e.g. a projection
    head) are trained with the model.

    Examples
    --------
    >>> class Flat(Regularizer):
    ...     class Hparams(Regularizer.Hparams):
    ...         weight: float = hparam(0.5, "weight of the term", low=0.0)
    ...         floor: float = hparam(1e-6, "clamp before the log", low=0.0)
    ...     hp: Hparams
    ...     def loss(self, ctx):
    ...         return ctx.output.logits.sum() * self.hp.floor
    >>> Flat(floor="0.1").hp, Flat.params["floor"].domain()
    (Flat.Hparams(weight=0.5, floor=0.1), 'a number >= 0')
    """

    class Hparams(Configurable.Hparams):
        weight: float = hparam(1.0, "weight lambda of this term in the loss", low=0.0)

    hp: Hparams
    requires: ClassVar[frozenset[str]] = frozenset()
    #: whether :meth:`loss`/:meth:`terms` keep the padding of a batch padded to a static
    #: shape (``train.pad_buckets``, :func:`grprune.batch.pad_batch`) out: its
    #: ``graph_mask``/``edge_mask``, or graphs of environment -1. The trainer refuses to
    #: pad for a regularizer that does not say so.
    pads: ClassVar[bool] = False
    selector_defaults: ClassVar[Mapping[str, Any]] = {}
    display_name: ClassVar[str | None] = None
    table_order: ClassVar[float] = math.inf
    name_order: ClassVar[float] = math.inf
    reserve: Callable[[int], None] | None = None
    #: the name :data:`REGULARIZERS` registered the class under (set by the registry)
    registered_name: ClassVar[str] = ""

    def __init__(self, **hparams: Any) -> None:
        super().__init__()
        self.init_hparams(hparams)

    @property
    def hparam_prefix(self) -> str:
        """The prefix of this regularizer's keys, ``reg.<name>.``."""
        return f"reg.{self.name}."

    @property
    def name(self) -> str:
        """The registered name (the class name if unregistered)."""
        return type(self).registered_name or type(self).__name__

    @property
    def weight(self) -> float:
        """The ``weight`` hyperparameter :math:`\\lambda`."""
        return self.hp.weight

    def weight_at(self, ctx: StepContext) -> float:
        """The weight of :meth:`loss` in this step; ``weight`` unless a subclass schedules it."""
        return self.weight

    @classmethod
    def supports(cls, selector: type[Selector] | None = None, dataset: Any = None) -> bool:
        """Whether this regularizer can run with ``selector`` on ``dataset``.

        Parameters
        ----------
        selector : Selector class or None
            The run's selector class; None: the run has no selector.
        dataset : GraphDataset or None
            The loaded dataset (``envs`` (G,) environment ids); None: not known yet.

        Returns
        -------
        bool
            True if it can. A subclass may return False, or raise
            :class:`Unsupported` with the reason (the default does, from ``requires``).
        """
        needs = set(cls.requires)
        if "selector" in needs:
            if selector is None:
                raise Unsupported("it needs a subgraph selector (edge logits)")
            if not selector.learned:
                raise Unsupported("it needs a learned subgraph selector (edge logits), "
                                  "which this selector is not")
        task = "classification" if dataset is None else dataset.task
        if "classes" in needs and task != "classification":
            raise Unsupported(f"it computes a cross-entropy over one class label per graph, "
                              f"and this dataset's task is {task}")
        if "env" in needs and dataset is not None:
            envs = torch.as_tensor(dataset.envs)
            if len(torch.unique(envs[envs >= 0])) < 2:
                raise Unsupported("it needs environment ids, but the dataset has a single "
                                  "environment")
        return True

    def terms(self, ctx: StepContext) -> dict[str, Tensor]:
        """The weighted terms this regularizer adds to the loss, by name.

        The trainer adds their sum to the loss and logs each under
        ``loss["<regularizer>/<term>"]`` in ``results.jsonl``. The default is one
        term, ``penalty`` :math:`= \\lambda\\, R` with :math:`R` = :meth:`loss`
        and :math:`\\lambda` = :meth:`weight_at`; :math:`R` is also logged
        unweighted, as ``loss["<regularizer>"]``.

        Returns
        -------
        dict of str to Tensor
            Scalar Tensors with gradient.
        """
        value = self.loss(ctx)
        ctx.values[self.name] = value
        return {"penalty": self.weighted(ctx, value)}

    def weighted(self, ctx: StepContext, value: Tensor) -> Tensor:
        """:math:`\\lambda R`: ``value`` (:meth:`loss`, a scalar Tensor) times :meth:`weight_at`;
        a subclass whose weight follows a schedule may compute it from
        :attr:`StepContext.step_tensor` instead (:class:`~grprune.regularizers.env.AnnealedPenalty`)."""
        return self.weight_at(ctx) * value

    def loss(self, ctx: StepContext) -> Tensor:
        """The unweighted penalty, a scalar Tensor with gradient.

        Subclasses implement this or :meth:`terms`; for one that implements only
        :meth:`terms`, this is the sum of its weighted terms.
        """
        if type(self).terms is Regularizer.terms:
            raise NotImplementedError(f"{type(self).__name__} implements neither loss() "
                                      f"nor terms()")
        return sum_terms(self.terms(ctx))


REGULARIZERS.base = Regularizer


def sum_terms(terms: Mapping[str, Tensor]) -> Tensor:
    """The sum of the terms, in their order."""
    values = iter(terms.values())
    total = next(values)
    for value in values:
        total = total + value
    return total


def needs_selector(cls: type[Regularizer]) -> bool:
    """True if the regularizer class cannot run without a selector (``--selector auto``
    then picks gumbel-gin)."""
    try:
        return not cls.supports(selector=None, dataset=None)
    except Unsupported:
        return True


def check_supports(regs: Mapping[str, type[Regularizer]], selector: str = "none",
                   dataset: Any = None, selectors: Any = None) -> None:
    """Ask every regularizer's :meth:`Regularizer.supports` about the run's parts.

    Parameters
    ----------
    regs : dict of str to Regularizer class
        By name, in ``--reg`` order.
    selector : str
        The selector's registered name, or ``"none"``.
    dataset : GraphDataset, optional
    selectors : Registry, optional
        Where ``selector`` is looked up (default: ``SELECTORS``).

    Raises
    ------
    GrpruneError
        On the first incompatible part, one message naming the regularizer, the
        selector and (if given) the dataset, and the reason.
    """
    if selectors is None:
        from grprune.selectors.base import SELECTORS as selectors
    sel_cls = None if selector == "none" else selectors.get(selector)
    for name, cls in regs.items():
        try:
            ok, reason = bool(cls.supports(selector=sel_cls, dataset=dataset)), ""
        except Unsupported as exc:
            ok, reason = False, f": {exc}"
        if not ok:
            where = f" on dataset {dataset.name!r}" if dataset is not None else ""
            learned = [n for n in selectors.names() if selectors.get(n).learned]
            hint = (f" (learned selectors: {', '.join(learned)})"
                    if "selector" in reason and learned else "")
            raise GrpruneError(f"regularizer {name!r} cannot run with selector {selector!r}"
                               f"{where}{reason}{hint}")
