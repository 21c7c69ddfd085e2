"""A/B of ``train.compile`` (issue 49, item 3): the step eager, as one CUDA graph, and through
``torch.compile``.

Usage::

    python -m benchmarks.speed.compile --device cuda --out "$OUT" --budget 200   # device.sh
    python -m benchmarks.speed.compile --device cpu --quick --out /tmp/c         # try on a CPU

Runs, in this one process and one after the other, :data:`CASES` (``targets.py``'s
``motif-prune-epoch``, GOOD-Motif basis epochs of PrunE, and ``molbbbp-prune-run-100``, a
whole 100-epoch ogbg-molbbbp PrunE run) with ``train.fast_path=true``,
``train.pad_buckets=true`` (GOOD-Motif with its preset's official eps-align form, static on
padded batches) and each ``train.compile`` mode of ``--modes`` (default
``cuda-graph,none,reduce-overhead``; ``cuda-graph`` is :class:`grprune.step.GraphedStep`, the
whole step with Adam captured per bucket, on the CPU replayed eagerly), modes next to each
other, each after ``torch._dynamo.reset()``, so a mode pays its own compilation. Each finished run appends one
JSON object to ``OUT/compile.jsonl`` (``targets.py``'s fields: ``seconds`` is the run's
``wall_time_s`` or the median epoch after the first; ``train_epoch_s`` every epoch's training
time, whose first entries carry the compilation), with ``compile``, ``compile_s``
(:func:`compile_seconds`: the epochs' training time over the steady epoch's, compilation
and CUDA-graph capture) and ``label``. A run that
would start with less than ``--budget`` left is skipped. ``--quick`` cuts epochs and graphs
(``targets.SIZES``) so that a CPU runs it in minutes (and there with ``--backend aot_eager``
inductor's C++ build is skipped); its numbers only show that the script works.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.speed import targets  # the cases and their records

#: ``what`` of targets.RUNS, in order: GOOD-Motif first, whose 3 epochs compile each bucket
#: once (no warm-up) and leave 2 to time; the 100-epoch run compiles each twice (ERM warm-up)
CASES = ["motif-prune-epoch", "molbbbp-prune-run-100"]


def flags_of(what: str, mode: str, device: str, quick: bool) -> dict:
    """The settings of one measured run: ``targets.command``'s, with the padding and
    ``train.compile=mode``."""
    args, kind = targets.RUNS[what]
    epochs, limit = targets.SIZES[kind]["quick" if quick else "full"]
    flags = {"train.epochs": epochs, "train.device": device, "train.progress": "none",
             "train.fast_path": True, "train.pad_buckets": True, "train.compile": mode}
    if kind == "epoch":
        flags.update({"train.warmup_epochs": 0, "train.eval_train": False})
    if limit:
        flags["data.limit"] = limit
    return flags


def compile_seconds(train_s: list[float]) -> float:
    """Training time beyond the steady epoch (the median of the second half of the epochs),
    summed over the epochs: what compilation and CUDA-graph capture cost (each new bucket
    shape, and phase, compiles in the epoch that first meets it).

    >>> compile_seconds([10.0, 3.0, 1.0, 1.0, 1.0, 1.0])
    11.0
    """
    steady = statistics.median(train_s[len(train_s) // 2:])
    return round(sum(max(t - steady, 0.0) for t in train_s), 3)


def schedule(cases: list[str], modes: list[str]) -> list[tuple[str, str]]:
    """The runs in order: the modes without :func:`torch.compile` (``none``,
    ``cuda-graph``) of every case first, then the compiled ones, each case's modes next to
    each other (a compilation that eats the budget then leaves the others measured).

    >>> schedule(["a", "b"], ["none", "reduce-overhead", "cuda-graph"])
    [('a', 'none'), ('a', 'cuda-graph'), ('b', 'none'), ('b', 'cuda-graph'), \
('a', 'reduce-overhead'), ('b', 'reduce-overhead')]
    """
    cheap = [m for m in modes if m in ("none", "cuda-graph")]
    compiled = [m for m in modes if m not in cheap]
    return [(what, mode) for group in (cheap, compiled) for what in cases for mode in group]


def measure(what: str, mode: str, args: argparse.Namespace, commit: str, runs: Path) -> dict:
    """One run of ``what`` with ``train.compile=mode``, in this process."""
    import torch
    from grprune import step
    from grprune.resolve import resolve_config
    from grprune.run import execute
    torch._dynamo.reset()
    step.BACKEND = args.backend or None
    opts = dict(zip(targets.RUNS[what][0][::2], targets.RUNS[what][0][1::2]))
    cfg = resolve_config(data=opts["--data"], selector=opts["--selector"], reg=opts["--reg"],
                         flags={**flags_of(what, mode, args.device, args.quick),
                                "data.split": opts["--split"]})
    run_dir = runs / f"{what}-{mode}"
    t0 = time.perf_counter()
    execute(cfg, run_dir, force=True, log=lambda msg: None)
    row = targets.record(what, run_dir, time.perf_counter() - t0, commit)
    backend = args.backend or "inductor"
    if mode in ("none", "cuda-graph"):  # no torch.compile: eager, or the step's own capture
        backend = {"none": "eager", "cuda-graph": "torch.cuda.CUDAGraph" if
                   args.device.startswith("cuda") else "eager stand-in"}[mode]
    row.update(compile=mode, backend=backend, label=f"compile-{mode}",
               settings=flags_of(what, mode, args.device, args.quick),
               compile_s=compile_seconds(row["train_epoch_s"]))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, required=True, help="folder of compile.jsonl")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for all runs")
    parser.add_argument("--modes", default="cuda-graph,none,reduce-overhead",
                        help="comma list of train.compile modes, in order (cuda-graph first: "
                             "targets.py has timed the eager step in the same device call)")
    parser.add_argument("--only", default="", help="comma list of case ids (or beginnings)")
    parser.add_argument("--backend", default="", help="torch.compile backend (default "
                                                      "inductor; aot_eager: no C++ build)")
    parser.add_argument("--quick", action="store_true", help="few epochs and graphs")
    parser.add_argument("--commit", default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    commit, deadline = targets.commit_of(args.commit), time.monotonic() + args.budget
    cases = [c for c in CASES if not args.only
             or any(c.startswith(o) for o in args.only.split(","))]
    with tempfile.TemporaryDirectory() as tmp:
        for what, mode in schedule(cases, args.modes.split(",")):
            if time.monotonic() > deadline:
                print(f"compile: no time left for {what} {mode}", flush=True)
                continue
            row = measure(what, mode, args, commit, Path(tmp))
            with open(args.out / "compile.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            print(f"{what} compile={mode}: {row['seconds']} s (compile "
                  f"{row['compile_s']} s, epochs {row['train_epoch_s'][:4]}...)",
                  flush=True)


if __name__ == "__main__":
    main()
