"""Run the patched official PrunE code on the exported data, seed after seed, and append
each run's result to ``results.jsonl``.

Run with the official code's venv (it needs numpy only; the training runs in a
subprocess of the same interpreter)::

    OMP_NUM_THREADS=1 nice -n 15 /work/official-venv/bin/python \\
        benchmarks/accuracy/official/runs.py --split scaffold --seeds 0-3

Resumable: a (dataset, split, seed) already in the results file is skipped, and a run
writes its record only when it has finished (the official ``run.py`` writes its numbers
to a temp file that is renamed, then this script appends them atomically). Each run's
log goes to ``$OFFICIAL_WORK/logs/``.

Environment: ``OFFICIAL_SRC`` (the patched checkout, default ``/work/official-src``),
``OFFICIAL_DATA`` (``export.py``'s root, default ``/work/official-data``),
``OFFICIAL_WORK`` (logs and temp files, default ``/work/official-work``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

#: the official README's ogbg-molbbbp recipe ("Training on OGBG-Molbbbp (Scaffold Split)"),
#: with ``--edge_dim 3``: without it ``--mol_encoder`` builds no AtomEncoder and the first
#: forward pass fails (any value > 0 builds the same model: OGB's 3 bond features)
RECIPES = {
    "ogbg-molbbbp": ["--dataset", "molbbbp", "--shift", "covariate", "--batch_size", "64",
                     "--base_gnn", "gin", "--early_stop_epochs", "50", "--nhid", "64",
                     "--epochs", "100", "--nlayers", "4", "--edge_gnn_layers", "2",
                     "--edge_gnn", "gin", "--mol_encoder", "--edge_uniform_penalty", "0.01",
                     "--edge_prob_thres", "50", "--edge_budget", "0.85", "--edge_penalty",
                     "10", "--with_bn", "--dropout", "0.0", "--edge_dim", "3"],
}


def parse_seeds(text: str) -> list[int]:
    """``"0-3"`` -> ``[0, 1, 2, 3]``; ``"0,2"`` -> ``[0, 2]``.

    Raises
    ------
    ValueError
        If a part is not an integer or a range ``a-b`` with ``a <= b``.
    """
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        a, b = int(lo), int(hi) if hi else int(lo)
        if a > b or a < 0:
            raise ValueError(f"bad seed range {part!r}")
        seeds.extend(range(a, b + 1))
    return seeds


def hardware() -> str:
    """``"1 core of an AMD EPYC (CPU)"``: the CPU's model name and the threads torch may use
    (``OMP_NUM_THREADS``, else all cores)."""
    name = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    return f"{cores} core{'s' if cores > 1 else ''} of an {name} (CPU)"


def git_commit(path: Path, short: bool = True) -> str:
    """The commit checked out at ``path``, or ``""`` if it is not a git checkout."""
    cmd = ["git", "-C", str(path), "rev-parse", *(["--short"] if short else []), "HEAD"]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def run_one(dataset: str, split: str, seed: int, src: Path, data: Path, work: Path,
            extra: list[str]) -> dict:
    """One run of the official ``run.py``; its record for the results file.

    Raises
    ------
    RuntimeError
        If the run fails (the log's path is in the message).
    """
    work.mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)
    tag = f"{dataset}-{split}-seed{seed}"
    out, log = work / f"{tag}.json", work / "logs" / f"{tag}.log"
    out.unlink(missing_ok=True)
    args = [*RECIPES[dataset], "--domain", split, "--seed", str(seed), "--root", str(data),
            *extra]
    env = dict(os.environ, OFFICIAL_RESULT_JSON=str(out), OFFICIAL_SPLIT="grprune",
               TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", MPLBACKEND="Agg")
    start = time.time()
    with open(log, "w") as f:
        rc = subprocess.run([sys.executable, "run.py", *args], cwd=src, env=env, stdout=f,
                            stderr=subprocess.STDOUT).returncode
    if rc != 0 or not out.exists():
        raise RuntimeError(f"{tag} failed (exit {rc}); see {log}")
    res = json.loads(out.read_text())
    curve = res["curve"]
    best = max(range(len(curve)), key=lambda e: (curve[e][0], -e))  # first best, as sorted()
    side = json.loads((data / dataset.replace("-", "_") / "grprune.json").read_text())
    return {"dataset": dataset, "split": split, "seed": seed,
            "valid": round(100 * res["valid"], 4), "test": round(100 * res["test"], 4),
            "best_epoch": best, "epochs": len(curve), "split_sizes": res["split_sizes"],
            "split_hash": side["splits"][split]["hash"], "data_hash": side["graphs_hash"],
            "args": " ".join(args[:-2]),
            "official_commit": git_commit(src) or common.COMMIT[:7],
            "grprune_commit": git_commit(HERE), "hardware": hardware(),
            "seconds": round(time.time() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="ogbg-molbbbp", choices=sorted(RECIPES))
    p.add_argument("--split", action="append", choices=["scaffold", "size"],
                   help="split(s) to run (repeatable; default both)")
    p.add_argument("--seeds", default="0-3", help="e.g. 0-3 or 0,2")
    p.add_argument("--results", type=Path, default=common.RESULTS)
    p.add_argument("--extra", default="", help="more arguments for the official run.py "
                   "(a smoke test: --extra '--epochs 2'); such runs are not recorded")
    a = p.parse_args(argv)
    try:
        seeds = parse_seeds(a.seeds)
    except ValueError as err:
        p.error(str(err))
    src = Path(os.environ.get("OFFICIAL_SRC", "/work/official-src"))
    data = Path(os.environ.get("OFFICIAL_DATA", "/work/official-data"))
    work = Path(os.environ.get("OFFICIAL_WORK", "/work/official-work"))
    if not (src / "run.py").is_file():
        print(f"runs.py: {src} has no run.py; fetch and patch the official code (README.md)",
              file=sys.stderr)
        return 2
    if not (data / a.dataset.replace("-", "_") / "grprune.json").is_file():
        print(f"runs.py: no export under {data}; run export.py first", file=sys.stderr)
        return 2
    extra = a.extra.split()
    # seed after seed, both splits each: an interrupted session leaves both columns at n
    for seed in seeds:
        for split in a.split or ["scaffold", "size"]:
            done = {(r["dataset"], r["split"], r["seed"]) for r in common.read_results(a.results)}
            if not extra and (a.dataset, split, seed) in done:
                print(f"skip {a.dataset} {split} seed {seed}: in {a.results.name}")
                continue
            try:
                row = run_one(a.dataset, split, seed, src, data, work, extra)
            except RuntimeError as err:
                print(f"runs.py: {err}", file=sys.stderr)
                return 1
            print(f"{a.dataset} {split} seed {seed}: test {row['test']:.2f} at epoch "
                  f"{row['best_epoch']} (valid {row['valid']:.2f}), {row['seconds']:.0f} s",
                  flush=True)
            if not extra:
                common.append_result(row, a.results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
