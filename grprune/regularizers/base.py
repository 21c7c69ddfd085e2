"""Regularizer interface: one scalar penalty per training step.

The trainer minimises (paper Eq. 5)

.. math:: \\mathcal L = \\mathcal L_{GT} + \\sum_i \\lambda_i R_i

where each :math:`R_i` is a registered :class:`Regularizer` and
:math:`\\lambda_i` its ``weight`` hyperparameter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from torch import Tensor, nn

from grprune.batch import GraphBatch
from grprune.hparams import Configurable, Param
from grprune.registry import Registry

if TYPE_CHECKING:
    from grprune.model import GraphClassifier, ModelOutput
    from grprune.selectors.base import Selection

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
    extras : dict
        Scratch space shared by the regularizers of one step.
    """

    batch: GraphBatch
    output: "ModelOutput"
    model: "GraphClassifier"
    epoch: int = 0
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def selection(self) -> "Selection | None":
        return self.output.selection

    def encode(self, edge_weight: Tensor | None) -> "ModelOutput":
        """Run encoder, readout and head on the batch with another edge mask.

        Parameters
        ----------
        edge_weight : Tensor of shape (E,), values in [0, 1], or None
        """
        return self.model.encode(self.batch, edge_weight)


class Regularizer(nn.Module, Configurable, ABC):
    """A penalty added to the classification loss, weighted by ``weight``.

    Subclasses declare ``params`` (including ``weight``, the paper's
    :math:`\\lambda`) and implement :meth:`loss`. ``requires`` names what the
    regularizer needs: ``"selector"`` (a learned subgraph selector's output:
    edge logits, probabilities and samples) or ``"env"`` (environment ids from
    the dataset); an unmet need stops the run before training with a message
    naming both parts. ``selector_defaults`` are selector hyperparameters the
    method's source uses (GSAT: soft concrete samples, ``{"hard": False,
    "eval_mode": "soft"}``); they apply unless the user sets those keys.

    A regularizer is an ``nn.Module``: parameters it creates (e.g. a projection
    head) are trained with the model.
    """

    params = {"weight": Param(1.0, "weight lambda of this term in the loss", low=0.0)}
    requires: ClassVar[frozenset[str]] = frozenset()
    selector_defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, **hparams: Any) -> None:
        super().__init__()
        name = getattr(type(self), "registered_name", type(self).__name__)
        self.hparams = self.resolve_hparams(hparams, prefix=f"reg.{name}.")

    @property
    def weight(self) -> float:
        return float(self.hparams["weight"])

    @abstractmethod
    def loss(self, ctx: StepContext) -> Tensor:
        """The unweighted penalty, a scalar Tensor with gradient."""
