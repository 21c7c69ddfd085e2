"""Time issue 43's GPU targets: whole molbbbp runs and GOOD-Motif epochs, fast path on and off.

Usage::

    python -m benchmarks.speed.targets --device cuda --out "$OUT"           # device.sh speed
    python -m benchmarks.speed.targets --device cpu --quick --out /tmp/t    # try it on a CPU
    python -m benchmarks.speed.targets --list                               # the plan, in order

Each measurement is one ``grprune run`` in a process of its own, as a user starts it, and
appends one JSON object to ``OUT/cuda-targets.jsonl`` as soon as it is measured, so a call
cut short by ``--budget`` still returns what it finished. The tasks run most important
first (:data:`PLAN`): the targets with the fast path, then the A/B without it and a
profile of each dataset's PrunE step, then the rest; ``--only ID,...`` (ids or their
beginnings, e.g. ``motif``; a whole id picks that task alone) picks tasks for a second call.

* ``molbbbp-prune-run-100`` / ``molbbbp-erm-run-100``: a whole 100-epoch run on
  ogbg-molbbbp (scaffold split, the dataset's default preset; train, valid and test
  evaluated every epoch, the final evaluation and files included). ``seconds`` is the run's
  own ``wall_time_s`` (``summary.json``); ``command_s`` adds the interpreter's start,
  imports and CUDA's initialisation.
* ``motif-prune-epoch`` / ``motif-erm-epoch``: GOOD-Motif basis, all 18,000 training
  graphs, ``train.warmup_epochs=0`` (PrunE's selector and regularizers on in every epoch),
  ``train.eval_train=false``, 3 epochs. ``seconds`` is the median training time
  (``results.jsonl`` ``train_time_s``) of the epochs after the first, which pays for lazy
  CUDA set-up.

Every object has ``what``, ``seconds``, ``device`` (the card's name; the CPU's model on a
CPU), ``commit``, ``fast_path``, ``peak_mib`` (``summary.json`` ``peak_mem_mib``: torch's
peak allocation on CUDA, the process's peak RSS on a CPU) and ``deterministic``
(``train.deterministic``, on unless the task's id ends in ``:nondet``), plus details.
A ``profile:`` task appends to ``OUT/profile-molbbbp-prune.txt`` or
``OUT/profile-motif-prune.txt`` :mod:`torch.profiler` tables of one PrunE training pass
(``--profile-steps`` batches) and of one evaluation of the validation split, with the
kernel-launch, host-sync and copy counts that show whether a step waits on the host.
``-H KEY=VALUE`` adds a setting to every run (an A/B of a switch such as the padding's,
with ``--label`` to tell the rows apart: they get ``overrides`` and ``label``).
``--quick`` cuts epochs and graphs (``data.limit``) so that a CPU runs the whole plan in
minutes; its numbers only show that the script works.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: ``what`` -> (``grprune run`` arguments, kind); PrunE as the issue states it
RUNS = {
    "molbbbp-prune-run-100": (["--data", "ogbg-molbbbp", "--split", "scaffold",
                               "--selector", "gumbel-gin", "--reg", "size,eps-align"], "run"),
    "molbbbp-erm-run-100": (["--data", "ogbg-molbbbp", "--split", "scaffold",
                             "--selector", "none", "--reg", "none"], "run"),
    "motif-prune-epoch": (["--data", "good-motif", "--split", "basis",
                           "--selector", "gumbel-gin", "--reg", "size,eps-align"], "epoch"),
    "motif-erm-epoch": (["--data", "good-motif", "--split", "basis",
                         "--selector", "none", "--reg", "none"], "epoch"),
}
#: the tasks, most important first: ``WHAT:fast|plain[:nondet]`` or ``profile:DATA:fast|plain``
PLAN = ["molbbbp-prune-run-100:fast", "molbbbp-erm-run-100:fast", "motif-prune-epoch:fast",
        "motif-erm-epoch:fast", "molbbbp-prune-run-100:plain", "motif-prune-epoch:plain",
        "profile:molbbbp:fast", "profile:motif:fast", "molbbbp-erm-run-100:plain",
        "motif-erm-epoch:plain", "molbbbp-prune-run-100:fast:nondet",
        "motif-prune-epoch:fast:nondet", "profile:molbbbp:plain", "profile:motif:plain"]
#: epochs and data.limit: full, and --quick
SIZES = {"run": {"full": (100, 0), "quick": (3, 200)},
         "epoch": {"full": (3, 0), "quick": (2, 400)}}
PROFILED = {"molbbbp": ("ogbg-molbbbp", "scaffold"), "motif": ("good-motif", "basis")}


def commit_of(given: str | None) -> str:
    """``--commit``, else ``$GRPRUNE_COMMIT``, else git's (``-dirty`` with changes), else
    ``unknown`` (the device machine gets the tree without ``.git``)."""
    if given or os.environ.get("GRPRUNE_COMMIT"):
        return given or os.environ["GRPRUNE_COMMIT"]
    from grprune.provenance import git_commit
    return git_commit() or "unknown"


def command(what: str, fast: bool, deterministic: bool, device: str, quick: bool,
            out: Path, overrides: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The ``grprune run`` command of one measurement (``overrides``: more ``-H`` settings,
    last, so they win)."""
    args, kind = RUNS[what]
    epochs, limit = SIZES[kind]["quick" if quick else "full"]
    cmd = [sys.executable, "-m", "grprune", "run", *args, "--epochs", str(epochs),
           "--device", device, "--progress", "none", "--json", "--force", "--out", str(out),
           "--deterministic" if deterministic else "--no-deterministic",
           "-H", f"train.fast_path={str(fast).lower()}"]
    if kind == "epoch":
        cmd += ["-H", "train.warmup_epochs=0", "-H", "train.eval_train=false"]
    if limit:
        cmd += ["-H", f"data.limit={limit}"]
    for setting in overrides:
        cmd += ["-H", setting]
    return cmd


def record(what: str, run_dir: Path, command_s: float, commit: str) -> dict:
    """The JSON object of one finished measurement, from its run directory."""
    summary = json.loads((run_dir / "summary.json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()
               if line.strip()]
    train_s = [r["train_time_s"] for r in records]
    env = summary.get("environment") or {}
    seconds = (summary["wall_time_s"] if RUNS[what][1] == "run"
               else statistics.median(train_s[1:] or train_s))
    limit = config["data"].get("limit", 0)
    n_train = (summary.get("dataset_info") or {}).get("split_sizes", {}).get("train")
    return {
        "what": what, "seconds": round(seconds, 3),
        "device": env.get("gpu") or env.get("cpu") or summary["device"],
        "commit": commit, "fast_path": bool(config["train"]["fast_path"]),
        "peak_mib": summary["peak_mem_mib"],
        "deterministic": bool(config["train"]["deterministic"]),
        "epochs": summary["epochs_run"], "limit": limit,
        "train_graphs": min(limit, n_train) if limit and n_train else (limit or n_train),
        "train_epoch_s": [round(t, 4) for t in train_s],
        "epoch_time_s_median": summary.get("epoch_time_s_median"),
        "command_s": round(command_s, 3), "test": summary.get("test"),
        "torch": env.get("torch"), "config_hash": config.get("hash"),
    }


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def measure(task: str, args: argparse.Namespace, commit: str, runs: Path, left: float) -> bool:
    """Run one measurement task and append its object; False when it hit the budget."""
    what, mode, *rest = task.split(":")
    fast, det = mode == "fast", "nondet" not in rest
    run_dir = runs / task.replace(":", "-")
    t0 = time.perf_counter()
    try:
        done = subprocess.run(command(what, fast, det, args.device, args.quick, run_dir,
                                      args.overrides),
                              env=_child_env(), cwd=ROOT, capture_output=True, text=True,
                              timeout=left, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        print(f"targets: {task} stopped at the budget after {left:.0f} s", flush=True)
        return False
    if done.returncode != 0:
        print(f"targets: {task} failed (exit {done.returncode}):\n{done.stderr[-3000:]}",
              flush=True)
        return True
    rec = record(what, run_dir, time.perf_counter() - t0, commit)
    if args.overrides or args.label:
        rec.update(overrides=args.overrides, label=args.label)
    with open(args.out / "cuda-targets.jsonl", "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    print(f"targets: {task}{f' [{args.label}]' if args.label else ''}: {rec['seconds']:.3f} s (command {rec['command_s']:.1f} s, "
          f"peak {rec['peak_mib']} MiB, {rec['epochs']} epochs, test {rec['test']})", flush=True)
    return True


def profile_task(task: str, args: argparse.Namespace, left: float) -> bool:
    """Run one ``profile:`` task in a process of its own; False when it hit the budget."""
    _, name, mode = task.split(":")
    steps = 4 if args.quick else args.profile_steps
    cmd = [sys.executable, __file__, "--profile-worker", name, "--device", args.device,
           "--out", str(args.out), "--profile-steps", str(steps),
           "--fast" if mode == "fast" else "--no-fast"]
    try:
        done = subprocess.run(cmd, env=_child_env(), capture_output=True, text=True,
                              timeout=left, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        print(f"targets: {task} stopped at the budget", flush=True)
        return False
    text = done.stdout if done.returncode == 0 else (
        f"== {task}: failed (exit {done.returncode})\n{done.stderr[-3000:]}")
    path = args.out / f"profile-{name}-prune.txt"
    with open(path, "a") as fh:
        fh.write(text + "\n\n")
    print(f"targets: {task} -> {path.name}", flush=True)
    return True


def _event_counts(prof) -> dict[str, float]:
    """Kernel launches, host syncs, copies and kernel time (seconds) of a profile."""
    launches = syncs = copies = 0
    device_us = 0.0
    for ev in prof.key_averages():
        if "LaunchKernel" in ev.key:
            launches += ev.count
        elif "Synchronize" in ev.key:
            syncs += ev.count
        elif ev.key.startswith("cudaMemcpy"):
            copies += ev.count
        if "CPU" not in str(getattr(ev, "device_type", "CPU")):  # kernels, as torch's footer
            device_us += float(getattr(ev, "self_device_time_total", 0.0) or 0.0)
    return {"kernel_launches": launches, "syncs": syncs, "memcpy_calls": copies,
            "kernel_time_s": device_us / 1e6}


def profile_worker(name: str, fast: bool, device: str, steps: int) -> str:
    """The report of one PrunE training pass of ``steps`` batches and one evaluation of the
    validation split (``data.limit`` graphs per split), with and under the profiler."""
    from grprune.resolve import resolve_config  # first: grprune pins torch's CPU kernels
    from grprune.run import load_config_dataset
    from grprune.trainer import Trainer

    import torch
    from torch.profiler import ProfilerActivity, profile

    data, split = PROFILED[name]
    size = resolve_config(data=data, flags={"data.split": split})["train"]["batch_size"]
    flags = {"train.device": device, "train.warmup_epochs": 0, "train.fast_path": fast,
             "data.split": split, "train.progress": "none", "data.limit": steps * size}
    cfg = resolve_config(data=data, selector="gumbel-gin", reg="size,eps-align", flags=flags)
    trainer = Trainer(cfg, load_config_dataset(cfg), Path(tempfile.mkdtemp()))
    cuda = trainer.device.type == "cuda"

    def timed(fn) -> float:
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - t

    trainer.train_epoch(0)  # warm-up: allocator, lazily built state
    trainer.evaluate("valid")
    plain = min(timed(lambda: trainer.train_epoch(1)) for _ in range(2))
    sort = "self_device_time_total" if cuda else "self_cpu_time_total"
    lines = [f"== {data} PrunE, train.fast_path={fast}, {trainer.device}, "
             f"{len(trainer.splits['train'])} training graphs ({steps} steps of {size}), "
             f"{len(trainer.splits['valid'])} valid graphs (eval batch "
             f"{trainer.eval_batch_size()})",
             f"training pass without the profiler: {plain:.4f} s "
             f"({plain / steps * 1e3:.2f} ms/step)"]
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    for label, fn in (("training pass", lambda: trainer.train_epoch(2)),
                      ("evaluation of valid", lambda: trainer.evaluate("valid"))):
        with profile(activities=acts) as prof:
            wall = timed(fn)
        counts = ", ".join(f"{k} {v:.4g}" for k, v in _event_counts(prof).items())
        table = prof.key_averages().table
        lines += [f"\n-- {label}: {wall:.4f} s under the profiler; {counts}",
                  f"(sorted by {sort})", table(sort_by=sort, row_limit=35,
                                               max_name_column_width=60),
                  "(sorted by cpu_time_total: host work, launches, syncs)",
                  table(sort_by="cpu_time_total", row_limit=25, max_name_column_width=60)]
    return "\n".join(lines)


def run_plan(args: argparse.Namespace, commit: str, runs: Path, deadline: float) -> None:
    """Run :data:`PLAN` (or the ``--only`` tasks) in order until the budget is spent."""
    given = args.only.split(",") if args.only else []
    # a whole task id picks that task alone, any other text the tasks it begins
    chosen = [t for t in PLAN if not given
              or any(t == p or (p not in PLAN and t.startswith(p)) for p in given)]
    for task in chosen:
        left = deadline - time.monotonic()
        if left < 10:
            print(f"targets: {task} skipped: the budget is spent", flush=True)
            continue
        done = (profile_task(task, args, left) if task.startswith("profile:")
                else measure(task, args, commit, runs, left))
        if not done:
            break


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    ap.add_argument("--out", type=Path, help="folder: cuda-targets.jsonl (appended), "
                    "profile-*.txt, targets-runs.tgz (the runs' config, results, summary)")
    ap.add_argument("--quick", action="store_true",
                    help="few epochs and graphs (data.limit): try the script on a CPU")
    ap.add_argument("--only", default="", help="comma list of task ids (that task alone) "
                    "or their beginnings (every task that begins so)")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    ap.add_argument("--profile-steps", type=int, default=20, help="training steps profiled")
    ap.add_argument("--budget", type=float, default=420.0,
                    help="seconds: no task starts after it, one in progress is stopped")
    ap.add_argument("--commit", default=None, help="commit to record (default: "
                    "$GRPRUNE_COMMIT, else git's, else unknown)")
    ap.add_argument("-H", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for every run, e.g. train.pad_buckets=8 (repeatable; "
                    "recorded as overrides); profiles ignore it")
    ap.add_argument("--label", default="", help="a tag recorded with the rows (pad-on); "
                    "also names targets-runs-LABEL.tgz")
    ap.add_argument("--profile-worker", metavar="NAME", help=argparse.SUPPRESS)
    ap.add_argument("--fast", action=argparse.BooleanOptionalAction, default=True,
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.list:
        print("\n".join(PLAN))
        return
    if args.profile_worker:
        print(profile_worker(args.profile_worker, args.fast, args.device, args.profile_steps))
        return
    if args.out is None:
        ap.error("--out is required")
    deadline = time.monotonic() + args.budget
    args.out.mkdir(parents=True, exist_ok=True)
    commit = commit_of(args.commit)
    with tempfile.TemporaryDirectory(prefix="grprune-targets-") as tmp:
        try:
            run_plan(args, commit, Path(tmp), deadline)
        finally:  # the measured runs' records (no checkpoints), also after a stop
            name = f"targets-runs-{args.label}.tgz" if args.label else "targets-runs.tgz"
            with tarfile.open(args.out / name, "w:gz") as tar:
                for f in sorted(Path(tmp).glob("*/*")):
                    if f.name in ("summary.json", "results.jsonl", "config.json"):
                        tar.add(f, arcname=f"{f.parent.name}/{f.name}")


if __name__ == "__main__":
    main()
