"""Molecules to DGL graphs: OGB featurization of SMILES, the size limits checked before
RDKit parses a molecule, and lenient parsing.

Graphs use OGB's featurization (:func:`ogb.utils.smiles2graph`): 9 categorical
atom features and 3 categorical bond features, every bond present as two
directed edges ``(i, j), (j, i)`` in RDKit's bond order. A molecule RDKit cannot
parse is skipped and counted, never an error; RDKit's log output is silenced
while parsing.

``lenient=True`` keeps molecules that fail only RDKit's valence check (current
RDKit rejects 7 hypervalent Al/B/Ge complexes of MoleculeNet HIV that the
2019 RDKit behind OGB accepted): they are parsed with ``sanitize=False``,
``UpdatePropertyCache(strict=False)`` and every sanitization step except the
valence check, then featurized with OGB's ``atom_to_feature_vector`` and
``bond_to_feature_vector`` exactly like :func:`ogb.utils.smiles2graph`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from grprune.compat import dgl
from grprune.data.csv_cells import cut_size
from grprune.errors import DataError
from grprune.messages import short_repr

if TYPE_CHECKING:  # RDKit and OGB are imported where used, so that importing is cheap
    from rdkit import Chem

NUM_ATOM_FEATURES = 9
NUM_BOND_FEATURES = 3
#: the most atoms (wildcards and bracket hydrogens included, :func:`atom_count`) a molecule
#: may have (``data.max_atoms`` of ``molecule-csv``): a larger one is skipped with the
#: reason ``too large`` before RDKit sees it (RDKit's scaffold and canonical-SMILES code is
#: superlinear: 2 s at 1,000 atoms, over 100 s at 4,000, and cannot be interrupted; its
#: ``MolToSmiles`` recurses per atom and overflows the stack at 20,000). Drug-like sets
#: stay far below it (ogbg-molhiv's largest molecule has 222 atoms).
MAX_ATOMS = 500
#: the reason of a molecule over :data:`MAX_ATOMS`, as it begins in skip reasons
TOO_LARGE = "too large"
#: the most bytes (UTF-8) one SMILES may have: a longer one is skipped (``too large``)
#: before its atoms are counted or RDKit sees it, whatever ``data.max_atoms`` is but 0
#: (500 atoms of ``[13C@@H+]`` with ring closures need under 10,000)
MAX_SMILES_BYTES = 100_000
# one atom of a SMILES, as RDKit makes atoms: a bracket atom (hydrogen included: ``[H]``,
# ``[2H]``), an organic-subset atom, or the wildcard ``*``. A bracket never spans another
# ``[``, so the count is linear in the length even for text such as ``[[[[``.
_ATOM_TOKEN = re.compile(r"\[[^\[\]]*\]|Br|Cl|[BCNOPSFIbcnops*]")


def atom_count(smiles: str) -> int:
    """The atoms of a SMILES string, counted from its text alone: every atom RDKit can
    make, so an upper bound on ``Chem.MolFromSmiles(smiles).GetNumAtoms()``.

    Linear in the length and independent of RDKit, so it bounds a molecule before any
    parsing: bracket atoms (``[nH]``, ``[Na+]``, ``[2H]``, ``[H]``), the organic subset
    (``B C N O P S F Cl Br I`` and aromatic ``b c n o p s``) and the wildcard ``*``.
    Exact for valid SMILES without bracket hydrogens (which RDKit folds into their
    neighbour); for invalid text it is an estimate (RDKit then rejects the string anyway).

    Examples
    --------
    >>> atom_count("c1ccccc1O"), atom_count("[Na+].[Cl-]"), atom_count("[2H]C")
    (7, 2, 2)
    >>> atom_count("*C*"), atom_count("[*]CC")
    (3, 3)
    """
    return len(_ATOM_TOKEN.findall(smiles)) if isinstance(smiles, str) else 0


def too_large_reason(smiles: str, max_atoms: int = MAX_ATOMS) -> str | None:
    """``"too large: 20,000 atoms (the limit is 500, data.max_atoms)"`` for a SMILES over
    ``max_atoms`` atoms (:func:`atom_count`), ``"too large: 1,000,000 bytes (...)"`` for
    one over :data:`MAX_SMILES_BYTES` bytes (checked first, in time independent of the
    text), else None; ``max_atoms`` 0 means no limit. A cell the CSV reader did not read
    (over :data:`grprune.data.csv_cells.CELL_LIMIT` bytes: its note,
    :func:`~grprune.data.csv_cells.cut_note`) is too large whatever ``max_atoms`` is.

    >>> too_large_reason("*" * 600)
    'too large: 600 atoms (the limit is 500, data.max_atoms)'
    >>> too_large_reason("<a cell of 1,073,741,824 bytes, not read>", max_atoms=0)
    'too large: a SMILES of 1,073,741,824 bytes (the limit is 100,000 bytes; not read)'
    """
    if not isinstance(smiles, str):
        return None
    cut = cut_size(smiles)
    if cut is not None:
        return (f"{TOO_LARGE}: a SMILES of {cut:,} bytes (the limit is {MAX_SMILES_BYTES:,} "
                f"bytes; not read)")
    if not max_atoms:
        return None
    if len(smiles) > MAX_SMILES_BYTES:  # so many bytes at least: the text is not encoded
        return (f"{TOO_LARGE}: a SMILES of {len(smiles):,} characters (the limit is "
                f"{MAX_SMILES_BYTES:,} bytes)")
    if len(smiles) <= max_atoms:
        return None  # a SMILES has at least one character per atom
    size = len(smiles.encode("utf-8", "replace"))
    if size > MAX_SMILES_BYTES:
        return f"{TOO_LARGE}: a SMILES of {size:,} bytes (the limit is {MAX_SMILES_BYTES:,} bytes)"
    n = atom_count(smiles)
    if n <= max_atoms:
        return None
    return f"{TOO_LARGE}: {n:,} atoms (the limit is {max_atoms:,}, data.max_atoms)"


def check_smiles_text(smiles: object, max_atoms: int = MAX_ATOMS) -> None:
    """Refuse a SMILES before RDKit reads it: not a string, blank, or too large
    (:func:`too_large_reason`), each featurizer's first check.

    Raises
    ------
    DataError
        ``empty or missing SMILES ...``, or the :func:`too_large_reason` message.
    """
    if not isinstance(smiles, str) or not smiles.strip():
        raise DataError(f"empty or missing SMILES {smiles!r}")
    large = too_large_reason(smiles, max_atoms)
    if large:
        raise DataError(large)


def graph_from_arrays(
    edge_index: np.ndarray, node_feat: np.ndarray, edge_feat: np.ndarray, num_nodes: int
) -> dgl.DGLGraph:
    """Build a DGL graph from OGB-style arrays, keeping the edge order.

    Parameters
    ----------
    edge_index : np.ndarray, shape (2, E)
        Source and destination node of each directed edge.
    node_feat : np.ndarray, shape (N, 9)
        Categorical atom features; stored as int64 ``ndata['feat']``.
    edge_feat : np.ndarray, shape (E, 3)
        Categorical bond features; stored as int64 ``edata['feat']``.
    num_nodes : int
        N (a graph may have no edges).

    Returns
    -------
    dgl.DGLGraph
        Graph with ``ndata['feat']`` (N, 9) and ``edata['feat']`` (E, 3), int64.
    """
    src = torch.as_tensor(np.asarray(edge_index[0]), dtype=torch.int64)
    dst = torch.as_tensor(np.asarray(edge_index[1]), dtype=torch.int64)
    g = dgl.graph((src, dst), num_nodes=int(num_nodes))
    g.ndata["feat"] = torch.as_tensor(np.asarray(node_feat), dtype=torch.int64).reshape(
        int(num_nodes), -1
    )
    g.edata["feat"] = torch.as_tensor(np.asarray(edge_feat), dtype=torch.int64).reshape(
        len(src), NUM_BOND_FEATURES
    )
    return g


def lenient_mol(smiles: str) -> "Chem.Mol | None":
    """A molecule parsed without RDKit's valence check; None if even that fails.

    ``MolFromSmiles(sanitize=False)``, ``UpdatePropertyCache(strict=False)`` and
    every sanitization step except ``SANITIZE_PROPERTIES`` (the valence check).
    """
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles, sanitize=False)
    if mol is None or mol.GetNumAtoms() == 0:
        return None
    mol.UpdatePropertyCache(strict=False)
    flags = Chem.SanitizeFlags.SANITIZE_ALL ^ Chem.SanitizeFlags.SANITIZE_PROPERTIES
    if Chem.SanitizeMol(mol, flags, catchErrors=True) != Chem.SanitizeFlags.SANITIZE_NONE:
        return None
    return mol


def _lenient_arrays(smiles: str) -> dict | None:
    """OGB arrays of a molecule parsed without RDKit's valence check (None if that fails)."""
    from ogb.utils.features import atom_to_feature_vector, bond_to_feature_vector

    mol = lenient_mol(smiles)
    if mol is None:
        return None
    try:
        node_feat = [atom_to_feature_vector(a) for a in mol.GetAtoms()]
        edges, edge_feat = [], []
        for bond in mol.GetBonds():
            i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
            f = bond_to_feature_vector(bond)
            edges += [(i, j), (j, i)]
            edge_feat += [f, f]
    except Exception:
        return None
    edge_index = np.asarray(edges, dtype=np.int64).T.reshape(2, -1)
    return {"edge_index": edge_index, "node_feat": np.asarray(node_feat, dtype=np.int64),
            "edge_feat": np.asarray(edge_feat, dtype=np.int64).reshape(-1, NUM_BOND_FEATURES),
            "num_nodes": len(node_feat)}


def smiles_to_graph(smiles: str, lenient: bool = False,
                    max_atoms: int = MAX_ATOMS) -> dgl.DGLGraph:
    """Featurize one SMILES string with :func:`ogb.utils.smiles2graph`.

    Parameters
    ----------
    smiles : str
        The molecule.
    lenient : bool
        If RDKit rejects the molecule, retry without the valence check (see
        the module docstring).
    max_atoms : int
        Refuse a molecule with more atoms than this (:data:`MAX_ATOMS`; 0: no limit)
        before RDKit parses it.

    Returns
    -------
    dgl.DGLGraph
        ``ndata['feat']`` int64 (N, 9), ``edata['feat']`` int64 (E, 3) with
        E = 2 * number of bonds (0 for a molecule without bonds, e.g. ``"C"``).

    Raises
    ------
    DataError
        If RDKit cannot parse ``smiles``, the molecule has no atoms, or it has more than
        ``max_atoms`` atoms (the message begins ``too large``).
    """
    from ogb.utils import smiles2graph
    from rdkit import rdBase

    check_smiles_text(smiles, max_atoms)
    with rdBase.BlockLogs():
        try:
            d = smiles2graph(smiles)
        except Exception:  # MolFromSmiles gave None (AttributeError) or RDKit failed
            d = _lenient_arrays(smiles) if lenient else None
            if d is None:
                raise DataError(f"RDKit cannot parse SMILES {short_repr(smiles)}: "
                                f"{unparsable_reason(smiles)}") from None
    if d["num_nodes"] == 0:
        raise DataError(f"SMILES {short_repr(smiles)} has no atoms")
    return graph_from_arrays(d["edge_index"], d["node_feat"], d["edge_feat"], d["num_nodes"])


def featurize_smiles(
    smiles: Sequence[str], lenient: bool = False
) -> tuple[list[dgl.DGLGraph], np.ndarray]:
    """Featurize many SMILES, skipping those RDKit cannot parse.

    Parameters
    ----------
    smiles : sequence of str, length S
    lenient : bool
        Keep molecules that fail only the valence check (see the module docstring).

    Returns
    -------
    graphs : list of dgl.DGLGraph, length G <= S
        See :func:`smiles_to_graph`.
    kept : np.ndarray of int64, shape (G,)
        Position in ``smiles`` of each graph (increasing).
    """
    graphs, kept, _ = featurize_smiles_with_lenient(smiles, lenient)
    return graphs, kept


def featurize_smiles_with_lenient(smiles: Sequence[str], lenient: bool
                                  ) -> tuple[list, np.ndarray, list[int]]:
    """:func:`featurize_smiles` plus the positions kept only by lenient parsing."""
    graphs, kept, lenient_pos = [], [], []
    for i, s in enumerate(smiles):
        try:
            graphs.append(smiles_to_graph(s))
        except DataError:
            if not lenient:
                continue
            try:
                graphs.append(smiles_to_graph(s, lenient=True))
            except DataError:
                continue
            lenient_pos.append(i)
        kept.append(i)
    return graphs, np.asarray(kept, dtype=np.int64), lenient_pos


def unparsable_reason(smiles: str) -> str:
    """Why RDKit rejects a SMILES, in words (for skip reasons; no exception names).

    ``"not valid SMILES syntax"`` when even unsanitized parsing fails, else the
    first problem :func:`rdkit.Chem.DetectChemistryProblems` reports (e.g.
    ``"Explicit valence for atom # 1 C, 5, is greater than permitted"``).

    Examples
    --------
    >>> unparsable_reason("C1CC(C")
    'not valid SMILES syntax'
    """
    from rdkit import Chem, rdBase

    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles, sanitize=False)
        if mol is None:
            return "not valid SMILES syntax"
        if mol.GetNumAtoms() == 0:
            return "no atoms"
        try:
            problems = Chem.DetectChemistryProblems(mol)
        except Exception:  # noqa: BLE001 - a message is all we want here
            problems = ()
    if problems:
        return " ".join(problems[0].Message().split())
    return "RDKit cannot build the molecule"
