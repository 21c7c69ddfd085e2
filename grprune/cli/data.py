"""``grprune data``: inspect datasets and export their splits."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import click

from grprune.cli.options import _names, option


def _load(name: str, split: str | None, shift: str | None, overrides: tuple[str, ...],
          root: str | None, download: bool):
    """Resolve dataset parameters (``--split``, ``--shift``, ``-H``) and load."""
    from grprune.data.registry import DATASETS, file_dataset, load_dataset
    from grprune.errors import GrpruneError
    from grprune.record.settings import parse_override

    params: dict[str, str] = {}
    found = file_dataset(name)
    if found is not None:  # grprune data info mols.csv
        name, params["path"] = found
    source = DATASETS.get(name)
    for text in overrides:
        key, value = parse_override(text if text.startswith("data.") else f"data.{text}")
        section, _, rest = key.partition(".")
        if section != "data":
            raise GrpruneError(f"-H {text}: only data.* keys apply to `grprune data`")
        params[rest] = value
    if split is not None:
        params["split"] = split
    if shift is not None:
        params["shift"] = shift
    resolved = source.resolve_params(params)
    t0 = time.perf_counter()
    dataset = load_dataset(source.registered_name, root=root, download=download, **resolved)
    return dataset, resolved, time.perf_counter() - t0


def _dataset_options(func):
    for opt in reversed([
        click.argument("name"),
        option("--split", default=None, help="split name (see `grprune ls datasets`)"),
        option("--shift", default=None, help="covariate or concept (GOOD datasets)"),
        option("-H", "--hparam", "overrides", multiple=True, metavar="KEY=VALUE",
               help="dataset hyperparameter, e.g. -H data.bias=0.7 (repeatable)"),
        option("--root", default=None, help="data root [default: $GRPRUNE_DATA_ROOT or "
                                            "~/.cache/grprune/data]"),
        option("--download", is_flag=True, default=False,
               help="use OGB's online download route (OGB datasets)"),
    ]):
        func = opt(func)
    return func


class _DataGroup(click.Group):
    """``grprune data``, whose help ends with the registered datasets: listed when the
    help is shown, so that importing the CLI imports no dataset module."""

    def format_help_text(self, ctx: click.Context, formatter) -> None:
        help_text = self.help
        self.help = f"{help_text}\n\n\b\nBuilt in: {_names('data')}"
        try:
            super().format_help_text(ctx, formatter)
        finally:
            self.help = help_text


@click.group("data", cls=_DataGroup, short_help="Inspect datasets and export their splits.")
def data() -> None:
    """Inspect datasets and export their splits (settings: `grprune ls datasets`)."""


def _pct(fractions: dict[str, float]) -> str:
    return " / ".join(f"{c}: {100 * f:.1f}%" if not math.isnan(f) else f"{c}: -"
                      for c, f in fractions.items())


@data.command("info")
@_dataset_options
@option("--json", "as_json", is_flag=True, default=False,
        help="print JSON (split sizes under `splits`) instead of a table")
def info(name, split, shift, overrides, root, download, as_json) -> None:
    """Graphs per split part, mean nodes and edges, label balance, environments.

    \b
    Example:
      grprune data info good-hiv --split size
      grprune data info spmotif -H data.bias=0.7 --json
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from grprune.data.info import describe

    dataset, params, load_s = _load(name, split, shift, overrides, root, download)
    facts = describe(dataset)
    facts["params"] = params
    facts["load_s"] = round(load_s, 3)
    if as_json:
        click.echo(json.dumps(facts, indent=2))
        return
    title = f"{facts['dataset']}  split={facts['split']}"
    if facts.get("shift"):
        title += f"  shift={facts['shift']}"
    table = Table(title=escape(title))
    for col, right in (("part", False), ("graphs", True), ("mean nodes", True),
                       ("mean edges", True), ("labels", False), ("envs", True)):
        table.add_column(col, justify="right" if right else "left")
    for part in facts["parts"].values():
        table.add_row(part["label"], str(part["graphs"]), f"{part['mean_nodes']:.1f}",
                      f"{part['mean_edges']:.1f}", _pct(part["label_fraction"]),
                      str(part["n_envs"]))
    console = Console(width=110)
    console.print(table)
    inf = facts["info"]
    lines = [f"graphs: {facts['n_graphs']}   classes: {facts['num_classes']}   "
             f"metric: {facts['metric']}   environments: {facts['n_envs']}   "
             f"ground-truth motif edges: {'yes' if facts['has_edge_gt'] else 'no'}"]
    if "source" in inf:
        lines.append(f"source: {inf['source']}")
    if "n_source_rows" in inf:
        skipped = inf.get("n_skipped", 0)
        bad = inf.get("bad_rows")  # [{"row", "reason"}] where a source gives reasons
        why = "" if bad is not None else " (RDKit cannot parse)"
        text = f"source rows: {inf['n_source_rows']}   skipped{why}: {skipped}"
        if skipped and bad is None:
            rows = inf.get("skipped_rows", [])
            text += f" (rows {', '.join(map(str, rows[:12]))}{', ...' if len(rows) > 12 else ''})"
        if inf.get("n_lenient"):
            text += f"   kept without valence check: {inf['n_lenient']}"
        lines.append(text)
        lines += [f"  row {b['row']}: {b['reason']}" for b in (bad or [])[:12]]
        if bad and len(bad) > 12:
            lines.append(f"  ... and {len(bad) - 12} more (grprune data info --json lists all)")
    if facts["unassigned"]:
        lines.append(f"graphs in no part: {facts['unassigned']}")
    from grprune.data.info import duplicate_ids_note
    if duplicate_ids_note(dataset):
        lines.append(f"duplicate IDs: {duplicate_ids_note(dataset)}")
    if "split_source" in inf:
        lines.append(f"split source: {inf['split_source']}")
    lines.append(f"cache: {inf.get('cache', '-')}   load time: {facts['load_s']:.2f} s")
    for line in lines:
        console.print(line, highlight=False, markup=False)  # paths, SMILES in reasons


@data.command("export")
@_dataset_options
@option("--out", type=click.Path(path_type=Path), required=True,
        help="folder for train/valid/test.csv.gz (and id_valid/id_test where they exist)")
@option("--force", is_flag=True, default=False, help="overwrite a different existing split")
def export(name, split, shift, overrides, root, download, out, force) -> None:
    """Write a split in OGB's format: one 0-based source-file row index per line.

    \b
    Example:
      grprune data export ogbg-molhiv --split scaffold --out splits/molhiv
    """
    from grprune.data.info import export_split

    dataset, params, _ = _load(name, split, shift, overrides, root, download)
    result = export_split(dataset, out, force=force)
    source = dataset.info.get("source", "the dataset's graph order")
    for part, path in result["files"].items():
        state = "unchanged" if part in result["unchanged"] else "written"
        click.echo(f"{path}: {result['sizes'][part]} rows ({state})")
    click.echo(f"indices are rows of {source}", err=True)
