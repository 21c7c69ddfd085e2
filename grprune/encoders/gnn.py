"""GIN and GCN encoders (OGB's ``GNN_node`` / ``GNN_node_Virtualnode`` design)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from grprune.batch import GraphBatch
from grprune.encoders.base import ENCODERS, Encoder, NodeEmbedding, mlp, run_masked
from grprune.hparams import hparam
from grprune.encoders.layers import EDGE_MASKS, WeightedGCNConv, WeightedGINEConv


def xavier_init(module: nn.Module) -> None:
    """``xavier_uniform_`` weights and zero biases for every ``nn.Linear`` in ``module``
    (the official PrunE code's ``GIN.weights_init``)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class _MessagePassingEncoder(Encoder):
    """``layers`` convolutions, each followed by BatchNorm, ReLU (not after the
    last; none at all with ``layer_relu=False``) and dropout; with ``virtual_node``
    a virtual node connected to every node of its graph is added before each layer
    and updated by an MLP after it (Gilmer et al. 2017; OGB). Returns the last
    layer's node embeddings.

    Options that the official PrunE code (``modelNew/gin.py``, ``conv.py``) sets
    differently from OGB's GIN, which the paper cites: ``layer_relu=False`` (its GIN
    has no ReLU between layers: conv, BatchNorm, dropout), ``edge_mask="before-relu"``
    (:func:`~grprune.encoders.layers.masked_relu`), ``init="xavier"``
    (``xavier_uniform_`` weights and zero biases in every Linear layer); the classifier's
    ``model.readout="sum-l2"`` and ``model.head_layers=3`` are
    :class:`grprune.record.settings.ModelSettings`.
    """

    conv_class: type[nn.Module]

    class Hparams(Encoder.Hparams):
        layers: int = hparam(4, "number of message-passing layers", low=1, high=64)
        hidden: int = hparam(64, "hidden width D", low=1, high=8192)
        dropout: float = hparam(0.5, "dropout probability after each layer", low=0.0,
                                high=1.0, high_open=True)
        virtual_node: bool = hparam(False, "add a virtual node per graph (paper: on for "
                                           "ogbg-molbbbp)")
        layer_relu: bool = hparam(True, "ReLU between layers (OGB's GIN; official code: none)")
        edge_mask: str = hparam("after-relu", "edge mask on ReLU(h_u + e_uv) (after-relu, "
                                              "OGB) or inside it (before-relu, official code: "
                                              "a pruned edge gets no gradient)",
                                choices=EDGE_MASKS)
        init: str = hparam("torch", "Linear initialisation: torch's default, or xavier "
                                    "(official code)", choices=("torch", "xavier"))

    hp: Hparams

    def __init__(self, feature_kind: str = "ogb", node_dim: int = 0, edge_dim: int = 0,
                 **hparams) -> None:
        super().__init__(feature_kind, node_dim, edge_dim, **hparams)
        hp = self.hp
        d = self.out_dim = hp.hidden
        self.node_embedding = NodeEmbedding(feature_kind, d, node_dim)
        self.convs = nn.ModuleList(
            self.conv_class(d, feature_kind, edge_dim, hp.edge_mask)
            for _ in range(hp.layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(d) for _ in range(hp.layers))
        if hp.virtual_node:
            self.vn_embedding = nn.Embedding(1, d)
            nn.init.zeros_(self.vn_embedding.weight)
            self.vn_mlps = nn.ModuleList(
                nn.Sequential(mlp([d, 2 * d, d]), nn.BatchNorm1d(d), nn.ReLU())
                for _ in range(hp.layers - 1))
        if hp.init == "xavier":
            xavier_init(self)

    def forward(self, batch: GraphBatch, edge_weight: Tensor | None = None) -> Tensor:
        hp = self.hp
        h = self.node_embedding(batch)
        vn = None
        if hp.virtual_node:
            vn = self.vn_embedding.weight.expand(batch.num_graphs, -1)
        last = hp.layers - 1
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            if vn is not None:
                h = h + batch.gather(vn, "node_graph")
            h_in = h
            h = run_masked(norm, conv(h, batch, edge_weight), batch.row_mask("node", h.dtype))
            if i < last and hp.layer_relu:
                h = torch.relu(h)
            h = F.dropout(h, hp.dropout, self.training)
            if vn is not None and i < last:
                pooled = batch.segment_sum(h_in, "node_graph") + vn
                graphs = batch.row_mask("graph", h.dtype)
                vn = F.dropout(run_masked(self.vn_mlps[i], pooled, graphs),
                               hp.dropout, self.training)
        return h


@ENCODERS.register("gin")
class GINEncoder(_MessagePassingEncoder):
    """GIN with bond features (Xu et al. 2019; Hu et al. 2020), edge-masked.

    The paper's encoder h(.) for every dataset (Appendix "Detailed experiment
    setting"): 4 layers, sum readout; hidden 64 with a virtual node on
    ogbg-molbbbp.
    """

    conv_class = WeightedGINEConv


@ENCODERS.register("gcn")
class GCNEncoder(_MessagePassingEncoder):
    """GCN with bond features (Kipf & Welling 2017; OGB variant), edge-masked."""

    conv_class = WeightedGCNConv
