"""How much of a sampled-evaluation cell is evaluation noise: one training per seed,
every epoch scored under several evaluation-noise keys and with M averaged draws.

A selector with ``selector.eval_mode=sample`` (the ``official`` preset, as the official
code) scores each epoch on one hard Gumbel mask per bond, its noise keyed by the run's
seed, the split and each graph (:func:`grprune.determinism.eval_seed`). Selection then
takes the epoch of the best validation score, so two epochs that tie within the noise can
swap, and the test score reported moves with them. This script trains each seed once (as
``grprune run`` does: the same configuration, the same training) and, after every
post-warm-up epoch, also scores valid and test

- under ``--keys`` - 1 other noise keys (``eval_seed(seed, "<split>#k<k>")``), one draw
  each: what the run would have reported with another draw of the same noise;
- with ``selector.eval_samples = --draws`` under the run's own key: the class
  probabilities averaged over M keyed masks,
  :math:`\\hat p(y \\mid G) = \\frac1M \\sum_{m=1}^{M} f_\\theta(G \\odot s^{(m)})`,
  :math:`s^{(m)}_e \\sim \\text{Gumbel-Softmax}(\\sigma(w_e), \\tau)` hard, a Monte Carlo
  estimate of the expected prediction under the selector's probabilities.

Evaluation forks its own random stream, so the extra scoring changes nothing that trains:
key 0's records equal the run's ``results.jsonl`` bit for bit (checked, and said, per seed).
For each key the selection is re-done over the trained epochs (the first best validation
score, warm-up epochs included where the preset selects them, ``train.select_warmup``),
so a key's reported test score is exactly what that run would have reported, up to early
stopping (the run stops on key 0's patience; with 100 epochs and patience 50 the runs
measured here trained every epoch).

Selection reads test only at the selected epoch, which is the first best validation score,
so at the time it trained it set a new best. A key's test score is therefore computed only
at epochs whose validation score beats every earlier one in the selection's pool (about a
tenth of the epochs; half the scoring time on GOOD-Motif size); elsewhere it is left empty
(NaN). Key 0's rows are the run's own records, complete.

Writes ``OUT.epochs.csv`` (seed, epoch, phase, key, valid, test; ×1) and ``OUT.md``: per
seed the reported test under each key (its sd: the evaluation-noise sd of one seed's
number) and under M draws; per cell the mean ± sd over seeds under the run's own key,
the mean within-seed noise variance as a share of the across-seed variance, and the cell
re-scored with M draws. A seed already in ``OUT.epochs.csv`` is skipped and an interrupted
one continues where it stopped (:func:`measure_seed`), so the command resumes. Usage::

    python -m benchmarks.accuracy.prune.evalnoise --data ogbg-molbbbp --split size \\
        --preset official --seeds 0-3 --keys 5 --draws 16 --runs runs/evalnoise \\
        --out benchmarks/accuracy/prune/evalnoise/evalnoise-molbbbp-size
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from grprune.trainer import Trainer

FIELDS = ["dataset", "split", "preset", "seed", "epoch", "phase", "key", "valid", "test",
          "commit"]


def fail(message: str) -> None:
    print(f"evalnoise.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_seeds(text: str) -> list[int]:
    """``0-3`` or ``0,2,5`` (or both, comma-separated) as a sorted list."""
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        try:
            out.update(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            fail(f"--seeds {text!r}: give ranges like 0-3 or lists like 0,2,5")
    if not out or len(out) > 100:
        fail(f"--seeds {text!r}: give 1 to 100 seeds")
    return sorted(out)


def key_seed(seed: int, split: str, key: int) -> int:
    """The evaluation seed of noise key ``key`` on ``split``: key 0 is the run's own
    (:func:`grprune.determinism.eval_seed` of ``split``), key k the seed of
    ``"<split>#k<k>"``."""
    from grprune.determinism import eval_seed
    return eval_seed(seed, split if key == 0 else f"{split}#k{key}")


def rows_path(run_dir: Path) -> Path:
    """Where a seed's rows wait until the seed is finished: beside its run directory
    (``<run>.evalnoise.csv``), rewritten whole after every epoch."""
    return run_dir.with_name(run_dir.name + ".evalnoise.csv")


def measure_seed(args, seed: int) -> list[dict]:
    """Train one seed and score every epoch under each key and with M draws.

    An interrupted seed resumes: its run directory continues from ``state.pt`` (as
    ``grprune run`` resumes) and the epochs already scored are read back from
    :func:`rows_path`. The trainer calls back after ``state.pt`` is written, so at most the
    last epoch it counts can lack its rows; that epoch is scored from the restored state
    before training goes on (scoring forks its own random stream, and the restore is redone
    by :meth:`Trainer.fit`)."""
    from grprune.record.runconfig import FeatureSpec
    from grprune.record.rundir import RunDir
    from grprune.resume import restore_state
    from grprune.run import load_config_dataset, plan_run, prepare_run_dir
    from grprune.trainer import Trainer
    plan = plan_run(data=args.data, split=args.split, preset=args.preset, reg=args.reg,
                    seed=seed, progress="none", overrides=args.H,
                    out=args.runs / f"{args.data}-{args.split}-{args.preset}-seed{seed}")
    saved = rows_path(plan.run_dir)
    rows: list[dict] = (pd.read_csv(saved, dtype={"key": str, "commit": str}).to_dict("records")
                        if saved.is_file() else [])
    status, state = prepare_run_dir(plan.cfg, plan.run_dir)
    done = {int(r["epoch"]) for r in rows}
    if status == "resume" and not set(range(state.n_records - 1)) <= done:
        # epochs whose weights are gone lack their rows: the seed starts over
        status, state = prepare_run_dir(plan.cfg, plan.run_dir, force=True)
    if status == "finished":
        if set(range(len(RunDir(plan.run_dir).record_lines()))) <= done:
            return rows
        status, state = prepare_run_dir(plan.cfg, plan.run_dir, force=True)
    if status == "fresh":
        rows = []
    dataset = load_config_dataset(plan.cfg)
    cfg = plan.cfg.with_features(FeatureSpec.of(dataset))
    trainer: Trainer | None = None
    from grprune.provenance import git_commit
    base = {"dataset": args.data, "split": args.split, "preset": args.preset, "seed": seed,
            "commit": git_commit() or "?"}

    select_warmup = bool(cfg.train.select_warmup)

    def best_valid(key: str) -> float:
        """The key's best validation score so far among the epochs selection may pick."""
        pool = [r["valid"] for r in rows if r["key"] == key
                and (select_warmup or r["phase"] != "warmup")]
        return max(pool, default=-math.inf)

    def scored(record) -> list[dict]:
        """The epoch's rows: key 0 as trained, the other keys and M draws scored now (test
        only where the key's validation score is a new best, see the module's docstring)."""
        assert trainer is not None
        warm = record.warmup
        own = {s: record.value(s, trainer.metric) for s in ("valid", "test")}
        head = {**base, "epoch": record.epoch, "phase": record.phase}
        out = [{**head, "key": "0", **own}]
        keyed = [(str(key), key, 1) for key in range(1, args.keys)]
        for name, key, draws in keyed + [(f"M{args.draws}", 0, args.draws)]:
            if warm:  # a warm-up epoch has no selector: every key scores as the run
                out.append({**head, "key": name, **own})
                continue
            valid = score(trainer, seed, key, draws, "valid")
            test = (score(trainer, seed, key, draws, "test") if valid > best_valid(name)
                    else math.nan)
            out.append({**head, "key": name, "valid": valid, "test": test})
        return out

    def on_epoch(record) -> None:
        rows.extend(scored(record))
        from grprune.record.files import atomic_write_bytes
        atomic_write_bytes(saved, pd.DataFrame(rows, columns=FIELDS)
                           .to_csv(index=False).encode())

    trainer = Trainer(cfg, dataset, plan.run_dir, on_epoch=on_epoch)
    RunDir(plan.run_dir).write_config(cfg)
    records = None
    if status == "resume":
        records = RunDir(plan.run_dir).resumed_records(state.n_records)
        rows[:] = [r for r in rows if int(r["epoch"]) < state.n_records]
        if records and records[-1].epoch not in done:
            restore_state(trainer, state)
            on_epoch(records[-1])
        print(f"evalnoise.py: seed {seed}: resuming after epoch {state.epoch}", flush=True)
    trainer.fit(resume=state, records=records)
    logged = RunDir(plan.run_dir).record_lines()
    same = [(r["valid"][trainer.metric], r["test"][trainer.metric]) for r in logged] == \
        [(r["valid"], r["test"]) for r in rows if r["key"] == "0"]
    print(f"evalnoise.py: seed {seed}: {len(logged)} epochs; key 0 equals the run's "
          f"results.jsonl: {same}", flush=True)
    if not same:
        fail(f"seed {seed}: key 0 differs from the run's own records: the extra scoring "
             "moved training")
    return rows


def score(trainer: Trainer, seed: int, key: int, draws: int, split: str) -> float:
    """The metric on ``split`` of the trainer's model now, with the selector on, under noise
    key ``key`` and ``draws`` averaged masks (each split has its own keyed stream, so
    scoring one does not move the other's noise)."""
    from grprune.evaluation import evaluate_batches
    selector = trainer.model.selector
    assert selector is not None, "a sampled evaluation needs a selector"
    # the frozen view with eval_samples = draws (checked as -H is), the run's own restored
    before = selector.replace_hparams({"eval_samples": draws})
    try:
        return evaluate_batches(trainer.model, trainer._batches(split), use_selector=True,
                                metric=trainer.metric,
                                num_classes=trainer.dataset.num_classes,
                                seed=key_seed(seed, split, key)).metric
    finally:
        selector.hp = before


def select(epochs: pd.DataFrame, select_warmup: bool) -> pd.Series:
    """The row of the first best validation score (the trainer's :class:`Best`)."""
    pool = epochs if select_warmup else epochs[epochs["phase"] != "warmup"]
    return pool.loc[pool["valid"].idxmax()]


def _sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else math.nan


def _picks(table: pd.DataFrame, select_warmup: bool) -> tuple[list[str], dict]:
    """The noise keys (the run's own first, then the M-draw keys) and, per seed and key,
    the selected epoch's row."""
    keys = sorted(table["key"].unique(), key=lambda k: (k.startswith("M"), k))
    picks = {seed: {k: select(g[g["key"] == k].sort_values("epoch"), select_warmup)
                    for k in keys}
             for seed, g in table.groupby("seed", sort=True)}
    return keys, picks


def summary(table: pd.DataFrame, select_warmup: bool) -> dict:
    """A cell's evaluation noise from ``OUT.epochs.csv`` rows (one split): ``n`` seeds,
    ``reported`` (mean, sd) under the run's own key, ``noise_sd`` (root mean within-seed
    variance of the reported test over the noise keys), ``share`` (that variance as a
    fraction of the across-seed variance of the reported test), ``draws`` M and
    ``rescored`` (mean, sd) with M averaged draws; scores ×100."""
    keys, picks = _picks(table, select_warmup)
    noise, averaged = [k for k in keys if not k.startswith("M")], [k for k in keys
                                                                    if k.startswith("M")]
    own = [100 * p["0"]["test"] for p in picks.values()]
    within = [statistics.variance([100 * p[k]["test"] for k in noise])
              for p in picks.values()]
    rescored = [100 * p[averaged[0]]["test"] for p in picks.values()]
    total = statistics.variance(own) if len(own) > 1 else math.nan
    return {"n": len(own), "keys": len(noise), "reported": (statistics.mean(own), _sd(own)),
            "noise_sd": math.sqrt(statistics.mean(within)),
            "share": statistics.mean(within) / total if total else math.nan,
            "draws": int(averaged[0][1:]), "rescored": (statistics.mean(rescored),
                                                        _sd(rescored))}


def report(table: pd.DataFrame, select_warmup: bool, header: str) -> str:
    """``OUT.md``: per seed the reported test under each key and with M draws (selected
    epoch in brackets), then the cell's :func:`summary`."""
    keys, picks = _picks(table, select_warmup)
    noise = [k for k in keys if not k.startswith("M")]
    lines = [header, "", "| seed | " + " | ".join(
        f"key {k}" if k in noise else f"M = {k[1:]}" for k in keys[:len(noise)])
        + " | sd over keys | " + " | ".join(f"M = {k[1:]}" for k in keys[len(noise):])
        + " |", "|---" * (len(keys) + 2) + "|"]
    for seed, p in picks.items():
        cell = {k: f"{100 * p[k]['test']:.2f} (ep {int(p[k]['epoch'])})" for k in keys}
        sd = _sd([100 * p[k]["test"] for k in noise])
        lines.append(f"| {seed} | " + " | ".join(cell[k] for k in noise) + f" | {sd:.2f} | "
                     + " | ".join(cell[k] for k in keys[len(noise):]) + " |")
    s = summary(table, select_warmup)
    lines += ["", f"- reported (the run's own key): {s['reported'][0]:.2f} ± "
              f"{s['reported'][1]:.2f} (n = {s['n']})",
              f"- evaluation-noise sd of one seed's number (root mean within-seed variance "
              f"over {s['keys']} keys): {s['noise_sd']:.2f}",
              f"- its share of the across-seed variance: {s['share']:.0%}",
              f"- re-scored with {s['draws']} averaged draws: {s['rescored'][0]:.2f} ± "
              f"{s['rescored'][1]:.2f} (n = {s['n']})"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--split", required=True)
    ap.add_argument("--preset", default="official")
    ap.add_argument("--reg", default="size,eps-align")
    ap.add_argument("--seeds", default="0-3")
    ap.add_argument("--keys", type=int, default=5, help="noise keys, the run's own first [5]")
    ap.add_argument("--draws", type=int, default=16, help="M of the averaged score [16]")
    ap.add_argument("-H", action="append", default=[], help="-H key=value, as grprune run")
    ap.add_argument("--runs", type=Path, default=Path("runs/evalnoise"))
    ap.add_argument("--out", type=Path, required=True, help="writes OUT.epochs.csv, OUT.md")
    args = ap.parse_args(argv)
    from grprune.record.files import atomic_write_bytes
    from grprune.run import plan_run
    if not 2 <= args.keys <= 64 or not 1 <= args.draws <= 256:
        fail("--keys takes 2 to 64 and --draws 1 to 256")
    epochs_csv = args.out.with_suffix(".epochs.csv")
    table = (pd.read_csv(epochs_csv, dtype={"key": str}) if epochs_csv.is_file()
             else pd.DataFrame(columns=FIELDS))
    for seed in parse_seeds(args.seeds):
        if ((table["seed"] == seed) & (table["split"] == args.split)).any():
            print(f"evalnoise.py: seed {seed} already measured", flush=True)
            continue
        rows = measure_seed(args, seed)
        table = pd.concat([table, pd.DataFrame(rows, columns=FIELDS)], ignore_index=True)
        atomic_write_bytes(epochs_csv, table.to_csv(index=False).encode())
    plan = plan_run(data=args.data, split=args.split, preset=args.preset, reg=args.reg,
                    overrides=args.H)
    commit = "+".join(sorted(set(map(str, table["commit"]))))
    from grprune.provenance import cpu_model
    hardware = f"{cpu_model()} (CPU), one thread"
    header = (f"# Evaluation noise: {args.data} {args.split}, `{args.preset}`, "
              f"{args.reg}\n\nWritten by `benchmarks/accuracy/prune/evalnoise.py` "
              f"(--keys {args.keys} --draws {args.draws}); training and scoring at {commit}, "
              f"{hardware}; test ×100 "
              f"at the selected epoch (ep) under each evaluation-noise key (key 0: the "
              f"run's own, what `grprune run` reports) and with M averaged draws under "
              f"key 0. The weights are the same in every column of a row.")
    md = report(table[table["split"] == args.split], bool(plan.cfg.train.select_warmup),
                header)
    atomic_write_bytes(args.out.with_suffix(".md"), md.encode())
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
