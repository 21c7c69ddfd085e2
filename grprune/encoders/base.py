"""Encoder interface and the input feature embeddings shared by encoders and selectors."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, cast

import torch
from torch import Tensor, nn

from grprune.batch import GraphBatch, RowMask
from grprune.determinism import one_thread, serial
from grprune.hparams import Configurable
from grprune.registry import Registry

ENCODERS = Registry("encoder", entry_point_group="grprune.encoders")


def _multi_hot_sum(feat: Tensor | GraphBatch, field: str, tables: nn.ModuleList,
                   offsets: Tensor) -> Tensor:
    """``sum_i tables[i](x[:, i])`` as one multi-hot matrix product, ``x`` being ``feat``
    or, for a batch, its feature tensor ``field`` (``"node_feat"`` or ``"edge_feat"``).

    OGB's ``AtomEncoder``/``BondEncoder`` sum one embedding lookup per feature
    column. Stacking their tables into one ``(V, D)`` weight and multiplying by the
    ``(rows, V)`` multi-hot matrix of ``x + offsets`` gives the same values and
    gradients with one product forward and one backward, instead of a lookup, an
    addition and a slow dense-embedding backward per column (2-3x faster on the CPU
    for molecule batches; V is 174 for atoms and 13 for bonds). The parameters stay
    OGB's modules, so checkpoints keep their keys.

    The multi-hot matrix depends on the batch only, and a step embeds one batch's bonds in
    every layer of the selector and of the encoder (and its atoms in both): given a
    :class:`~grprune.batch.GraphBatch`, it is made once per batch, feature, table sizes and
    dtype (:meth:`GraphBatch.derive <grprune.batch.GraphBatch.derive>`, which also makes it
    afresh under :func:`torch.inference_mode` and :func:`torch.compile`) and reused, the
    same values with fewer ops; given a tensor, it is made every call.

    Shapes: ``x (rows, C)`` int64, ``offsets (C,)`` -> ``(rows, D)``.
    """
    weight = torch.cat([cast(Tensor, table.weight) for table in tables])  # nn.Embedding's
    sizes = tuple(cast(nn.Embedding, table).num_embeddings for table in tables)
    if isinstance(feat, Tensor):
        return _multi_hot(feat, offsets, sizes, weight.dtype) @ weight
    x = cast(Tensor, getattr(feat, field))
    hot = feat.derive((f"multi_hot/{field}", sizes, weight.dtype),
                      lambda: _multi_hot(x, offsets, sizes, weight.dtype))
    return hot @ weight


def _multi_hot(feat: Tensor, offsets: Tensor, sizes: tuple[int, ...],
               dtype: torch.dtype) -> Tensor:
    """The ``(rows, sum(sizes))`` multi-hot matrix of ``feat + offsets`` in ``dtype``: 1 in
    column ``offsets[i] + feat[r, i]`` of row ``r`` for each column ``i``, else 0.

    Shapes: ``feat (rows, C)`` int64, ``offsets (C,)`` -> ``(rows, sum(sizes))``.
    """
    hot = torch.zeros(feat.shape[0], sum(sizes), dtype=dtype, device=feat.device)
    return hot.scatter_(1, feat + offsets, 1.0)


def _table_offsets(tables: nn.ModuleList) -> Tensor:
    sizes = torch.tensor([table.num_embeddings for table in tables])
    return torch.cumsum(sizes, 0) - sizes


class NodeEmbedding(nn.Module):
    """Embeds node features into ``dim`` channels.

    ``kind="ogb"`` uses the tables of OGB's :class:`~ogb.graphproppred.mol_encoder.AtomEncoder`
    on the 9 categorical atom features; ``kind="linear"`` a linear map of float
    features (synthetic graphs).

    Shapes: ``node_feat (N, F)`` -> ``(N, dim)``. Given a :class:`~grprune.batch.GraphBatch`
    instead, it embeds the batch's ``node_feat``, and the ``"ogb"`` kind's multi-hot matrix
    is made once for the batch (:func:`_multi_hot_sum`).
    """

    offsets: Tensor  # buffer of the "ogb" kind

    def __init__(self, kind: str, dim: int, in_dim: int = 0) -> None:
        super().__init__()
        self.kind = kind
        if kind == "ogb":
            from ogb.graphproppred.mol_encoder import AtomEncoder
            self.net = AtomEncoder(dim)
            self.register_buffer("offsets", _table_offsets(self.net.atom_embedding_list),
                                 persistent=False)
        else:
            self.net = nn.Linear(max(in_dim, 1), dim)

    def forward(self, node_feat: Tensor | GraphBatch) -> Tensor:
        if self.kind == "ogb":
            return _multi_hot_sum(node_feat, "node_feat", self.net.atom_embedding_list,
                                  self.offsets)
        if isinstance(node_feat, GraphBatch):
            node_feat = node_feat.node_feat
        if node_feat.shape[1] == 0:
            node_feat = node_feat.new_ones(node_feat.shape[0], 1)
        return self.net(node_feat.to(self.net.weight.dtype))


class EdgeEmbedding(nn.Module):
    """Embeds edge features into ``dim`` channels (OGB ``BondEncoder`` or linear).

    Shapes: ``edge_feat (E, F_e)`` -> ``(E, dim)``; with ``F_e = 0`` and
    ``kind="linear"`` the embedding is zero (plain GIN). Given a
    :class:`~grprune.batch.GraphBatch` instead, it embeds the batch's ``edge_feat``, and the
    ``"ogb"`` kind's multi-hot matrix is made once for the batch (:func:`_multi_hot_sum`).
    """

    offsets: Tensor  # buffer of the "ogb" kind

    def __init__(self, kind: str, dim: int, in_dim: int = 0) -> None:
        super().__init__()
        self.kind, self.dim = kind, dim
        if kind == "ogb":
            from ogb.graphproppred.mol_encoder import BondEncoder
            self.net = BondEncoder(dim)
            self.register_buffer("offsets", _table_offsets(self.net.bond_embedding_list),
                                 persistent=False)
        elif in_dim > 0:
            self.net = nn.Linear(in_dim, dim)
        else:
            self.net = None

    def forward(self, edge_feat: Tensor | GraphBatch) -> Tensor | None:
        if self.net is None:
            return None
        if self.kind == "ogb":
            return _multi_hot_sum(edge_feat, "edge_feat", self.net.bond_embedding_list,
                                  self.offsets)
        if isinstance(edge_feat, GraphBatch):
            edge_feat = edge_feat.edge_feat
        return self.net(edge_feat.to(self.net.weight.dtype))


class Encoder(nn.Module, Configurable, ABC):
    """A GNN mapping a batch (and an optional edge mask) to node embeddings.

    Subclasses declare their hyperparameters (``encoder.*`` keys) in a nested ``Hparams``
    class that subclasses their base class's, read as ``self.hp.<name>`` (annotate
    ``hp: Hparams``), and implement :meth:`forward`.

    Parameters
    ----------
    feature_kind : str
        ``"ogb"`` (categorical OGB atom/bond features) or ``"linear"``.
    node_dim, edge_dim : int
        Raw feature widths (used by ``"linear"``).
    **hparams
        Values for the fields of ``Hparams``.

    Raises
    ------
    GrpruneError
        On an unknown key or a bad value (:meth:`~grprune.hparams.Configurable.resolve_hparams`).
    """

    #: hidden width of the node embeddings returned by :meth:`forward`
    out_dim: int
    #: the name :data:`ENCODERS` registered the class under (set by the registry)
    registered_name: ClassVar[str] = ""

    def __init__(self, feature_kind: str = "ogb", node_dim: int = 0, edge_dim: int = 0,
                 **hparams) -> None:
        super().__init__()
        self.init_hparams(hparams)
        self.feature_kind, self.node_dim, self.edge_dim = feature_kind, node_dim, edge_dim

    @property
    def hparam_prefix(self) -> str:
        """The prefix of an encoder's keys, ``encoder.``."""
        return "encoder."

    @abstractmethod
    def forward(self, batch: GraphBatch, edge_weight: Tensor | None = None) -> Tensor:
        """Node embeddings.

        Parameters
        ----------
        batch : GraphBatch
        edge_weight : Tensor of shape (E,), values in [0, 1], optional
            Multiplies each edge's message (1 = edge kept, 0 = edge pruned).
            ``None`` keeps every edge.

        Returns
        -------
        Tensor of shape (N, out_dim)
        """


ENCODERS.base = Encoder


def masked_batch_norm(bn: nn.BatchNorm1d, x: Tensor, mask: Tensor | RowMask | None) -> Tensor:
    """``bn(x)`` over the rows where ``mask`` is True; the other rows (padding) give 0.

    In training the statistics are those of the real rows only,

    .. math::
        \\mu = \\frac{\\sum_i m_i x_i}{\\sum_i m_i},\\quad
        \\sigma^2 = \\frac{\\sum_i m_i (x_i - \\mu)^2}{\\sum_i m_i},\\quad
        y_i = m_i \\Big(\\gamma \\frac{x_i - \\mu}{\\sqrt{\\sigma^2 + \\epsilon}} + \\beta\\Big),

    and the running statistics move as :class:`torch.nn.BatchNorm1d` moves them (unbiased
    variance, ``momentum``, or the cumulative mean for ``momentum=None``); in evaluation
    the running statistics normalise. So a batch padded to a static shape
    (:func:`grprune.batch.pad_batch`) trains the statistics and the real rows as the
    unpadded batch does, within rounding, and padding rows stay 0 (bounded) layer after
    layer. ``mask=None`` is exactly ``bn(x)``. Nothing waits for the device; the means are
    matrix-vector products with :attr:`RowMask.weight` (few ops per call).

    Parameters
    ----------
    bn : nn.BatchNorm1d
        Its parameters and buffers are used (and its running statistics updated).
    x : Tensor of shape (M, D)
    mask : Tensor of shape (M,), bool, or RowMask (:meth:`GraphBatch.row_mask`), or None

    Returns
    -------
    Tensor of shape (M, D)
    """
    if mask is None:
        return bn(x)
    rows = mask if isinstance(mask, RowMask) else RowMask.of(mask, x.dtype)
    running_mean, running_var = bn.running_mean, bn.running_var
    if bn.training or running_mean is None or running_var is None:
        mean = rows.weight @ x
        centered = x - mean
        var = rows.weight @ (centered * centered)
        if bn.training and running_mean is not None and running_var is not None:
            with torch.no_grad():
                tracked = cast(Tensor, bn.num_batches_tracked)
                tracked.add_(1)
                factor: float | Tensor = (bn.momentum if bn.momentum is not None
                                          else 1.0 / tracked.to(x.dtype))
                running_mean.lerp_(mean, factor)
                running_var.lerp_(var * rows.unbias, factor)
    else:
        centered, var = x - running_mean, running_var
    scale = torch.rsqrt(var + bn.eps)
    if bn.affine:
        return torch.addcmul(bn.bias, centered, scale * bn.weight) * rows.keep
    return centered * scale * rows.keep


def batch_norm(bn: nn.BatchNorm1d, x: Tensor) -> Tensor:
    """``bn(x)``; in training on the CPU its batch statistics and their gradient computed on
    one intra-op thread (:func:`grprune.determinism.one_thread`,
    :func:`grprune.determinism.serial`): torch's kernels split the rows of an ``(N, C)``
    input between its threads, so the sums, and the numbers, would depend on how many there
    are. Shapes: ``(M, D)`` -> ``(M, D)``."""
    if not bn.training or x.device.type != "cpu" or torch.compiler.is_compiling():
        return bn(x)
    with one_thread():
        return serial(bn(x))


def run_masked(module: nn.Module, x: Tensor, mask: Tensor | RowMask | None) -> Tensor:
    """``module(x)`` with every ``BatchNorm1d`` in it (nested ``nn.Sequential`` included)
    taking ``mask`` (:func:`masked_batch_norm`). ``mask=None`` gives ``module(x)``'s
    numbers, its BatchNorms run by :func:`batch_norm` (on one CPU thread in training).

    Shapes: ``x (M, D_in)``, ``mask (M,)`` -> ``(M, D_out)``.
    """
    if isinstance(module, nn.BatchNorm1d):
        return batch_norm(module, x) if mask is None else masked_batch_norm(module, x, mask)
    if isinstance(module, nn.Sequential):
        for layer in module:
            x = run_masked(layer, x, mask)
        return x
    return module(x)


def mlp(dims: list[int], batch_norm: bool = True) -> nn.Sequential:
    """Linear layers with (BatchNorm,) ReLU between them, none after the last."""
    layers: list[nn.Module] = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            if batch_norm:
                layers.append(nn.BatchNorm1d(dims[i + 1]))
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)
