"""The ``grprune`` command line: ``run``, ``ls``, ``data``, ``sweep``, ``collect``,
``explain`` and ``predict``.

Every option has help text and an environment-variable fallback
(``GRPRUNE_<COMMAND>_<OPTION>``, e.g. ``GRPRUNE_RUN_EPOCHS=5``). Errors a user
can cause end with one message on stderr and exit code 2.
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import click

from grprune.errors import GrpruneError

option = functools.partial(click.option, show_envvar=True)


class GrpruneGroup(click.Group):
    """A click group that turns user errors into one line and exit code 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GrpruneError as exc:
            click.echo(f"grprune: error: {exc}", err=True)
            ctx.exit(2)
        except OSError as exc:  # a path that cannot be created, read or written; a full disk
            where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f)
            click.echo(f"grprune: error: {exc.strerror or exc}" + (f": {where}" if where else ""),
                       err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo("grprune: interrupted; run the same command again to resume", err=True)
            ctx.exit(130)


@click.group(cls=GrpruneGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "auto_envvar_prefix": "GRPRUNE"})
@click.version_option(package_name="grprune")
def main() -> None:
    """grprune: out-of-distribution generalization for graph classification.

    PrunE (NeurIPS 2025) prunes spurious edges with a learned subgraph selector,
    regularized by a graph-size constraint (size) and epsilon-probability
    alignment (eps-align). See `grprune ls` for every registered part.
    """


def _names(kind: str) -> str:
    from grprune.data import DATASETS
    from grprune.encoders import ENCODERS
    from grprune.regularizers import REGULARIZERS
    from grprune.selectors import SELECTORS
    reg = {"data": DATASETS, "encoder": ENCODERS, "reg": REGULARIZERS,
           "selector": SELECTORS}[kind]
    return ", ".join(reg.names(load_plugins=False))


def _fmt(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return str(value)


class EpochPrinter:
    """Per-epoch progress: a rich progress bar on a terminal, plain lines otherwise."""

    def __init__(self, mode: str, metric: str, epochs: int, title: str) -> None:
        if mode == "auto":
            mode = "rich" if sys.stderr.isatty() else "plain"
        self.mode, self.metric, self.epochs = mode, metric, epochs
        self.progress = None
        if mode == "rich":
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(),
                                     TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                                     console=Console(stderr=True), transient=False)
            self.task = self.progress.add_task(title, total=epochs, info="")
            self.progress.start()

    def __call__(self, rec: dict) -> None:
        m = self.metric
        parts = [f"loss {rec['loss']['total']:.4f}"]
        for split in ("train", "valid", "test"):
            if split in rec:
                parts.append(f"{split} {_fmt(rec[split][m])}")
        parts.append(f"kept {rec['loss']['kept_edge_fraction']:.2f}")
        info = "  ".join(parts) + ("  *" if rec.get("improved") else "")
        if self.mode == "rich":
            self.progress.update(self.task, completed=rec["epoch"] + 1, info=info)
        elif self.mode == "plain":
            click.echo(f"epoch {rec['epoch'] + 1:>3}/{self.epochs} [{rec['phase']}] {info} "
                       f"({rec['epoch_time_s']:.1f}s)", err=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def print_summary(summary: dict, run_dir: Path, status: str) -> None:
    """The final metrics as a rich table on stdout."""
    from rich.console import Console
    from rich.table import Table
    m = summary["metric"]
    table = Table(title=f"{summary['dataset']} ({summary.get('split')}) - {status}",
                  show_header=True)
    table.add_column("field")
    table.add_column("value", justify="right")
    from grprune.naming import method_label
    rows = [("method", method_label(summary["reg"], summary["selector"],
                                    summary.get("preset") or "paper")),
            ("selector", summary["selector"]), ("seed", summary["seed"]),
            ("best epoch", summary["best_epoch"]), (f"valid {m}", summary["valid"]),
            (f"test {m}", summary["test"])]
    if "id_valid" in summary or "id_test" in summary:
        rows[-2:] = [(f"OOD-valid {m}", summary["valid"]), (f"OOD-test {m}", summary["test"]),
                     (f"ID-valid {m}", summary.get("id_valid")),
                     (f"ID-test {m}", summary.get("id_test"))]
    if summary.get("motif_edge_rocauc") is not None:
        rows.append(("motif edge ROC-AUC (test)", summary["motif_edge_rocauc"]))
    rows += [("kept edge fraction (test)", summary["kept_edge_fraction"]),
             ("wall time (s)", summary.get("wall_time_s")),
             ("median epoch time (s)", summary.get("epoch_time_s_median")),
             ("peak memory (MiB)", summary.get("peak_mem_mib")),
             ("device", summary.get("device")), ("run directory", str(run_dir))]
    for name, value in rows:
        table.add_row(name, _fmt(value) if value is not None else "-")
    Console(width=100).print(table)


@main.command()
@option("--selector", default=None,
        help="subgraph selector: auto (gumbel-gin when a regularizer needs one), none, or "
             f"one of: {_names('selector')}")
@option("--reg", default=None,
        help="comma list of regularizers, or none for plain ERM [default: size,eps-align]. "
             f"Built in: {_names('reg')}")
@option("--data", default=None, help=f"dataset [default: ogbg-molbbbp]. Built in: {_names('data')}")
@option("--split", default=None, help="dataset split, e.g. scaffold or size (see `grprune ls datasets`)")
@option("--shift", default=None, help="distribution shift of GOOD datasets: covariate or concept")
@option("--encoder", default=None, help=f"GNN encoder [default: gin]. Built in: {_names('encoder')}")
@option("--preset", default=None,
        help="named bundle of settings per dataset: paper, official, a preset of yours "
             "(`grprune ls presets`) or a preset file [default: auto, the dataset's preset "
             "chosen on validation]")
@option("--epochs", type=int, default=None, help="training epochs [default: 100]")
@option("--seed", type=int, default=None, help="random seed [default: 0]")
@option("--device", default=None, help="auto (CUDA when present), cpu, cuda or cuda:N [default: auto]")
@option("--deterministic/--no-deterministic", default=None,
        help="same seed, same numbers, also on a busy machine: MKL on one thread on the CPU, "
             "deterministic kernels on CUDA [default: on]")
@option("--out", type=click.Path(path_type=Path), default=None,
        help="run directory [default: runs/<dataset>/<method>-seed<seed>-<hash>]")
@option("--root", default=None, help="data root (caches, OGB folders) [default: $GRPRUNE_DATA_ROOT "
                                     "or ~/.cache/grprune/data]")
@option("--download", is_flag=True, default=False,
        help="use OGB's online download route instead of the bundled data")
@option("-H", "--hparam", "overrides", multiple=True, metavar="KEY=VALUE",
        help="override any hyperparameter by namespaced key, e.g. -H reg.size.eta=0.75 "
             "-H selector.tau=0.5 -H train.lr=1e-3 (repeatable)")
@option("--config", "config_file", type=click.Path(path_type=Path), default=None,
        help="JSON/YAML config file with the sections of config.json")
@option("--force", is_flag=True, default=False,
        help="re-run even if the run directory holds a finished run")
@option("--progress", type=click.Choice(["auto", "rich", "plain", "none"]), default=None,
        help="progress display [default: auto: rich on a terminal, plain lines otherwise]")
@option("--json", "as_json", is_flag=True, default=False, help="print the summary as JSON")
def run(selector, reg, data, split, shift, encoder, preset, epochs, seed, device, deterministic,
        out, root, download, overrides, config_file, force, progress, as_json) -> None:
    """Train a selector + GNN with the given regularizers and report metrics.

    \b
    Example:
      grprune run --selector gumbel-gin --reg size,eps-align --data ogbg-molbbbp
      grprune run --reg none --data ogbg-molbbbp --seed 1        # ERM baseline
    """
    from grprune.config import resolve_config
    from grprune.run import default_run_dir, execute

    flags = {"data.split": split, "data.shift": shift, "train.epochs": epochs, "train.seed": seed,
             "train.device": device, "data.root": root, "train.progress": progress,
             "train.deterministic": deterministic}
    if download:
        flags["data.download"] = True
    flags = {k: v for k, v in flags.items() if v is not None}
    cfg = resolve_config(data=data, selector=selector, reg=reg, encoder=encoder, flags=flags,
                         overrides=overrides, file=config_file, preset=preset)
    run_dir = out or default_run_dir(cfg)
    from grprune.naming import method_label
    method = method_label(list(cfg["reg"]), cfg["selector"]["name"], cfg["preset"]["name"])
    title = f"{cfg['data']['name']} {method} seed {cfg['train']['seed']}"
    printer = EpochPrinter(cfg["train"]["progress"], "?", cfg["train"]["epochs"], title)
    if printer.mode != "none":
        click.echo(f"grprune: {title} -> {run_dir}", err=True)

    def on_epoch(rec: dict) -> None:
        printer.metric = next(k for k in rec["valid"] if k != "kept_edge_fraction")
        printer(rec)

    try:
        status, summary = execute(cfg, run_dir, force=force, on_epoch=on_epoch,
                                  log=lambda msg: click.echo(f"grprune: {msg}", err=True))
    finally:
        printer.close()
    if status == "finished":
        click.echo(f"grprune: {run_dir} already holds this finished run; nothing to do "
                   f"(use --force to re-run)", err=True)
    if as_json:
        from grprune.results import to_json
        click.echo(to_json(summary))
    else:
        print_summary(summary, run_dir, status)


def _presets_table():
    """``grprune ls presets``: every preset, its description and values per dataset."""
    from rich.table import Table

    from grprune import presets as P
    from grprune.data import DATASETS
    table = Table(title="presets (--preset NAME; auto = each dataset's default)",
                  show_lines=True)
    for col in ("name", "applies to", "settings"):
        table.add_column(col)
    defaults = {ds: P.default_for(ds) for ds in DATASETS.names()}
    for name, path in P.available().items():
        preset = P.parse(path, name)
        chosen = [ds for ds, p in defaults.items() if p == name]
        head = f"{name}\n{preset.description}\n({path})"
        if chosen:
            head += f"\ndefault for: {', '.join(chosen)}"
        table.add_row(head, "every dataset",
                      "\n".join(f"{k} = {v}" for k, v in preset.all.items()) or "-")
        for ds, values in preset.datasets.items():
            table.add_row("", ds, "\n".join(f"{k} = {v}" for k, v in values.items()))
    return table


@main.command("ls")
@click.argument("kind", required=False,
                type=click.Choice(["selectors", "encoders", "regularizers", "datasets", "train",
                                   "presets"]))
def ls(kind) -> None:
    """List registered parts with their hyperparameters and defaults, and the presets."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from grprune.config import DataSettings, TrainSettings
    from grprune.data import DATASETS
    from grprune.encoders import ENCODERS
    from grprune.regularizers import REGULARIZERS
    from grprune.selectors import SELECTORS

    console = Console(width=140)
    groups = {"selectors": ("selector", SELECTORS), "encoders": ("encoder", ENCODERS),
              "regularizers": ("reg.NAME", REGULARIZERS), "datasets": ("data", DATASETS)}

    def new_table(title: str, first: tuple[str, ...]) -> Table:
        table = Table(title=title, show_lines=False)
        for col in (*first, "default", "domain", "description"):
            table.add_column(col)
        return table

    def add_rows(table: Table, cls, prefix: str, lead: tuple[str, ...]) -> None:
        for key, default, text, domain in cls.describe_hparams():
            if prefix == "data" and key == "split":
                domain = "one of " + ", ".join(getattr(cls, "splits", ()))
            table.add_row(*lead, f"{prefix}.{key}", escape(str(default)), escape(domain),
                          escape(text))

    for name, (prefix, registry) in groups.items():
        if kind not in (None, name):
            continue
        table = new_table(name, ("name", "hyperparameter"))
        for part in registry.names():
            cls = registry.get(part)
            doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
            if name == "datasets":
                doc = f"{getattr(cls, 'description', doc)}. Splits: " \
                      f"{', '.join(getattr(cls, 'splits', ()))}."
            table.add_row(part, "", "", "", escape(doc))
            add_rows(table, cls, prefix.replace("NAME", part), ("",))
        console.print(table)
    if kind in (None, "train"):
        table = new_table("train and data settings", ("hyperparameter",))
        for prefix, cls in (("train", TrainSettings), ("data", DataSettings)):
            add_rows(table, cls, prefix, ())
        console.print(table)
    if kind in (None, "presets"):
        console.print(_presets_table())
    broken = {**REGULARIZERS.broken_plugins, **SELECTORS.broken_plugins,
              **DATASETS.broken_plugins}
    for ep, msg in broken.items():
        console.print(f"[yellow]plugin {ep!r} failed to load: {msg}[/yellow]")


from grprune.cli.collect import collect as _collect, curves as _curves  # noqa: E402
from grprune.cli.data import data as _data_group  # noqa: E402
from grprune.cli.explain import explain as _explain, predict as _predict  # noqa: E402
from grprune.cli.sweep import sweep as _sweep  # noqa: E402

for _command in (_data_group, _sweep, _collect, _curves, _explain, _predict):
    main.add_command(_command)
