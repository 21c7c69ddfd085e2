"""``grprune collect``: run directories -> paper-style tables (rich, Markdown, CSV)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grprune.cli.options import option
from grprune.errors import GrpruneError
from grprune.record.files import atomic_write_bytes


def _console():
    from rich.console import Console
    # A pipe or a file gets a wide table instead of rich's 80 columns.
    return Console(file=sys.stdout, width=None if sys.stdout.isatty() else 160,
                   highlight=False)


@click.command("collect")
@click.argument("dirs", nargs=-1, required=True, metavar="DIR...",
                type=click.Path(path_type=Path))
@option("--select", type=click.Choice(["valid", "oracle", "all"]), default="valid",
        show_default=True,
        help="model selection per method and dataset: valid (best mean validation score), "
             "oracle (best mean TEST score; optimistic, labelled as such) or all (every "
             "setting)")
@option("--presets", type=click.Choice(["separate", "select"]), default="separate",
        show_default=True,
        help="separate: runs of each preset (--preset official, paper) are their own method, "
             "e.g. 'PrunE (official)'; select: the preset is one more hyperparameter, chosen "
             "per method and dataset by the --select rule and named in the table")
@option("--layout", type=click.Choice(["table", "ablation", "long"]), default="table",
        show_default=True,
        help="table: methods x datasets (paper Table 1); ablation: regularizer sets "
             "size,eps-align / size / eps-align / none x datasets (paper Fig. 3a); long: "
             "one line per method, dataset (and setting)")
@option("--out", type=click.Path(path_type=Path), default=None, metavar="PREFIX",
        help="write PREFIX.md and PREFIX.csv [default: DIR/results, DIR the first argument]")
@option("--sensitivity", default=None, metavar="KEY",
        help="test metric against one hyperparameter, e.g. reg.size.eta (eta), "
             "reg.eps-align.k (K), reg.size.weight (lambda1), reg.eps-align.weight "
             "(lambda2); prints a table and writes a PNG plot and a CSV")
@option("--plot", type=click.Path(path_type=Path), default=None, metavar="FILE",
        help="PNG file of --sensitivity [default: DIR/sensitivity-KEY.png]")
def collect(dirs, select, presets, layout, out, sensitivity, plot) -> None:
    """Tables of finished runs: mean ± std over seeds, with model selection.

    Reads every run directory under DIR (config.json + summary.json; never logs),
    groups runs by dataset and method (regularizer set + selector), aggregates the
    seeds of each setting (sample std; one seed prints as '63.35 (n=1)') and, per
    group, picks the setting with the best mean validation score. A cell marked † holds
    seeds whose selected epoch is an ERM warm-up epoch (a model without its selector);
    the line under the table says which. Prints a rich table and writes DIR/results.md and
    DIR/results.csv. Failed, unfinished and unreadable run directories, and runs a
    sweep.json plans but that have not finished, are listed at the end.

    \b
    Examples:
      grprune collect runs/sweep1
      grprune collect runs/sweep1 --layout ablation --out tables/ablation
      grprune collect runs/sweep1 --select oracle          # labelled ORACLE everywhere
      grprune collect runs/presets --presets select        # choose the preset on validation
      grprune collect runs/eta --sensitivity reg.size.eta --plot eta.png
    """
    import grprune.collect
    from grprune.collect.protocol import trained_with

    for d in dirs:
        if not d.exists():
            raise GrpruneError(f"no such directory: {d}")
        if not d.is_dir():
            raise GrpruneError(f"not a directory: {d}")
    scan = grprune.collect.scan_runs(dirs)
    sweeps = grprune.collect.sweep_report(scan)
    notes = grprune.collect.notes_for(scan, sweeps)
    console = _console()
    if not scan.runs:
        where = ", ".join(map(str, dirs))
        for note in notes:
            click.echo(f"  {note}", err=True)
        click.echo(f"grprune: no finished runs under {where}"
                   + (f" ({len(scan.problems)} run directories listed above were not "
                      f"collected)" if scan.problems else ""), err=True)
        sys.exit(1)
    base = dirs[0]
    if sensitivity:
        points = grprune.collect.sensitivity(scan.runs, sensitivity, select=select)
        console.print(grprune.collect.sensitivity_table(points))
        name = "sensitivity-" + sensitivity.replace("/", "_")
        png = plot or base / f"{name}.png"
        grprune.collect.plot_sensitivity(points, png)
        csv_path = png.with_suffix(".csv")
        atomic_write_bytes(csv_path, grprune.collect.sensitivity_csv(points).encode())
        click.echo(f"grprune: wrote {png} and {csv_path}", err=True)
    else:
        rows = grprune.collect.aggregate(scan.runs, select=select, presets=presets)
        trained = trained_with(scan.runs)
        for r in rows:
            r["trained_with"] = trained
        md_notes = ([f"trained with: {trained}"] if trained else []) + notes
        if trained:
            console.print(f"Trained with: {trained}", markup=False, style="bold yellow")
        console.print(grprune.collect.rich_table(rows, layout, select))
        legend = grprune.collect.warmup_legend(rows)
        if legend:  # what a cell marked † is: an ERM warm-up model
            console.print(legend, markup=False, style="yellow", soft_wrap=True)
        console.print(grprune.collect.SELECTION_TEXT[select] + ".", markup=False,
                      style="bold red" if select == "oracle" else "dim")
        md, csv_path = grprune.collect.write_outputs(rows, out or base / "results", layout,
                                                     select, md_notes)
        click.echo(f"grprune: wrote {md} and {csv_path}", err=True)
    if notes:
        click.echo(click.style("Not collected / incomplete:", fg="yellow"), err=True)
        for note in notes:
            click.echo(f"  {note}", err=True)


@click.command("curves")
@click.argument("dirs", nargs=-1, required=True, metavar="DIR...",
                type=click.Path(path_type=Path))
@option("--out", type=click.Path(path_type=Path), default=None, metavar="FILE",
        help="PNG file [default: DIR/curves.png, DIR the first argument]")
def curves(dirs, out) -> None:
    """Metrics and selector diagnostics over epochs, one line per method and setting.

    Reads results.jsonl of every finished run under DIR and draws, averaged over seeds:
    valid and test metric, the fraction of test edges kept at evaluation, quantiles of
    the keep probability p, the share of bonds with p < 0.1 and p > 0.9, and on data with
    ground-truth motif edges the motif-edge ROC-AUC (OOD-test, ID-valid) and Precision@50.
    A panel without data in any run (the motif panels on molecules, the selector panels
    of ERM) is left out.

    \b
    Example:
      grprune curves runs/prune-motif --out curves.png
    """
    from grprune.curves import plot, series

    for d in dirs:
        if not d.is_dir():
            raise GrpruneError(f"no such directory: {d}")
    groups = series(dirs)
    path = plot(groups, out or dirs[0] / "curves.png")
    for g in groups:
        click.echo(f"  {g.label}: {len(g.runs)} run(s)", err=True)
    click.echo(f"grprune: wrote {path}", err=True)
