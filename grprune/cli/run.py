"""``grprune run``: train one configuration and print its metrics."""

from __future__ import annotations

from pathlib import Path

import click

from grprune.cli.options import (log_option, model_options, option, progress_option,
                                 training_options)
from grprune.progress import epoch_progress, print_summary


def _log(msg: str) -> None:
    """One ``grprune: ...`` line on stderr."""
    click.echo(f"grprune: {msg}", err=True)


def _reason_kind(reason: str) -> str:
    """A skipped row's reason in a few words, for counting rows by reason."""
    for words, kind in (("too large", "too large"), ("parse", "unparsable SMILES"),
                        ("missing label", "missing label"), ("not 0 or 1", "label not 0/1"), ("featurizer", "not featurizable"),
                        ("no atoms", "no atoms"), ("SMILES", "missing SMILES")):
        if words in reason:
            return kind
    return reason[:40]


def skipped_rows_line(info: dict, dataset: str) -> str:
    """One line when the data's source rows were skipped (unparsable SMILES, bad labels):
    how many, by reason, and where to see them; ``""`` when none were."""
    n = info.get("n_skipped") or 0
    if not n:
        return ""
    from collections import Counter
    reasons = Counter(_reason_kind(str(b.get("reason", "?"))) for b in info.get("bad_rows", []))
    by = "; ".join(f"{k} {v}" for k, v in reasons.most_common())
    total = info.get("n_source_rows")
    from grprune.data.registry import DATASETS
    from grprune.data.registry import FileDatasetSource
    own_file = issubclass(DATASETS.get(dataset), FileDatasetSource)  # molecule-csv, dgl-graphs
    path = " -H data.path=..." if own_file else ""
    return (f"grprune: {n}{f' of {total}' if total else ''} source rows were skipped"
            f"{f' ({by})' if by else ''}; `grprune data info {dataset}{path}` lists them")


@click.command()
@model_options("run")
@training_options("run")
@option("--deterministic/--no-deterministic", default=None,
        help="same seed, same numbers, also on a busy machine: MKL's reproducible mode and "
             "AVX2 kernels on the CPU, deterministic kernels on CUDA [default: on]")
@option("--out", type=click.Path(path_type=Path), default=None,
        help="run directory [default: runs/<dataset>/<method>-seed<seed>-<hash>]")
@option("--force", is_flag=True, default=False,
        help="re-run even if the run directory holds a finished run")
@log_option("run")
@progress_option("run")
@option("--json", "as_json", is_flag=True, default=False, help="print the summary as JSON")
def run(selector, reg, data, split, shift, encoder, preset, epochs, seed, overrides, device,
        root, download, config_file, deterministic, out, force, logs, progress,
        as_json) -> None:
    """Train a selector + GNN with the given regularizers and report metrics.

    Each epoch prints a line such as 'epoch 82 (83/100) [train] loss 0.3121 valid
    0.9568 test 0.6753 train kept 0.85 * ETA 0:00:32': epoch 82 counted from 0 (as
    results.jsonl and the table's best epoch), the 83rd of 100; [warmup] or [train]
    (ERM warm-up, or the selector training); the training loss; the metric on the
    valid and test parts; train kept, the fraction of edges the selector kept in
    training; * for a new best valid; the ETA from the last 5 epochs. A narrow
    terminal drops fields from the right but keeps the epoch, * and ETA. The final
    table gives the epochs run (and the patience when early stopping ended the run);
    a note line follows when the selected epoch is an ERM warm-up epoch (that model
    does not use the selector) and when early stopping ended the run.

    \b
    Example:
      grprune run --selector gumbel-gin --reg size,eps-align --data ogbg-molbbbp
      grprune run --reg none --data ogbg-molbbbp --seed 1        # ERM baseline
    """
    from grprune.errors import RunPruned
    from grprune.run import execute, plan_run
    from grprune.trackers import RunTrackers, parse_logs
    from grprune.tune.trial import trial_hook

    specs = parse_logs(logs)  # a missing tracker package: one line, exit 2, before training
    plan = plan_run(data=data, selector=selector, reg=reg, encoder=encoder, preset=preset,
                    config_file=config_file, split=split, shift=shift, epochs=epochs,
                    seed=seed, device=device, root=root, download=download,
                    progress=progress, deterministic=deterministic, overrides=overrides,
                    out=out)
    cfg, run_dir = plan.cfg, plan.run_dir
    trackers, trial = RunTrackers(specs, run_dir), trial_hook(run_dir)
    with epoch_progress(cfg.train.progress, cfg.train.epochs, plan.title, run_dir,
                        log=_log) as show:
        def on_epoch(record) -> None:
            show(record)
            trackers.on_epoch(record)
            if trial is not None:
                trial(record)  # a tune trial: report, maybe prune (raises RunPruned)
        try:
            status, summary = execute(cfg, run_dir, force=force, on_epoch=on_epoch, log=_log)
        except RunPruned as exc:
            trackers.end(None)
            _log(str(exc))
            return
    if status != "finished":
        trackers.end(summary)
    if status == "finished":
        _log(f"{run_dir} already holds this finished run; nothing to do "
             f"(use --force to re-run)")
    skipped = skipped_rows_line(dict(summary.dataset_info or {}), cfg.data.name)
    if skipped:
        click.echo(skipped, err=True)
    if as_json:
        from grprune.record.files import to_json
        click.echo(to_json(summary.to_dict()))
    else:
        print_summary(summary, run_dir, status)
