"""grprune: out-of-distribution generalization for graph classification on DGL.

The core is PrunE (Yao et al., "Pruning Spurious Subgraphs for Graph
Out-of-Distribution Generalization", NeurIPS 2025): a learned subgraph selector
drops edges, regularized by a graph-size constraint and epsilon-probability
alignment, while the GNN is trained with ERM on the pruned graph.
"""

import os as _os

# Intel MKL (torch's CPU BLAS) may pick differently rounded code paths from call to call,
# e.g. for differently aligned memory. Conditional Numerical Reproducibility mode AUTO fixes
# the path for this machine's CPU at no measurable cost. It is read when MKL starts, so it is
# set before torch is imported; a value the user exported wins. (It does not make
# multi-threaded CPU runs repeat on a busy machine: train.deterministic does, see
# grprune.determinism.)
_os.environ.setdefault("MKL_CBWR", "AUTO")

from grprune import compat as _compat  # noqa: E402, F401  (registers the DGL workaround first)

__version__ = "0.1.0"
