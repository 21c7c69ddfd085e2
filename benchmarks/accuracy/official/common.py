"""What both sides of the harness compute the same way: graph and split fingerprints, OGB's
raw layout, the numpy layout of the GOOD datasets' export, and the results file.

Imported by ``export.py`` (grprune's venv), ``check.py`` and ``run.py`` (the official code's
venv) and ``table.py``; needs numpy only, so that each venv computes the same hashes.
"""

from __future__ import annotations

import csv
import fcntl
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
        ``x`` (N, F) node features, ``edge_index`` int (2, E) directed edges numbered
        inside the graph (both directions of a bond, in stored order), ``edge_attr``
        (E, F_e) edge features (GOOD-Motif: ``edge_gt`` as (E, 1)), ``y`` the graph's int
        label.

    Returns
    -------
    str
        The hash of every array with its shape, graph after graph: integer and boolean
        arrays as int64 bytes, floating ones (GOOD-Motif's ones (N, 1)) as float64 bytes.
    """
    h = hashlib.sha256()
    for x, edge_index, edge_attr, y in graphs:
        for a in (x, edge_index, edge_attr, np.asarray([y])):
            a = np.asarray(a)
            a = np.ascontiguousarray(a.astype(np.float64 if a.dtype.kind == "f" else np.int64))
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


def array_hash(values: Sequence[int] | np.ndarray) -> str:
    """SHA-256 (first 16 hex digits) of an int array in its order (e.g. the env id of each
    graph), as int64 bytes with its shape."""
    a = np.ascontiguousarray(np.asarray(values, dtype=np.int64))
    return hashlib.sha256(repr(a.shape).encode() + a.tobytes()).hexdigest()[:16]


#: grprune's part names (``split.npz``'s keys) -> GOOD's (``GOODMotif.load``'s dict keys)
GOOD_PARTS = {"train": "train", "valid": "val", "test": "test", "id-valid": "id_val",
              "id-test": "id_test"}
#: the arrays of :func:`write_graph_arrays`' ``graphs.npz``
GRAPH_ARRAYS = ("num_nodes", "num_edges", "x", "edge_index", "edge_gt", "y", "env_id")


def write_graph_arrays(out: Path, graphs: Sequence[tuple[np.ndarray, np.ndarray,
                       np.ndarray, int]], env_id: Sequence[int] | np.ndarray,
                       parts: Mapping[str, Sequence[int] | np.ndarray]) -> Path:
    """Write graphs with ground-truth edges and environments, and their split, as numpy
    arrays (``graphs.npz``, ``split.npz``) that ``good_export.py`` turns into PyG data.

    Parameters
    ----------
    out : Path
        The folder (created), e.g. ``ROOT/good_motif_basis``.
    graphs : sequence of (x, edge_index, edge_gt, y)
        ``x`` float (N, F) node features, ``edge_index`` int (2, E) both directions
        numbered inside the graph, ``edge_gt`` (E,) or (E, 1), 1 on ground-truth motif
        edges, ``y`` the int label.
    env_id : int (G,)
        Each graph's environment (GOOD's ``env_id``).
    parts : mapping of part name to int indices into ``graphs``
        E.g. ``train``, ``valid``, ``test``, ``id-valid``, ``id-test``; written sorted.

    Returns
    -------
    Path
        ``out``. ``graphs.npz`` holds :data:`GRAPH_ARRAYS`: ``num_nodes``/``num_edges``
        int64 (G,), ``x`` float32 (ΣN, F), ``edge_index`` int64 (2, ΣE) numbered inside
        each graph, ``edge_gt`` bool (ΣE,), ``y`` and ``env_id`` int64 (G,). Both files
        are written to a temp name and renamed.

    Raises
    ------
    ValueError
        If ``env_id`` has another length than ``graphs``.
    """
    if len(env_id) != len(graphs):
        raise ValueError(f"{len(env_id)} env ids for {len(graphs)} graphs")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    width = graphs[0][0].shape[1] if len(graphs) else 1
    arrays = {
        "num_nodes": np.asarray([len(g[0]) for g in graphs], dtype=np.int64),
        "num_edges": np.asarray([np.asarray(g[1]).shape[1] for g in graphs], dtype=np.int64),
        "x": np.concatenate([np.asarray(g[0], dtype=np.float32) for g in graphs])
        if len(graphs) else np.zeros((0, width), dtype=np.float32),
        "edge_index": np.concatenate([np.asarray(g[1], dtype=np.int64).reshape(2, -1)
                                      for g in graphs], axis=1)
        if len(graphs) else np.zeros((2, 0), dtype=np.int64),
        "edge_gt": np.concatenate([np.asarray(g[2]).reshape(-1).astype(bool) for g in graphs])
        if len(graphs) else np.zeros(0, dtype=bool),
        "y": np.asarray([int(g[3]) for g in graphs], dtype=np.int64),
        "env_id": np.asarray(env_id, dtype=np.int64)}
    for name, data in (("graphs", arrays),
                       ("split", {p: np.sort(np.asarray(v, dtype=np.int64))
                                  for p, v in parts.items()})):
        tmp = out / f"{name}.tmp.npz"
        np.savez_compressed(tmp, **data)
        tmp.replace(out / f"{name}.npz")
    return out


def read_graph_arrays(out: Path) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray,
                                                     int]], np.ndarray, dict[str, np.ndarray]]:
    """The graphs, env ids and parts :func:`write_graph_arrays` wrote in ``out``.

    Returns
    -------
    (graphs, env_id, parts)
        ``graphs`` a list of (x float32 (N, F), edge_index int64 (2, E), edge_gt bool (E,),
        y int); ``env_id`` int64 (G,); ``parts`` part name -> sorted int64 indices.

    Raises
    ------
    FileNotFoundError
        If ``graphs.npz`` or ``split.npz`` is missing.
    """
    with np.load(Path(out) / "graphs.npz") as f:
        a = {k: f[k] for k in GRAPH_ARRAYS}
    with np.load(Path(out) / "split.npz") as f:
        parts = {k: f[k] for k in f.files}
    node_end, edge_end = np.cumsum(a["num_nodes"]), np.cumsum(a["num_edges"])
    graphs = [(a["x"][n1 - n:n1], a["edge_index"][:, e1 - e:e1], a["edge_gt"][e1 - e:e1], int(y))
              for n, n1, e, e1, y in zip(a["num_nodes"].tolist(), node_end.tolist(),
                                         a["num_edges"].tolist(), edge_end.tolist(),
                                         a["y"].tolist())]
    return graphs, a["env_id"], parts


def good_side(name: str, split: str, graphs: list[tuple], env_id, parts: dict) -> dict:
    """Counts and hashes of a GOOD dataset split, the same on both sides: the graphs hash
    takes ``edge_gt`` as a (E, 1) edge feature; ``parts`` under grprune's names, of which
    :data:`PARTS` (train, OOD-valid, OOD-test) are counted and hashed."""
    return {"dataset": name, "split": split, "n_graphs": len(graphs),
            "graphs_hash": graphs_hash((x, ei, np.asarray(gt).reshape(-1, 1), y)
                                              for x, ei, gt, y in graphs),
            "env_hash": array_hash(env_id),
            "parts": {p: len(parts[p]) for p in PARTS},
            "split_hash": split_hash(parts)}


def good_line(who: str, side: dict) -> str:
    """One printed line of a GOOD dataset split's check (``export.py``, ``check.py``)."""
    return (f"{who}  {side['dataset']} {side['split']}: {side['n_graphs']} graphs, graphs "
            f"{side['graphs_hash']}, envs {side['env_hash']}, {side['parts']} split "
            f"{side['split_hash']}")


#: the keys (and their types) of a run's record that every reader of a results file uses
CORE_KEYS: Mapping[str, type | tuple[type, ...]] = {
    "dataset": str, "split": str, "seed": int, "test": (int, float)}


def record_problem(row: Mapping, required: Mapping[str, type | tuple[type, ...]]) -> str:
    """What a record lacks, or ``""``: each key of ``required`` present with a value of its
    type (a bool is no number).

    >>> record_problem({"dataset": "d", "split": "s", "seed": "0", "test": 1.0}, CORE_KEYS)
    "its seed is '0', not int"
    """
    for key, kind in required.items():
        if key not in row:
            return f"the record has no {key!r}"
        value = row[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            names = "/".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            return f"its {key} is {repr(value)[:60]}, not {names}"
    return ""


def read_results(path: Path = RESULTS, required: Mapping[str, type | tuple[type, ...]]
                 = CORE_KEYS) -> list[dict]:
    """The runs in a results file (one JSON object per line; blank lines skipped); no file:
    none.

    Parameters
    ----------
    path : Path
    required : mapping of str to type
        The keys each record must hold, with the type of their values
        (:data:`CORE_KEYS`; :func:`record_problem`).

    Raises
    ------
    ValueError
        If a line is not a JSON object, or a record lacks a required key or holds a value
        of another type, naming the file and line.
    OSError
        If the file cannot be read.
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
        except (ValueError, RecursionError) as err:  # 4,300 digits, deep nesting
            raise ValueError(f"{path}:{n}: not JSON ({type(err).__name__})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n}: not a JSON object")
        problem = record_problem(row, required)
        if problem:
            raise ValueError(f"{path}:{n}: {problem}")
        rows.append(row)
    return rows


def append_result(row: Mapping, path: Path = RESULTS) -> None:
    """Append one run to the results file: the whole file is rewritten to a temp name and
    renamed, so an interrupted write leaves the old file; an exclusive ``fcntl`` lock on
    ``<path>.lock`` keeps two ``runs.py`` processes on disjoint seeds from losing a row."""
    with open(str(path) + ".lock", "w") as lock:  # two runs.py may finish at once
        fcntl.flock(lock, fcntl.LOCK_EX)
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
