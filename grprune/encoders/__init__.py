"""GNN encoders: ``gin`` and ``gcn``, both taking an explicit ``edge_weight``."""

from grprune.encoders.base import ENCODERS, EdgeEmbedding, Encoder, NodeEmbedding, mlp
from grprune.encoders.gnn import GCNEncoder, GINEncoder

__all__ = ["ENCODERS", "Encoder", "NodeEmbedding", "EdgeEmbedding", "GINEncoder",
           "GCNEncoder", "mlp"]
