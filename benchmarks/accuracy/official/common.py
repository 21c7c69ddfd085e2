"""What both sides of the harness compute the same way: graph and split fingerprints, OGB's
raw layout, and the results file.

Imported by ``export.py`` (grprune's venv), ``check.py`` and ``run.py`` (the official code's
venv) and ``table.py``; needs numpy only, so that each venv computes the same hashes.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

#: the official code's commit the harness runs
COMMIT = "7b41dae58f3943c4bfc04d68aa1a8db8bd2c068d"
#: parts of a split, in the order they are hashed
PARTS = ("train", "valid", "test")
#: the per-run results file: one JSON object per line
RESULTS = Path(__file__).resolve().parent / "results.jsonl"
RESULT_FIELDS = ["dataset", "split", "seed", "valid", "test", "best_epoch", "epochs",
                 "split_sizes", "split_hash", "data_hash", "args", "official_commit",
                 "grprune_commit", "hardware", "seconds"]


def split_hash(splits: Mapping[str, Sequence[int] | np.ndarray]) -> str:
    """SHA-256 (first 16 hex digits) of a split's sorted indices.

    Parameters
    ----------
    splits : mapping with ``train``, ``valid``, ``test``, each int indices into the graphs

    Returns
    -------
    str
        ``sha256("train:i,j,...;valid:...;test:...")[:16]``, indices sorted ascending, so
        the hash names the sets and not their order.

    Raises
    ------
    KeyError
        If a part is missing.
    """
    text = ";".join(f"{part}:" + ",".join(str(int(i)) for i in sorted(np.asarray(splits[part])
                                                                      .tolist()))
                    for part in PARTS)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def graphs_hash(graphs: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, int]]) -> str:
    """SHA-256 (first 16 hex digits) of a sequence of graphs, in order.

    Parameters
    ----------
    graphs : iterable of (x, edge_index, edge_attr, y)
        ``x`` int (N, F) node features, ``edge_index`` int (2, E) directed edges numbered
        inside the graph (both directions of a bond, in stored order), ``edge_attr`` int
        (E, F_e), ``y`` the graph's int label.

    Returns
    -------
    str
        The hash of every array as int64 bytes, with its shape, graph after graph.
    """
    h = hashlib.sha256()
    for x, edge_index, edge_attr, y in graphs:
        for a in (x, edge_index, edge_attr, np.asarray([y])):
            a = np.ascontiguousarray(np.asarray(a, dtype=np.int64))
            h.update(repr(a.shape).encode())
            h.update(a.tobytes())
    return h.hexdigest()[:16]


def _write_csv_gz(path: Path, rows: np.ndarray) -> None:
    """``rows`` (n,) or (n, k) ints as a header-less gzip CSV, written atomically."""
    rows = np.asarray(rows, dtype=np.int64)
    rows = rows.reshape(len(rows), -1) if rows.size else rows.reshape(0, 1)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", newline="") as f:
        csv.writer(f).writerows(rows.tolist())
    tmp.replace(path)


def write_ogb_raw(root: Path, name: str, graphs: list[tuple[np.ndarray, np.ndarray,
                  np.ndarray, int]], splits: Mapping[str, Mapping[str, np.ndarray]]) -> Path:
    """Write graphs and splits in OGB's raw layout, which ``PygGraphPropPredDataset`` reads.

    Parameters
    ----------
    root : Path
        The ``--root`` given to the official code; the dataset goes to ``root/<name>``
        with ``-`` replaced by ``_`` (``ogbg_molbbbp``), as OGB names its folders.
    name : str
        OGB name, e.g. ``"ogbg-molbbbp"``; its ``add_inverse_edge`` must be true (OGB's
        master.csv): each bond is written once and OGB's reader adds the reverse edge
        right after it.
    graphs : list of (x, edge_index, edge_attr, y)
        As :func:`graphs_hash`, with both directions of each bond interleaved: edge
        ``2k+1`` is the reverse of edge ``2k`` with the same features (the order OGB's
        ``smiles2graph`` and reader use).
    splits : mapping of split name to {``train``, ``valid``, ``test``: int indices}
        Each is written to ``split/<split name>/<part>.csv.gz``.

    Returns
    -------
    Path
        The dataset folder.

    Raises
    ------
    ValueError
        If a graph's edges are not reverse-interleaved pairs.
    """
    out = Path(root) / name.replace("-", "_")
    (out / "raw").mkdir(parents=True, exist_ok=True)
    edges, efeat, nfeat, n_nodes, n_edges, labels = [], [], [], [], [], []
    for k, (x, ei, ea, y) in enumerate(graphs):
        ei, ea = np.asarray(ei, dtype=np.int64), np.asarray(ea, dtype=np.int64)
        fwd, back = ei[:, 0::2], ei[:, 1::2]
        if ei.shape[1] % 2 or not (np.array_equal(fwd, back[::-1])
                                   and np.array_equal(ea[0::2], ea[1::2])):
            raise ValueError(f"graph {k}: edges are not (i, j), (j, i) pairs with equal "
                             f"features; OGB's reader could not rebuild them")
        edges.append(fwd.T)
        efeat.append(ea[0::2])
        nfeat.append(np.asarray(x, dtype=np.int64))
        n_nodes.append(len(x))
        n_edges.append(fwd.shape[1])
        labels.append(int(y))
    _write_csv_gz(out / "raw" / "edge.csv.gz", np.concatenate(edges) if edges else
                  np.zeros((0, 2)))
    _write_csv_gz(out / "raw" / "edge-feat.csv.gz", np.concatenate(efeat))
    _write_csv_gz(out / "raw" / "node-feat.csv.gz", np.concatenate(nfeat))
    _write_csv_gz(out / "raw" / "num-node-list.csv.gz", np.asarray(n_nodes))
    _write_csv_gz(out / "raw" / "num-edge-list.csv.gz", np.asarray(n_edges))
    _write_csv_gz(out / "raw" / "graph-label.csv.gz", np.asarray(labels))
    for split, parts in splits.items():
        (out / "split" / split).mkdir(parents=True, exist_ok=True)
        for part in PARTS:
            _write_csv_gz(out / "split" / split / f"{part}.csv.gz",
                          np.sort(np.asarray(parts[part], dtype=np.int64)))
    (out / "RELEASE_v1.txt").write_text("exported from grprune by "
                                        "benchmarks/accuracy/official/export.py\n")
    return out


def read_results(path: Path = RESULTS) -> list[dict]:
    """The runs in a results file (one JSON object per line; blank lines skipped).

    Raises
    ------
    ValueError
        If a line is not a JSON object, naming the file and line.
    """
    rows: list[dict] = []
    if not Path(path).exists():
        return rows
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{n}: not JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n}: not a JSON object")
        rows.append(row)
    return rows


def append_result(row: Mapping, path: Path = RESULTS) -> None:
    """Append one run to the results file: the whole file is rewritten to a temp name and
    renamed, so an interrupted write leaves the old file."""
    text = Path(path).read_text() if Path(path).exists() else ""
    if text and not text.endswith("\n"):
        text += "\n"
    text += json.dumps({k: row[k] for k in RESULT_FIELDS if k in row}) + "\n"
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def summarize(rows: Iterable[Mapping], dataset: str, split: str) -> tuple[float, float, int]:
    """Mean, sample std (0 for one run) and n of ``test`` over the runs of one column,
    one run per seed (the last one recorded wins).

    Returns ``(nan, nan, 0)`` when there is none.
    """
    by_seed = {r["seed"]: float(r["test"]) for r in rows
               if r.get("dataset") == dataset and r.get("split") == split}
    values = np.asarray(list(by_seed.values()), dtype=float)
    if not len(values):
        return float("nan"), float("nan"), 0
    std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return float(values.mean()), std, len(values)
