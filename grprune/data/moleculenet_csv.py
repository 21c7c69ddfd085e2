"""MoleculeNet-style CSV files (a SMILES column and an integer class label column) read
and featurized into :class:`MoleculeGraphs`, directly or through an on-disk graph cache:
the bundled MoleculeNet sets of the ``ogbg-*``, ``good-hiv`` and ``mol-substructure``
datasets.

Featurization is :func:`grprune.data.molecules.smiles_to_graph` (OGB's features);
``lenient=True`` keeps molecules that fail only RDKit's valence check (see
:mod:`grprune.data.molecules`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from grprune.data.csv_tables import match_columns, read_text_csv
from grprune.data.molecules import featurize_smiles_with_lenient
from grprune.errors import DataError
from grprune.record.files import file_sha256


def read_molecule_csv(
    path: str | Path, smiles_column: str, label_column: str
) -> tuple[list[str], np.ndarray]:
    """Read the SMILES and integer class labels of a CSV (plain or ``.gz``).

    Parameters
    ----------
    path : str or Path
        The CSV file; compression is inferred from the suffix.
    smiles_column, label_column : str
        Column names (e.g. ``"smiles"`` and ``"p_np"`` for BBBP).

    Returns
    -------
    smiles : list of str, length S
        One entry per data row; a missing SMILES becomes ``""``.
    labels : np.ndarray of int64, shape (S,)

    Raises
    ------
    DataError
        If the file is missing, unreadable, truncated or corrupt, empty, lacks
        either column, or a label is not a non-negative integer (the message
        names the row).
    """
    path = Path(path)
    df = read_text_csv(path, "data file", hint=" (the file is corrupt or truncated; "
                                               "restore or re-download it)")
    cols = match_columns(df.columns, {"SMILES column": smiles_column,
                                      "label column": label_column}, f"CSV file {path}")
    smiles_column, label_column = cols["SMILES column"], cols["label column"]
    if len(df) == 0:
        raise DataError(f"CSV file {path} has a header but no data rows")
    raw = df[label_column].str.strip()
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values) | (values < 0) | (values != np.round(values))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"CSV file {path}, row {row} (line {row + 2}): label {raw.iloc[row]!r} in column "
            f"{label_column!r} is not a non-negative integer class label"
            + (f" ({int(bad.sum())} bad rows in all)" if bad.sum() > 1 else "")
        )
    return df[smiles_column].tolist(), values.astype(np.int64)


@dataclass
class MoleculeGraphs:
    """Featurized molecules of one CSV file.

    Attributes
    ----------
    graphs : list of dgl.DGLGraph, length G
    labels : np.ndarray of int64, shape (G,)
    smiles : list of str, length G
    source_rows : np.ndarray of int64, shape (G,)
        0-based data row of each graph in the CSV.
    skipped_rows : list of int
        Data rows whose SMILES RDKit cannot parse.
    n_source_rows : int
        Number of data rows in the CSV.
    lenient_rows : list of int
        Data rows kept only by lenient parsing (``lenient=True``).
    """

    graphs: Sequence
    labels: np.ndarray
    smiles: list[str]
    source_rows: np.ndarray
    skipped_rows: list[int] = field(default_factory=list)
    n_source_rows: int = 0
    lenient_rows: list[int] = field(default_factory=list)


def load_molecule_csv(
    path: str | Path, smiles_column: str, label_column: str, lenient: bool = False
) -> MoleculeGraphs:
    """Read a molecule CSV and featurize it, skipping unparsable SMILES.

    Parameters
    ----------
    path : str or Path
        CSV file, plain or gzip-compressed.
    smiles_column, label_column : str
        Column names.
    lenient : bool
        Keep molecules that fail only RDKit's valence check (:mod:`grprune.data.molecules`).

    Returns
    -------
    MoleculeGraphs
        G graphs in file order; ``skipped_rows`` lists the rows left out.

    Raises
    ------
    DataError
        See :func:`read_molecule_csv`.
    """
    smiles, labels = read_molecule_csv(path, smiles_column, label_column)
    graphs, kept, lenient_rows = featurize_smiles_with_lenient(smiles, lenient)
    skipped = sorted(set(range(len(smiles))) - set(kept.tolist()))
    return MoleculeGraphs(
        graphs=graphs,
        labels=labels[kept],
        smiles=[smiles[i] for i in kept],
        source_rows=kept,
        skipped_rows=skipped,
        n_source_rows=len(smiles),
        lenient_rows=lenient_rows,
    )


def cached_molecule_csv(
    path: str | Path,
    smiles_column: str,
    label_column: str,
    cache_dir: str | Path,
    lenient: bool = False,
) -> tuple[MoleculeGraphs, str]:
    """:func:`load_molecule_csv` through an on-disk graph cache.

    The cache (:func:`grprune.data.cache.load_or_build`) is keyed by the
    file's sha256, the columns, ``lenient`` and the RDKit and OGB versions, so a
    changed source or library rebuilds it.

    Parameters
    ----------
    path : str or Path
        CSV file, plain or gzip-compressed.
    smiles_column, label_column : str
        Column names.
    cache_dir : str or Path
        Folder of this cache (e.g. ``<root>/moleculenet_hiv/grprune_v1``).
    lenient : bool
        See :func:`load_molecule_csv`.

    Returns
    -------
    MoleculeGraphs
        As :func:`load_molecule_csv`; ``smiles`` re-read from the CSV on a hit.
    status : str
        Cache status (``"hit"``, ``"built"``, ``"rebuilt (...)"``, ``"not written (...)"``).

    Raises
    ------
    DataError
        See :func:`read_molecule_csv`.
    """
    import ogb
    import rdkit

    from grprune.data.cache import load_or_build

    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    key = {"format_version": 2, "source_file": path.name, "source_sha256": file_sha256(path),
           "smiles_column": smiles_column, "label_column": label_column,
           "lenient": bool(lenient), "rdkit_version": rdkit.__version__,
           "ogb_version": ogb.__version__}

    def build():
        mg = load_molecule_csv(path, smiles_column, label_column, lenient=lenient)
        tensors = {"labels": torch.from_numpy(mg.labels),
                   "source_rows": torch.from_numpy(mg.source_rows)}
        extra = {"n_source_rows": mg.n_source_rows, "skipped_rows": mg.skipped_rows,
                 "lenient_rows": mg.lenient_rows}
        return mg.graphs, tensors, extra

    graphs, tensors, meta, status = load_or_build(
        Path(cache_dir), key, build, ("skipped_rows", "n_source_rows", "lenient_rows"),
        ("labels", "source_rows"))
    source_rows = tensors["source_rows"].numpy().astype(np.int64)
    all_smiles, _ = read_molecule_csv(path, smiles_column, label_column)
    return MoleculeGraphs(
        graphs=graphs, labels=tensors["labels"].numpy().astype(np.int64),
        smiles=[all_smiles[i] for i in source_rows], source_rows=source_rows,
        skipped_rows=[int(r) for r in meta["skipped_rows"]],
        n_source_rows=int(meta["n_source_rows"]),
        lenient_rows=[int(r) for r in meta["lenient_rows"]]), status
