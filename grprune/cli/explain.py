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


def _csv_ids(run, csv_file: Path, id_column: str | None) -> list[str] | None:
    """The ``--csv`` file's compound IDs: ``--id-column``, else the run's
    ``data.id_column`` where the CSV has that column; None for neither."""
    from grprune.data.molecules import match_columns, read_text_csv
    df = read_text_csv(csv_file, "--csv")
    name = id_column or run.cfg.data.id_column
    if not name:
        return None
    if id_column is None and name.casefold() not in {str(c).casefold() for c in df.columns}:
        return None  # the run's ID column is not in this file: rows identify molecules
    col = match_columns(df.columns, {"--id-column": name}, f"--csv {csv_file}")["--id-column"]
    return [str(x) for x in df[col].tolist()]


def _with_csv_columns(molecules, csv_file: Path, keep_columns: str | None,
                      smiles_column: str | None):
    """:func:`grprune.predict.with_input_columns` of ``--csv``, ``--keep-columns`` and
    ``--smiles-column``."""
    from grprune.data.molecules import read_text_csv
    from grprune.predict import with_input_columns
    keep = [c.strip() for c in keep_columns.split(",") if c.strip()] if keep_columns else None
    return with_input_columns(molecules, read_text_csv(csv_file, "--csv"), keep, smiles_column)


def _short(smiles: str, width: int = 120) -> str:
    """User text for a printed table: cut to ``width`` characters (a 20,000-atom chain
    would fill the screen), rich markup escaped (``[nH]`` is a bracket atom, not a tag)."""
    from rich.markup import escape
    return escape(smiles if len(smiles) <= width else smiles[:width - 1] + "…")


def _why(row: dict) -> str:
    """The status cell of a printed row of predictions: ``ok``, else the reason it was not
    scored."""
    return _short(str(row.get("reason") or row["status"]), 200)


def _score_columns(df) -> list[str]:
    """The score columns of a prediction table: ``prob_*``, ``pred_*``, or an ensemble's
    ``score_mean``, ``score_sd``."""
    from grprune.predict_columns import shown_score_columns
    return [*shown_score_columns([str(c) for c in df.columns]),
            *(c for c in ("score_mean", "score_sd") if c in df.columns)]


def _label(value, ok: bool) -> str:
    """The label cell: the predicted class; ``-`` where there is none (a molecule not
    scored; a regression or multi-task run, whose ``pred_label`` is empty)."""
    import pandas as pd
    return "-" if not ok or value is None or pd.isna(value) or str(value) == "" else str(value)


def _kept(r: dict) -> str:
    """The kept-bonds cell: ``kept/bonds``, or the bonds alone (an ensemble keeps none)."""
    return (f"{r['bonds_kept']}/{r['num_bonds']}" if "bonds_kept" in r
            else f"{r['num_bonds']} bonds")


def _model_name(run) -> str:
    """A run's directory name, or an ensemble's :attr:`grprune.ensemble.Ensemble.name`."""
    from grprune.ensemble import Ensemble
    return run.name if isinstance(run, Ensemble) else run.run_dir.name


def _prediction_table(run, pred, ids: list[str] | None, shown: int):
    """The printed table of predict: the first ``shown`` molecules."""
    from rich.table import Table

    from grprune.predict import OK
    df = pred.molecules
    prob_cols = _score_columns(df)
    table = Table(title=_short(f"{run.dataset_name} model {_model_name(run)}: "
                               f"{pred.n_ok}/{len(df)} molecules scored", 400))
    for col, just in (("row", "right"), *((("id", "left"),) if ids else ()),
                      ("canonical SMILES", "left"), ("status", "left"),
                      *((c, "right") for c in prob_cols), ("label", "right"),
                      ("kept bonds", "right")):
        table.add_column(col, justify=just, overflow="fold")
    for rec in df.head(shown).itertuples(index=False):
        r = rec._asdict()
        ok = r["status"] == OK
        table.add_row(str(r["row"]), *((_short(ids[r["row"]]),) if ids else ()),
                      _short(r["canonical_smiles"] or r["smiles"]), _why(r),
                      *((f"{r[c]:.4f}" if ok else "-") for c in prob_cols),
                      _label(r["pred_label"], ok),
                      _kept(r) if ok else "-")
    return table


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
    from grprune.ensemble import Ensemble
    from grprune.predict import check_molecule_run

    paths = [*([run_dir] if run_dir is not None else []), *runs]
    rows_per_chunk = _check_predict_options(paths, smiles, csv_file, chunk_rows, smiles_column,
                                            id_column, keep_columns, out, bonds, top_k,
                                            batch_size)
    run = load_model(paths, device, calibrated=calibrated, log=_note)
    check_molecule_run(run)
    if isinstance(run, Ensemble) and len(run) > 1:
        if bonds or draw_dir is not None:
            raise GrpruneError(f"{'--bonds' if bonds else '--draw'} shows one model's kept "
                               f"bonds; it does not apply to an ensemble of several runs")
        _note(f"scoring with an ensemble of {len(run)} runs: "
              + ", ".join(str(r.run_dir) for r in run.members))
    if calibrated:
        _note("probabilities calibrated: " + "; ".join(
            f"{r.run_dir.name} {c.describe()}" for r, c in zip(run.members, run.calibrators)))
    if run.warmup_note:  # an ERM warm-up model: every bond is kept
        _note(run.warmup_note)
    from grprune.screen import can_stream
    if csv_file is not None and draw_dir is None and can_stream(run):
        n_ok = _predict_stream(run, csv_file, smiles_column, id_column, keep_columns, out,
                               bonds, batch_size, progress, rows_per_chunk)
    else:
        n_ok = _predict_in_memory(run, smiles, csv_file, smiles_column, id_column,
                                  keep_columns, out, bonds, draw_dir, top_k, fmt, batch_size)
    scored, too_large = n_ok
    if scored == 0:  # as the help says: exit status 1 when none is, too large ones included
        _note("no molecule could be scored" + (
            f" ({too_large:,} too large: over the atom or size limit)" if too_large else ""))
        click.get_current_context().exit(1)


def _check_predict_options(paths, smiles, csv_file, chunk_rows, smiles_column, id_column,
                           keep_columns, out, bonds, top_k, batch_size) -> int:
    """Refuse predict's option combinations that cannot work (one line each), before a
    run is loaded; the rows per chunk."""
    if not paths:
        raise GrpruneError("name the run: grprune predict RUN ..., or --run DIR (repeatable)")
    if bool(smiles) == (csv_file is not None):
        raise GrpruneError("give either --smiles (repeatable) or --csv FILE")
    for name, given in (("--smiles-column", smiles_column), ("--keep-columns", keep_columns),
                        ("--id-column", id_column), ("--chunk-rows", chunk_rows)):
        if given is not None and csv_file is None:
            raise GrpruneError(f"{name} applies to --csv only")
    if top_k is not None and top_k < 1:
        raise GrpruneError(f"--top-k must be at least 1, got {top_k}")
    if batch_size < 1:
        raise GrpruneError(f"--batch-size must be at least 1, got {batch_size}")
    if bonds and out is None:
        raise GrpruneError("--bonds needs --out FILE")
    if out is not None and out.suffix.lower() == ".parquet" and csv_file is None:
        raise GrpruneError("--out .parquet applies to --csv; write --smiles results to a .csv")
    from grprune.screen import CHUNK_ROWS
    from grprune.screen_files import check_output, check_target
    rows_per_chunk = _positive_int("--chunk-rows", chunk_rows, CHUNK_ROWS)
    if out is not None:
        check_output(out)  # Parquet without pyarrow: one line, before anything is read
    if csv_file is not None and not csv_file.is_file():
        raise GrpruneError(f"--csv not found: {csv_file}")
    if out is not None:  # a directory, or the input itself: before the run is loaded
        check_target(out, csv_file, bonds)
    return rows_per_chunk


def _positive_int(name: str, text: str | None, default: int) -> int:
    """An option's positive integer (``default`` when not given).

    Raises
    ------
    GrpruneError
        One line, for text that is no integer or one below 1.
    """
    if text is None:
        return default
    from grprune.hparams import short_repr
    digits = str(text).replace("_", "").replace(",", "")
    try:
        if len(digits) > 40:  # int() refuses 4,300 digits (and no chunk is near 40)
            raise ValueError(digits)
        value = int(digits)
    except ValueError:
        raise GrpruneError(f"{name} must be a whole number of rows, got "
                           f"{short_repr(text)}") from None
    if value < 1:
        raise GrpruneError(f"{name} must be at least 1, got {value}")
    return value


def _predict_stream(run, csv_file, smiles_column, id_column, keep_columns, out, bonds,
                    batch_size, progress, chunk_rows) -> tuple[int, int]:
    """``predict --csv`` through :func:`grprune.screen.screen_csv`; the molecules scored
    and those too large to score."""
    from grprune.screen import ScreenOptions, screen_csv
    keep = [c.strip() for c in keep_columns.split(",") if c.strip()] if keep_columns else None
    opts = ScreenOptions(smiles_column=smiles_column, id_column=id_column, keep_columns=keep,
                         batch_size=batch_size, bonds=bonds, progress=progress,
                         chunk_rows=chunk_rows)
    summary = screen_csv(run, csv_file, out, opts, log=_note)
    shown = 50
    _console().print(_stream_table(run, summary, shown))
    if summary.rows > shown:
        click.echo(f"... {summary.rows - shown:,} more rows" + (
            "" if out else "; use --out FILE for all of them"))
    _report_duplicates(summary.duplicate_ids, summary.duplicate_rows)
    _note(summary.line())
    if out is not None:
        _note("wrote " + " and ".join(str(f) for f in summary.files))
    from grprune.data.molecules import TOO_LARGE
    return summary.scored, summary.skipped.get(TOO_LARGE, 0)


def _report_duplicates(count: int, first: list) -> None:
    """One note on repeated compound IDs: how many rows, and the first ones."""
    if count:
        shown = "; ".join(f"row {r} has ID {i!r} of row {f}" for r, i, f in first[:5])
        _note(f"{count} row{'s' if count > 1 else ''} repeat{'' if count > 1 else 's'} an "
              f"earlier row's ID ({shown}{' ...' if count > 5 else ''}); scores are per "
              f"row, but lookups by ID are ambiguous")


def _stream_table(run, summary, shown: int):
    """The printed table of a streamed predict: its first ``shown`` rows."""
    from rich.table import Table

    from grprune.predict import OK
    df = summary.head
    prob_cols = _score_columns(df)
    table = Table(title=_short(f"{run.dataset_name} model {_model_name(run)}: "
                               f"{summary.scored:,}/{summary.rows:,} molecules scored", 400))
    id_col = summary.id_column
    for col in ("row", *(("id",) if id_col else ()), "canonical SMILES", "status", *prob_cols,
                "label", "kept bonds"):
        table.add_column(col, justify="left" if col in ("id", "canonical SMILES", "status")
                         else "right", overflow="fold")
    for r in df.head(shown).to_dict("records"):
        ok = r["status"] == OK
        table.add_row(str(r["row"]), *((_short(str(r[id_col])),) if id_col else ()),
                      _short(r["canonical_smiles"] or r["smiles"]), _why(r),
                      *((f"{r[c]:.4f}" if ok else "-") for c in prob_cols),
                      _label(r["pred_label"], ok),
                      _kept(r) if ok else "-")
    return table


def _predict_in_memory(run, smiles, csv_file, smiles_column, id_column, keep_columns, out,
                       bonds, draw_dir, top_k, fmt, batch_size) -> tuple[int, int]:
    """``predict --smiles``, ``--draw`` and runs with other featurizers: every molecule in
    memory (:func:`grprune.ensemble.score_smiles`); the molecules scored and those too
    large to score."""
    from grprune.ensemble import score_smiles
    from grprune.predict import OK, draw_prediction, read_smiles_csv, write_prediction
    from grprune.data.molecules import TOO_LARGE
    inputs = list(smiles) if smiles else read_smiles_csv(csv_file, smiles_column)
    ids = _csv_ids(run, csv_file, id_column) if csv_file is not None else None
    pred = score_smiles(run, inputs, batch_size=batch_size)
    if csv_file is not None:  # the input's own columns (IDs, names) go beside the scores
        pred.molecules = _with_csv_columns(pred.molecules, csv_file, keep_columns,
                                           smiles_column)
    if ids is not None:
        seen: dict[str, int] = {}
        dups = []
        for r, i in enumerate(ids):
            if i != "" and i in seen:
                dups.append((r, i, seen[i]))
            seen.setdefault(i, r)
        _report_duplicates(len(dups), dups[:10])
        pred.bonds.insert(1, "id", [ids[r] for r in pred.bonds["row"]])
    df, shown = pred.molecules, 50
    _console().print(_prediction_table(run, pred, ids, shown))
    if len(df) > shown:
        click.echo(f"... {len(df) - shown} more rows" + ("" if out else "; use --out FILE "
                                                          "for all of them"))
    if out is not None:
        files = write_prediction(pred, out, bonds=bonds)
        _note("wrote " + " and ".join(str(f) for f in files))
    if draw_dir is not None:
        from grprune.draw import rdkit_drawing_error
        if rdkit_drawing_error():
            _note(f"RDKit cannot draw molecules here ({rdkit_drawing_error()}); "
                  f"drawing plain graphs (node = atom index)")
        drawn = draw_prediction(pred, draw_dir, fmt=fmt, top_k=top_k, ids=ids)
        _note(f"wrote {_count(len(drawn), 'picture')} to {draw_dir}")
    failed = df[df["status"] != OK]
    if len(failed):
        by = failed.groupby("status")["row"].apply(list)
        parts = [f"{status}: row{'s' if len(rows) > 1 else ''} "
                 f"{', '.join(map(str, rows[:10]))}{' ...' if len(rows) > 10 else ''}"
                 for status, rows in by.items()]
        _note(f"{len(failed)} of {len(df)} molecules not scored ({'; '.join(parts)})")
    return pred.n_ok, int((df["status"] == TOO_LARGE).sum())
