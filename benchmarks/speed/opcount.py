"""Count the ATen ops one training step dispatches: the CPU's proxy for a GPU's kernel launches.

Usage::

    python -m benchmarks.speed.opcount --out benchmarks/speed/opcount-cpu-2core.jsonl
    python -m benchmarks.speed.opcount --only molbbbp --label pad-on -H train.pad_buckets=8
    python -m benchmarks.speed.opcount --device cuda --out "$OUT/opcount-cuda.jsonl"

A step on a GPU costs about one launch (~26 µs of host time, issue 49) per kernel, and the
host, not the GPU, sets the pace of grprune's small-batch steps. The launches can be counted
without a GPU: every ATen op a step dispatches becomes one kernel or more on CUDA, or none
(``empty``, views). For each case (:data:`CASES`: PrunE and ERM on ogbg-molbbbp and
GOOD-Motif, batches of 64) the script builds the run's :class:`~grprune.trainer.Trainer` on
``--steps`` batches of training graphs (``data.limit``, ``train.warmup_epochs=0``), trains one
epoch to warm up, then counts two more epochs with :meth:`Trainer.train_epoch`, whatever the
trainer does in them (gathering batches, forward, backward, the optimizer, the epoch's loss
read-out), divided by the steps:

* ``dispatched``: ops that reach the dispatcher below autograd, counted by a
  :class:`torch.utils._python_dispatch.TorchDispatchMode` (forward, backward and optimizer;
  an op's own inner calls are not counted again): the closest count to launches.
* ``aten``: every ``aten::`` event of :mod:`torch.profiler`, nested calls included (``zeros``
  counts itself, its ``empty`` and its ``fill_``): the count the device profile's table of
  issue 49 gives (``fill_`` 558, ``empty`` 391, ``_index_put_impl_`` 31 per molbbbp step).
* ``ops``: the profiler's counts per step of :data:`WATCHED` (``fill_``, ``empty``,
  ``index_put_`` and their kin), and ``top``: the 15 most frequent ops.
* On CUDA also ``launches``: the profiler's ``cudaLaunchKernel`` events per step.

Each case appends one JSON object to ``--out`` (``what``, ``label``, ``device``, ``commit``,
``torch``, ``steps``, ``batch_size``, ``fast_path``, ``deterministic``, ``overrides``, the
counts). ``-H KEY=VALUE`` passes settings (e.g. the padding switch) to every case; a setting
this version of grprune does not know skips the case with one line and exit code 0, so the
script runs against older and newer trees alike. Counts are deterministic for a given tree and
torch version; they are not timings.

``--where OP,OP`` (dispatcher names, e.g. ``_local_scalar_dense,_to_copy``) also prints, per
case, where the counted epoch dispatched those ops: the innermost frames of grprune and
``torch.optim`` on the Python stack, with the count per step (``where`` in the row). That is
how issue 49's host reads were found: all but one per step were Adam's ``foreach`` reads of
its step counters, which live on the host.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: ``what`` -> (dataset, split, selector, regularizers)
CASES = {
    "molbbbp-prune-step": ("ogbg-molbbbp", "scaffold", "gumbel-gin", "size,eps-align"),
    "molbbbp-erm-step": ("ogbg-molbbbp", "scaffold", "none", "none"),
    "motif-prune-step": ("good-motif", "basis", "gumbel-gin", "size,eps-align"),
    "motif-erm-step": ("good-motif", "basis", "none", "none"),
}
#: ops broken out in ``ops`` (profiler names, without ``aten::``)
WATCHED = ("fill_", "zero_", "empty", "empty_strided", "index_put_", "_index_put_impl_",
           "index_add_", "scatter_add_", "copy_", "to", "item", "_local_scalar_dense")


def _call_site(depth: int = 3) -> str:
    """The innermost ``depth`` frames of grprune (or ``torch/optim``) on the stack, outermost
    first, as ``path:line function`` joined by `` > ``."""
    import traceback

    frames = [f for f in traceback.extract_stack()
              if ("grprune" in f.filename or "torch/optim" in f.filename)
              and "benchmarks" not in f.filename]
    return " > ".join(f"{f.filename.rsplit('site-packages/', 1)[-1].replace(str(ROOT) + '/', '')}"
                      f":{f.lineno} {f.name}" for f in frames[-depth:])


def _dispatch_counter(where: frozenset[str] = frozenset()):
    """A TorchDispatchMode that counts the ops it sees by name (``fill_``, ``mm``), those of
    an optimizer step apart (its ``in_optimizer`` flag, set by the optimizer's hooks), and
    the call sites (:func:`_call_site`) of the ops named in ``where``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpCounter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.counts: Counter[str] = Counter()
            self.optimizer: Counter[str] = Counter()
            self.sites: Counter[str] = Counter()
            self.in_optimizer = False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            (self.optimizer if self.in_optimizer else self.counts)[name] += 1
            if name in where:
                self.sites[f"{name} @ {_call_site()}"] += 1
            return func(*args, **(kwargs or {}))

    return OpCounter()


def _aten_events(prof) -> tuple[Counter[str], Counter[str], int]:
    """The profiler's ``aten::`` events by name (nested ones included): all of them, those
    under an optimizer step (torch's ``Optimizer.step#...`` range), and the kernel launches."""
    every: Counter[str] = Counter()
    optimizer: Counter[str] = Counter()
    launches = 0
    for ev in prof.key_averages():
        if ev.key.startswith("aten::"):
            every[ev.key[len("aten::"):]] += ev.count
        elif "LaunchKernel" in ev.key:
            launches += ev.count
    stack = [ev for ev in prof.events() if ev.name.startswith("Optimizer.step#")]
    while stack:
        ev = stack.pop()
        if ev.name.startswith("aten::"):
            optimizer[ev.name[len("aten::"):]] += 1
        stack.extend(ev.cpu_children)
    return every, optimizer, launches


def count_case(what: str, device: str, steps: int, batch_size: int, fast: bool,
               overrides: list[str], where: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The op counts per training step of one case (:data:`CASES`); with ``where`` (op
    names) also ``where``: their call sites and counts per step, most frequent first.

    Raises
    ------
    GrpruneError
        If an override names a setting this version does not know, or a bad value.
    """
    from grprune.resolve import resolve_config  # first: grprune pins torch's CPU kernels
    from grprune.run import load_config_dataset
    from grprune.trainer import Trainer

    import torch
    from torch.profiler import ProfilerActivity, profile

    data, split, selector, reg = CASES[what]
    flags = {"train.device": device, "train.warmup_epochs": 0, "train.fast_path": fast,
             "data.split": split, "train.progress": "none", "train.batch_size": batch_size,
             "data.limit": steps * batch_size}
    cfg = resolve_config(data=data, selector=selector, reg=reg, flags=flags,
                         overrides=overrides)
    trainer = Trainer(cfg, load_config_dataset(cfg), Path(tempfile.mkdtemp()))
    n_steps = -(-len(trainer.splits["train"]) // batch_size)
    cuda = trainer.device.type == "cuda"
    trainer.train_epoch(0)  # warm-up: lazily built state, the first selection's check
    counter = _dispatch_counter(where)

    def enter(*_):
        counter.in_optimizer = True

    def leave(*_):
        counter.in_optimizer = False

    hooks = [trainer.optimizer.register_step_pre_hook(enter),
             trainer.optimizer.register_step_post_hook(leave)]
    with counter:
        trainer.train_epoch(1)
    for hook in hooks:
        hook.remove()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        trainer.train_epoch(2)
        if cuda:
            torch.cuda.synchronize()
    aten, aten_opt, launches = _aten_events(prof)
    model = aten - aten_opt

    def per_step(n: float) -> float:
        return round(n / n_steps, 2)

    out: dict[str, Any] = {
        "what": what, "dataset": data, "split": split, "selector": selector, "reg": reg,
        "steps": n_steps, "batch_size": batch_size, "train_graphs": len(trainer.splits["train"]),
        "fast_path": fast, "deterministic": bool(cfg.train.deterministic),
        "dispatched": per_step(counter.counts.total() + counter.optimizer.total()),
        "dispatched_model": per_step(counter.counts.total()),
        "aten": per_step(aten.total()), "aten_model": per_step(model.total()),
        "ops": {k: per_step(aten[k]) for k in WATCHED if aten[k]},
        "ops_model": {k: per_step(model[k]) for k in WATCHED if model[k]},
        "top_model": {k: per_step(v) for k, v in model.most_common(15)},
        "dispatched_top_model": {k: per_step(v) for k, v in counter.counts.most_common(15)},
    }
    if cuda:
        out["launches"] = per_step(launches)
    if where:
        out["where"] = {k: per_step(v) for k, v in counter.sites.most_common()}
    return out


def _device_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    from grprune.provenance import environment

    env = environment(device)
    return str(env.get("cpu") or platform.processor() or platform.machine())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    ap.add_argument("--steps", type=int, default=8, help="training steps per counted epoch")
    ap.add_argument("--batch-size", type=int, default=64, help="graphs per step")
    ap.add_argument("--fast", action=argparse.BooleanOptionalAction, default=True,
                    help="train.fast_path (default on)")
    ap.add_argument("--only", default="", help="comma list of cases or their beginnings "
                    f"({', '.join(CASES)})")
    ap.add_argument("-H", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for every case, e.g. train.pad_buckets=8 (repeatable)")
    ap.add_argument("--where", default="", metavar="OP,OP",
                    help="also list where these ops are dispatched, e.g. _local_scalar_dense")
    ap.add_argument("--label", default="", help="a tag stored with the rows (pad-on, before)")
    ap.add_argument("--out", type=Path, help="JSON-lines file to append to (default: print)")
    ap.add_argument("--commit", default=None, help="commit to record (default: "
                    "$GRPRUNE_COMMIT, else git's, else unknown)")
    args = ap.parse_args(argv)
    from grprune.errors import GrpruneError
    from grprune.provenance import git_commit

    import torch

    commit = args.commit or os.environ.get("GRPRUNE_COMMIT") or git_commit() or "unknown"
    chosen = [w for w in CASES if not args.only
              or any(w.startswith(p) for p in args.only.split(","))]
    if not chosen:
        ap.error(f"--only {args.only!r} names no case; cases: {', '.join(CASES)}")
    hardware = _device_name(args.device)
    for what in chosen:
        try:
            row = count_case(what, args.device, args.steps, args.batch_size, args.fast,
                             args.overrides, frozenset(filter(None, args.where.split(","))))
        except GrpruneError as exc:
            print(f"opcount: {what}: skipped: {exc}", flush=True)
            continue
        row = {**row, "label": args.label, "device": hardware, "commit": commit,
               "torch": torch.__version__, "overrides": args.overrides,
               "pad_env": os.environ.get("GRPRUNE_PAD")}
        ops = ", ".join(f"{k} {v:g}" for k, v in row["ops_model"].items())
        launches = f", {row['launches']:g} launches" if "launches" in row else ""
        print(f"opcount: {what}{' [' + args.label + ']' if args.label else ''}: per step "
              f"{row['dispatched']:g} ops dispatched ({row['dispatched_model']:g} outside the "
              f"optimizer), {row['aten']:g} aten events ({row['aten_model']:g}){launches}, "
              f"{row['steps']} steps of {row['batch_size']}; outside the optimizer: {ops}",
              flush=True)
        for site, count in row.get("where", {}).items():
            print(f"  {count:9g} per step  {site}", flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")
        else:
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
