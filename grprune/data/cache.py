"""On-disk cache of featurized graphs: ``graphs.bin`` (flat arrays) plus ``meta.json``.

``graphs.bin`` (layout ``packed-v2``) holds the arrays of a
:class:`~grprune.data.packed.PackedGraphs` (edge index numbered inside each graph, node
and edge features, per-graph node and edge counts) and the graph-level tensors (labels,
environments, ...), raw and one after the other, each at a 64-byte aligned offset.
``meta.json`` holds the table of those arrays (name, dtype, shape, offset), a *key*
(source file sha256, format version, library versions) and the sha256 of
``graphs.bin``.

A load memory-maps ``graphs.bin`` (copy-on-write: nothing is read into memory until
used, and nothing is ever written back), so a cache of a million molecules opens in
seconds and its pages are shared between processes. A cache is used only if its key
equals the expected key and ``graphs.bin`` hashes to the recorded value, so a stale,
truncated or corrupt cache is rebuilt, never used. Files are written to a temporary name
and moved into place with :func:`os.replace`; ``graphs.bin`` is replaced before
``meta.json``, so an interrupted write leaves a cache that fails the hash check.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from grprune.data.packed import PackedGraphs
from grprune.record.files import file_sha256, read_run_file

#: folder under ``<root>/<dataset>/`` that holds grprune's caches
CACHE_DIRNAME = "grprune_v1"
GRAPHS_FILE = "graphs.bin"
META_FILE = "meta.json"
LAYOUT = "packed-v2"
#: offsets of the arrays in graphs.bin are multiples of this
ALIGN = 64
#: dtypes an array of graphs.bin may have (never ``object``: nothing is unpickled)
DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
_NAME = re.compile(r"^(edge_index|num_nodes|num_edges|(ndata|edata|tensor)/[A-Za-z0-9_.-]+)$")


def read_graph_cache(
    directory: Path,
    key: dict[str, Any],
    meta_keys: tuple[str, ...] = (),
    tensor_keys: tuple[str, ...] = (),
) -> tuple[tuple[PackedGraphs, dict[str, torch.Tensor], dict] | None, str]:
    """Open a cache written by :func:`write_graph_cache` if it is valid for ``key``.

    Parameters
    ----------
    directory : Path
        The cache folder.
    key : dict
        JSON values the cache's ``meta.json`` must hold unchanged.
    meta_keys, tensor_keys : tuple of str
        Entries ``meta.json`` and the graph-level tensors must have.

    Returns
    -------
    cached : (graphs, tensors, meta) or None
        ``graphs`` (:class:`PackedGraphs`, G graphs, its arrays memory-mapped),
        ``tensors`` (dict of graph-level tensors, first dim G) and the ``meta`` dict;
        None if absent or invalid.
    reason : str
        Why the cache is not usable (``""`` when it is).
    """
    meta_path, graphs_path = directory / META_FILE, directory / GRAPHS_FILE
    if not meta_path.is_file() or not graphs_path.is_file():
        return None, "no cache"
    try:
        meta = json.loads(read_run_file(meta_path))  # regular, at most MAX_JSON_BYTES
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"unreadable {META_FILE} ({type(exc).__name__})"
    if not isinstance(meta, dict) or any(k not in meta for k in meta_keys):
        return None, f"malformed {META_FILE}"
    changed = [k for k, v in key.items() if meta.get(k) != v]
    if changed:
        return None, f"{', '.join(changed)} changed"
    if meta.get("layout") != LAYOUT:
        return None, "cache layout changed"
    try:
        if file_sha256(graphs_path) != meta.get("graphs_sha256"):
            return None, f"{GRAPHS_FILE} is corrupt (checksum mismatch)"
        arrays = _map_arrays(graphs_path, meta.get("arrays"))
        graphs = PackedGraphs(
            arrays["edge_index"], arrays["num_nodes"], arrays["num_edges"],
            {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("ndata/")},
            {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("edata/")})
        tensors = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("tensor/")}
    except Exception as exc:  # OSError, a bad array table, counts not adding up
        return None, f"cannot read {GRAPHS_FILE} ({type(exc).__name__})"
    if (
        len(graphs) != meta.get("n_graphs")
        or any(k not in tensors for k in tensor_keys)
        or any(len(t) != len(graphs) for t in tensors.values())
    ):
        return None, f"{GRAPHS_FILE} does not match {META_FILE}"
    return (graphs, tensors, meta), ""


def _map_arrays(path: Path, table: Any) -> dict[str, torch.Tensor]:
    """The arrays of ``graphs.bin`` as tensors over one copy-on-write memory map.

    Raises
    ------
    ValueError
        If the table is malformed, or an array lies outside the file.
    """
    if not isinstance(table, list):
        raise ValueError("no array table")
    size = path.stat().st_size
    buf = np.memmap(path, dtype=np.uint8, mode="c") if size else np.zeros(0, np.uint8)
    out = {}
    for entry in table:
        name, dtype, shape, offset = (entry["name"], entry["dtype"], entry["shape"],
                                      entry["offset"])
        if (not isinstance(name, str) or not _NAME.match(name) or dtype not in DTYPES
                or not isinstance(shape, list)
                or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(offset, int) or offset < 0 or offset % ALIGN):
            raise ValueError(f"bad array entry {entry!r}")
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if offset + nbytes > size:
            raise ValueError(f"array {name} lies outside {path.name}")
        array = buf[offset:offset + nbytes].view(dt).reshape(shape)
        out[name] = torch.from_numpy(array)
    for name in ("edge_index", "num_nodes", "num_edges"):
        if name not in out:
            raise ValueError(f"no array {name}")
    return out


def write_graph_cache(
    directory: Path,
    key: dict[str, Any],
    graphs: Sequence,
    tensors: dict[str, torch.Tensor],
    extra: dict[str, Any] | None = None,
) -> None:
    """Write graphs, graph-level tensors and ``meta.json`` atomically.

    Parameters
    ----------
    directory : Path
        Created if needed.
    key : dict
        Validity key (see :func:`read_graph_cache`).
    graphs : sequence of dgl.DGLGraph, length G
        A list or :class:`PackedGraphs`; stored packed (all graphs must share
        their ``ndata``/``edata`` keys).
    tensors : dict of str to torch.Tensor, each with first dim G
    extra : dict, optional
        More JSON facts stored in ``meta.json``.

    Raises
    ------
    OSError
        If the folder cannot be written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    suffix = f".tmp{os.getpid()}"
    tmp_graphs = directory / (GRAPHS_FILE + suffix)
    tmp_meta = directory / (META_FILE + suffix)
    try:
        packed = PackedGraphs.from_graphs(graphs).pack()
        index = packed.edge_index
        if index.numel() and int(index.max()) < 2**31 and index.dtype != torch.int32:
            index = index.to(torch.int32)  # ids inside one graph: half the bytes of int64
        arrays = {"edge_index": index, "num_nodes": packed.num_nodes,
                  "num_edges": packed.num_edges,
                  **{f"ndata/{k}": v for k, v in packed.ndata.items()},
                  **{f"edata/{k}": v for k, v in packed.edata.items()},
                  **{f"tensor/{k}": v for k, v in tensors.items()}}
        table, digest = _write_arrays(tmp_graphs, arrays)
        meta = {**key, **(extra or {}), "n_graphs": len(graphs), "layout": LAYOUT,
                "arrays": table, "graphs_sha256": digest}
        tmp_meta.write_text(json.dumps(meta, indent=1))
        os.replace(tmp_graphs, directory / GRAPHS_FILE)
        os.replace(tmp_meta, directory / META_FILE)
    finally:
        for tmp in (tmp_graphs, tmp_meta):
            tmp.unlink(missing_ok=True)


def _write_arrays(path: Path, arrays: dict[str, torch.Tensor]) -> tuple[list[dict], str]:
    """Write the arrays raw at aligned offsets; their table and the file's sha256."""
    table, h, offset = [], hashlib.sha256(), 0
    with open(path, "wb") as fh:
        for name, tensor in arrays.items():
            if not _NAME.match(name):
                raise ValueError(f"cannot store an array named {name!r}")
            array = np.ascontiguousarray(tensor.detach().cpu().numpy())
            if array.dtype.name not in DTYPES:
                raise ValueError(f"cannot store {name} of dtype {array.dtype}")
            pad = -offset % ALIGN
            fh.write(b"\0" * pad)
            h.update(b"\0" * pad)
            offset += pad
            data = array.data.cast("B") if array.nbytes else b""
            fh.write(data)
            h.update(data)
            table.append({"name": name, "dtype": array.dtype.name, "shape": list(array.shape),
                          "offset": offset})
            offset += array.nbytes
        fh.flush()
        os.fsync(fh.fileno())
    return table, h.hexdigest()


def load_or_build(
    directory: Path,
    key: dict[str, Any],
    build: Callable[[], tuple[Sequence, dict[str, torch.Tensor], dict[str, Any]]],
    meta_keys: tuple[str, ...] = (),
    tensor_keys: tuple[str, ...] = (),
) -> tuple[Sequence, dict[str, torch.Tensor], dict[str, Any], str]:
    """Read a valid cache for ``key`` or build one and write it.

    Parameters
    ----------
    directory : Path
        The cache folder (one per dataset and parameter set).
    key : dict
        JSON values that decide validity: source checksums, generator
        parameters, format and library versions.
    build : callable
        ``build() -> (graphs, tensors, extra)``: G graphs, graph-level tensors
        (first dim G) and JSON facts for ``meta.json``.
    meta_keys, tensor_keys : tuple of str
        What a cached ``meta.json`` and tensor dict must hold.

    Returns
    -------
    graphs : PackedGraphs on a hit, else what ``build`` returned (packed)
    tensors : dict of str to Tensor
    meta : dict
        ``key``, ``extra`` and the checksums.
    status : str
        ``"hit"``, ``"built"``, ``"rebuilt (<reason>)"`` or ``"not written (<error>)"``
        (the data is then used without a cache, with a warning).
    """
    cached, reason = read_graph_cache(directory, key, meta_keys, tensor_keys)
    graphs: Sequence  # PackedGraphs, or build()'s empty sequence
    if cached is not None:
        graphs, tensors, meta = cached
        return graphs, tensors, meta, "hit"
    graphs, tensors, extra = build()
    if len(graphs):
        graphs = PackedGraphs.from_graphs(graphs)
    status = "built" if reason == "no cache" else f"rebuilt ({reason})"
    try:
        write_graph_cache(directory, key, graphs, tensors, extra)
    except Exception as exc:  # read-only root, full disk: work without a cache
        # DGL's errors carry a C++ stack trace after their first line: keep the first
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        status = f"not written ({type(exc).__name__}: {first})"
        warnings.warn(f"grprune: could not write the dataset cache in {directory}: {first}")
    return graphs, tensors, {**key, **extra, "n_graphs": len(graphs)}, status


def _strings_sha256(items: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(items).encode()).hexdigest()


def cached_strings(
    path: Path, key: dict[str, Any], compute: Callable[[], list[str]], length: int,
    field: str = "scaffolds",
) -> tuple[list[str], str]:
    """A list of strings (e.g. scaffold SMILES) from a JSON cache, else computed and cached.

    The file holds ``key``, ``n_molecules``, the list under ``field`` and its
    sha256 under ``<field>_sha256``; it is used only if ``key`` is unchanged,
    the list has ``length`` strings and the checksum matches, so a stale,
    truncated or edited file is recomputed. Written atomically.

    Parameters
    ----------
    path : Path
        The JSON file.
    key : dict
        JSON values the cache must hold unchanged (source sha256, library and
        recipe versions).
    compute : callable
        ``compute() -> list of str`` of length ``length``.
    length : int
        Expected number of strings.
    field : str
        Name of the list in the file.

    Returns
    -------
    values : list of str
    status : str
        ``"hit"``, ``"built"``, ``"rebuilt (<reason>)"`` or ``"not written (<error>)"``.
    """
    from grprune.record.files import atomic_write_json

    reason = "no cache"
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            cached, reason = None, f"unreadable {path.name} ({type(exc).__name__})"
        if isinstance(cached, dict):
            values = cached.get(field)
            changed = [k for k, v in key.items() if cached.get(k) != v]
            if changed:
                reason = f"{', '.join(changed)} changed"
            elif (not isinstance(values, list) or len(values) != length
                  or not all(isinstance(v, str) for v in values)
                  or _strings_sha256(values) != cached.get(f"{field}_sha256")):
                reason = f"{path.name} is corrupt (checksum mismatch)"
            else:
                return values, "hit"
        elif cached is not None:
            reason = f"malformed {path.name}"
    values = compute()
    status = "built" if reason == "no cache" else f"rebuilt ({reason})"
    try:
        atomic_write_json(path, {**key, "n_molecules": len(values),
                                 f"{field}_sha256": _strings_sha256(values), field: values})
    except OSError as exc:  # read-only root: work without a cache
        status = f"not written ({type(exc).__name__}: {exc})"
    return values, status
