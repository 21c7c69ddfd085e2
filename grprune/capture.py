"""CUDA-graph capture: the backends that capture and replay, and the probes that find what a
captured graph would keep from its capture.

``train.compile=cuda-graph`` captures the whole training step (:class:`grprune.step.GraphedStep`)
and evaluation's passes (:class:`grprune.evaluation.GraphedForward`). Both use what is here:

* the backends: :class:`CudaGraphs` (PyTorch's "whole-network capture" recipe) and, on the CPU,
  :class:`EagerGraphs`, whose replay runs the captured function again, eagerly, so that the
  plumbing is tested bit for bit without a GPU (``tests/test_cuda_graph.py``);
* the probes, run around the last eager call before a capture: :func:`watch_capture_hazards`
  (host reads, ops sized by values, copies between host and device, CUDA syncs),
  :func:`watch_replaced_tensors` (a new tensor put in a module) and :class:`WatchedBatch` (the
  batch's host integers); :func:`mark_eager` keeps a key that any of them flags eager;
* a batch as a graph's static input: :func:`batch_tensors`, :func:`static_copy` and
  :class:`StaticGraph` (copy a batch in, replay).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import fields, replace
from typing import Any, Callable, Iterator

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from grprune.batch import GraphBatch
from grprune.csr import Segments

#: ops whose output size depends on tensor values (the host reads it back)
_SIZED_BY_VALUES = frozenset({"nonzero", "nonzero_static", "masked_select", "_unique",
                              "_unique2", "unique_dim", "unique_consecutive",
                              "unique_dim_consecutive", "bincount"})


class WatchedBatch(GraphBatch):
    """A view of a :class:`GraphBatch` (the same tensors and caches) that records reads of
    the host integers that differ between batches of one bucket (``real_graphs``,
    ``real_edges``): a captured step would keep the capture's values."""

    reads: set[str]

    @classmethod
    def of(cls, batch: GraphBatch) -> "WatchedBatch":
        view = cls(**{f.name: getattr(batch, f.name) for f in fields(batch)})
        view.reads = set()
        return view

    def __getattribute__(self, name: str) -> Any:
        if name in ("real_graphs", "real_edges"):
            object.__getattribute__(self, "reads").add(name)
        return object.__getattribute__(self, name)


class HostReads(TorchDispatchMode):
    """Records (into ``found``) the ops that read a tensor back to the host or size their
    output by its values (``.item()``, ``nonzero``, ``unique``, a bool-mask index,
    ``repeat_interleave`` without ``output_size``, a device-to-host copy), which a CUDA
    graph cannot capture, and host-to-device copies, whose values it would keep."""

    def __init__(self, found: set[str]) -> None:
        super().__init__()
        self.found = found

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name == "_local_scalar_dense" or name in _SIZED_BY_VALUES:
            self.found.add(name)
        elif name == "repeat_interleave" and func._overloadname != "self_int" \
                and kwargs.get("output_size") is None:
            self.found.add(name)
        elif name in ("index", "index_put", "index_put_", "_index_put_impl_") and any(
                isinstance(i, Tensor) and i.dtype == torch.bool for i in args[1]):
            self.found.add(f"{name} (bool mask)")
        elif name in ("_to_copy", "copy_"):
            src, dst = (args[1], args[0].device) if name == "copy_" else (
                args[0], torch.device(kwargs.get("device") or args[0].device))
            if src.device.type != "cpu" and dst.type == "cpu":
                self.found.add("device-to-host copy")
            elif src.device.type == "cpu" and dst.type != "cpu":
                self.found.add("host-to-device copy")
        return func(*args, **kwargs)


@contextlib.contextmanager
def watch_capture_hazards(found: set[str], device: torch.device) -> Iterator[None]:
    """Record into ``found`` what :class:`HostReads` sees, and on CUDA the synchronizing
    calls that CUDA's sync debug mode reports (made inside ops, where no dispatch mode
    sees them); other warnings pass on."""
    if device.type != "cuda":
        with HostReads(found):
            yield
        return
    old = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught, HostReads(found):
            warnings.simplefilter("always")
            yield
    finally:
        torch.cuda.set_sync_debug_mode(old)
    for w in caught:
        if "synchroniz" in str(w.message):
            found.add("a CUDA synchronization")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _held_tensors(modules: dict[str, torch.nn.Module]) -> dict[str, Tensor]:
    """Every tensor the modules hold (parameters, buffers, tensor attributes), by name: a
    step that puts a new tensor in one of these places (instead of writing into it) leaves
    a captured graph writing to the old one."""
    out: dict[str, Tensor] = {}
    for prefix, module in modules.items():
        for name, sub in module.named_modules(prefix=prefix):
            held = [*sub._parameters.items(), *sub._buffers.items(), *vars(sub).items()]
            out.update({f"{name}.{k}": v for k, v in held if isinstance(v, Tensor)})
    return out


@contextlib.contextmanager
def watch_replaced_tensors(modules: dict[str, torch.nn.Module],
                           found: set[str]) -> Iterator[None]:
    """Record into ``found`` each of the modules' tensors that the code inside replaced."""
    before = _held_tensors(modules)
    yield
    after = _held_tensors(modules)
    found.update(f"a new tensor in {name}" for name in before.keys() | after.keys()
                 if before.get(name) is not after.get(name))


def mark_eager(eager: dict[tuple, str], key: tuple, found: list[str], subject: str,
               runs: str) -> None:
    """Keep ``key`` eager (``eager[key]``: why) if a probe ``found`` anything; warn once."""
    if found and not eager:
        warnings.warn(f"grprune: train.compile=cuda-graph: {subject} depends on what a captured"
                      f" graph would keep from its capture ({', '.join(found)}); {runs} "
                      f"eagerly", stacklevel=4)
    if found:
        eager[key] = ", ".join(found)


class EagerGraphs:
    """The CPU's stand-in for :class:`CudaGraphs`: "capture" keeps the step's closure over
    the static buffers, and each replay runs it again, eagerly, on them. The plumbing of
    :class:`grprune.step.GraphedStep` (static buffers, copies, keys, what a graph keeps from its capture)
    is then tested on the CPU, where a replay gives the eager step's numbers bit for bit."""

    def warmup(self) -> contextlib.AbstractContextManager:
        """The eager steps before a capture: run where they are."""
        return contextlib.nullcontext()

    def capture(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` as a replay: each call runs it again."""
        return fn


class CudaGraphs:
    """Capture and replay with :class:`torch.cuda.CUDAGraph`, as PyTorch's "whole-network
    capture" recipe does (``torch.cuda`` docs, "CUDA Graphs"): eager warm-up steps on a side
    stream, capture under :class:`torch.cuda.graph` with a memory pool of each graph's own
    (graphs of several buckets replay in any order; ``share_pool``: one pool for all, safe
    while every graph's outputs stay referenced), replay on the current stream."""

    def __init__(self, device: torch.device, share_pool: bool = False) -> None:
        self.side = torch.cuda.Stream(device)
        self.pool = torch.cuda.graph_pool_handle() if share_pool else None

    @contextlib.contextmanager
    def warmup(self) -> Iterator[None]:
        """Run the enclosed eager step on the side stream, ordered after and before the
        current stream's work."""
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            yield
        torch.cuda.current_stream().wait_stream(self.side)

    def capture(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """Capture ``fn`` (recorded, not run) into a new graph; the replay runs the graph
        and returns ``fn``'s static outputs, which the next replay overwrites."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            out = fn()

        def replay() -> Any:
            graph.replay()
            return out
        return replay


def batch_tensors(batch: GraphBatch) -> list[Tensor]:
    """Every input tensor of a batch in a fixed order: its tensor fields, then its CSR
    layouts' (:attr:`GraphBatch.csr`), by name."""
    out = [v for f in fields(batch) if isinstance(v := getattr(batch, f.name), Tensor)]
    for name in sorted(batch.csr):
        seg = batch.csr[name]
        out += [t for t in (seg.index, seg.order, seg.lengths) if t is not None]
    return out


def static_copy(batch: GraphBatch) -> GraphBatch:
    """A copy of ``batch`` whose tensors are new buffers (a graph's static inputs)."""
    csr = {k: Segments(s.index.clone(), None if s.order is None else s.order.clone(),
                       s.lengths.clone()) for k, s in batch.csr.items()}
    tensors: dict[str, Any] = {f.name: v.clone() for f in fields(batch)
                               if isinstance(v := getattr(batch, f.name), Tensor)}
    return replace(batch, **tensors, csr=csr, row_masks={}, derived={})


class StaticGraph:
    """A graph captured over a static batch (:func:`static_copy`): each call copies a batch
    of the same shapes in and replays (:class:`grprune.step.GraphedStep`'s steps)."""

    def __init__(self, static: GraphBatch, replay: Callable[[], Any]) -> None:
        self.static, self.replay = static, replay
        self.inputs = batch_tensors(static)

    def __call__(self, tensors: list[Tensor]) -> Any:
        """Copy a batch's tensors (:func:`batch_tensors`) into the static ones (one foreach
        copy) and replay."""
        torch._foreach_copy_(self.inputs, tensors)
        return self.replay()
