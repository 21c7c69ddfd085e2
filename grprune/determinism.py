"""Same seed, same numbers: the thread and kernel settings of a run, applied and recorded.

What makes two runs of one seed differ (measured on this project's 2-core x86 machine,
torch 2.13.0+cpu with MKL 2024.2 and GNU OpenMP; ``benchmarks/speed/README.md``):

* **CPU, more than one intra-op thread.** Two torch CPU kernels that the model uses add
  their rows in an order that depends on the number of intra-op threads (each thread sums
  its share of the rows, then the shares are added), so 1 and 2 threads gave other numbers
  from the first step: the batch statistics of ``BatchNorm1d`` on an ``(N, C)`` input and
  their gradient (``native_batch_norm`` and ``native_batch_norm_backward``), and a sum of a
  large tensor to one number (``sum``, two-pass reduction above 32768 elements: the gradient
  of GIN's ``eps``, a ``(1,)`` parameter multiplying the ``(N, D)`` node states). Every other
  op of a molbbbp PrunE step (the matrix products included) gave the same bits at 1 and 2
  threads, and at a fixed 2 threads none varied while another process kept a core busy.
  So those ops, and only those, run on one thread (:func:`one_thread` around the forward,
  :func:`serial` on the backward node: :func:`grprune.encoders.base.run_masked` and
  :class:`grprune.encoders.layers.WeightedGINEConv`), which gives the numbers the
  whole step gives on one thread, and :func:`apply` leaves torch's thread count as it is:
  a run gives the same numbers on 1 and on 2 threads. That frees the count to follow the
  machine: before each epoch the trainer takes 1 thread or all, whichever
  :func:`faster_thread_count` finds faster now (``train.threads=0``), since threads that
  wait for a core another process holds made an epoch 50x slower.
* **The CPU's vector instructions.** PyTorch's CPU kernels come in AVX2 and AVX-512
  builds that round differently; an AVX-512 machine and an AVX2 machine parted in the
  first epoch of one seed. Importing :mod:`grprune` pins the AVX2 kernels on every x86-64
  CPU that has AVX2 (``ATEN_CPU_CAPABILITY=avx2``, unless the user set it), so the CPU
  generation no longer matters.
* **CUDA:** ``index_add_`` and the backward of indexing (``index_put_`` with
  ``accumulate=True``) use atomic adds whose order varies;
  ``torch.use_deterministic_algorithms(True)`` switches them to deterministic kernels
  that sort their index on every call (PyTorch's documented list includes both). The
  model's sums and gathers (message passing, readout, bond scores, the regularizers'
  per-graph sums) therefore go through CSR layouts instead
  (:class:`grprune.csr.Segments`, :meth:`grprune.batch.GraphBatch.segment_sum` and
  :meth:`~grprune.batch.GraphBatch.gather`): the edges sorted by destination (and source,
  and bond) once per batch, where batches are formed, then ``segment_reduce`` forward and a
  gather backward, deterministic without atomics or a sort per step. On the CPU they add
  the same numbers in the same order as ``index_add_``, so CPU records are unchanged bit
  for bit. cuBLAS additionally needs ``CUBLAS_WORKSPACE_CONFIG=:4096:8``
  (https://docs.nvidia.com/cuda/cublas/#results-reproducibility).

The promise that follows, with ``train.deterministic`` on (the default): the same seed,
configuration and data give the same numbers on x86-64 CPUs with AVX2 with the same torch
build, however busy the machine, on 1 or 2 intra-op threads (more are not measured) and
whether or not the CPU also has AVX-512. A GPU run
repeats on the same GPU model, driver and torch build. A CPU run and a GPU run, x86 and ARM
CPUs, or two torch builds round differently.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import time
import warnings
import zlib
from typing import Any, Iterator

import numpy as np
import torch

from grprune.errors import GrpruneError

#: cuBLAS workspace setting required for deterministic cuBLAS (CUDA >= 10.2)
CUBLAS_WORKSPACE = ":4096:8"


def apply(device: torch.device, deterministic: bool, threads: int = 0) -> dict[str, Any]:
    """Apply the determinism settings for training on ``device``; return their record.

    Parameters
    ----------
    device : torch.device
    deterministic : bool
        On CUDA, ``torch.use_deterministic_algorithms(True)`` and
        ``CUBLAS_WORKSPACE_CONFIG`` (unless the user set it); off, nondeterministic CUDA
        kernels are allowed. The CPU keeps torch's thread count either way: the ops whose
        sums depend on it run on one thread (:func:`one_thread`, :func:`serial`).
    threads : int
        ``train.threads``: the most CPU threads an epoch may use, fixed; 0 = torch's count,
        1 or all of it per epoch (:func:`faster_thread_count`).

    Returns
    -------
    dict
        ``deterministic``; ``threads`` (the most intra-op threads an epoch may use);
        ``threads_probed`` (whether each CPU epoch takes 1 or that many, whichever is
        faster); ``deterministic_algorithms``;
        ``cublas_workspace_config``; ``mkl_cbwr``; ``cpu_capability`` (the CPU kernels
        torch dispatches to, e.g. ``AVX2``); ``torch`` (version). Stored in
        ``summary.json`` under ``"determinism"``, so two runs can be compared.
    """
    capability = torch.backends.cpu.get_cpu_capability()
    if (deterministic and device.type == "cpu"
            and os.environ.get("ATEN_CPU_CAPABILITY") == "avx2" and capability != "AVX2"):
        warnings.warn(f"grprune: torch runs its {capability} CPU kernels, not the AVX2 ones "
                      f"grprune pins, because torch computed before grprune was imported; "
                      f"this run's numbers will differ from other CPUs'. Import grprune "
                      f"first, or export ATEN_CPU_CAPABILITY=avx2", stacklevel=2)
    if device.type == "cuda":
        if deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        torch.use_deterministic_algorithms(deterministic)
        torch.backends.cudnn.benchmark = False
    return {"deterministic": deterministic, "threads": threads or torch.get_num_threads(),
            "threads_probed": device.type == "cpu" and not threads,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
            "mkl_cbwr": os.environ.get("MKL_CBWR"),
            "cpu_capability": capability,
            "torch": torch.__version__}


#: floats of the probe's in-place sine: 4x torch's grain size (32768), so every thread count
#: above one splits it; compute-bound, so 2 idle cores take clearly less time than one
#: (an add, memory-bound, chose one thread in 3 of 100 probes on idle cores)
PROBE_FLOATS = 1 << 17
#: parallel regions the probe times at each thread count (about 1.3 ms on one idle core)
PROBE_REGIONS = 8
#: seconds the probe sleeps before each timed region, so that the pool's threads have
#: stopped spinning and sleep, as they do between a training step's parallel regions: back
#: to back, the regions kept them awake and 2 threads looked fast (0.55x one) beside busy
#: processes where 2-thread epochs took 19x one's (benchmarks/speed/README.md)
PROBE_GAP_S = 0.001


def faster_thread_count(most: int, regions: int = PROBE_REGIONS) -> int:
    """1 or ``most``: the intra-op thread count that runs ``regions`` parallel regions (an
    in-place sine over :data:`PROBE_FLOATS` floats each) faster on the machine as it is now,
    which torch is then set to.

    A parallel region waits for its slowest thread, so on cores that other processes also
    use, threads that wait for a core cost more than they give: the README's molbbbp job took
    25 s an epoch on 2 threads beside two busy processes and 0.5 s on one, while on idle
    cores 2 threads took 0.74x one's time (``benchmarks/speed/README.md``, "Threads on a busy
    machine"). The count does not change the numbers (:func:`one_thread`, :func:`serial`).
    Each region is timed after a :data:`PROBE_GAP_S` sleep, so the time includes waking
    the pool's threads, which is what a busy machine makes slow. The timing of ``most``
    threads stops once it is 4x one thread's, so the probe costs about 12 ms an epoch on
    2 idle cores (mostly the sleeps) and about 30 ms on busy ones.

    >>> faster_thread_count(1)
    1
    """
    if most <= 1:
        torch.set_num_threads(1)
        return 1
    x = torch.ones(PROBE_FLOATS)

    def seconds(threads: int, limit: float) -> float:
        torch.set_num_threads(threads)
        x.sin_()  # the pool's threads started before the clock
        total = 0.0
        for _ in range(regions):
            if threads > 1:  # they stop spinning, as between a step's regions
                time.sleep(PROBE_GAP_S)
            start = time.perf_counter()
            x.sin_()
            total += time.perf_counter() - start
            if total > limit:
                break
        return total

    one = seconds(1, math.inf)
    chosen = most if seconds(most, 4 * one) < one else 1
    torch.set_num_threads(chosen)
    return chosen


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Torch's CPU kernels run on one intra-op thread inside the block, on as many as before
    after it (``torch.set_num_threads``, well under a microsecond a call)."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def serial(out: torch.Tensor) -> torch.Tensor:
    """``out``, whose backward node (``out.grad_fn``, e.g. ``NativeBatchNormBackward0``)
    will run on one intra-op thread: a pre-hook lowers torch's thread count, a hook after
    the node gives it back (the CPU's backward runs on the thread that called it). Nothing
    is done for a tensor without a backward node, off the CPU, or under
    :func:`torch.compile`."""
    if torch.compiler.is_compiling() or out.device.type != "cpu":  # (no grad_fn read there)
        return out
    node = out.grad_fn
    if node is None:
        return out
    before: list[int] = []

    def lower(grad_outputs):
        before.append(torch.get_num_threads())
        torch.set_num_threads(1)

    def restore(grad_inputs, grad_outputs):
        if before:
            torch.set_num_threads(before.pop())

    node.register_prehook(lower)
    node.register_hook(restore)
    return out


def select_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU.

    Raises
    ------
    GrpruneError
        If CUDA is asked for but not available.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise GrpruneError(f"--device {name}: CUDA is not available on this machine "
                           f"(torch {torch.__version__}); use --device cpu or auto")
    try:
        return torch.device(name)
    except RuntimeError as exc:
        raise GrpruneError(f"bad device {name!r}: {exc}") from None


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def eval_seed(seed: int, split: str) -> int:
    """The seed of evaluation's random stream on ``split`` (:meth:`Trainer.evaluate`):
    CRC-32 of ``"{seed}/{split}"``, an int in [0, 2**32), the same on every machine and
    Python process (unlike :func:`hash` of a string)."""
    return zlib.crc32(f"{seed}/{split}".encode())
