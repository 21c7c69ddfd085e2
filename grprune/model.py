"""Selector + encoder + readout + head: the classifier :math:`f(t(G))`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn

from grprune.batch import GraphBatch
from grprune.encoders.base import Encoder, mlp
from grprune.losses import cross_entropy, masked_target_loss
from grprune.selectors.base import Selection, Selector


@dataclass
class ModelOutput:
    """Output of :class:`GraphClassifier` for a batch of ``B`` graphs.

    Attributes
    ----------
    logits : Tensor of shape (B, C)
        Class logits; per-task logits (B, T) for ``task="multilabel"``, standardized
        predictions (B, T) for ``task="regression"``.
    graph_repr : Tensor of shape (B, D)
        Readout of the node embeddings (input of the head).
    node_repr : Tensor of shape (N, D)
        Encoder node embeddings.
    selection : Selection or None
        The selector's choice (None without a selector or while it is off).
    """

    logits: Tensor
    graph_repr: Tensor
    node_repr: Tensor
    selection: Selection | None = None


class GraphClassifier(nn.Module):
    """Graph classifier :math:`\\rho \\circ h` on the subgraph chosen by :math:`t`.

    Parameters
    ----------
    encoder : Encoder
        GNN :math:`h` with an ``edge_weight`` argument.
    num_classes : int
        ``C``; binary tasks use ``C = 2`` and cross-entropy (paper Eq. 6). For
        ``multilabel`` and ``regression``: the number of tasks ``T`` (label columns).
    selector : Selector, optional
        Subgraph selector :math:`t`; None trains plain ERM.
    readout : {"sum", "mean", "sum-l2"}
        ``model.readout`` (:meth:`encode`).
    head_layers : int
        ``model.head_layers``: Linear layers of the MLP :math:`\rho` on the readout.
    task : {"classification", "multilabel", "regression"}
        What the head predicts (:attr:`grprune.data.dataset.GraphDataset.task`): classes
        (softmax, cross-entropy), ``T`` binary labels (sigmoid, masked binary
        cross-entropy) or ``T`` targets (masked squared error on the standardized target).
    target_mean, target_std : sequence of float, length T, optional
        Regression: the training split's mean and standard deviation of each target; the
        head predicts :math:`(y - \\mu) / \\sigma` and :meth:`predict` returns
        :math:`\\mu + \\sigma z` in the target's units. Default 0 and 1 (no scaling).
    """

    target_mean: Tensor  # (T,), regression only (buffers)
    target_std: Tensor

    def __init__(self, encoder: Encoder, num_classes: int, selector: Selector | None = None,
                 readout: str = "sum", head_layers: int = 2, task: str = "classification",
                 target_mean: tuple[float, ...] | None = None,
                 target_std: tuple[float, ...] | None = None) -> None:
        super().__init__()
        self.task = task
        if task == "regression":  # not in the state_dict: the run's features record holds them
            self.register_buffer("target_mean", torch.tensor(
                target_mean or [0.0] * num_classes, dtype=torch.float32), persistent=False)
            self.register_buffer("target_std", torch.tensor(
                target_std or [1.0] * num_classes, dtype=torch.float32), persistent=False)
        self.encoder = encoder
        self.selector = selector
        d = encoder.out_dim
        self.readout = readout
        self.head = mlp([d] * max(head_layers, 1) + [num_classes], batch_norm=False)

    def encode(self, batch: GraphBatch, edge_weight: Tensor | None = None) -> ModelOutput:
        """Encoder, readout and head with the given mask (no selector).

        The readout (``model.readout``) is the sum of the node embeddings of each
        graph (paper), their mean, or ``sum-l2``: the sum divided by its L2 norm plus
        1e-8 (official code, ``modelNew/gin.py``).

        Parameters
        ----------
        batch : GraphBatch
        edge_weight : Tensor of shape (E,), values in [0, 1], or None (all kept)
        """
        node_repr = self.encoder(batch, edge_weight)
        pool = batch.segment_mean if self.readout == "mean" else batch.segment_sum
        graph_repr = pool(node_repr, "node_graph")
        if self.readout == "sum-l2":  # official code: g / (||g||_2 + 1e-8)
            graph_repr = graph_repr / (graph_repr.norm(dim=1, keepdim=True) + 1e-8)
        return ModelOutput(logits=self.head(graph_repr), graph_repr=graph_repr,
                           node_repr=node_repr)

    def forward(self, batch: GraphBatch, use_selector: bool = True) -> ModelOutput:
        """Select (if a selector is present and ``use_selector``), then encode.

        ``use_selector=False`` is the ERM warm-up: the full graph is encoded.
        """
        if self.selector is None or not use_selector:
            return self.encode(batch)
        selection = self.selector(batch)
        out = self.encode(batch, selection.edge_weight)
        out.selection = selection
        return out

    def loss(self, out: ModelOutput, y: Tensor, mask: Tensor | None = None) -> Tensor:
        """The task loss of a training step (``ce`` in ``results.jsonl``): cross-entropy
        (:func:`grprune.losses.cross_entropy`, paper Eq. 6) for classes, else
        :func:`grprune.losses.masked_target_loss` (regression on the standardized target).

        Parameters
        ----------
        out : ModelOutput
        y : Tensor of shape (B,), int64 classes; or (B, T) float, NaN missing
        mask : Tensor of shape (B,), bool, optional
            Real graphs (False: padding).
        """
        if self.task == "classification":
            return cross_entropy(out.logits, y, mask=mask)
        if self.task == "regression":
            y = (y - self.target_mean) / self.target_std
        return masked_target_loss(out.logits, y, self.task, mask=mask)

    def _output(self, logits: Tensor) -> Tensor:
        """Probabilities (softmax; sigmoid per task) or de-standardized values."""
        if self.task == "classification":
            return torch.softmax(logits, -1)
        if self.task == "multilabel":
            return torch.sigmoid(logits)
        return logits * self.target_std + self.target_mean

    def predict(self, batch: GraphBatch, use_selector: bool = True) -> tuple[Tensor, ModelOutput]:
        """Class probabilities as evaluation computes them (call in eval mode, no grad);
        per-task probabilities (``multilabel``) or predicted values in the target's units
        (``regression``).

        With a selector whose ``eval_mode`` is ``sample``, the outputs are
        averaged over ``eval_samples`` fresh masks; otherwise one forward pass.

        Returns
        -------
        (prob, output) : Tensor of shape (B, C) (or (B, T)), and the last pass's ModelOutput
        """
        sel = self.selector
        draws = sel.eval_draws if sel is not None and use_selector else 1
        prob: Tensor | float = 0.0
        for _ in range(draws):
            out = self.forward(batch, use_selector=use_selector)
            prob = prob + self._output(out.logits) / draws
        return cast(Tensor, prob), out  # draws >= 1: a Tensor
