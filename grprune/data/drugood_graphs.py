"""The graphs of a DrugOOD curation's entries: each distinct SMILES featurized once
(:func:`grprune.data.molecules.featurize_smiles`, OGB's features) through an on-disk cache
keyed by the sorted SMILES list (:func:`cached_molecule_graphs`), and one graph per entry
whose SMILES parses, entries that share a SMILES sharing one graph object
(:func:`entry_graphs`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import torch

from grprune.data.cache import load_or_build
from grprune.data.drugood_curation import Curation
from grprune.data.molecules import featurize_smiles
from grprune.data.packed import PackedGraphs
from grprune.errors import DataError

#: bump when the cached graphs' format changes
FORMAT_VERSION = 1


def smiles_sha256(unique_smiles: list[str]) -> str:
    """Hex sha256 of a list of SMILES, serialized as a JSON array (unambiguous)."""
    return hashlib.sha256(json.dumps(unique_smiles).encode("utf-8")).hexdigest()


def cached_molecule_graphs(
    unique_smiles: list[str], cache_root: Path
) -> tuple[Sequence, np.ndarray, str, Path]:
    """Graphs of distinct SMILES, through an on-disk cache keyed by their content.

    Parameters
    ----------
    unique_smiles : list of str, length U
        Distinct SMILES, sorted (the order fixes the cache's contents).
    cache_root : Path
        ``<root>/drugood_ec50/grprune_v1``; the cache is the sub-folder
        ``molecules-<first 16 hex digits of smiles_sha256(unique_smiles)>``.

    Returns
    -------
    graphs : sequence of dgl.DGLGraph, length U' <= U
        (``ndata['feat']`` int64 (N, 9), ``edata['feat']`` int64 (E, 3)): the
        parsable molecules, a :class:`~grprune.data.packed.PackedGraphs` (graphs
        are built on first access).
    graph_of : np.ndarray of int64, shape (U,)
        Position in ``graphs`` of each SMILES, -1 where RDKit cannot parse it.
    status : str
        ``"hit"``, ``"built"``, ``"rebuilt (<reason>)"`` or ``"not written (...)"``.
    cache_dir : Path
    """
    import ogb
    import rdkit

    digest = smiles_sha256(unique_smiles)
    cache_dir = cache_root / f"molecules-{digest[:16]}"
    key = {"format_version": FORMAT_VERSION, "dataset": "drugood-ec50 molecules",
           "smiles_sha256": digest, "n_molecules": len(unique_smiles),
           "rdkit_version": rdkit.__version__, "ogb_version": ogb.__version__}

    def build():
        graphs, kept = featurize_smiles(unique_smiles)
        unparsable = sorted(set(range(len(unique_smiles))) - set(kept.tolist()))
        return graphs, {"mol_index": torch.from_numpy(kept)}, {"unparsable": unparsable}

    graphs, tensors, _, status = load_or_build(cache_dir, key, build, ("unparsable",),
                                               ("mol_index",))
    mol_index = tensors["mol_index"].numpy().astype(np.int64)
    if len(mol_index) and (mol_index.min() < 0 or mol_index.max() >= len(unique_smiles)):
        raise DataError(f"graph cache {cache_dir} is inconsistent (molecule index out of "
                        "range); delete that folder to rebuild it")
    graph_of = np.full(len(unique_smiles), -1, dtype=np.int64)
    graph_of[mol_index] = np.arange(len(mol_index), dtype=np.int64)
    return graphs, graph_of, status, cache_dir


class EntryGraphs(NamedTuple):
    """The graphs of a curation's entries (see :func:`entry_graphs`)."""

    graphs: Sequence          # G graphs, one per kept entry, in entry order
    kept: np.ndarray          # int64 (G,): entry of each graph
    skipped: list[int]        # entries whose SMILES RDKit cannot parse
    n_molecules: int          # distinct SMILES
    status: str               # graph cache status
    cache_dir: Path


def entry_graphs(cur: Curation, cache_root: Path) -> EntryGraphs:
    """One graph per entry whose SMILES parses, featurized once per distinct SMILES
    through the cache (:func:`cached_molecule_graphs`); entries sharing a SMILES share
    one graph object."""
    unique = sorted(set(cur.smiles))
    position = {s: j for j, s in enumerate(unique)}
    mol_graphs, graph_of, status, cache_dir = cached_molecule_graphs(unique, cache_root)
    per_entry = graph_of[np.asarray([position[s] for s in cur.smiles], dtype=np.int64)]
    kept = np.flatnonzero(per_entry >= 0).astype(np.int64)
    skipped = [int(r) for r in np.flatnonzero(per_entry < 0)]
    packed = PackedGraphs.from_graphs(mol_graphs) if len(mol_graphs) else None
    graphs = packed.take(per_entry[kept]) if packed is not None else []
    return EntryGraphs(graphs, kept, skipped, len(unique), status, cache_dir)
