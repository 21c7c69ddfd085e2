"""``grprune sweep``: expand a grid of ``grprune run`` configurations and run them all."""

from __future__ import annotations

import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

import click

from grprune.record.rundir import RunDir
from grprune.cli.options import (check_launcher_options, launcher_options, log_option,
                                 model_options, option, progress_option, training_options)
from grprune.cli.plugins import child_env, loaded_plugins
from grprune.errors import GrpruneError

_STATUS_STYLE = {"finished": "green", "failed": "red", "interrupted": "yellow",
                 "pending": "", "running": "cyan", "foreign": "magenta"}


class SweepDisplay:
    """Sweep progress: a rich bar with done / running / failed counts on a terminal,
    plain lines otherwise, or nothing.

    Parameters
    ----------
    mode : str
        ``auto`` (rich when stderr is a terminal, else plain), ``rich``, ``plain`` or
        ``none``.
    total : int
        Runs to do.
    root : Path
        The sweep root; run directories are shown relative to it.
    """

    def __init__(self, mode: str, total: int, root: Path) -> None:
        if mode == "auto":
            mode = "rich" if sys.stderr.isatty() else "plain"
        self.mode, self.total, self.root = mode, total, root
        self.done = self.failed = self.running = self.started = 0
        self.progress = None
        if mode == "rich" and total:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)
            self.progress = Progress(TextColumn("[bold]sweep"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(),
                                     TextColumn("{task.fields[info]}"),
                                     console=Console(stderr=True))
            self.task = self.progress.add_task("sweep", total=total, info=self._info())
            self.progress.start()

    def _info(self) -> str:
        failed = f"[red]failed {self.failed}[/red]" if self.failed else "failed 0"
        return f"done {self.done}  running {self.running}  {failed}"

    def _rel(self, job) -> str:
        try:
            return job.run_dir.relative_to(self.root).as_posix()
        except ValueError:
            return str(job.run_dir)

    def _print(self, text: str, markup: bool = False) -> None:
        """A line: rich markup is read only with ``markup`` (user text escaped there)."""
        if self.mode == "rich" and self.progress is not None:
            self.progress.console.print(text, highlight=False, markup=markup)
        elif self.mode == "plain":
            click.echo(text, err=True)

    def start(self, job) -> None:
        """A run was started."""
        self.running += 1
        self.started += 1
        if self.mode == "plain":
            click.echo(f"sweep: start [{self.started}/{self.total}] {self._rel(job)}", err=True)
        self._update()

    def end(self, job, ok: bool, message: str) -> None:
        """A run ended (``ok``) or failed (``message``)."""
        from grprune.record.summary import RunSummary
        self.running -= 1
        secs = time.time() - job.started
        if ok:
            self.done += 1
            s = RunDir(job.run_dir).summary() or RunSummary.from_dict({})
            scores = "".join(f", {part} {s.metric} {s.score(part):.4f}"
                             for part in ("valid", "test") if s.score(part) is not None)
            self._print(f"sweep: done [{self.done + self.failed}/{self.total}] "
                        f"{self._rel(job)} ({secs:.1f} s{scores})")
        else:
            self.failed += 1
            if self.mode == "rich":
                from rich.markup import escape
                self._print(f"sweep: [red]FAILED[/red] {escape(self._rel(job))}: "
                            f"{escape(message)}", markup=True)
            else:
                self._print(f"sweep: FAILED [{self.done + self.failed}/{self.total}] "
                            f"{self._rel(job)}: {message}")
        self._update()

    def foreign(self, job, detail: str) -> None:
        """A started run found another process running it (a second sweep took it)."""
        self.running -= 1
        self.total -= 1
        self._print(f"sweep: not run {self._rel(job)}: {detail}; left alone")
        self._update()

    def _update(self) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=self.total,
                                 completed=self.done + self.failed, info=self._info())

    def close(self) -> None:
        """Stop the live display."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def reuse_roots(given: Sequence[Path], root: Path) -> list[Path]:
    """``--reuse`` values as directories: a glob pattern (``'runs/paper-*'``) gives the
    directories it matches, none if it matches none; a plain path is kept (refused later if
    it is not a directory). ``root`` itself is left out."""
    import glob
    out: list[Path] = []
    for item in given:
        text = str(item)
        found = ([Path(p) for p in sorted(glob.glob(text)) if Path(p).is_dir()]
                 if glob.has_magic(text) else [Path(text)])
        out += [p for p in found if p.absolute() != root and p not in out]
    return out


def _command(params: dict, plugins: Sequence[str] = ()) -> list[str]:
    """The sweep's command line, rebuilt from its options (environment variables
    included) and its plugins, for ``sweep.json``."""
    args = ["grprune"]
    for plugin in plugins:
        args += ["--plugin", plugin]
    args.append("sweep")
    if params["spec"] is not None:
        args += ["--spec", str(params["spec"])]
    for name in ("selector", "data", "split", "shift", "encoder", "preset", "epochs", "seeds"):
        if params[name] is not None:
            args += [f"--{name}", str(params[name])]
    for reg in params["reg"]:
        args += ["--reg", reg]
    for o in params["overrides"]:
        args += ["-H", o]
    if params["search"] != "none":
        args += ["--search", params["search"]]
    for name in ("device", "root"):
        if params[name] is not None:
            args += [f"--{name}", str(params[name])]
    if params["download"]:
        args.append("--download")
    if params["config_file"] is not None:
        args += ["--config", str(params["config_file"])]
    args += ["--out", str(params["out"])]
    for src in params["reuse"]:
        args += ["--reuse", str(src)]
    if params["workers"] is not None:
        args += ["--workers", str(params["workers"])]
    if params["launcher"] != "local":
        args += ["--launcher", params["launcher"]]
    if params["address"]:
        args += ["--address", params["address"]]
    if params["cpus_per_run"] != 1:
        args += ["--cpus-per-run", f"{params['cpus_per_run']:g}"]
    for log in params["logs"]:
        args += ["--log", log]
    return args


def _grids(params: dict):
    from grprune.sweep.grid import grid_from_options, load_spec
    if params["config_file"] is not None and not Path(params["config_file"]).is_file():
        raise GrpruneError(f"config file not found: {params['config_file']}")
    cli = grid_from_options(
        data=params["data"], split=params["split"], shift=params["shift"],
        selector=params["selector"], encoder=params["encoder"], preset=params["preset"],
        epochs=params["epochs"],
        seeds=params["seeds"], reg=params["reg"], hparams=params["overrides"],
        device=params["device"], root=params["root"], download=params["download"],
        config=params["config_file"])
    from grprune.sweep.search import with_search
    grids = [cli] if params["spec"] is None else [g.update(cli) for g in load_spec(params["spec"])]
    return [with_search(g, params["search"]) for g in grids]


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def print_plan(expansion, root: Path, show_commands: bool) -> None:
    """Print the dry-run plan: a table of run directory, status, varying values and
    dropped overrides, then the status counts.

    Parameters
    ----------
    expansion : grprune.sweep.Expansion
        The sweep's configurations.
    root : Path
        The sweep root (absolute).
    show_commands : bool
        Also print each configuration's equivalent ``grprune run`` command.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from grprune.sweep.expansion import dropped_text, run_command
    from grprune.sweep.plan import rel_dir, run_dir_of, run_status

    console = Console(width=None if sys.stdout.isatty() else 200)
    n = len(expansion.configs)
    title = (f"sweep plan: {n} configuration{'s' * (n != 1)} under {root} "
             f"({expansion.points} grid points, {expansion.duplicates} duplicate"
             f"{'s' * (expansion.duplicates != 1)} removed)")
    click.echo(title)
    table = Table()
    table.add_column("#", justify="right")
    table.add_column("run dir", overflow="fold")
    table.add_column("status")
    for axis in expansion.varying:
        table.add_column(escape(axis))
    any_dropped = any(c.dropped for c in expansion.configs)
    if any_dropped:
        table.add_column("dropped overrides")
    counts: dict[str, int] = {}
    notes = []
    for i, conf in enumerate(expansion.configs, 1):
        status, detail = run_status(conf.cfg, run_dir_of(conf, root))
        counts[status] = counts.get(status, 0) + 1
        if detail:
            notes.append(f"{rel_dir(conf, root)}: {status}: {detail}")
        style = _STATUS_STYLE[status]
        row = [str(i), escape(rel_dir(conf, root)),
               f"[{style}]{status}[/{style}]" if style else status]
        row += [escape(_fmt(v)) for v in expansion.values(conf).values()]
        if any_dropped:
            row.append(escape(dropped_text(conf.dropped)) or "-")
        table.add_row(*row)
    console.print(table)
    click.echo("status: " + ", ".join(f"{counts[s]} {s}" for s in
                                      ("finished", "failed", "interrupted", "pending",
                                       "running", "foreign") if s in counts))
    for note in notes:
        click.echo(f"  {note}")
    if show_commands:
        click.echo("equivalent grprune run commands:")
        for conf in expansion.configs:
            click.echo(shlex.join(["grprune", *run_command(conf, run_dir_of(conf, root))]))


def _summary(outcome, root: Path, n: int) -> None:
    def rel(p: Path) -> str:
        try:
            return p.relative_to(root).as_posix()
        except ValueError:
            return str(p)

    click.echo(f"sweep: {n} configuration{'s' * (n != 1)} in {root}: {len(outcome.done)} done, "
               f"{len(outcome.skipped)} skipped (already finished), "
               f"{len(outcome.failed)} failed"
               + (f", {len(outcome.foreign)} not run (foreign, or running elsewhere)"
                  if outcome.foreign else ""))
    for run_dir, message in outcome.failed:
        click.echo(f"  failed: {rel(run_dir)}: {message} (log: {RunDir(run_dir).log_path})")
    for run_dir, detail in outcome.foreign:
        click.echo(f"  not run: {rel(run_dir)}: {detail}; left alone")


@click.command("sweep")
@option("--spec", type=click.Path(path_type=Path), default=None, metavar="FILE",
        help="YAML sweep spec: a mapping with the keys data, split, shift, selector, encoder, "
             "epochs, reg (a list of sets), seeds, device, root, hparams ({key: value or "
             "list}), or a list of such mappings (their configurations are unioned). "
             "Options given on the command line override the spec's")
@model_options("sweep")
@training_options("sweep")
@option("--out", type=click.Path(path_type=Path), default=Path("runs"), show_default=True,
        metavar="SWEEP_ROOT",
        help="sweep root: sweep.json and one run directory per configuration, "
             "<out>/<dataset>/<method>-seed<seed>-<hash>. With --launcher ray it must be "
             "on a file system every Ray worker sees at the same path")
@option("--reuse", "reuse", multiple=True, type=click.Path(path_type=Path), metavar="DIR",
        help="another sweep root (repeatable; a quoted glob such as 'runs/paper-*' takes "
             "every directory it matches, if any): a configuration finished there (the same "
             "<dataset>/<method>-seed<seed>-<hash>) is linked into --out instead of trained "
             "again")
@option("--workers", type=click.IntRange(min=1), default=None,
        help="runs at once [default: 1]: local child processes, or the CPUs of the local "
             "Ray instance (with --cpus-per-run); with --address, tasks in flight "
             "[default: all]")
@launcher_options
@option("--search", type=click.Choice(["none", "default"]), default="none", show_default=True,
        help="default: add each part's declared search space (the paper's grids: "
             "reg.size.eta 0.5,0.75,0.85, reg.eps-align.k 50,70,90, ...; `grprune ls "
             "regs` lists them) as -H axes; keys given with -H or in --spec keep their "
             "values")
@option("--dry-run", is_flag=True, default=False,
        help="print the plan (run dirs, status, varying values, dropped overrides); "
             "run and write nothing")
@option("--show-commands", is_flag=True, default=False,
        help="with --dry-run: also print the equivalent grprune run command of each "
             "configuration")
@log_option("sweep")
@progress_option("sweep")
@click.pass_context
def sweep(ctx, **params) -> None:
    """Run a grid of configurations, one run directory each, in parallel and resumably.

    Comma lists of --data, --split, --shift, --selector, --encoder, --preset, --epochs,
    --seeds and of each -H value expand to their cartesian product; every grid point is
    resolved as `grprune run` would resolve it, and points with the same config hash
    are run once. Finished runs are skipped; interrupted and failed ones are run
    again (they resume from their last epoch), so re-running the same command
    continues a sweep. Exit code 1 when a run failed, 2 on bad input, 130 on Ctrl-C.

    \b
    Examples:
      grprune sweep -H reg.size.eta=0.5,0.75,0.85 --seeds 1-4 --out runs/eta
      grprune sweep --reg size,eps-align --reg none --data ogbg-molbbbp,good-motif \\
                    --seeds 0-3 --workers 2 --out runs/erm-vs-prune
      grprune sweep --spec sweep.yaml --dry-run --show-commands
      grprune sweep --data good-motif --search default --seeds 0-2 --out runs/grid
      grprune sweep --spec sweep.yaml --launcher ray --address auto --out /shared/runs
      grprune --plugin my_regs sweep --reg size,eps-align,edge-entropy --seeds 0-3
    """
    from grprune.sweep.expansion import expand
    from grprune.sweep.plan import reuse_runs, run_sweep, write_plan
    from grprune.sweep.plan import Outcome

    from grprune.trackers import for_children, log_args, parse_logs

    _check_options(params)
    specs = parse_logs(params["logs"])
    expansion = expand(_grids(params))
    root = Path(params["out"]).absolute()
    if params["dry_run"]:
        print_plan(expansion, root, params["show_commands"])
        return
    if root.exists() and not root.is_dir():
        raise GrpruneError(f"--out {params['out']} exists and is not a directory")
    plugins = loaded_plugins(ctx)
    write_plan(root, expansion, _command(params, plugins))
    linked = reuse_runs(expansion, root, reuse_roots(params["reuse"], root))
    if linked:
        click.echo(f"sweep: {len(linked)} finished run(s) linked from "
                   f"{', '.join(map(str, params['reuse']))} (--reuse), not trained again")
    extra_args = log_args(for_children(specs, root))
    todo = _announce(expansion, root, params)
    launch, env = _launcher(params, plugins)
    display = SweepDisplay(params["progress"] or "auto", todo, root)
    outcome = Outcome()
    old_handler = None
    if threading.current_thread() is threading.main_thread():
        def on_term(signum, frame):  # SIGTERM: stop like Ctrl-C
            raise KeyboardInterrupt
        old_handler = signal.signal(signal.SIGTERM, on_term)
    try:
        run_sweep(expansion, root, launch, env=env, on_start=display.start,
                  on_done=display.end, on_foreign=display.foreign,
                  outcome=outcome, extra_args=extra_args)
    except KeyboardInterrupt:
        display.close()
        click.echo(f"grprune: sweep interrupted ({len(outcome.done)} done, "
                   f"{display.running} stopped); run the same command again to resume",
                   err=True)
        ctx.exit(130)
    finally:
        display.close()
        if old_handler is not None:
            signal.signal(signal.SIGTERM, old_handler)
    _summary(outcome, root, len(expansion.configs))
    if outcome.failed:
        ctx.exit(1)


def _check_options(params: dict) -> None:
    """Refuse options that do not go together; check that ray is there when asked for."""
    if params["show_commands"] and not params["dry_run"]:
        raise click.UsageError("--show-commands goes with --dry-run")
    check_launcher_options(params, dry_run=params["dry_run"])


def _announce(expansion, root: Path, params: dict) -> int:
    """Print what the sweep will do (unless ``--progress none``) and warn about run
    directories it leaves alone; returns how many configurations are to run."""
    from grprune.sweep.plan import run_dir_of, run_status
    statuses = [run_status(c.cfg, run_dir_of(c, root))[0] for c in expansion.configs]
    todo = sum(s not in ("finished", "foreign", "running") for s in statuses)
    workers, n = params["workers"] or 1, len(expansion.configs)
    if (params["progress"] or "auto") != "none":
        parts = [f"{statuses.count(s)} {s}" for s in ("pending", "interrupted", "failed")
                 if s in statuses]
        click.echo(f"sweep: {n} configuration{'s' * (n != 1)} under {root}: {todo} to run"
                   + (f" ({', '.join(parts)})" if parts else "")
                   + f", {statuses.count('finished')} already finished"
                   + (f", {statuses.count('foreign')} foreign" if "foreign" in statuses else "")
                   + (f", {statuses.count('running')} running elsewhere"
                      if "running" in statuses else "")
                   + f" ({params['launcher']} launcher, {workers} worker"
                     f"{'s' * (workers != 1)})", err=True)
    for conf, status in zip(expansion.configs, statuses):
        if status in ("foreign", "running"):
            _, detail = run_status(conf.cfg, run_dir_of(conf, root))
            click.echo(f"sweep: warning: {run_dir_of(conf, root)}: {detail}; not touching it, "
                       f"this configuration is skipped", err=True)
    return todo


def _launcher(params: dict, plugins: list[str]):
    """The launcher (``launch(jobs, on_start, on_done)``) and the environment variables
    of every child: thread counts, and the plugins to import (``GRPRUNE_PLUGINS``)."""
    from grprune.sweep.launchers import make_launcher
    launch, env = make_launcher(params["launcher"], params["workers"], params["address"],
                                params["cpus_per_run"])
    env.update(child_env(plugins))
    return launch, env
