"""``grprune explain`` (pictures, edges.csv and explanation metrics of a run) and
``grprune predict`` (a molecule run on new SMILES)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grprune.cli.options import option
from grprune.errors import GrpruneError


def _console(stderr: bool = False, width: int | None = None):
    from rich.console import Console
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=width or (None if stream.isatty() else 140),
                   highlight=False, soft_wrap=False)


def _note(msg: str) -> None:
    click.echo(f"grprune: {msg}", err=True)


@click.command("explain")
@click.argument("run_dir", type=click.Path(path_type=Path))
@option("--graphs", "graphs", default=None, metavar="IDS",
        help="graphs to draw, each in --part: dataset indices (3,17,40-45), source "
             "rows (row:204, row:200-210: 0-based CSV data rows, as data info and "
             "predict number them) or your IDs (id:CMPD-7, or any non-numeric name; "
             "data.id_column) [default: the first 8 graphs of --part]")
@option("--part", default="test", show_default=True,
        help="split part: train, valid, test, or id-valid/id-test on OOD benchmarks; "
             "metrics cover the whole part (data.limit applied, as in training)")
@option("--top-k", "top_k", type=int, default=None, metavar="K",
        help="mark the K bonds of highest keep probability instead of the bonds the "
             "evaluation mask keeps")
@option("--format", "fmt", type=click.Choice(["png", "svg"]), default="png", show_default=True,
        envvar="GRPRUNE_EXPLAIN_FORMAT", help="picture format")
@option("--out", type=click.Path(path_type=Path), default=None,
        help="output folder [default: RUN_DIR/explain]")
@option("--device", default="auto", show_default=True,
        help="auto (CUDA when present), cpu, cuda or cuda:N")
@option("--fidelity/--no-fidelity", default=True, show_default=True,
        envvar="GRPRUNE_EXPLAIN_FIDELITY",
        help="score the explanations of the whole --part without ground truth "
             "(fidelity+/-, characterization, sparsity; runs the model twice more per "
             "graph) into fidelity.json")
def explain(run_dir, graphs, part, top_k, fmt, out, device, fidelity) -> None:
    """Edge keep probabilities of a finished run: pictures, edges.csv, metrics.

    Reads the scores the trainer stored for the test part (edge_probs.npz) and, for
    other parts or runs without that file, rebuilds RUN_DIR's model (checkpoint.pt)
    and scores the graphs exactly as the trainer evaluated them; writes to --out:

    \b
      edges.csv       one row per undirected bond of the drawn graphs: graph index,
                      source row (0-based data row of your CSV), id (with
                      data.id_column), part, label, predicted class and
                      probabilities, SMILES, bond
                      (RDKit index for molecules), src, dst, edge_prob (sigmoid of
                      the logit), edge_weight and kept (evaluation mask), rank
                      (1 = highest probability), edge_gt (synthetic data)
      graph-<i>.png   graph-<i>_row-<r>_id-<ID>.png where the source row differs
                      from the index and IDs exist; molecules drawn with RDKit,
                      kept bonds highlighted in a colour
                      for their keep probability; synthetic graphs with networkx:
                      motif edges blue, kept solid, pruned dashed
      metrics.json    on data with ground-truth edges (good-motif, spmotif, mol-substructure):
                      edge ROC-AUC, Recall@K / Precision@K (K = 10..50 %), and the
                      G_c / G_s bonds among the top ceil(1.5|G_c|) and ceil(5|G_c|)
                      bonds (paper Fig. 2), over all graphs of the part and over
                      the correctly predicted ones; also printed as a table
      fidelity.json   a run with a selector: fidelity+/- (accuracy and probability
                      forms), characterization and sparsity over the whole part, S
                      the marked bonds, target the label and the prediction; printed

    \b
    Examples:
      grprune explain runs/good-motif/size+eps-align-seed0-0123abcd
      grprune explain RUN --graphs 3,17,40-45 --top-k 10 --format svg --out figs
      grprune explain RUN --graphs id:CMPD-0042,row:204 --part train
    """
    from grprune.explain import explain_run, metrics_rows
    from grprune.explain_graphs import parse_graph_ids
    from grprune.inference import load_run

    ids = parse_graph_ids(graphs) if graphs is not None else None
    run = load_run(run_dir, device)
    res = explain_run(run, part=part, graph_ids=ids, top_k=top_k, fmt=fmt, out_dir=out,
                      log=_note, fidelity=fidelity)
    for note in res.notes:
        _note(note)
    if res.metrics is not None:
        m = res.metrics
        acc = m.get("accuracy")
        _print_table(f"{m['dataset']} ({m['part']}): explanation metrics over undirected bonds"
                     + (f", accuracy {acc:.4f}" if acc is not None else ""),
                     ("metric", "all graphs", "correctly predicted"), metrics_rows(m),
                     "Recall/Precision@K: per graph the floor(K% of its bonds) with the lowest "
                     "probability are called spurious; counts summed over graphs. "
                     "Ties: lower bond id ranks higher.")
    if res.fidelity is not None:
        from grprune.explain_fidelity import fidelity_rows
        fid = res.fidelity
        _print_table(f"explanations without ground truth, {fid['part']} ({fid['graphs']} "
                     f"graphs); S = {fid['explanation']}",
                     ("score", "target = label", "target = prediction"), fidelity_rows(fid),
                     "fidelity+: the change when S is removed; fidelity-: the change when "
                     "only S is kept (GraphFramEx, as torch_geometric.explain.metric); "
                     "characterization: their weighted harmonic mean (of fid+ and 1 - fid-).")
    pictures = [f for f in res.files if f.startswith("graph-")]
    click.echo(f"wrote {_count(len(pictures), 'picture')}, edges.csv"
               + "".join(f", {f}" for f in ("metrics.json", "fidelity.json") if f in res.files)
               + f" to {res.out_dir}")


def _print_table(title: str, columns: tuple[str, str, str], rows, note: str) -> None:
    """One of ``grprune explain``'s tables: a name column and two value columns, then a
    line that says how to read it."""
    from rich.markup import escape
    from rich.table import Table

    from grprune.explain import format_value
    table = Table(title=escape(title))
    table.add_column(columns[0])
    for col in columns[1:]:
        table.add_column(col, justify="right")
    for name, a, b in rows:
        table.add_row(name, format_value(a), format_value(b))
    _console().print(table)
    click.echo(note)


def _count(n: int, noun: str) -> str:
    """``1 picture``, ``2 pictures``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


@click.command("predict")
@click.argument("run_dir", type=click.Path(path_type=Path), required=False)
@option("--run", "runs", multiple=True, type=click.Path(path_type=Path), metavar="DIR",
        help="a run directory, or a folder of finished runs (a sweep's output), to score "
             "with (repeatable): two or more runs form an ensemble, and each molecule gets "
             "the members' mean score (score_mean), its standard deviation (score_sd) and "
             "ensemble_size; the runs must share dataset, task and metric")
@option("--calibrated", is_flag=True, default=False, envvar="GRPRUNE_PREDICT_CALIBRATED",
        help="apply each run's post-hoc calibration (fitted by `grprune calibrate RUN`) to "
             "its class-1 probability (binary classification runs)")
@option("--smiles", "smiles", multiple=True, metavar="SMILES",
        help="a molecule to score (repeatable)")
@option("--csv", "csv_file", type=click.Path(path_type=Path), default=None,
        envvar="GRPRUNE_PREDICT_CSV", help="CSV file with a SMILES column (plain or compressed; "
                                           "read and scored in chunks)")
@option("--chunk-rows", "chunk_rows", default=None, metavar="N",
        envvar="GRPRUNE_PREDICT_CHUNK_ROWS",
        help="with --csv: rows per chunk at most; each chunk is scored and written before "
             "the next is read, and a rerun after a kill resumes after the last finished one "
             "(the first chunk is 500 rows, each next twice the last) [default: 20000]")
@option("--smiles-column", default=None, metavar="NAME",
        help="SMILES column of --csv [default: smiles, matched case-insensitively]")
@option("--id-column", default=None, metavar="NAME",
        help="with --csv: column of compound IDs, shown in the table, checked for duplicates, "
             "carried by --out and --bonds and in --draw's picture names "
             "(mol-<row>_id-<ID>.png) [default: the run's data.id_column when the CSV has it]")
@option("--keep-columns", default=None, metavar="A,B",
        help="with --csv: the input columns --out carries beside the scores [default: "
             "every column of the CSV, e.g. your compound IDs]")
@option("--out", type=click.Path(path_type=Path), default=None,
        help="write one row per input molecule to this file (.csv, or .parquet with "
             "pyarrow), written as OUT.partial and renamed when complete; a rerun after an "
             "interruption resumes it")
@option("--bonds", is_flag=True, default=False, envvar="GRPRUNE_PREDICT_BONDS",
        help="with --out: also write one row per bond (row, id, RDKit bond, atoms, bond "
             "type, edge_prob, edge_weight, kept) to <stem>.bonds.csv")
@option("--draw", "draw_dir", type=click.Path(path_type=Path), default=None, metavar="DIR",
        envvar="GRPRUNE_PREDICT_DRAW", help="write one picture per molecule to DIR (mol-<row>.png): "
             "kept bonds highlighted, atoms indexed (holds every molecule in memory: for "
             "small sets)")
@option("--top-k", "top_k", type=int, default=None, metavar="K",
        help="with --draw: mark the K bonds of highest keep probability instead of "
             "the kept bonds")
@option("--format", "fmt", type=click.Choice(["png", "svg"]), default="png", show_default=True,
        envvar="GRPRUNE_PREDICT_FORMAT", help="picture format of --draw")
@option("--batch-size", type=int, default=2048, show_default=True,
        help="molecules per batch (scores do not depend on it)")
@option("--progress", type=click.Choice(["auto", "plain", "none"]), default="auto",
        show_default=True, envvar="GRPRUNE_PREDICT_PROGRESS",
        help="progress on stderr: auto (a live line on a terminal, else plain lines at every "
             "10 % or 30 s), plain or none")
@option("--device", default="auto", show_default=True,
        help="auto (CUDA when present), cpu, cuda or cuda:N")
def predict(run_dir, runs, calibrated, smiles, csv_file, chunk_rows, smiles_column, id_column,
            keep_columns, out, bonds, draw_dir, top_k, fmt, batch_size, progress,
            device) -> None:
    """Score new molecules with a finished molecule run, or an ensemble of runs.

    Featurizes each SMILES like the training data (the run's features, RDKit's full
    sanitization: a molecule training would skip is not scored, and its reason is
    training's) and evaluates the model as the trainer did, each
    molecule's evaluation noise keyed by its canonical SMILES, so that its score
    depends on the molecule alone (not on the other rows, their order or the batch
    size). Prints the first rows: row (0-based input position), the ID (with an ID
    column), canonical SMILES, status (ok, or why not: empty SMILES, unparsable
    SMILES with RDKit's reason, too large), class-1 probability
    (all class probabilities beyond two classes), predicted label and bonds kept;
    then one summary line. --csv is read, scored and written in chunks, with
    progress on stderr, in bounded memory (a library of 10^6 SMILES is fine).
    With --csv, --out carries the CSV's own columns (compound IDs and the like)
    beside the scores. Several runs (--run A --run B, or a sweep's folder) are
    scored as an ensemble: each member as it scores alone, then the mean and standard
    deviation per molecule. --calibrated applies each run's calibration.json.
    Exit status 0 if at least one molecule was scored, 1 if none.

    \b
    Examples:
      grprune predict RUN --smiles 'CN1C=NC2=C1C(=O)N(C(=O)N2C)C' --smiles 'CC(=O)Oc1ccccc1C(=O)O'
      grprune predict RUN --csv library.csv.gz --id-column ID --out preds.csv
      grprune predict RUN --csv drugs.csv --smiles-column SMILES --out preds.parquet --bonds
      grprune predict --run runs/a --run runs/b --run runs/c --csv library.csv --out ens.csv
      grprune predict RUN --calibrated --csv library.csv --out calibrated.csv
    """
    from grprune.api import load_model
    from grprune.predict.flow import PredictRequest, check_request, predict_request

    paths = [*([run_dir] if run_dir is not None else []), *runs]
    if not paths:
        raise GrpruneError("name the run: grprune predict RUN ..., or --run DIR (repeatable)")
    request = check_request(PredictRequest(
        smiles=tuple(smiles), csv_file=csv_file, smiles_column=smiles_column,
        id_column=id_column, keep_columns=keep_columns, out=out, bonds=bonds,
        draw_dir=draw_dir, top_k=top_k, fmt=fmt, batch_size=batch_size, progress=progress,
        chunk_rows=chunk_rows))
    run = load_model(paths, device, calibrated=calibrated, log=_note)
    if predict_request(run, request, log=_note, show=_show).scored == 0:
        click.get_current_context().exit(1)  # as the help says: none scored, exit status 1


def _show(printed) -> None:
    """Print predict's table (:class:`grprune.predict.printed.PrintedTable`): its cells
    escaped (``[nH]`` is a bracket atom, not a tag), then the line under it."""
    from rich.markup import escape
    from rich.table import Table
    table = Table(title=escape(printed.title))
    for col, justify in printed.columns:
        table.add_column(col, justify=justify, overflow="fold")
    for row in printed.rows:
        table.add_row(*(escape(cell) for cell in row))
    _console().print(table)
    if printed.more is not None:
        click.echo(printed.more)
