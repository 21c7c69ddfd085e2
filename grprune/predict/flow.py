"""The prediction flow: score molecules with a run (or an ensemble), streamed or in memory.

:func:`predict_request` is ``grprune predict`` once its options are parsed: it checks the run,
chooses how to score (:func:`streams`: a ``--csv`` library through
:func:`grprune.predict.stream.screen_csv`, in chunks; SMILES, ``--draw`` and runs with other
featurizers in memory, :func:`grprune.predict.ensemble.score_smiles`), writes the files, and hands
the command a :class:`PredictResult` and its printed table (:class:`PrintedTable`); the
command only prints. :func:`check_request` refuses option combinations that cannot work,
before a run is loaded.

:func:`predict_molecules` is :meth:`grprune.inference.Run.predict` (and
:func:`grprune.api.predict_ensemble`'s): SMILES go to :func:`grprune.predict.ensemble.score_smiles`,
a table (:func:`is_table`) to :func:`predict_table`, which chooses as :func:`predict_request` does
(:func:`streams`), streams it through :func:`grprune.predict.stream.screen_csv` (or scores
it in memory for a run whose featurizer is not OGB's) and reads the written rows back with
their dtypes (:func:`read_table`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from grprune.errors import DataError, GrpruneError
from grprune.predict.ensemble import Ensemble, score_smiles
from grprune.predict.columns import shown_score_columns
from grprune.predict.printed import PrintedTable, printed_table
from grprune.predict.memory import (OK, Prediction, draw_prediction, molecule_featurizer,
                                    read_smiles_csv, with_input_columns)
from grprune.predict.stream import CHUNK_ROWS, ScreenOptions, ScreenSummary, screen_csv
from grprune.predict.outputs import check_output, check_target, write_prediction


@dataclass(frozen=True)
class PredictRequest:
    """What to score and where to write it: ``grprune predict``'s options, parsed.

    ``chunk_rows`` is the option's text until :func:`check_request` makes it a number;
    ``keep_columns`` is ``"A,B"``.
    """

    smiles: tuple = ()
    csv_file: Path | None = None
    smiles_column: str | None = None
    id_column: str | None = None
    keep_columns: str | None = None
    out: Path | None = None
    bonds: bool = False
    draw_dir: Path | None = None
    top_k: int | None = None
    fmt: str = "png"
    batch_size: int = 2048
    progress: str = "auto"
    chunk_rows: int | str | None = None


@dataclass
class PredictResult:
    """What :func:`predict_request` did: molecules ``scored`` and ``too_large`` (not scored: over
    the atom or size limit), the streamed screen's summary or the in-memory prediction."""

    scored: int = 0
    too_large: int = 0
    summary: ScreenSummary | None = None
    prediction: Prediction | None = None


def _quiet(msg) -> None:
    """A ``log`` or ``show`` that drops what it is given."""


def check_request(request: PredictRequest) -> PredictRequest:
    """Refuse option combinations that cannot work (one line each), before a run is
    loaded; the request with its rows per chunk a number.

    Raises
    ------
    GrpruneError
        One line naming the option.
    """
    r = request
    if bool(r.smiles) == (r.csv_file is not None):
        raise GrpruneError("give either --smiles (repeatable) or --csv FILE")
    for name, given in (("--smiles-column", r.smiles_column), ("--keep-columns", r.keep_columns),
                        ("--id-column", r.id_column), ("--chunk-rows", r.chunk_rows)):
        if given is not None and r.csv_file is None:
            raise GrpruneError(f"{name} applies to --csv only")
    if r.top_k is not None and r.top_k < 1:
        raise GrpruneError(f"--top-k must be at least 1, got {r.top_k}")
    if r.batch_size < 1:
        raise GrpruneError(f"--batch-size must be at least 1, got {r.batch_size}")
    if r.bonds and r.out is None:
        raise GrpruneError("--bonds needs --out FILE")
    if r.out is not None and r.out.suffix.lower() == ".parquet" and r.csv_file is None:
        raise GrpruneError("--out .parquet applies to --csv; write --smiles results to a .csv")
    rows_per_chunk = _positive_int("--chunk-rows", r.chunk_rows, CHUNK_ROWS)
    if r.out is not None:
        check_output(r.out)  # Parquet without pyarrow: one line, before anything is read
    if r.csv_file is not None and not r.csv_file.is_file():
        raise GrpruneError(f"--csv not found: {r.csv_file}")
    if r.out is not None:  # a directory, or the input itself: before the run is loaded
        check_target(r.out, r.csv_file, r.bonds)
    return replace(r, chunk_rows=rows_per_chunk)


def _positive_int(name: str, text, default: int) -> int:
    """An option's positive integer (``default`` when not given).

    Raises
    ------
    GrpruneError
        One line, for text that is no integer or one below 1.
    """
    if text is None:
        return default
    from grprune.messages import short_repr
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


def _keep(keep_columns: str | None) -> list[str] | None:
    """``--keep-columns A,B`` as a list (None: every column)."""
    return [c.strip() for c in keep_columns.split(",") if c.strip()] if keep_columns else None


def streams(run, request: PredictRequest) -> bool:
    """Whether :func:`predict_request` streams: a ``--csv`` library, nothing drawn, and a
    run whose featurizer (:func:`grprune.predict.memory.molecule_featurizer`) is OGB's, the
    one the chunks are featurized with (:func:`grprune.predict.stream.can_stream`).

    Raises
    ------
    GrpruneError
        A run without molecule features (:func:`~grprune.predict.memory.molecule_featurizer`).
    """
    from grprune.data.molecules import smiles_to_graph
    featurizer = molecule_featurizer(run)  # refuses a run without molecule features
    return (request.csv_file is not None and request.draw_dir is None
            and featurizer is smiles_to_graph)


def predict_request(run, request: PredictRequest, log: Callable[[str], None] = _quiet,
            show: Callable[[PrintedTable], None] = _quiet) -> PredictResult:
    """Score ``request``'s molecules with ``run``: ``grprune predict``.

    Parameters
    ----------
    run : grprune.inference.Run or grprune.predict.ensemble.Ensemble
        A molecule run, or runs (:func:`grprune.api.load_model`).
    request : PredictRequest
        Checked by :func:`check_request`.
    log : callable
        Receives the notes (stderr of the command), one line each.
    show : callable
        Receives the table of the first rows, when it is ready.

    Returns
    -------
    PredictResult

    Raises
    ------
    GrpruneError
        Not a molecule run; ``--bonds`` or ``--draw`` with an ensemble; as
        :func:`~grprune.predict.stream.screen_csv`.
    """
    streamed = streams(run, request)
    if isinstance(run, Ensemble) and len(run) > 1:
        if request.bonds or request.draw_dir is not None:
            raise GrpruneError(f"{'--bonds' if request.bonds else '--draw'} shows one model's "
                               f"kept bonds; it does not apply to an ensemble of several runs")
        log(f"scoring with an ensemble of {len(run)} runs: "
            + ", ".join(str(r.run_dir) for r in run.members))
    if isinstance(run, Ensemble) and run.calibrated:
        log("probabilities calibrated: " + "; ".join(
            f"{r.run_dir.name} {c.describe()}" for r, c in zip(run.members, run.calibrators)
            if c is not None))
    if run.warmup_note:  # an ERM warm-up model: every bond is kept
        log(run.warmup_note)
    result = (_stream(run, request, log, show) if streamed
              else _in_memory(run, request, log, show))
    if result.scored == 0:  # the command's exit status 1, too large ones included
        log("no molecule could be scored" + (
            f" ({result.too_large:,} too large: over the atom or size limit)"
            if result.too_large else ""))
    return result


def _stream(run, request: PredictRequest, log, show) -> PredictResult:
    """:func:`predict_request` of a ``--csv`` library through
    :func:`~grprune.predict.stream.screen_csv`."""
    from grprune.data.molecules import TOO_LARGE
    r = request
    opts = ScreenOptions(smiles_column=r.smiles_column, id_column=r.id_column,
                         keep_columns=_keep(r.keep_columns), batch_size=r.batch_size,
                         bonds=r.bonds, progress=r.progress, chunk_rows=int(r.chunk_rows or CHUNK_ROWS))
    assert r.csv_file is not None  # streams() streams a --csv library only
    summary = screen_csv(run, r.csv_file, r.out, opts, log=log)
    df, shown, id_col = summary.head, 50, summary.id_column
    table = printed_table(
        f"{run.dataset_name} model {_model_name(run)}: "
        f"{summary.scored:,}/{summary.rows:,} molecules scored", df.head(shown), id_col is not None,
        [str(v) for v in df[id_col].head(shown)] if id_col else None)
    if summary.rows > shown:
        table.more = (f"... {summary.rows - shown:,} more rows"
                      + ("" if r.out else "; use --out FILE for all of them"))
    show(table)
    log_duplicates(summary.duplicate_ids, summary.duplicate_rows, log)
    log(summary.line())
    if r.out is not None:
        log("wrote " + " and ".join(str(f) for f in summary.files))
    return PredictResult(scored=summary.scored, too_large=summary.skipped.get(TOO_LARGE, 0),
                         summary=summary)


def _in_memory(run, request: PredictRequest, log, show) -> PredictResult:
    """:func:`predict_request` of ``--smiles``, ``--draw`` and runs with other featurizers: every
    molecule in memory (:func:`grprune.predict.ensemble.score_smiles`)."""
    from grprune.data.csv_tables import read_text_csv
    from grprune.data.molecules import TOO_LARGE
    r = request
    inputs = (list(r.smiles) if r.csv_file is None
              else read_smiles_csv(r.csv_file, r.smiles_column))
    ids = _csv_ids(run, r.csv_file, r.id_column) if r.csv_file is not None else None
    pred = score_smiles(run, inputs, batch_size=r.batch_size)
    if r.csv_file is not None:  # the input's own columns (IDs, names) go beside the scores
        pred.molecules = with_input_columns(pred.molecules, read_text_csv(r.csv_file, "--csv"),
                                            _keep(r.keep_columns), r.smiles_column)
    if ids is not None:
        dups = _duplicate_ids(ids)
        log_duplicates(len(dups), dups[:10], log)
        pred.bonds.insert(1, "id", [ids[row] for row in pred.bonds["row"]])
    df, shown = pred.molecules, 50
    table = printed_table(f"{run.dataset_name} model {_model_name(run)}: "
                           f"{pred.n_ok}/{len(df)} molecules scored", df.head(shown),
                           ids is not None, [ids[row] for row in df["row"].head(shown)]
                           if ids is not None else None)
    if len(df) > shown:
        table.more = (f"... {len(df) - shown} more rows"
                      + ("" if r.out else "; use --out FILE for all of them"))
    show(table)
    _log_failed(df, log)
    if r.out is not None:
        log("wrote " + " and ".join(str(f) for f in write_prediction(pred, r.out, bonds=r.bonds)))
    if r.draw_dir is not None:
        _draw(pred, r.draw_dir, r, ids, log)
    return PredictResult(scored=pred.n_ok, too_large=int((df["status"] == TOO_LARGE).sum()),
                         prediction=pred)


def _model_name(run) -> str:
    """A run's directory name, or an ensemble's :attr:`grprune.predict.ensemble.Ensemble.name`."""
    return run.name if isinstance(run, Ensemble) else run.run_dir.name


def _csv_ids(run, csv_file: Path, id_column: str | None) -> list[str] | None:
    """The ``--csv`` file's compound IDs: ``--id-column``, else the run's
    ``data.id_column`` where the CSV has that column; None for neither."""
    from grprune.data.csv_tables import match_columns, read_text_csv, same_column
    df = read_text_csv(csv_file, "--csv")
    cols = [str(c) for c in df.columns]
    col = (match_columns(cols, {"--id-column": id_column}, f"--csv {csv_file}")["--id-column"]
           if id_column else same_column(cols, run.cfg.data.id_column))
    return None if col is None else [str(x) for x in df[col].tolist()]


def _duplicate_ids(ids: list[str]) -> list[tuple[int, str, int]]:
    """(row, ID, the first row with that ID) of each row that repeats an earlier ID."""
    seen: dict[str, int] = {}
    dups = []
    for r, i in enumerate(ids):
        if i != "" and i in seen:
            dups.append((r, i, seen[i]))
        seen.setdefault(i, r)
    return dups


def log_duplicates(count: int, first: list, log: Callable[[str], None]) -> None:
    """One note on repeated compound IDs: how many rows, and the first ones."""
    if count:
        shown = "; ".join(f"row {r} has ID {i!r} of row {f}" for r, i, f in first[:5])
        log(f"{count} row{'s' if count > 1 else ''} repeat{'' if count > 1 else 's'} an "
            f"earlier row's ID ({shown}{' ...' if count > 5 else ''}); scores are per "
            f"row, but lookups by ID are ambiguous")


def _draw(pred: Prediction, draw_dir: Path, request: PredictRequest, ids, log) -> None:
    """``--draw``: one picture per scored molecule, and a note."""
    from grprune.draw import rdkit_drawing_error
    if rdkit_drawing_error():
        log(f"RDKit cannot draw molecules here ({rdkit_drawing_error()}); "
            f"drawing plain graphs (node = atom index)")
    drawn = draw_prediction(pred, draw_dir, fmt=request.fmt, top_k=request.top_k,
                            ids=ids)
    n = len(drawn)
    log(f"wrote {n} picture{'' if n == 1 else 's'} to {draw_dir}")


def _log_failed(df, log) -> None:
    """One note on the molecules not scored: how many, by status, and their first rows."""
    failed = df[df["status"] != OK]
    if len(failed):
        by = failed.groupby("status")["row"].apply(list)
        parts = [f"{status}: row{'s' if len(rows) > 1 else ''} "
                 f"{', '.join(map(str, rows[:10]))}{' ...' if len(rows) > 10 else ''}"
                 for status, rows in by.items()]
        log(f"{len(failed)} of {len(df)} molecules not scored ({'; '.join(parts)})")



def is_table(molecules) -> bool:
    """Whether ``Run.predict`` is given a table rather than SMILES: a pandas DataFrame, a
    :class:`pathlib.Path`, or a str ending in ``.csv`` (``.csv.gz``, ``.bz2``, ``.xz``,
    ``.zip``, ``.zst``: no SMILES does).

    >>> is_table("library.csv.gz"), is_table("CCO"), is_table(["CCO"])
    (True, False, False)
    """
    import re

    import pandas as pd
    if isinstance(molecules, (Path, pd.DataFrame)):
        return True
    return isinstance(molecules, str) and re.search(
        r"\.csv(\.(gz|bz2|xz|zip|zst))?$", molecules.strip(), re.IGNORECASE) is not None


#: dtypes of predict's numeric columns when a written table is read back (the others are text)
_NUMERIC = {"molecules": {"row": "int64", "pred_label": "Int64", "num_bonds": "Int64",
                          "bonds_kept": "Int64", "score_mean": "float64", "score_sd": "float64",
                          "ensemble_size": "int64"},
            "bonds": {"row": "int64", "bond": "int64", "begin_atom": "int64",
                      "end_atom": "int64", "edge_prob": "float64", "edge_weight": "float64",
                      "kept": "int64"}}


def read_table(path: str | Path, kind: str = "molecules"):
    """A table predict wrote (:func:`~grprune.predict.stream.screen_csv`), read back with its
    dtypes: the input's columns and the SMILES as text (``""`` for empty cells), ``prob_*``
    and ``pred_*`` float (NaN when not scored), ``pred_label``, ``num_bonds``, ``bonds_kept``
    nullable integers.

    Parameters
    ----------
    path : path
        A ``.csv`` file.
    kind : {"molecules", "bonds"}
    """
    import pandas as pd
    cols = pd.read_csv(path, nrows=0).columns
    numeric = {c: ("float64" if kind == "molecules" and c in shown_score_columns(cols)
                   else _NUMERIC[kind].get(c)) for c in cols}
    return pd.read_csv(path, keep_default_na=False,
                       na_values={c: [""] for c, t in numeric.items() if t},
                       dtype={c: t or str for c, t in numeric.items()})


def predict_table(run, data, out: str | Path | None = None, opts: ScreenOptions | None = None,
                  log: Callable[[str], None] | None = None):
    """Score a table of molecules as ``grprune predict --csv`` does: ``Run.predict`` of a
    pandas DataFrame or a CSV file.

    The rows go through :func:`~grprune.predict.stream.screen_csv` (in chunks, in bounded memory; a
    DataFrame is written to a temporary CSV first), or, for a run with another featurizer
    (:func:`streams`), through :func:`grprune.predict.memory.predict_smiles` in
    memory, as the command does.

    Parameters
    ----------
    run : grprune.inference.Run
        A molecule run.
    data : pandas.DataFrame or path
        One row per molecule: a SMILES column (``opts.smiles_column``, default ``smiles``,
        matched up to case) and any others (IDs: ``opts.id_column``, or the run's
        ``data.id_column`` when the table has it).
    out : path, optional
        Write the rows there (``.csv``, or ``.parquet`` with pyarrow; resumed after an
        interruption as with ``--out``) and return the summary instead of the table.
    opts : ScreenOptions, optional
        Default: :class:`~grprune.predict.stream.ScreenOptions` without a progress display.
    log : callable, optional
        With ``out``: receives the state line (resume or clean start).

    Returns
    -------
    pandas.DataFrame or ScreenSummary
        Without ``out``, the molecule table (with ``opts.bonds``, the bond table) read back
        by :func:`read_table`: one row per input row, in order; the input's columns, as
        text. With ``out``, what was written.

    Raises
    ------
    DataError
        A missing or unreadable file, or a missing column.
    GrpruneError
        As :func:`~grprune.predict.stream.screen_csv`.
    """
    import tempfile

    import pandas as pd

    streamed = streams(run, PredictRequest(csv_file=Path("table.csv")))  # a table is a --csv
    opts = opts or ScreenOptions(progress="none")
    with tempfile.TemporaryDirectory(prefix="grprune-predict-") as tmp:
        if isinstance(data, pd.DataFrame):
            csv_file = Path(tmp) / "input.csv"
            data.to_csv(csv_file, index=False)
        else:
            csv_file = Path(data)
            if not csv_file.is_file():
                raise DataError(f"CSV file not found: {csv_file}")
        if not streamed:
            return _in_memory_table(run, csv_file, out, opts)
        target = Path(out) if out is not None else Path(tmp) / "preds.csv"
        summary = screen_csv(run, csv_file, target, opts,
                             log=(log or _quiet) if out is not None else _quiet)
        if out is not None:
            return summary
        from grprune.predict.memory import bonds_path
        return (read_table(bonds_path(target), "bonds") if opts.bonds
                else read_table(target))


def predict_molecules(model, molecules, batch_size: int = 256, bonds: bool = False, *,
                      smiles_column: str | None = None, id_column: str | None = None,
                      out: str | Path | None = None, chunk_rows: int | None = None, log=None):
    """:meth:`grprune.inference.Run.predict` (its parameters, returns and raises) of a run
    or of an :class:`~grprune.predict.ensemble.Ensemble` (:func:`grprune.api.predict_ensemble`):
    SMILES in memory (:func:`grprune.predict.ensemble.score_smiles`), a table through
    :func:`predict_table`."""
    table_only = {"smiles_column": smiles_column, "id_column": id_column, "out": out,
                  "chunk_rows": chunk_rows}
    if not is_table(molecules):
        given = [k for k, v in table_only.items() if v is not None]
        if given:
            raise GrpruneError(f"{given[0]}= applies to a table (a DataFrame or a CSV "
                               f"file), not to SMILES")
        items = [molecules] if isinstance(molecules, str) else list(molecules)
        pred = score_smiles(model, items, batch_size=batch_size)
        return pred.bonds if bonds else pred.molecules
    opts = ScreenOptions(smiles_column=smiles_column, id_column=id_column,
                         batch_size=batch_size, bonds=bonds, progress="none",
                         chunk_rows=CHUNK_ROWS if chunk_rows is None else int(chunk_rows))
    return predict_table(model, molecules, out=out, opts=opts, log=log)


def _in_memory_table(run, csv_file: Path, out: str | Path | None, opts: ScreenOptions):
    """:func:`predict_table` for a run :func:`~grprune.predict.stream.screen_csv` cannot score (its
    featurizer is not OGB's): every row in memory, as ``grprune predict`` scores such a run."""
    from grprune.data.csv_tables import match_columns, read_text_csv
    from grprune.predict.memory import with_input_columns
    inputs = read_text_csv(csv_file, "--csv")
    col = match_columns([str(c) for c in inputs.columns],
                        {"--smiles-column": opts.smiles_column or "smiles"}, "--csv")
    pred = score_smiles(run, inputs[col["--smiles-column"]].tolist(),
                        batch_size=opts.batch_size)
    pred.molecules = with_input_columns(pred.molecules, inputs, opts.keep_columns,
                                        opts.smiles_column)
    if out is None:
        return pred.bonds if opts.bonds else pred.molecules
    if Path(out).suffix.lower() == ".parquet":
        raise GrpruneError(f"out={out}: this run's molecules are scored in memory and "
                           f"written as CSV; name a .csv file")
    files = write_prediction(pred, out, bonds=opts.bonds)
    status = pred.molecules["status"]
    return ScreenSummary(rows=len(status), scored=pred.n_ok, files=files,
                         skipped=status[status != OK].value_counts().to_dict())
