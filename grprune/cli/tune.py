"""``grprune tune``: an Optuna search over one method's hyperparameters."""

from __future__ import annotations

import time
from pathlib import Path

import click

from grprune.cli.options import (check_launcher_options, launcher_options, log_option,
                                 model_options, option, progress_option, training_options)
from grprune.errors import GrpruneError


class TuneDisplay:
    """One plain line per trial start and end on stderr (``--progress none``: nothing)."""

    def __init__(self, mode: str, root: Path, total: int, metric: str) -> None:
        self.quiet, self.root, self.total, self.metric = mode == "none", root, total, metric
        self.t0 = time.time()

    def _echo(self, text: str) -> None:
        if not self.quiet:
            click.echo(text, err=True)

    def start(self, number: int, run_dir: Path, params: dict) -> None:
        values = " ".join(f"{k}={v}" for k, v in params.items())
        self._echo(f"tune: trial {number} start {run_dir.relative_to(self.root).as_posix()} "
                   f"{values}")

    def end(self, number: int, state: str, value, detail: str, secs: float) -> None:
        if state == "COMPLETE":
            what = f"finished, valid {self.metric} {value:.4f}"
        elif state == "PRUNED":
            what = f"pruned {detail}"
        else:
            what = f"FAILED: {detail}"
        self._echo(f"tune: trial {number} {what} ({secs:.1f} s)")


def print_table(rows, best, metric: str) -> None:
    """The trials as a table on stdout, the best marked."""
    from rich.console import Console
    from rich.table import Table

    import sys
    table = Table(title=f"trials (valid {metric})")
    keys = sorted({k for r in rows for k in r.params})
    for col in ("trial", "state", "valid", "epochs", *keys, "run dir"):
        table.add_column(col, overflow="fold")
    for r in rows:
        mark = " *" if best is not None and r.number == best.number else ""
        table.add_row(str(r.number), r.state.lower(),
                      "-" if r.value is None else f"{r.value:.4f}{mark}", str(r.epochs),
                      *[str(r.params.get(k, "-")) for k in keys], r.run_dir)
    Console(width=None if sys.stdout.isatty() else 200).print(table)


@click.command("tune")
@model_options("tune")
@training_options("tune")
@option("--trials", type=click.IntRange(min=1), default=None,
        help="end with this many configurations trained in the study, finished or pruned "
             "(failed trials and repeated configurations do not count) [default with "
             "--sampler grid: the grid's size]")
@option("--sampler", type=click.Choice(["tpe", "random", "grid"]), default="tpe",
        show_default=True, help="Optuna sampler; grid: the space's grid exhaustively")
@option("--sampler-seed", type=int, default=0, show_default=True,
        help="seed of the sampler (the runs' own seed is --seed)")
@option("--pruner", type=click.Choice(["median", "hyperband", "none"]), default="median",
        show_default=True, help="stop unpromising trials on their validation metric, "
                                "checked once per epoch")
@option("--prune-after", type=click.IntRange(min=0), default=None, metavar="EPOCHS",
        help="prune no trial before this epoch [default: the preset's ERM warm-up epochs, "
             "and at least a quarter of --epochs]")
@option("--space", "space_file", type=click.Path(path_type=Path), default=None,
        metavar="FILE", help="YAML search space: -H key -> [choices] or {low, high, log, "
                             "step, type} [default: the parts' declared spaces, as sweep "
                             "--search default; -H key=v1,v2 adds choices]")
@option("--storage", default=None, metavar="URL",
        help="Optuna storage: sqlite:///path.db, postgresql://..., mysql://... (one URL "
             "shared by several machines runs one study) [default: sqlite:///OUT/study.db]")
@option("--study", default="tune", show_default=True, help="the study's name in the storage")
@option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
        help="trials at once: local child processes, or the CPUs of the local Ray instance "
             "(with --cpus-per-run); with --address, Ray tasks in flight")
@launcher_options
@option("--out", type=click.Path(path_type=Path), default=Path("runs/tune"),
        show_default=True, metavar="DIR",
        help="tune directory: one run directory per trial (<out>/<dataset>/<method>-seed"
             "<seed>-<hash>), sweep.json, best.yaml, trials.csv, history.png, "
             "importances.png, and the default study.db")
@log_option("tune")
@progress_option("tune")
@click.pass_context
def tune(ctx, **params) -> None:
    """Search one method's hyperparameters with Optuna; each trial is a run directory.

    The objective is the validation metric at the run's own selection epoch (summary.json
    valid), never test, maximized or minimized as the metric says. Trials are pruned
    on the validation metric of each epoch. Killed at any moment, the same command
    continues the study; it ends with exactly --trials configurations trained, finished or
    pruned (a trial that repeats a configuration is told its result, not counted). Exit
    code 1 when a trial failed, 2 on bad input, 130 on Ctrl-C.

    \b
    Examples:
      grprune tune --data ogbg-molbbbp --reg size,eps-align --trials 20 --workers 2 \\
                   --out runs/tune-prune
      grprune tune --data ogbg-molbbbp --reg none --space erm.yaml --trials 20
      grprune tune --data good-motif --sampler grid --pruner median --out runs/grid
      grprune tune ... --storage postgresql://user@db/grprune --study prune-bbbp
      grprune tune ... --launcher ray --address auto --storage postgresql://db/grprune
    """
    from grprune.trackers import parse_logs
    from grprune.tune.setup import base_and_space, track
    from grprune.tune.spec import TuneSpec
    from grprune.tune.study import Tuner

    try:
        import optuna  # noqa: F401
    except ImportError:
        raise GrpruneError("grprune tune needs the optuna package: "
                           "pip install 'grprune[tune]'") from None
    from grprune.cli.plugins import child_env, loaded_plugins
    check_launcher_options(params)
    logs = parse_logs(params["logs"])
    root = Path(params["out"]).absolute()
    if root.exists() and not root.is_dir():
        raise GrpruneError(f"--out {params['out']} exists and is not a directory")
    if not str(params["study"]).strip():
        raise GrpruneError("--study is empty: give the study a name")
    base, space = base_and_space(params, params["space_file"])
    spec = TuneSpec(base=base, space=space, root=root, trials=params["trials"],
                    sampler=params["sampler"], pruner=params["pruner"],
                    storage=params["storage"], study=params["study"],
                    workers=params["workers"], seed=params["sampler_seed"],
                    command=["grprune", "tune", *_argv()],
                    env=child_env(loaded_plugins(ctx)), launcher=params["launcher"],
                    address=params["address"], cpus_per_run=params["cpus_per_run"],
                    prune_after=params["prune_after"])
    display = TuneDisplay(params["progress"] or "auto", root, 0, "")
    tuner = Tuner(spec, on_start=display.start, on_end=display.end)
    display.metric, display.total = tuner.metric, spec.trials or 0
    uri = track(spec, logs, tuner.study)
    display._echo(f"tune: study {spec.study!r} in {spec.storage_url}: {spec.trials} trials, "
                  f"{tuner.direction} valid {tuner.metric}, {len(space.axes)} keys "
                  f"({', '.join(space.axes)}), {spec.sampler} sampler, {spec.pruner} pruner "
                  f"(none before epoch {tuner.prune_after}), "
                  f"{spec.launcher} launcher, {spec.workers} "
                  f"worker{'s' * (spec.workers != 1)}")
    try:
        tuner.run()
    except KeyboardInterrupt:
        click.echo("grprune: tune interrupted; run the same command again to continue the "
                   "study", err=True)
        ctx.exit(130)
    report_end(tuner, uri)
    if tuner.failures:
        ctx.exit(1)


def report_end(tuner, uri: str | None) -> None:
    """What the end of ``grprune tune`` prints and writes: the table of trials,
    ``trials.csv``, the plots, the warnings (warm-up selections, a study ended short), the
    counts, ``best.yaml``; and the end of the MLflow parent run (``uri``)."""
    from grprune.tune.report import (best_row, trial_rows, warmup_note, write_best_yaml,
                                     write_plots, write_trials_csv)
    from grprune.tune.setup import end_tracking
    spec, root = tuner.spec, tuner.spec.root
    rows = trial_rows(tuner.study, root)
    best = best_row(tuner.study, rows)
    end_tracking(uri, tuner.study, best.value if best else None)
    print_table(rows, best, tuner.metric)
    write_trials_csv(root, rows)
    for note in write_plots(tuner.study, root):
        click.echo(f"tune: {note}", err=True)
    if (warm := warmup_note(rows, root)) is not None:
        click.echo(f"tune: warning: {warm}", err=True)
    counts = {s: sum(r.state == s for r in rows) for s in ("COMPLETE", "PRUNED", "FAIL")}
    repeats = (f" ({tuner.repeated} of them repeated a configuration and were told its "
               f"result)" if tuner.repeated else "")
    click.echo(f"tune: {counts['COMPLETE']} finished, {counts['PRUNED']} pruned, "
               f"{counts['FAIL']} failed trials in {root}{repeats}")
    if tuner.note:
        click.echo(f"tune: ended with {tuner.counted()} of {spec.trials} configurations: "
                   f"{tuner.note}", err=True)
    if best is not None:
        path = write_best_yaml(root, best)
        click.echo(f"best: trial {best.number}, valid {tuner.metric} {best.value:.4f}, "
                   f"{best.run_dir}; configuration: {path} (grprune run --config {path})")


def _argv() -> list[str]:
    """This command's arguments after ``tune`` (for ``sweep.json``)."""
    import sys
    args = sys.argv[1:]
    return args[args.index("tune") + 1:] if "tune" in args else args

