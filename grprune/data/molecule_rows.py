"""The rows of a ``molecule-csv`` file: read and checked (:func:`read_rows`: SMILES,
labels, IDs and the rows left out with their reason), featurized (:func:`featurize_rows`)
and cached as graphs under ``<root>/molecule_csv/grprune_v1/<key>/``
(:func:`cached_rows`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from grprune.compat import dgl
from grprune.data.cache import CACHE_DIRNAME, load_or_build
from grprune.data.csv_tables import match_columns, read_text_csv
from grprune.data.labels import dataset_task, label_columns, read_targets
from grprune.data.molecule_featurizers import FEATURIZERS
from grprune.data.molecules import MAX_ATOMS, too_large_reason
from grprune.errors import DataError
from grprune.record.files import file_sha256


def _label_problem(text: str) -> str | None:
    """Why a label cell is not a binary class label (None when it is 0 or 1)."""
    text = text.strip()
    if not text:
        return "missing label"
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value not in (0.0, 1.0):
        return f"label {text!r} is not 0 or 1"
    return None


def read_rows(path: Path, smiles_column: str, label_column: str, id_column: str = "",
              task: str = "classification"
              ) -> tuple[list[str], np.ndarray, dict[int, str], list[str] | None]:
    """The SMILES, labels and IDs of a molecule CSV, with the rows whose label is unusable.

    ``label_column`` may name several columns (a comma list); with several, or with
    ``task="regression"``, labels are read by :func:`grprune.data.labels.read_targets`.

    Columns are matched by :func:`grprune.data.csv_tables.match_columns` (exact,
    else the one column equal up to case); every missing one is named in one message.

    Parameters
    ----------
    path : Path
        CSV file, plain or compressed (inferred from the suffix).
    smiles_column, label_column : str
    id_column : str
        Column of compound IDs; ``""`` for none.
    task : {"classification", "regression"}
        ``data.task``.

    Returns
    -------
    smiles : list of str, length S
        One per data row (``""`` where missing).
    labels : np.ndarray of int64, shape (S,); or of float32, shape (S, T)
        0 or 1, -1 where the label is unusable; for several columns or regression, the
        values with NaN where missing (:func:`~grprune.data.labels.read_targets`).
    bad : dict of int to str
        0-based data row -> reason, for missing SMILES and unusable labels.
    ids : list of str (length S) or None
        The ID column's cells; None without ``id_column``.

    Raises
    ------
    DataError
        If the file is missing or unreadable, or columns are missing (one line
        that names all of them and the columns present).
    """
    df = read_text_csv(path, "data file (data.path)")
    names = label_columns(label_column)
    wanted = {"data.smiles_column": smiles_column}
    wanted.update({"data.label_column": names[0]} if len(names) == 1 else
                  {f"data.label_column ({name})": name for name in names})
    if str(id_column).strip():
        wanted["data.id_column"] = str(id_column).strip()
    cols = match_columns(df.columns, wanted, str(path))
    if len(df) == 0:
        raise DataError(f"{path} has a header but no data rows")
    smiles = [s.strip() for s in df[cols["data.smiles_column"]].tolist()]
    ids = ([str(x).strip() for x in df[cols["data.id_column"]].tolist()]
           if "data.id_column" in cols else None)
    kind = dataset_task(task, len(names))
    if kind != "classification":
        cells = {name: df[cols[k]].tolist() for k, name in zip(
            [k for k in cols if k.startswith("data.label_column")], names)}
        return smiles, *read_targets(cells, smiles, kind), ids
    labels = np.full(len(df), -1, dtype=np.int64)
    bad: dict[int, str] = {}
    for row, (s, text) in enumerate(zip(smiles, df[cols["data.label_column"]].tolist())):
        problems = [p for p in (None if s else "missing SMILES", _label_problem(text)) if p]
        if problems:
            bad[row] = "; ".join(problems)
        else:
            labels[row] = int(float(text))
    return smiles, labels, bad, ids


def featurize_rows(smiles: list[str], labels: np.ndarray, bad: dict[int, str],
                   featurizer: str, what: str = "molecules", max_atoms: int = MAX_ATOMS
                   ) -> tuple[Sequence[dgl.DGLGraph], np.ndarray, dict[int, str]]:
    """Featurize the rows :func:`read_rows` found usable.

    ``ogb`` goes through :func:`grprune.data.featurize.featurize_ogb`: chunks of
    SMILES parsed by worker processes into flat arrays, each distinct SMILES once,
    with a progress display, and no per-molecule ``DGLGraph``. ``dgllife-canonical``
    featurizes molecule by molecule
    (:func:`~grprune.data.molecule_featurizers.dgllife_graph`), serially, as before.

    Parameters
    ----------
    smiles : list of str, length S
    labels : np.ndarray of int64, shape (S,)
        Unused here (kept for the call's shape); rows in ``bad`` are skipped.
    bad : dict of int to str
        Rows already known to be unusable -> reason.
    featurizer : str
        A key of :data:`~grprune.data.molecule_featurizers.FEATURIZERS`.
    what : str
        How the progress display names the input.
    max_atoms : int
        Rows whose molecule has more atoms are skipped with the reason ``too large``
        before RDKit parses them (:data:`grprune.data.molecules.MAX_ATOMS`; 0: no limit).

    Returns
    -------
    graphs : sequence of dgl.DGLGraph, length G
        :class:`~grprune.data.packed.PackedGraphs` (uint8 OGB features, widened to
        int64 per graph) for ``ogb``, a list for ``dgllife-canonical``.
    kept : np.ndarray of int64, shape (G,)
        Data row of each graph (increasing).
    bad : dict of int to str
        ``bad`` plus the rows whose SMILES the featurizer rejects (the message of
        :func:`~grprune.data.molecules.smiles_to_graph` or
        :func:`~grprune.data.molecule_featurizers.dgllife_graph`),
        sorted by row.
    """
    bad = dict(bad)
    rows = np.asarray([r for r in range(len(smiles)) if r not in bad], dtype=np.int64)
    if featurizer == "ogb":
        from grprune.data.featurize import featurize_ogb

        flat, kept, failed = featurize_ogb([smiles[r] for r in rows], what=what,
                                           max_atoms=max_atoms)
        bad.update({int(rows[p]): why for p, why in failed.items()})
        graphs = flat.to_packed() if len(flat) else []
        return graphs, rows[kept], dict(sorted(bad.items()))
    to_graph = FEATURIZERS[featurizer][1]
    graph_list, kept_rows = [], []
    for row in rows.tolist():
        try:
            large = too_large_reason(smiles[row], max_atoms)
            if large:
                raise DataError(large)
            graph_list.append(to_graph(smiles[row]))
        except DataError as exc:
            bad[row] = str(exc)
            continue
        kept_rows.append(row)
    return graph_list, np.asarray(kept_rows, dtype=np.int64), dict(sorted(bad.items()))


def _cache_key(path: Path, smiles_column: str, label_column: str, featurizer: str,
               max_atoms: int = MAX_ATOMS, task: str = "classification") -> dict:
    import ogb
    import rdkit

    key = {"format_version": 4, "source_sha256": file_sha256(path),
           "smiles_column": smiles_column, "label_column": label_column,
           "featurizer": featurizer, "rdkit_version": rdkit.__version__,
           "ogb_version": ogb.__version__, "max_atoms": int(max_atoms)}
    if task != "classification":  # (a key without it: every classification cache as before)
        key["task"] = task
    if featurizer.startswith("dgllife"):
        from importlib.metadata import version
        key["dgllife_version"] = version("dgllife")
    return key


def cached_rows(path: Path, smiles_column: str, label_column: str, featurizer: str,
                root: Path, id_column: str = "", max_atoms: int = MAX_ATOMS,
                task: str = "classification") -> dict[str, Any]:
    """Read, check and featurize a molecule CSV through the graph cache; molecules over
    ``max_atoms`` atoms are skipped (:func:`featurize_rows`).

    Returns
    -------
    dict
        ``graphs`` (G), ``labels`` (G,) int64 or (G, T) float32 (:func:`read_rows`),
        ``source_rows`` (G,), ``smiles`` (G),
        ``ids`` (G, or None without ``id_column``),
        ``bad_rows`` (list of ``{"row", "reason"}``), ``n_source_rows``,
        ``source_sha256``, ``cache`` (status) and ``cache_dir``.

    Raises
    ------
    DataError
        See :func:`read_rows`; also when no row is usable.
    """
    from grprune.data.featurize import announce
    size = path.stat().st_size if path.is_file() else 0
    announce(f"reading {path.name} ({size / 2**20:,.1f} MiB)", size)
    smiles, labels, bad, ids = read_rows(path, smiles_column, label_column, id_column, task)
    what = "a 0/1 label" if labels.ndim == 1 else "a label"
    announce(f"read {path.name}: {len(smiles):,} rows, {len(smiles) - len(bad):,} with a "
             f"SMILES and {what}", size)
    key = _cache_key(path, smiles_column, label_column, featurizer, max_atoms, task)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    cache_dir = root / "molecule_csv" / CACHE_DIRNAME / digest

    def build():
        graphs, kept, all_bad = featurize_rows(smiles, labels, bad, featurizer, what=path.name,
                                               max_atoms=max_atoms)
        announce(f"{path.name}: {len(graphs):,} graphs, {len(all_bad):,} rows skipped; "
                 f"writing the graph cache", size)
        if not graphs:
            raise DataError(f"{path}: none of its {len(smiles)} rows is usable (e.g. row "
                            f"{next(iter(all_bad))}: {next(iter(all_bad.values()))})")
        tensors = {"labels": torch.from_numpy(labels[kept]), "source_rows": torch.from_numpy(kept)}
        rows = [{"row": int(r), "reason": why} for r, why in all_bad.items()]
        return graphs, tensors, {"n_source_rows": len(smiles), "bad_rows": rows}

    graphs, tensors, meta, status = load_or_build(
        cache_dir, key, build, ("n_source_rows", "bad_rows"), ("labels", "source_rows"))
    announce(f"{path.name}: graphs ready (cache {status})", size)
    rows = tensors["source_rows"].numpy().astype(np.int64)
    labels_out = tensors["labels"]
    return {"graphs": graphs, "source_rows": rows,
            "labels": labels_out.long() if labels_out.dim() == 1 else labels_out.float(),
            "smiles": [smiles[i] for i in rows],
            "ids": None if ids is None else [ids[i] for i in rows], "bad_rows": list(meta["bad_rows"]),
            "n_source_rows": int(meta["n_source_rows"]), "source_sha256": key["source_sha256"],
            "source": str(path),
            "cache": status, "cache_dir": str(cache_dir)}
