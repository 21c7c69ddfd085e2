"""CSV files read as tables of text, and their columns found by name: the one reader and
the one column matcher of molecule CSVs (training data, ``grprune predict --csv``,
``grprune screen``, explain's ``--graphs`` files and ``grprune data info``).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from grprune.data.csv_cells import open_csv, shown_names
from grprune.errors import DataError
from grprune.messages import short_repr, short_text


def read_text_csv(path: str | Path, what: str, hint: str = "") -> pd.DataFrame:
    """A CSV file (plain or compressed, inferred from the suffix) with every cell a string.

    Missing cells are ``""``, never NaN; a cell over
    :data:`~grprune.data.csv_cells.CELL_LIMIT` bytes is not read but noted
    (:func:`grprune.data.csv_cells.open_csv`: a SMILES so long is skipped as too large).

    Parameters
    ----------
    path : str or Path
    what : str
        How messages name the file (``"data file"``, ``"--csv"``).
    hint : str
        Appended to the message of an unreadable file.

    Raises
    ------
    DataError
        If the file is missing, empty or unreadable (gzip, parser or decoding errors).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} not found: {path}")
    try:
        with open_csv(path) as fh:  # a cell over CELL_LIMIT bytes is never held whole
            return pd.read_csv(fh, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise DataError(f"{what} {path} is empty") from None
    except Exception as exc:  # gzip/zlib/EOF/parser/decoding errors
        raise DataError(f"cannot read {what} {path}: {type(exc).__name__}: {exc}{hint}") from None


def same_column(columns: Sequence[str], name: str | None) -> str | None:
    """The column that ``name`` refers to, as :func:`match_columns` matches it (an exact
    match, else the one column equal to it up to case); None where there is none, or no
    ``name``.

    >>> same_column(["ID", "smiles"], "id"), same_column(["id", "ID"], "Id"), same_column(["a"], "")
    ('ID', None, None)
    """
    if not name:
        return None
    exact = [c for c in columns if c == name]
    folded = [c for c in columns if c.casefold() == str(name).casefold()]
    match = exact or (folded if len(folded) == 1 else [])
    return match[0] if match else None


def match_columns(columns: Sequence[str], wanted: Mapping[str, str], where: str) -> dict[str, str]:
    """The CSV column each wanted name refers to, matched one way everywhere.

    An exact match wins; otherwise a name matches the one column equal to it up
    to case (``SMILES`` for ``smiles``). Training (``data.smiles_column``,
    ``data.label_column``, ``data.id_column``), ``grprune predict --csv``
    (``--smiles-column``, ``--keep-columns``) and ``grprune data info`` all match
    through this function.

    Parameters
    ----------
    columns : sequence of str
        The CSV's header.
    wanted : mapping of str to str
        What asks (e.g. ``"data.smiles_column"``, named in the message) -> the
        column name asked for; a key equal to its name is not repeated.
    where : str
        How the message names the file (``"data file mols.csv"``).

    Returns
    -------
    dict of str to str
        What asks -> the column's name as the header spells it.

    Raises
    ------
    DataError
        Naming every missing column in one message, with the columns present and
        a close match where there is one.

    Examples
    --------
    >>> match_columns(["ID", "SMILES", "y"], {"smiles": "smiles", "label": "y"}, "f.csv")
    {'smiles': 'SMILES', 'label': 'y'}
    """
    columns = [str(c) for c in columns]
    found, missing = {}, []
    for asker, name in wanted.items():
        match = same_column(columns, name)
        if match is not None:
            found[asker] = match
        else:
            asked = f" ({short_text(asker, 60)})" if asker != name else ""
            by_folded = {c.casefold(): c for c in columns if len(c) <= 1000}  # close, case aside
            close = difflib.get_close_matches(str(name).casefold(), list(by_folded), n=1,
                                              cutoff=0.5) if len(str(name)) <= 1000 else []
            hint = f" Did you mean {short_repr(by_folded[close[0]], 60)}?" if close else ""
            missing.append(f"{short_repr(name, 60)}{asked}{hint}")
    if missing:
        s = "s" if len(missing) > 1 else ""
        raise DataError(f"{short_text(where, 80)} has no column{s} {'; '.join(missing[:3])}"
                        f"{' ...' if len(missing) > 3 else ''}. Its columns: "
                        f"{shown_names(columns)}")
    return found
