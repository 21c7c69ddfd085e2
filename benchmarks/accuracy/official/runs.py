"""Run the patched official PrunE code on the exported data, seed after seed, and append
each run's result to ``results.jsonl``.

Run with the official code's venv, from the repository root (it needs numpy only; the training runs in a
subprocess of the same interpreter)::

    OMP_NUM_THREADS=1 nice -n 15 /work/official-venv/bin/python \\
        -m benchmarks.accuracy.official.runs --split scaffold --seeds 0-3
    OMP_NUM_THREADS=1 nice -n 19 /work/official-venv/bin/python \\
        -m benchmarks.accuracy.official.runs --dataset good-motif --split basis --seeds 0

Resumable: a (dataset, split, seed) already in the results file is skipped, and a run
writes its record only when it has finished (the official ``run.py`` writes its numbers
to a temp file that is renamed, then this script appends them atomically). Each run's
log goes to ``$OFFICIAL_WORK/logs/``.

Resumable inside a run too: each run saves a checkpoint at the end of every epoch
(``$OFFICIAL_WORK/checkpoints/<dataset>-<split>-seed<seed>.pt``, ``checkpoint_path``;
``OFFICIAL_CHECKPOINT``, ``checkpoint.py``). A run whose checkpoint is there goes on from
the epoch after it (the output says ``resume``, the log is appended to) and gives the
curve an uninterrupted run gives; the checkpoint is removed once the result is recorded.
A resumed record's ``seconds`` is the last process's time only.

Environment: ``OFFICIAL_SRC`` (the patched checkout, default ``/work/official-src``),
``OFFICIAL_DATA`` (``export.py``'s root, default ``/work/official-data``),
``OFFICIAL_WORK`` (logs and temp files, default ``/work/official-work``);
``OFFICIAL_HARDWARE`` and ``GRPRUNE_COMMIT`` name the hardware and grprune's commit where
they cannot be read (a GPU run from a copy without ``.git``: ``benchmarks/device.sh``).
Each run gets ``OFFICIAL_SPLIT=grprune`` (molbbbp size), ``OFFICIAL_EXPORT=grprune``
(GOOD-Motif: ``good_export.load_good``, this folder on ``PYTHONPATH``) and
``OFFICIAL_RESULT_JSON`` and ``OFFICIAL_CHECKPOINT`` (``patch.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.accuracy.official import common

HERE = Path(__file__).resolve().parent
#: the repository root: on the official run.py's PYTHONPATH, so that ``good_export`` (which
#: it imports from :data:`HERE`) imports ``benchmarks.accuracy.official.common``
ROOT = HERE.parents[2]

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
    # the README's GOOD-Motif command (its "--device 0" is the default); run.py's motif
    # branch then sets nclass 3, nfeat 1, nlayers 3 (over --nlayers 4) and metric acc
    "good-motif": ["--dataset", "goodmotif", "--shift", "covariate", "--batch_size", "64",
                   "--base_gnn", "gin", "--early_stop_epochs", "50", "--nhid", "128",
                   "--epochs", "100", "--pretraining_epochs", "10", "--nlayers", "4",
                   "--edge_gnn_layers", "2", "--edge_gnn", "gin", "--edge_uniform_penalty",
                   "0.001", "--edge_prob_thres", "90", "--edge_budget", "0.85",
                   "--edge_penalty", "10", "--with_bn", "--dropout", "0.0"],
}
#: the splits of each dataset, in the order a seed runs them
SPLITS = {"ogbg-molbbbp": ("scaffold", "size"), "good-motif": ("basis", "size")}


def export_dir(data: Path, dataset: str, split: str) -> Path:
    """The export folder of one (dataset, split): ``ogbg_molbbbp``, ``good_motif_basis``."""
    base = dataset.replace("-", "_")
    return data / (base if dataset == "ogbg-molbbbp" else f"{base}_{split}")


#: the most seeds one call runs (each run takes minutes to hours)
MAX_SEEDS = 1000


def parse_seeds(text: str) -> list[int]:
    """``"0-3"`` -> ``[0, 1, 2, 3]``; ``"0,2"`` -> ``[0, 2]``; at most :data:`MAX_SEEDS`
    seeds, counted before any list is built.

    Raises
    ------
    ValueError
        If a part is not an integer or a range ``a-b`` with ``0 <= a <= b``, or the seeds
        are more than :data:`MAX_SEEDS` (the message quotes at most 60 characters).
    """
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        shown = repr(part if len(part) <= 60 else part[:57] + "...")
        if len(lo) > 18 or len(hi) > 18:  # int() of 4,300 digits fails; 10**18 seeds anyway
            raise ValueError(f"bad seed range {shown}: more than {MAX_SEEDS:,} seeds" if hi
                             else f"bad seed {shown}: a seed has at most 18 digits")
        try:
            a, b = int(lo), int(hi) if hi else int(lo)
        except ValueError:
            raise ValueError(f"bad seed range {shown}: expected N or A-B") from None
        if a > b or a < 0:
            raise ValueError(f"bad seed range {shown}")
        if len(seeds) + (b - a + 1) > MAX_SEEDS:
            raise ValueError(f"--seeds {text[:60]!r} names more than {MAX_SEEDS:,} seeds; "
                             f"run at most {MAX_SEEDS:,} at a time")
        seeds.extend(range(a, b + 1))
    return seeds


def hardware() -> str:
    """``"1 core of an AMD EPYC (CPU)"``: the CPU's model name and the threads torch may use
    (``OMP_NUM_THREADS``, else all cores); ``$OFFICIAL_HARDWARE`` when set (a GPU run:
    ``benchmarks/device.sh official-motif`` names the card)."""
    if os.environ.get("OFFICIAL_HARDWARE"):
        return os.environ["OFFICIAL_HARDWARE"]
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


def checkpoint_path(work: Path, dataset: str, split: str, seed: int, extra: list[str]) -> Path:
    """The checkpoint file of one run: ``$OFFICIAL_WORK/checkpoints/<dataset>-<split>-seed<seed>.pt``,
    with ``-x<hash of extra>`` before ``.pt`` for a run with ``--extra`` arguments (a smoke run
    never resumes a recorded run's checkpoint, nor the reverse)."""
    tag = f"{dataset}-{split}-seed{seed}"
    if extra:
        tag += "-x" + hashlib.sha256(" ".join(extra).encode()).hexdigest()[:8]
    return work / "checkpoints" / f"{tag}.pt"


def run_one(dataset: str, split: str, seed: int, src: Path, data: Path, work: Path,
            extra: list[str]) -> dict:
    """One run of the official ``run.py``; its record for the results file: ``valid`` and
    ``test`` are the official code's metric ×100 (ROC-AUC on ogbg-molbbbp, accuracy on
    GOOD-Motif) at the epoch it selects.

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
    ckpt = checkpoint_path(work, dataset, split, seed, extra)
    ckpt.parent.mkdir(exist_ok=True)
    resumed = ckpt.exists()
    if resumed:
        print(f"resume {tag} from {ckpt} (log appended to {log})", flush=True)
    args = [*RECIPES[dataset], "--domain", split, "--seed", str(seed), "--root", str(data),
            *extra]
    path = os.pathsep.join(p for p in (str(HERE), str(ROOT), os.environ.get("PYTHONPATH", ""))
                           if p)
    env = dict(os.environ, OFFICIAL_RESULT_JSON=str(out), OFFICIAL_CHECKPOINT=str(ckpt),
               OFFICIAL_SPLIT="grprune",
               OFFICIAL_EXPORT="grprune", PYTHONPATH=path,
               TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", MPLBACKEND="Agg")
    start = time.time()
    with open(log, "a" if resumed else "w") as f:
        rc = subprocess.run([sys.executable, "run.py", *args], cwd=src, env=env, stdout=f,
                            stderr=subprocess.STDOUT).returncode
    if rc != 0 or not out.exists():
        raise RuntimeError(f"{tag} failed (exit {rc}); see {log}")
    res = json.loads(out.read_text())
    curve = res["curve"]
    best = max(range(len(curve)), key=lambda e: (curve[e][0], -e))  # first best, as sorted()
    side = json.loads((export_dir(data, dataset, split) / "grprune.json").read_text())
    split_hash = side["split_hash"] if "split_hash" in side else side["splits"][split]["hash"]
    return {"dataset": dataset, "split": split, "seed": seed,
            "valid": round(100 * res["valid"], 4), "test": round(100 * res["test"], 4),
            "best_epoch": best, "epochs": len(curve), "split_sizes": res["split_sizes"],
            "split_hash": split_hash, "data_hash": side["graphs_hash"],
            "args": " ".join(args[:-2]),
            "official_commit": git_commit(src) or common.COMMIT[:7],
            "grprune_commit": git_commit(HERE) or os.environ.get("GRPRUNE_COMMIT", ""),
            "hardware": hardware(),
            "seconds": round(time.time() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="ogbg-molbbbp", choices=sorted(RECIPES))
    p.add_argument("--split", action="append", choices=["scaffold", "size", "basis"],
                   help="split(s) to run (repeatable; default both of the dataset: "
                        "scaffold, size for ogbg-molbbbp; basis, size for good-motif)")
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
    splits = a.split or list(SPLITS[a.dataset])
    bad = [s for s in splits if s not in SPLITS[a.dataset]]
    if bad:
        p.error(f"{a.dataset} has no split {bad[0]!r}; choose from "
                f"{', '.join(SPLITS[a.dataset])}")
    for split in splits:
        if not (export_dir(data, a.dataset, split) / "grprune.json").is_file():
            print(f"runs.py: no export of {a.dataset} {split} under {data}; run export.py "
                  f"--dataset {a.dataset} first", file=sys.stderr)
            return 2
    try:
        return _run_seeds(a.dataset, splits, seeds, src, data, work, a.results,
                          a.extra.split())
    except ValueError as err:  # a malformed results file: its line and what it lacks
        print(f"runs.py: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # an unwritable results file, work folder or log
        why = ("it is a file, where a folder is needed" if isinstance(err, FileExistsError)
               else err.strerror or str(err))
        print(f"runs.py: cannot write {err.filename or a.results}: {why}", file=sys.stderr)
        return 2


def _run_seeds(dataset: str, splits: list[str], seeds: list[int], src: Path, data: Path,
               work: Path, results: Path, extra: list[str]) -> int:
    """The runs of :func:`main`, seed after seed, both splits each (an interrupted session
    leaves both columns at n); exit status 1 when a run fails.

    Raises
    ------
    ValueError
        A malformed results file (:func:`common.read_results`).
    OSError
        A file that cannot be written.
    """
    if not extra:  # a malformed file is refused by the loop's first read, before any run
        results.parent.mkdir(parents=True, exist_ok=True)
        with open(str(results) + ".lock", "a"):  # unwritable: refused before any run
            pass
    for seed in seeds:
        for split in splits:
            done = {(r["dataset"], r["split"], r["seed"]) for r in common.read_results(results)}
            if not extra and (dataset, split, seed) in done:
                print(f"skip {dataset} {split} seed {seed}: in {results.name}")
                continue
            try:
                row = run_one(dataset, split, seed, src, data, work, extra)
            except RuntimeError as err:
                print(f"runs.py: {err}", file=sys.stderr)
                return 1
            print(f"{dataset} {split} seed {seed}: test {row['test']:.2f} at epoch "
                  f"{row['best_epoch']} (valid {row['valid']:.2f}), {row['seconds']:.0f} s",
                  flush=True)
            if not extra:
                common.append_result(row, results)
            # recorded (or a smoke run, finished): its checkpoint is no longer needed
            ckpt = checkpoint_path(work, dataset, split, seed, extra)
            for f in (ckpt, ckpt.with_name(ckpt.name + ".tmp")):
                f.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
