"""The ``grprune`` command line: ``run``, ``ls``, ``data``, ``sweep``, ``collect``,
``explain`` and ``predict``.

Every option has help text and an environment-variable fallback
(``GRPRUNE_<COMMAND>_<OPTION>``, e.g. ``GRPRUNE_RUN_EPOCHS=5``). Errors a user
can cause end with one message on stderr and exit code 2. ``grprune --plugin MODULE
COMMAND`` imports the user's own parts first (:mod:`grprune.cli.plugins`); options that
``run`` and ``sweep`` share are declared once, in :mod:`grprune.cli.options`.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path
from typing import Any

import click

from grprune.cli import plugins as _plugins
from grprune.cli.options import (_names, model_options, option, progress_option,  # noqa: F401
                                 training_options)
from grprune.errors import GrpruneError
from grprune.record.epoch import EpochRecord
from grprune.record.summary import RunSummary


class GrpruneGroup(click.Group):
    """A click group that turns user errors into one line and exit code 2."""

    def invoke(self, ctx: click.Context):
        restore = _on_sigterm_raise()
        try:
            return super().invoke(ctx)
        except Terminated:
            click.echo("grprune: terminated; run the same command again to resume", err=True)
            ctx.exit(143)
        except GrpruneError as exc:
            click.echo(f"grprune: error: {exc}", err=True)
            ctx.exit(2)
        except OSError as exc:  # a path that cannot be created, read or written; a full disk
            where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f)
            click.echo(f"grprune: error: {exc.strerror or exc}" + (f": {where}" if where else ""),
                       err=True)
            ctx.exit(2)
        except (MemoryError, RuntimeError) as exc:
            if not out_of_memory(exc):
                raise
            click.echo(f"grprune: error: out of memory ({out_of_memory(exc)}); lower "
                       f"encoder.hidden, selector.hidden, the layers or train.batch_size",
                       err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo("grprune: interrupted; run the same command again to resume", err=True)
            ctx.exit(130)
        finally:
            restore()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is (a command may install its own handler)."""


def _on_sigterm_raise():
    """While a command runs in the main thread with SIGTERM at its default, SIGTERM raises
    :class:`Terminated`, so the command stops as on Ctrl-C (state kept, writes atomic) and
    says how to resume. Returns the function that puts the old handler back."""
    import signal
    import threading
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        return lambda: None

    def on_term(signum, frame):
        raise Terminated

    signal.signal(signal.SIGTERM, on_term)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


def out_of_memory(exc: BaseException) -> str:
    """What ran out, in a few words, when ``exc`` is an allocation failure (``MemoryError``,
    torch's CPU allocator or CUDA's out-of-memory error); else ``""``."""
    import re
    if isinstance(exc, MemoryError):
        return "Python could not allocate"
    text = str(exc)
    asked = re.search(r"tried to allocate ([0-9.]+ ?[KMGT]?i?B|\d+ bytes)", text)
    if "can't allocate memory" in text or "out of memory" in text.lower():
        return f"tried to allocate {asked.group(1)}" if asked else "an allocation failed"
    return ""


@click.group(cls=GrpruneGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "auto_envvar_prefix": "GRPRUNE"})
@click.version_option(package_name="grprune")
@click.option("--plugin", "plugin", multiple=True, metavar="MODULE", allow_from_autoenv=False,
              help="import MODULE (a module name, or the path of a .py file) before the "
                   "command: your own regularizers, selectors, encoders or datasets, "
                   "registered with @REGULARIZERS.register(...) and the like (repeatable). "
                   f"Also read from ${_plugins.ENV} (comma-separated); a sweep's runs "
                   "import the same modules")
@click.pass_context
def main(ctx: click.Context, plugin: tuple[str, ...]) -> None:
    """grprune: out-of-distribution generalization for graph classification.

    PrunE (NeurIPS 2025) prunes spurious edges with a learned subgraph selector,
    regularized by a graph-size constraint (size) and epsilon-probability
    alignment (eps-align). See `grprune ls` for every registered part.
    """
    warnings.formatwarning = _one_line_warning
    ctx.meta[_plugins.ENV] = _plugins.load([*_plugins.from_env(), *plugin])


_python_formatwarning = warnings.formatwarning


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """grprune's own warnings (``"grprune: ..."``) as the one line they are, without
    Python's file, line number and source line; other warnings as Python writes them."""
    text = str(message)
    if text.startswith("grprune:"):
        return text + "\n"
    return _python_formatwarning(message, category, filename, lineno, line)


def loaded_plugins(ctx: click.Context | None = None) -> list[str]:
    """The plugins this command imported (``--plugin`` and ``$GRPRUNE_PLUGINS``), for
    child processes; from the environment when the command runs outside ``main``."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is not None and _plugins.ENV in ctx.meta:
        return list(ctx.meta[_plugins.ENV])
    return [_plugins._canonical(p) for p in _plugins.from_env()]


def _fmt(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def _reason_kind(reason: str) -> str:
    for words, kind in (("parse", "unparsable SMILES"), ("missing label", "missing label"),
                        ("not 0 or 1", "label not 0/1"), ("featurizer", "not featurizable"),
                        ("no atoms", "no atoms"), ("SMILES", "missing SMILES")):
        if words in reason:
            return kind
    return reason[:40]


def _split_fields(rec: EpochRecord, metric: str) -> dict[str, str]:
    """``{"train": "train 0.9312", "valid": ..., "test": ...}`` for the evaluated splits."""
    return {split: f"{split} {_fmt(rec.value(split, metric))}"
            for split in ("train", "valid", "test") if split in rec.scores}


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
    from grprune.data import DATASETS
    from grprune.data.registry import FileDatasetSource
    own_file = issubclass(DATASETS.get(dataset), FileDatasetSource)  # molecule-csv, dgl-graphs
    path = " -H data.path=..." if own_file else ""
    return (f"grprune: {n}{f' of {total}' if total else ''} source rows were skipped"
            f"{f' ({by})' if by else ''}; `grprune data info {dataset}{path}` lists them")


def _clock(seconds: float | None) -> str:
    """``H:MM:SS`` for a duration in seconds; ``-:--:--`` when it is not known yet."""
    if seconds is None or not math.isfinite(seconds):
        return "-:--:--"
    seconds = int(round(max(seconds, 0.0)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class _EpochLine:
    """The rich progress line, laid out anew for the width it is given (a rich renderable).

    Always shown: the epoch counter, the new-best ``*`` and the ETA, estimated from the
    mean ``epoch_time_s`` (seconds) of the last :attr:`ETA_WINDOW` epochs. The other
    fields and the bar join in :attr:`PRIORITY` order while they fit, shown in
    :attr:`ORDER`; a bar shown takes the width left, :attr:`MIN_BAR` to :attr:`MAX_BAR` cells.
    The line needs about 32 columns (100 epochs); on a narrower terminal it wraps.
    """

    PRIORITY = ("valid", "test", "kept", "phase", "loss", "bar", "train", "elapsed")
    ORDER = ("phase", "loss", "train", "valid", "test", "kept", "elapsed")
    MIN_BAR, MAX_BAR, ETA_WINDOW = 10, 40, 5

    def __init__(self, epochs: int) -> None:
        import time
        self.epochs, self.metric = epochs, "?"
        self.rec: EpochRecord | None = None
        self.times: list[float] = []
        self.started = time.monotonic()

    def update(self, rec: dict | EpochRecord, metric: str) -> None:
        """Show one finished epoch's record (what ``run``'s ``on_epoch`` gets)."""
        self.rec, self.metric = EpochRecord.from_dict(rec), metric
        self.times = [*self.times, float(self.rec.epoch_time_s or 0.0)][-self.ETA_WINDOW:]

    def _fields(self) -> dict[str, str]:
        import time
        rec = self.rec
        assert rec is not None  # fields are drawn after the first update
        fields = {"phase": f"[{rec.phase}]", "loss": f"loss {rec.total_loss:.4f}",
                  "kept": f"train kept {rec.train_kept:.2f}",
                  "elapsed": f"elapsed {_clock(time.monotonic() - self.started)}"}
        fields.update(_split_fields(rec, self.metric))
        return fields

    def __rich_console__(self, console, options):
        from rich.cells import cell_len
        from rich.text import Text
        rec, done = self.rec, 0 if self.rec is None else self.rec.epoch + 1
        head = f"epoch {'-' if rec is None else rec.epoch:>3} ({done}/{self.epochs})"
        eta = sum(self.times) / len(self.times) * (self.epochs - done) if self.times else None
        tail = f"{'*' if rec is not None and rec.improved else ' '} ETA {_clock(eta)}"
        room = options.max_width - cell_len(head) - cell_len(tail) - 2
        fields = {} if rec is None else self._fields()
        costs = {"bar": 1 + self.MIN_BAR, **{k: 2 + cell_len(v) for k, v in fields.items()}}
        shown = set()
        for key in (k for k in self.PRIORITY if k in costs):  # " " + bar, "  " + a field
            if costs[key] <= room:
                shown.add(key)
                room -= costs[key]
        line = Text()
        line.append(head, style="bold")
        if "bar" in shown:
            bar = min(self.MIN_BAR + room, self.MAX_BAR)
            filled = bar * min(done, self.epochs) // max(self.epochs, 1)
            line.append(" ")
            line.append("━" * filled, style="bar.finished" if done >= self.epochs
                        else "bar.complete")
            line.append("━" * (bar - filled), style="bar.back")
        for key in (k for k in self.ORDER if k in shown):
            line.append((" " if line.plain.endswith("]") or key == "phase" else "  ")
                        + fields[key])
        line.append("  " if shown else " ")
        line.append(tail[0], style="bold")
        line.append(tail[1:], style="progress.remaining")
        yield line


class EpochPrinter:
    """Per-epoch progress: a rich line on a terminal, plain lines otherwise.

    Parameters
    ----------
    mode : str
        ``"auto"`` (rich when stderr is a terminal, else plain), ``"rich"``, ``"plain"``
        or ``"none"``.
    metric : str
        The metric key of the records' ``train`` / ``valid`` / ``test`` dicts; the caller
        may set :attr:`metric` before each call.
    epochs : int
        The run's number of epochs (``train.epochs``).
    title : str
        The run's title; kept for callers, the line itself shows the epoch counter.
    console : rich.console.Console, optional
        Where the rich line goes [default: a console on stderr].

    The rich line always keeps the epoch counter, the new-best ``*`` and the ETA, and
    drops the bar and the other fields first on a narrow terminal (see :class:`_EpochLine`).
    """

    def __init__(self, mode: str, metric: str, epochs: int, title: str, *,
                 console=None) -> None:
        if mode == "auto":
            mode = "rich" if sys.stderr.isatty() else "plain"
        self.mode, self.metric, self.epochs, self.title = mode, metric, epochs, title
        self.live: Any = None  # a rich Live in "rich" mode
        if mode == "rich":
            from rich.console import Console
            from rich.live import Live
            self.line = _EpochLine(epochs)
            self.live = Live(self.line, console=console or Console(stderr=True),
                             refresh_per_second=4, transient=False)
            self.live.start()

    def __call__(self, rec: dict) -> None:
        if self.mode == "rich":
            self.line.update(rec, self.metric)
            self.live.refresh()
        elif self.mode == "plain":
            r = EpochRecord.from_dict(rec)
            parts = [f"loss {r.total_loss:.4f}", *_split_fields(r, self.metric).values(),
                     f"train kept {r.train_kept:.2f}"]
            info = "  ".join(parts) + ("  *" if r.improved else "")
            # epochs are numbered from 0, as in results.jsonl and summary.json's best_epoch;
            # (n/N) counts the epochs done
            click.echo(f"epoch {r.epoch:>3} ({r.epoch + 1}/{self.epochs}) "
                       f"[{r.phase}] {info} ({r.epoch_time_s or 0.0:.1f}s)", err=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def print_summary(summary: RunSummary | dict, run_dir: Path, status: str) -> None:
    """The final metrics as a rich table on stdout."""
    from rich.console import Console
    from rich.table import Table

    from grprune.naming import method_label
    s = RunSummary.from_dict(summary)
    m = s.metric
    table = Table(title=f"{s.dataset} ({s.split}) - {status}", show_header=True)
    table.add_column("field")
    table.add_column("value", justify="right")
    rows = [("method", method_label(s.reg, s.selector, s.preset)),
            ("selector", s.selector), ("seed", s.seed),
            ("best epoch (from 0)", s.best_epoch), (f"valid {m}", s.valid),
            (f"test {m}", s.test)]
    if s.in_distribution:
        rows[-2:] = [(f"OOD-valid {m}", s.valid), (f"OOD-test {m}", s.test),
                     (f"ID-valid {m}", s.id_valid), (f"ID-test {m}", s.id_test)]
    if s.motif_edge_rocauc is not None:
        rows.append(("motif edge ROC-AUC (test)", s.motif_edge_rocauc))
    rows += [("kept edge fraction (test)", s.kept_edge_fraction),
             ("wall time (s)", s.wall_time_s),
             ("median epoch time (s)", s.epoch_time_s_median),
             ("peak memory (MiB)", s.peak_mem_mib),
             ("device", s.device), ("run directory", str(run_dir))]
    for name, value in rows:
        table.add_row(name, _fmt(value) if value is not None else "-")
    Console(width=100).print(table)


@main.command()
@model_options("run")
@training_options("run")
@option("--deterministic/--no-deterministic", default=None,
        help="same seed, same numbers, also on a busy machine: MKL on one thread on the CPU, "
             "deterministic kernels on CUDA [default: on]")
@option("--out", type=click.Path(path_type=Path), default=None,
        help="run directory [default: runs/<dataset>/<method>-seed<seed>-<hash>]")
@option("--force", is_flag=True, default=False,
        help="re-run even if the run directory holds a finished run")
@progress_option("run")
@option("--json", "as_json", is_flag=True, default=False, help="print the summary as JSON")
def run(selector, reg, data, split, shift, encoder, preset, epochs, seed, overrides, device,
        root, download, config_file, deterministic, out, force, progress, as_json) -> None:
    """Train a selector + GNN with the given regularizers and report metrics.

    Each epoch prints a line such as 'epoch 82 (83/100) [train] loss 0.3121 valid
    0.9568 test 0.6753 train kept 0.85 * ETA 0:00:32': epoch 82 counted from 0 (as
    results.jsonl and the table's best epoch), the 83rd of 100; [warmup] or [train]
    (ERM warm-up, or the selector training); the training loss; the metric on the
    valid and test parts; train kept, the fraction of edges the selector kept in
    training; * for a new best valid; the ETA from the last 5 epochs. A narrow
    terminal drops fields from the right but keeps the epoch, * and ETA.

    \b
    Example:
      grprune run --selector gumbel-gin --reg size,eps-align --data ogbg-molbbbp
      grprune run --reg none --data ogbg-molbbbp --seed 1        # ERM baseline
    """
    from grprune.run import execute, plan_run

    plan = plan_run(data=data, selector=selector, reg=reg, encoder=encoder, preset=preset,
                    config_file=config_file, split=split, shift=shift, epochs=epochs,
                    seed=seed, device=device, root=root, download=download,
                    progress=progress, deterministic=deterministic, overrides=overrides,
                    out=out)
    cfg, run_dir, title = plan.cfg, plan.run_dir, plan.title
    printer = EpochPrinter(cfg.train.progress, "?", cfg.train.epochs, title)
    if printer.mode != "none":
        click.echo(f"grprune: {title} -> {run_dir}", err=True)

    def on_epoch(rec: dict) -> None:
        printer.metric = EpochRecord.from_dict(rec).metric or printer.metric
        printer(rec)

    try:
        status, summary = execute(cfg, run_dir, force=force, on_epoch=on_epoch,
                                  log=lambda msg: click.echo(f"grprune: {msg}", err=True))
    finally:
        printer.close()
    if status == "finished":
        click.echo(f"grprune: {run_dir} already holds this finished run; nothing to do "
                   f"(use --force to re-run)", err=True)
    skipped = skipped_rows_line(dict(summary.dataset_info or {}), cfg.data.name)
    if skipped:
        click.echo(skipped, err=True)
    if as_json:
        from grprune.results import to_json
        click.echo(to_json(summary.to_dict()))
    else:
        print_summary(summary, run_dir, status)


def _presets_table():
    """``grprune ls presets``: every preset, its description and values per dataset."""
    from rich.table import Table

    from grprune import presets as P
    table = Table(title="presets (--preset NAME; auto = each dataset's default)",
                  show_lines=True)
    for col in ("name", "applies to", "settings"):
        table.add_column(col)
    listed = P.defaults()
    for name, path in P.available().items():
        preset = P.parse(path, name)
        chosen = [key for key, p in listed.items() if p == name]
        if name == P.FALLBACK:
            chosen.append("every dataset and split defaults.yaml does not list"
                          if listed else "every dataset")
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

    from grprune.config import DataSettings, ModelSettings, TrainSettings
    from grprune.data import DATASETS
    from grprune.encoders import ENCODERS
    from grprune.regularizers import REGULARIZERS
    from grprune.selectors import SELECTORS

    console = Console(width=140)
    groups = {"selectors": ("selector", SELECTORS), "encoders": ("encoder", ENCODERS),
              "regularizers": ("reg.NAME", REGULARIZERS), "datasets": ("data", DATASETS)}

    def new_table(title: str, first: tuple[str, ...]) -> Table:
        table = Table(title=title, show_lines=False)
        for col in (*first, "default", "domain", "search", "description"):
            table.add_column(col)
        return table

    def add_rows(table: Table, cls, prefix: str, lead: tuple[str, ...]) -> None:
        for key, default, text, domain in cls.describe_hparams():
            if prefix == "data" and key == "split":
                domain = "one of " + ", ".join(getattr(cls, "splits", ()))
            param = getattr(cls, "params", {}).get(key)
            search = ", ".join(map(str, param.search)) if param and param.search else ""
            table.add_row(*lead, f"{prefix}.{key}", escape(str(default)), escape(domain),
                          escape(search), escape(text))

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
            table.add_row(part, "", "", "", "", escape(doc))
            add_rows(table, cls, prefix.replace("NAME", part), ("",))
        console.print(table)
    if kind in (None, "train"):
        table = new_table("train, model and data settings", ("hyperparameter",))
        for prefix, cls in (("train", TrainSettings), ("model", ModelSettings),
                            ("data", DataSettings)):
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
