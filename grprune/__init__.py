"""grprune: out-of-distribution generalization for graph classification on DGL.

The core is PrunE (Yao et al., "Pruning Spurious Subgraphs for Graph
Out-of-Distribution Generalization", NeurIPS 2025): a learned subgraph selector
drops edges, regularized by a graph-size constraint and epsilon-probability
alignment, while the GNN is trained with ERM on the pruned graph.
"""

from grprune import compat as _compat  # noqa: F401  (registers the DGL workaround first)

__version__ = "0.1.0"
