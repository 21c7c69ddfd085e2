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
# set before torch is imported; a value the user exported wins. (Runs on 1 and on 2 threads
# agree because the ops whose sums depend on the thread count run on one: see
# grprune.determinism.)
_os.environ.setdefault("MKL_CBWR", "AUTO")


def _cpu_has_avx2() -> bool:
    """Whether this is an x86-64 Linux CPU whose /proc/cpuinfo lists AVX2."""
    import platform
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return "avx2" in line.split()
    except OSError:
        pass
    return False


# PyTorch picks its CPU kernels (reductions, elementwise and index ops) by the widest vector
# instructions the CPU has: AVX2 or AVX-512 on x86-64. The two round differently, so one seed
# trained on an AVX-512 machine parted from the same seed on an AVX2 machine in the first
# epoch (the README's molbbbp job: best epoch 78, test ROC-AUC 0.6621 against 82 and
# 0.6753). ATEN_CPU_CAPABILITY=avx2 makes every x86-64 CPU with AVX2 run the AVX2 kernels,
# at a cost within noise (0.99-1.06x per epoch, benchmarks/speed/README.md). Read when torch
# starts, so set before torch is imported; a value the user exported wins (``avx512`` gives
# those kernels back). summary.json records the kernels a run used
# (``determinism.cpu_capability``).
if "ATEN_CPU_CAPABILITY" not in _os.environ and _cpu_has_avx2():
    _os.environ["ATEN_CPU_CAPABILITY"] = "avx2"

# DGL (and through it OGB and RDKit) is imported only by the modules that use it, each
# through grprune.compat (the DGL workaround), so that `grprune --help` and `grprune
# collect` start without them.

__version__ = "0.1.0"

# -- the Python API (grprune.api), imported on first use -------------------------
# (the training loop is grprune.trainer; ``grprune.train`` is the API function)

#: names ``import grprune`` offers, each imported on first use (PEP 562), so that
#: ``import grprune`` itself stays free of torch, DGL, RDKit and OGB
_LAZY = {"train": "grprune.api", "load_run": "grprune.api", "Run": "grprune.inference",
         "predict_ensemble": "grprune.api",
         "from_graphs": "grprune.data"}
#: subpackages reachable as attributes before they are imported (``grprune.data``)
_SUBMODULES = ("api", "data", "inference")

__all__ = ["Run", "from_graphs", "load_run", "predict_ensemble", "train", "__version__"]


def __getattr__(name: str):
    import importlib
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"grprune.{name}")
    raise AttributeError(f"module 'grprune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))
