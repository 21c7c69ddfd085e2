"""What a loaded dataset holds, and its split in OGB's file format.

:func:`describe` backs ``grprune data info`` and :func:`export_split` backs
``grprune data export``.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np

from grprune.data.dataset import GraphDataset
from grprune.data.packed import graph_sizes
from grprune.data.splits import PART_NAMES
from grprune.errors import GrpruneError

#: how parts are shown when a dataset has in-distribution hold-outs
OOD_LABELS = {"train": "train", "id-valid": "ID-valid", "id-test": "ID-test",
              "valid": "OOD-valid", "test": "OOD-test"}
#: display order of the parts
PART_ORDER = ("train", "id-valid", "id-test", "valid", "test")


def part_label(dataset: GraphDataset, part: str) -> str:
    """``"OOD-valid"`` for ``valid`` when the dataset has ID parts, else the part name."""
    has_id = any(p in dataset.splits for p in ("id-valid", "id-test"))
    return OOD_LABELS.get(part, part) if has_id else part


def _label_counts(dataset, labels: np.ndarray, idx: np.ndarray) -> dict[str, int]:
    """Graphs of each class among ``idx`` (class id -> count); for ``multilabel`` and
    ``regression`` data, the graphs labelled in each task (label column -> count)."""
    if dataset.task == "classification":
        return {str(c): int(n) for c, n in enumerate(
            np.bincount(labels[idx], minlength=dataset.num_classes))}
    names = dataset.info.get("label_columns") or [str(t) for t in range(labels.shape[1])]
    seen = (~np.isnan(labels[idx])).sum(0)
    return {str(name): int(n) for name, n in zip(names, seen)}


def describe(dataset: GraphDataset) -> dict[str, Any]:
    """Facts about a dataset and each part of its split.

    Parameters
    ----------
    dataset : GraphDataset

    Returns
    -------
    dict
        ``dataset``, ``split``, ``shift`` (or None), ``metric``, ``num_classes``,
        ``n_graphs``, ``n_skipped`` (molecules RDKit could not parse),
        ``n_envs`` (environment ids >= 0; GOOD gives graphs outside its training
        environments the id -1), ``has_edge_gt``, ``splits`` ({part: number of graphs}),
        ``parts`` ({part: {label, graphs, mean_nodes, mean_edges, label_counts,
        label_fraction, n_envs}}; edges count undirected edges, i.e. directed
        edges / 2), ``unassigned`` (graphs in no part) and ``info`` (the
        loader's own facts), ``duplicate_ids`` (:func:`duplicate_ids`).
    """
    nodes, edges = graph_sizes(dataset.graphs)
    edges = edges / 2.0
    labels = dataset.labels.numpy()
    envs = dataset.envs.numpy()
    parts: dict[str, dict[str, Any]] = {}
    assigned = np.zeros(len(dataset), dtype=bool)
    for part in PART_ORDER:
        if part not in dataset.splits:
            continue
        idx = dataset.splits[part]
        assigned[idx] = True
        counts = _label_counts(dataset, labels, idx)
        parts[part] = {
            "label": part_label(dataset, part),
            "graphs": int(len(idx)),
            "mean_nodes": float(nodes[idx].mean()) if len(idx) else float("nan"),
            "mean_edges": float(edges[idx].mean()) if len(idx) else float("nan"),
            "label_counts": {c: int(n) for c, n in counts.items()},
            "label_fraction": {c: (float(n) / len(idx) if len(idx) else float("nan"))
                               for c, n in counts.items()},
            "n_envs": int(len(np.unique(envs[idx][envs[idx] >= 0]))),
        }
    info = dict(dataset.info)
    return {
        "dataset": dataset.name,
        "split": info.get("split"),
        "shift": info.get("shift"),
        "metric": dataset.metric,
        "num_classes": dataset.num_classes,
        "n_graphs": len(dataset),
        "n_skipped": int(info.get("n_skipped", 0)),
        "n_envs": int(len(np.unique(envs[envs >= 0]))),
        "has_edge_gt": dataset.has_edge_gt,
        "splits": {p: v["graphs"] for p, v in parts.items()},
        "parts": parts,
        "unassigned": int((~assigned).sum()),
        "duplicate_ids": duplicate_ids(dataset),
        "info": info,
    }


def duplicate_ids(dataset: GraphDataset, first: int = 5) -> dict[str, Any]:
    """Compound IDs that more than one graph has (duplicate IDs in the source).

    Returns
    -------
    dict
        ``count``: graphs whose ID an earlier graph has (0 without IDs); ``first``: up to
        ``first`` repeated IDs, each ``{"id", "rows"}`` (0-based source rows having it).
    """
    if dataset.ids is None:
        return {"count": 0, "first": []}
    rows: dict[str, list[int]] = {}
    for i, x in enumerate(dataset.ids):
        if x != "":
            rows.setdefault(x, []).append(int(dataset.source_rows[i]))
    repeated = [(x, r) for x, r in rows.items() if len(r) > 1]
    return {"count": sum(len(r) - 1 for _, r in repeated),
            "first": [{"id": x, "rows": r[:10]} for x, r in repeated[:first]]}


def duplicate_ids_note(dataset: GraphDataset) -> str | None:
    """One line on duplicate IDs (:func:`duplicate_ids`), or None when every ID is unique."""
    dup = duplicate_ids(dataset)
    if not dup["count"]:
        return None
    shown = "; ".join(f"{d['id']!r} at rows {', '.join(map(str, d['rows']))}"
                      for d in dup["first"])
    return (f"{dup['count']} graph{'s' if dup['count'] > 1 else ''} of {dataset.name} repeat "
            f"an earlier graph's ID ({shown}{' ...' if dup['count'] > len(dup['first']) else ''})"
            f"; explain --graphs id:X lists every match")


def _index_file_bytes(rows: np.ndarray) -> bytes:
    text = "".join(f"{int(r)}\n" for r in rows)
    return gzip.compress(text.encode(), mtime=0)


def export_split(dataset: GraphDataset, out: str | Path, force: bool = False) -> dict[str, Any]:
    """Write the split in OGB's format: one ``<part>.csv.gz`` per part.

    Each file holds one 0-based row index per line, no header, sorted
    ascending: the row of each graph in the dataset's *source file*
    (``dataset.source_rows``; for OGB molecules the MoleculeNet CSV, for
    generated data the graph index). ``train``, ``valid`` and ``test`` are
    always written; ``id-valid`` and ``id-test`` (as ``id_valid.csv.gz`` and
    ``id_test.csv.gz``) where the dataset has them. The gzip streams carry no
    timestamp, so the same split gives byte-identical files.

    Parameters
    ----------
    dataset : GraphDataset
    out : path
        Folder; created if needed.
    force : bool
        Overwrite files that differ from what would be written.

    Returns
    -------
    dict
        ``files`` ({part: path}), ``written`` and ``unchanged`` (lists of parts),
        ``sizes`` ({part: rows}).

    Raises
    ------
    GrpruneError
        If ``out`` is a file, or holds a different split and ``force`` is False
        (nothing is overwritten then).
    """
    from grprune.record.files import atomic_write_bytes

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise GrpruneError(f"--out {out} is a file, not a folder")
    payload = {}
    for part in PART_NAMES:
        if part in dataset.splits:
            rows = np.sort(dataset.source_rows[dataset.splits[part]])
            payload[part] = (out / f"{part.replace('-', '_')}.csv.gz", _index_file_bytes(rows),
                             len(rows))
    differ = [str(path) for path, data, _ in payload.values()
              if path.is_file() and path.read_bytes() != data]
    if differ and not force:
        raise GrpruneError(f"{differ[0]} already exists with a different split; nothing was "
                           f"written (use --force to overwrite, or choose another --out)")
    out.mkdir(parents=True, exist_ok=True)
    written, unchanged = [], []
    for part, (path, data, _) in payload.items():
        if path.is_file() and path.read_bytes() == data:
            unchanged.append(part)
            continue
        atomic_write_bytes(path, data)
        written.append(part)
    return {"files": {p: str(v[0]) for p, v in payload.items()}, "written": written,
            "unchanged": unchanged, "sizes": {p: v[2] for p, v in payload.items()}}
