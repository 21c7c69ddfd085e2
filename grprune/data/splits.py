"""Train/valid/test splits: scaffold, size, random, and OGB split files.

A split is a dict ``{"train", "valid", "test"} -> np.ndarray`` of sorted, int64,
pairwise disjoint indices that together cover ``0 .. n-1``.
"""

from __future__ import annotations

import gzip
import math
from collections import defaultdict
from pathlib import Path
from typing import Sequence

import numpy as np

from grprune.errors import DataError, GrpruneError

SPLIT_NAMES = ("train", "valid", "test")
#: in-distribution hold-outs of OOD benchmarks (GOOD, DrugOOD); ``valid`` and
#: ``test`` are then the out-of-distribution parts
ID_PARTS = ("id-valid", "id-test")
PART_NAMES = SPLIT_NAMES + ID_PARTS


def _check_frac(frac: Sequence[float]) -> tuple[float, float, float]:
    if len(frac) != 3 or any(f < 0 for f in frac) or abs(sum(frac) - 1.0) > 1e-6:
        raise GrpruneError(
            f"split fractions must be three non-negative numbers summing to 1, got {tuple(frac)}"
        )
    return float(frac[0]), float(frac[1]), float(frac[2])


def _part_sizes(n: int, f_train: float, f_valid: float) -> tuple[int, int]:
    """Train and valid sizes of a cut split: ``floor(f_train * n)`` and
    ``floor(f_valid * n + 0.5)``, capped at what train leaves; test takes the rest."""
    n_train = int(math.floor(f_train * n + 1e-9))
    return n_train, min(int(math.floor(f_valid * n + 0.5)), n - n_train)


def _as_split(train, valid, test) -> dict[str, np.ndarray]:
    return {
        k: np.sort(np.asarray(v, dtype=np.int64)) for k, v in zip(SPLIT_NAMES, (train, valid, test))
    }


def _lenient_scaffold(smiles: str, include_chirality: bool) -> str:
    """Murcko scaffold of a molecule parsed without the valence check."""
    from rdkit import Chem

    from grprune.data.molecules import lenient_mol

    mol = lenient_mol(smiles)
    if mol is None:
        raise ValueError("unparsable")
    core = Chem.MurckoDecompose(mol)
    core.UpdatePropertyCache(strict=False)
    Chem.GetSymmSSSR(core)
    return Chem.MolToSmiles(core, isomericSmiles=include_chirality)


def murcko_scaffolds(smiles: Sequence[str], include_chirality: bool = True) -> list[str]:
    """Bemis–Murcko scaffold SMILES of each molecule.

    Uses ``MurckoScaffold.MurckoScaffoldSmiles(smiles=s, includeChirality=...)``;
    a molecule that fails RDKit's strict parse but parses without the valence
    check (:mod:`grprune.data.molecules`, lenient mode; e.g. the 7 hypervalent
    complexes of MoleculeNet HIV) gets the scaffold of that lenient parse
    (``Chem.MurckoDecompose`` with a non-strict property update).

    Parameters
    ----------
    smiles : sequence of str, length n
    include_chirality : bool
        OGB's scaffold split uses True; GOOD's scaffold domains use False.

    Returns
    -------
    list of str, length n
        ``""`` for acyclic molecules.

    Raises
    ------
    DataError
        If RDKit cannot compute a scaffold (the message names the index).
    """
    from rdkit import rdBase
    from rdkit.Chem.Scaffolds import MurckoScaffold

    out = []
    with rdBase.BlockLogs():
        for i, s in enumerate(smiles):
            try:
                try:
                    scaffold = MurckoScaffold.MurckoScaffoldSmiles(
                        smiles=s, includeChirality=include_chirality)
                except Exception:
                    scaffold = _lenient_scaffold(s, include_chirality)
            except Exception as exc:
                raise DataError(
                    f"cannot compute the scaffold of molecule {i} ({s!r}): {type(exc).__name__}"
                ) from None
            out.append(scaffold)
    return out


def scaffold_envs(scaffolds: Sequence[str]) -> np.ndarray:
    """Environment id of each molecule: the rank of its scaffold among the distinct
    scaffolds in sorted order, int64, shape (G,).

    The same ids as ``np.unique(np.asarray(scaffolds).astype(str), return_inverse=True)[1]``
    without a fixed-width string array (10^6 scaffolds of up to ~200 characters made that
    a gigabyte).

    Examples
    --------
    >>> scaffold_envs(["c1ccccc1", "", "c1ccccc1", "C1CC1"]).tolist()
    [2, 0, 2, 1]
    """
    index = {s: i for i, s in enumerate(sorted(set(scaffolds)))}
    return np.fromiter((index[s] for s in scaffolds), dtype=np.int64, count=len(scaffolds))


def scaffold_split(
    smiles: Sequence[str], frac: Sequence[float] = (0.8, 0.1, 0.1),
    scaffolds: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """Deterministic Bemis–Murcko scaffold split, as used to make OGB's files.

    Each molecule's scaffold is
    ``MurckoScaffold.MurckoScaffoldSmiles(smiles=s, includeChirality=True)``.
    Molecules are grouped by scaffold; the groups are ordered by
    ``(group size, first index in the group)`` in *descending* order (largest
    groups first; among equal sizes, the group whose first molecule comes last
    goes first). Walking that order, a group goes to train unless
    ``len(train) + len(group) > frac[0] * n``, else to valid unless
    ``len(train) + len(valid) + len(group) > (frac[0] + frac[1]) * n``, else to
    test. On the 2039 ogbg-molbbbp SMILES this reproduces OGB's official
    scaffold split files exactly (dgllife's ``ScaffoldSplitter`` breaks ties
    ascending and does not).

    Parameters
    ----------
    smiles : sequence of str, length n
        Parsable SMILES.
    frac : (float, float, float)
        Train, valid and test fractions, summing to 1.
    scaffolds : sequence of str, length n, optional
        Precomputed :func:`murcko_scaffolds` (with chirality) of ``smiles``.

    Returns
    -------
    dict of str to np.ndarray of int64
        ``train``, ``valid``, ``test``: sorted indices into ``smiles``.

    Raises
    ------
    GrpruneError
        On bad fractions.
    DataError
        If RDKit cannot compute a scaffold (the message names the index).
    """
    f_train, f_valid, _ = _check_frac(frac)
    if scaffolds is None:
        scaffolds = murcko_scaffolds(smiles, include_chirality=True)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, scaffold in enumerate(scaffolds):
        groups[scaffold].append(i)
    ordered = sorted(groups.values(), key=lambda g: (len(g), g[0]), reverse=True)
    n = len(smiles)
    train_cut, valid_cut = f_train * n, (f_train + f_valid) * n
    train: list[int] = []
    valid: list[int] = []
    test: list[int] = []
    for group in ordered:
        if len(train) + len(group) > train_cut:
            if len(train) + len(valid) + len(group) > valid_cut:
                test.extend(group)
            else:
                valid.extend(group)
        else:
            train.extend(group)
    return _as_split(train, valid, test)


def size_split(
    num_nodes: Sequence[int] | np.ndarray, seed: int, frac: Sequence[float] = (0.8, 0.1, 0.1)
) -> dict[str, np.ndarray]:
    """Size split: train on the largest graphs, validate and test on the smallest.

    Graphs are sorted by number of nodes, descending (ties by index ascending).
    Train takes the first ``n_train = floor(frac[0] * n)`` graphs. The remaining
    (smallest) graphs are shuffled with ``numpy.random.default_rng(seed)``
    (from increasing index order); valid takes the first
    ``n_valid = floor(frac[1] * n + 0.5)`` of them (capped at what is left) and
    test the rest. For n = 2039 that is 1631 / 204 / 204, the same sizes as the
    official scaffold split.

    Parameters
    ----------
    num_nodes : sequence of int, shape (n,)
        Size of each graph.
    seed : int
        Seed of the valid/test shuffle; train does not depend on it.
    frac : (float, float, float)
        Train, valid and test fractions, summing to 1.

    Returns
    -------
    dict of str to np.ndarray of int64
        ``train``, ``valid``, ``test``: sorted indices.

    Raises
    ------
    GrpruneError
        On bad fractions.
    """
    f_train, f_valid, _ = _check_frac(frac)
    sizes = np.asarray(num_nodes, dtype=np.int64).reshape(-1)
    n = len(sizes)
    order = np.argsort(-sizes, kind="stable")
    n_train, n_valid = _part_sizes(n, f_train, f_valid)
    rest = np.random.default_rng(seed).permutation(np.sort(order[n_train:]))
    return _as_split(order[:n_train], rest[:n_valid], rest[n_valid:])


def random_split(n: int, seed: int, frac: Sequence[float] = (0.8, 0.1, 0.1)
                 ) -> dict[str, np.ndarray]:
    """Random split: a seeded permutation cut into train, valid and test.

    ``numpy.random.default_rng(seed).permutation(n)``; train takes the first
    ``floor(frac[0] * n)``, valid the next ``floor(frac[1] * n + 0.5)`` (capped at
    what is left), test the rest (the part sizes of :func:`size_split`).

    Parameters
    ----------
    n : int
        Number of graphs.
    seed : int
    frac : (float, float, float)
        Train, valid and test fractions, summing to 1.

    Returns
    -------
    dict of str to np.ndarray of int64
        ``train``, ``valid``, ``test``: sorted indices.

    Raises
    ------
    GrpruneError
        On bad fractions.

    Examples
    --------
    >>> {k: len(v) for k, v in random_split(10, seed=0).items()}
    {'train': 8, 'valid': 1, 'test': 1}
    """
    f_train, f_valid, _ = _check_frac(frac)
    order = np.random.default_rng(seed).permutation(int(n))
    n_train, n_valid = _part_sizes(int(n), f_train, f_valid)
    return _as_split(order[:n_train], order[n_train:n_train + n_valid],
                     order[n_train + n_valid:])


def check_split(
    split: dict, n: int, where: str, files: dict[str, str] | None = None, cover: bool = True
) -> dict[str, np.ndarray]:
    """Validate a split and return it as sorted int64 arrays.

    Parameters
    ----------
    split : dict of str to array-like of int
        Must hold ``train``, ``valid`` and ``test``; may hold ``id-valid`` and
        ``id-test`` (:data:`ID_PARTS`).
    n : int
        Number of graphs; the parts must be pairwise disjoint.
    where : str
        Where the split comes from (a folder), for messages.
    files : dict of str to str, optional
        The file each part was read from, named in messages instead of the part.
    cover : bool
        Also require the parts to cover ``0 .. n-1``.

    Returns
    -------
    dict of str to np.ndarray of int64, sorted

    Raises
    ------
    DataError
        Naming the part (file) that is missing, out of range, duplicated or
        overlapping, or the indices that no part covers.
    """
    unknown = [k for k in split if k not in PART_NAMES]
    if unknown:
        raise DataError(f"split {where} has an unknown part {unknown[0]!r} "
                        f"(parts: {', '.join(PART_NAMES)})")
    names = [k for k in PART_NAMES if k in split or k in SPLIT_NAMES]
    label = {k: (files or {}).get(k) or f"{where} ({k})" for k in names}
    out = {}
    for name in names:
        if name not in split:
            raise DataError(f"split {where} has no {name!r} part")
        idx = np.sort(np.asarray(split[name], dtype=np.int64).reshape(-1))
        bad = idx[(idx < 0) | (idx >= n)]
        if len(bad):
            raise DataError(
                f"split {label[name]}: index {int(bad[0])} is out of range for {n} graphs"
            )
        dup = idx[1:][idx[1:] == idx[:-1]]
        if len(dup):
            raise DataError(f"split {label[name]}: index {int(dup[0])} appears twice")
        out[name] = idx
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            both = np.intersect1d(out[a], out[b])
            if len(both):
                raise DataError(
                    f"split parts overlap: {label[a]} and {label[b]} share {len(both)} "
                    f"indices (e.g. {int(both[0])})"
                )
    covered = sum(len(v) for v in out.values())
    if cover and covered != n:
        missing = np.setdiff1d(np.arange(n), np.concatenate(list(out.values())))
        raise DataError(
            f"split {where} covers {covered} of {n} graphs; e.g. index {int(missing[0])} "
            "is in no part"
        )
    return out


def _read_index_file(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt") as fh:
            lines = fh.read().splitlines()
    except Exception as exc:  # truncated gzip, bad bytes, ...
        raise DataError(f"cannot read split file {path}: {type(exc).__name__}: {exc}") from None
    values = []
    for lineno, line in enumerate(lines, 1):
        text = line.strip().strip(",")
        if not text:
            continue
        try:
            values.append(int(text))
        except ValueError:
            raise DataError(
                f"split file {path}, line {lineno}: {line.strip()!r} is not an integer index"
            ) from None
    return np.asarray(values, dtype=np.int64)


def load_split_files(directory: str | Path, n: int) -> dict[str, np.ndarray]:
    """Read an OGB split folder: ``train/valid/test.csv.gz`` (or ``.csv``).

    Each file holds one 0-based graph index per line, without a header.

    Parameters
    ----------
    directory : str or Path
        E.g. ``.../ogbg_molbbbp/split/scaffold``.
    n : int
        Number of graphs the indices refer to.

    Returns
    -------
    dict of str to np.ndarray of int64
        ``train``, ``valid``, ``test``: sorted indices.

    Raises
    ------
    DataError
        If a file is missing, unreadable or holds a non-integer, or the parts
        are not disjoint or do not cover ``0 .. n-1`` (the message names the file).
    """
    directory = Path(directory)
    parts, files = {}, {}
    for name in SPLIT_NAMES:
        candidates = [directory / f"{name}.csv.gz", directory / f"{name}.csv"]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            raise DataError(f"split file not found: {candidates[0]} (nor {candidates[1].name})")
        parts[name], files[name] = _read_index_file(path), f"file {path}"
    return check_split(parts, n, str(directory), files)
