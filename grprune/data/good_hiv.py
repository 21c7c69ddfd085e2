"""GOOD-HIV: MoleculeNet HIV with GOOD's scaffold and size domains and shifts.

GOOD (Gui et al., NeurIPS 2022 Datasets and Benchmarks, "GOOD: A Graph
Out-of-Distribution Benchmark") turns MoleculeNet HIV (41,127 molecules,
binary ``HIV_active``, ROC-AUC) into out-of-distribution splits. GOOD ships
its splits as pickled PyG files on Google Drive; grprune recomputes them from
the bundled CSV (``grprune/data/files/moleculenet/hiv.csv.gz``) with GOOD's
published procedure, so ``split_source`` is ``"computed (GOOD recipe)"``.

Molecules
---------
All 41,127 rows, in file order (GOOD reads the same file through PyG's
``MoleculeNet``), featurized as in ``ogbg-molhiv``
(:func:`grprune.data.ogbg.hiv_molecules`: OGB atom/bond features, cached once
for both datasets). Current RDKit rejects 7 hypervalent Al/B/Ge complexes (rows
137, 987, 12882, 18293, 30784, 30785, 35728) that the RDKit of GOOD's time
accepted (GOOD's parts add up to all 41,127 molecules; RDKit 2022.09 parses
all 7). They are parsed leniently, without the valence check, for the graphs
and for their scaffolds, and get the scaffolds and atom counts RDKit 2022.09
gives them. All 7 are inactive (label 0) and each is alone in its scaffold
domain.

Domains
-------
``scaffold``
    The Bemis–Murcko scaffold SMILES without chirality, GOOD's
    ``MurckoScaffold.MurckoScaffoldSmiles(mol=MolFromSmiles(s),
    includeChirality=False)``; acyclic molecules have the empty scaffold
    ``""`` (1,582 of them). RDKit has changed how it writes SMILES since
    2022, which changes scaffold strings, hence domain order and the split.
    :func:`murcko_scaffold` therefore spells scaffolds as RDKit did then: it
    drops the brackets RDKit 2025.03 puts on atoms bonded to metals (342
    molecules) and takes the 2022.09 scaffold of 9 molecules whose canonical
    SMILES changed otherwise (:data:`GOOD_ERA_SCAFFOLDS`). With RDKit
    2026.09 this gives, for all 41,127 molecules, the same string as RDKit
    2022.09's ``MurckoScaffoldSmiles``; 19,089 domains. Computing the
    scaffolds takes about 15 s; they are cached.
``size``
    The number of atoms, ``MolFromSmiles(s).GetNumAtoms()`` (hydrogens
    implicit), which is the number of nodes of each graph (equal to RDKit
    2022.09's count for every molecule); 151 domains.

Domain values are sorted ascending (strings by code point, as Python sorts
them), with a stable sort, so molecules of one domain keep file order; domain
ids ``0 .. D-1`` follow that order.

Covariate shift (:func:`covariate_split`)
-----------------------------------------
The domain-sorted list (reversed for ``size``, so the largest molecules come
first and go to training; within one size, later rows first) is cut at
``int(0.8 n)`` and ``int(0.9 n)``, each cut moved forward to the next domain
change, into the training pool, OOD-valid and OOD-test: no domain is shared
between the three. The training pool is shuffled and its last
``2 * int(0.1 n)`` molecules become ID-valid and ID-test (``int(0.1 n)``
each, in that order). The rest is training, split into 10 environments by
walking it in shuffled order: environment ``k + 1`` starts at the first domain
change at or after position ``(k + 1) * (len(train) // 10)``.

Concept shift (:func:`concept_split`)
-------------------------------------
Every domain is scanned five times, in domain order, building five sets with
label-to-domain biases ``(0.95, 0.95, 0.9, 0.85, 0.5)`` and picking ratios
``(0.3, 0.5, 0.6, 1, 1)``: sets 0, 2 and 3 are the training environments
0, 1, 2, set 1 is OOD-test and set 4 (everything left) is OOD-valid. A domain
has sign ``+1`` if fewer than ``n / 2`` molecules precede it in domain order,
else ``-1`` (negated for the two OOD sets). A molecule whose sign times
``(label - mean label)`` is positive joins the set when ``u < bias`` and
``p < ratio``, otherwise when ``u > bias`` and ``p < ratio``, with ``p`` and
``u`` two fresh uniform draws per molecule and set. If a domain holds both
kinds of molecule, at least one joined, and all of one kind stayed out, the
last of that kind to stay out joins too (GOOD's guard against one-label
domains). Chosen molecules leave the domain. The three training sets,
concatenated, are shuffled and the last ``2 * int(0.15 m)`` of the ``m``
molecules become ID-valid and ID-test; the rest is training. Every molecule
ends in exactly one part.

Where a carve-out size is 0 (tiny inputs only) the ID parts are empty and
training keeps the pool; GOOD's ``pool[:-0]`` would empty training instead.

Randomness
----------
GOOD draws from Python's global :mod:`random` after its runner seeds it with
``random_seed`` (123 by default), in this order: its no-shift split (shuffle
of all ``n`` molecules, then ``randint(0, 9)`` for each of ``int(0.6 n)``),
the covariate shuffle, the concept draws and the concept shuffle. grprune
makes the same calls, in the same order, on ``random.Random(seed)`` (the
no-shift draws are made and discarded), so ``seed`` plays GOOD's
``random_seed``; the default is 123. Covariate part sizes do not depend on
the seed; concept sizes do, and seed 123 gives exactly GOOD's published
concept sizes for both domains, so GOOD's files evidently came from a fresh
run seeded with 123 (membership itself cannot be compared without GOOD's
files).

Environments
------------
``envs`` holds GOOD's ``env_id`` for molecules GOOD gives one: the training
part (0..9 covariate, 0..2 concept) and, for concept shift, ID-valid and
ID-test (carved out after environments are assigned). Every other molecule
(covariate ID parts, OOD parts) has ``-1``: GOOD assigns it no training
environment.

Cache
-----
The scaffolds are stored in ``<root>/good_hiv/grprune_v1/scaffolds.json``,
keyed by the CSV's sha256, the source rows, the RDKit version and
:data:`RECIPE_VERSION`, with a checksum of the scaffold list; a stale,
truncated or corrupt file is rebuilt. Splits are recomputed on each load
(about a second). Sizes need no cache.

Sizes
-----
train / ID-valid / ID-test / OOD-valid / OOD-test, as GOOD's paper reports
them and grprune computes them (the PrunE paper's table repeats the
covariate ones):

========  =========  ======  ========  =======  =========  ========
domain    shift      train   ID-valid  ID-test  OOD-valid  OOD-test
========  =========  ======  ========  =======  =========  ========
scaffold  covariate  24,682  4,112     4,112    4,113      4,108
scaffold  concept    15,209  3,258     3,258    9,365      10,037
size      covariate  26,169  4,112     4,112    2,773      3,961
size      concept    14,454  3,096     3,096    9,956      10,525
========  =========  ======  ========  =======  =========  ========
"""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from rdkit import Chem, rdBase

from grprune.data import ogbg
from grprune.data.cache import CACHE_DIRNAME, cached_strings
from grprune.data.dataset import GraphDataset
from grprune.data.molecules import file_sha256, lenient_mol
from grprune.data.packed import graph_sizes
from grprune.hparams import Param
from grprune.data.registry import DATASETS, DatasetSource
from grprune.errors import DataError, GrpruneError

#: bump when the domain or split recipe changes (invalidates cached scaffolds)
RECIPE_VERSION = 1
FOLDER = "good_hiv"
SCAFFOLD_FILE = "scaffolds.json"
SHIFTS = ("covariate", "concept")
DOMAINS = ("scaffold", "size")

# GOOD's constants
COVARIATE_FRACTIONS = (0.8, 0.1)  # train pool, OOD-valid; OOD-test is the rest
COVARIATE_ID_FRACTION = 0.1  # of all molecules, for each of ID-valid and ID-test
COVARIATE_NUM_ENVS = 10
CONCEPT_BIAS = (0.95, 0.95, 0.9, 0.85, 0.5)
CONCEPT_RATIO = (0.3, 0.5, 0.6, 1.0, 1.0)
CONCEPT_IS_TRAIN = (True, False, True, True, False)
CONCEPT_OOD_TEST_SET, CONCEPT_OOD_VALID_SET = 1, 4
CONCEPT_ID_FRACTION = 0.15  # of the training pool, for each of ID-valid and ID-test
NO_SHIFT_TRAIN_FRACTION = 0.6

#: atomic numbers of SMILES's organic subset (B, C, N, O, P, S, F, Cl, Br, I)
_ORGANIC = frozenset({5, 6, 7, 8, 9, 15, 16, 17, 35, 53})
#: one SMILES atom: a bracket atom or an organic-subset symbol
_ATOM_TOKEN = re.compile(r"\[[^\]]+\]|Br|Cl|[BCNOPSFIbcnops*]")

_PHENOXY_PC = (  # tetraphenoxy-phthalocyanine scaffold (rows 21127, 21129)
    "c1ccc(Oc2ccc3c(c2)C2=NC3=NC3=NC(=NC4=NC(=NC5=NC(=N2)c2ccc(Oc6ccccc6)cc25)c2ccc(Oc5ccccc5)"
    "cc24)c2cc(Oc4ccccc4)ccc23)cc1")
#: Scaffolds as RDKit 2022.09 writes them, for the 9 HIV molecules whose
#: scaffold SMILES current RDKit spells differently beyond the metal brackets
#: of :func:`_legacy_smiles` (fragment order, canonical order in symmetric
#: macrocycles, H count on Tl, dative bonds). Keyed by the source SMILES.
GOOD_ERA_SCAFFOLDS = {
    # row 16561
    "[O+]#C[Mo+2]12345(C#[O+])(C6=C1[C-]2C3=C64)[PH](c1ccccc1)(c1ccccc1)C=C[PH]5(c1ccccc1)"
    "c1ccccc1.[O+]#C[Mo]1234(C#[O+])(C#[O+])C5=C1[C-]2C3=C54":
    "C12=C3[C-]4C5=C1[Mo]2354.C1=C[PH](c2ccccc2)(c2ccccc2)[Mo+2]2345(C6=C2[C-]3C4=C65)"
    "[PH]1(c1ccccc1)c1ccccc1",
    # rows 20512-20514
    "[CH2-][Tl-]1([CH2-])[O+]=C2C=CC=CC=C2[OH+]1": "C1=CC=C2[OH+][TlH2-][O+]=C2C=C1",
    "C[CH-][Tl-]1([CH-]C)[O+]=C(c2ccccc2)[CH-]C(c2ccccc2)=[O+]1":
    "c1ccc(C2=[O+][TlH2-][O+]=C(c3ccccc3)[CH-]2)cc1",
    "C[CH-][Tl-]1([CH-]C)[O+]=C(C)[CH-]C(C)=[O+]1": "C1=[O+][TlH2-][O+]=C[CH-]1",
    # row 21124
    "CC(C)(c1ccccc1)c1ccc(Oc2ccc3c4nc5nc(nc6nc(nc7nc(nc(n4)c3c2)c2ccc(Oc3ccc(C(C)(C)c4ccccc4)"
    "cc3)cc72)c2ccc(Oc3ccc(C(C)(C)c4ccccc4)cc3)cc62)c2cc(Oc3ccc(C(C)(C)c4ccccc4)cc3)ccc52)cc1":
    "c1ccc(Cc2ccc(Oc3ccc4c(c3)C3=NC4=NC4=NC(=NC5=NC(=NC6=NC(=N3)c3ccc(Oc7ccc(Cc8ccccc8)cc7)"
    "cc36)c3ccc(Oc6ccc(Cc7ccccc7)cc6)cc35)c3cc(Oc5ccc(Cc6ccccc6)cc5)ccc34)cc2)cc1",
    # row 21127
    "CC(C)(C)c1ccc(Oc2ccc3c4nc5nc(nc6nc(nc7nc(nc(n4)c3c2)c2ccc(Oc3ccc(C(C)(C)C)cc3C(C)(C)C)"
    "cc72)c2ccc(Oc3ccc(C(C)(C)C)cc3C(C)(C)C)cc62)c2cc(Oc3ccc(C(C)(C)C)cc3C(C)(C)C)ccc52)"
    "c(C(C)(C)C)c1": _PHENOXY_PC,
    # row 21128
    "c1ccc(Oc2cccc(Oc3ccc4c5nc6nc(nc7nc(nc8nc(nc(n5)c4c3)c3ccc(Oc4cccc(Oc5ccccc5)c4)cc83)"
    "c3ccc(Oc4cccc(Oc5ccccc5)c4)cc73)c3cc(Oc4cccc(Oc5ccccc5)c4)ccc63)c2)cc1":
    "c1ccc(Oc2cccc(Oc3ccc4c(c3)C3=NC4=NC4=NC(=NC5=NC(=NC6=NC(=N3)c3ccc(Oc7cccc(Oc8ccccc8)c7)"
    "cc36)c3ccc(Oc6cccc(Oc7ccccc7)c6)cc35)c3cc(Oc5cccc(Oc6ccccc6)c5)ccc34)c2)cc1",
    # row 21129
    "CCCCCCCCCc1ccc(Oc2ccc3c4nc5nc(nc6nc(nc7nc(nc(n4)c3c2)c2ccc(Oc3ccc(CCCCCCCCC)cc3)cc72)"
    "c2ccc(Oc3ccc(CCCCCCCCC)cc3)cc62)c2cc(Oc3ccc(CCCCCCCCC)cc3)ccc52)cc1": _PHENOXY_PC,
    # row 35278
    "C1C[N+]23CCC[N+]4(C1)CC[S-]1[Fe+2]24([SH+]CC3)[S-]2CC[N+]34CCC[N+]5(CCC3)CC[SH+]"
    "[Fe+2]1254":
    "C1C[N+]23CCC[N+]4(C1)CC[S-]1[Fe+2]24([SH+]CC3)[S-]2CC[N+]34CCC[N+]5(CCC3)CC[SH+]"
    "[Fe+2]1254",
}


# -- domains ------------------------------------------------------------------
def _legacy_smiles(core: Chem.Mol) -> str:
    """Canonical SMILES (no stereo) with pre-2025 RDKit's atom brackets.

    RDKit 2025.03 (rdkit PR #8318) writes every organic-subset atom bonded to a
    metal in brackets with its H count (``[O]``, ``[NH]``); older releases,
    GOOD's among them, write it bare when its valence is a default one.
    Brackets do not change the canonical atom order, so each organic-subset
    atom token is rewritten as the writer spells that atom once the metals are
    replaced by dummy atoms; other atoms and all bonds, ring closures and
    branches stay as written. (For the 9 HIV molecules whose canonical order
    did change since 2022 see :data:`GOOD_ERA_SCAFFOLDS`.)
    """
    smiles = Chem.MolToSmiles(core, isomericSmiles=False)
    if not smiles or all(a.GetAtomicNum() in _ORGANIC for a in core.GetAtoms()):
        return smiles
    order = [int(x) for x in core.GetProp("_smilesAtomOutputOrder").strip("[]").split(",")
             if x.strip()]
    tokens = list(_ATOM_TOKEN.finditer(smiles))
    if len(tokens) != len(order) or len(order) != core.GetNumAtoms():
        return smiles  # unexpected SMILES shape: keep RDKit's own spelling
    plain = Chem.RWMol(core)
    for atom in plain.GetAtoms():
        if atom.GetAtomicNum() not in _ORGANIC:
            atom.SetAtomicNum(0)
    out, end = [], 0
    for token, idx in zip(tokens, order):
        out.append(smiles[end:token.start()])
        if core.GetAtomWithIdx(idx).GetAtomicNum() in _ORGANIC:
            out.append(plain.GetAtomWithIdx(idx).GetSmarts(False, False, False))
        else:
            out.append(token.group())
        end = token.end()
    out.append(smiles[end:])
    return "".join(out)


def _scaffold_of_mol(mol: Chem.Mol, strict: bool) -> str:
    """RDKit's ``MurckoScaffoldSmiles(mol=mol, includeChirality=False)`` in pre-2025
    spelling (:func:`_legacy_smiles`), optionally with a non-strict property
    update (for hypervalent atoms)."""
    core = Chem.MurckoDecompose(mol)
    core.ClearComputedProps()
    core.UpdatePropertyCache(strict=strict)
    Chem.GetSymmSSSR(core)
    return _legacy_smiles(core)


def murcko_scaffold(smiles: str) -> tuple[str, bool]:
    """The Bemis–Murcko scaffold SMILES of a molecule, without chirality, as GOOD computed it.

    GOOD's domain is ``MurckoScaffold.MurckoScaffoldSmiles(mol=MolFromSmiles(s),
    includeChirality=False)`` under the RDKit of 2022. This function runs the
    same steps (``MurckoDecompose``, property update, SSSR, canonical SMILES
    without stereo) and spells the result as that RDKit did: atoms bonded to
    metals are not bracketed (:func:`_legacy_smiles`), and the 9 HIV molecules
    whose scaffold current RDKit writes differently otherwise take their
    RDKit 2022.09 scaffold from :data:`GOOD_ERA_SCAFFOLDS`. A molecule RDKit
    rejects only for its valence (current RDKit rejects 7 HIV molecules that
    older releases accepted) is parsed without that check and its scaffold
    computed with a non-strict property update.

    Parameters
    ----------
    smiles : str

    Returns
    -------
    scaffold : str
        ``""`` for an acyclic molecule.
    lenient : bool
        Whether the lenient parse was needed.

    Raises
    ------
    DataError
        If RDKit cannot parse ``smiles`` even leniently.

    Examples
    --------
    >>> murcko_scaffold("Cc1ccccc1O")
    ('c1ccccc1', False)
    >>> murcko_scaffold("CCO")
    ('', False)
    >>> murcko_scaffold("OCC(O)C1O[Sb](O)(O)(O)OC1C(O)CO")  # no [O] around Sb
    ('C1CO[SbH]O1', False)
    """
    if not isinstance(smiles, str) or not smiles:
        raise DataError(f"empty or missing SMILES {smiles!r}")
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
        lenient = mol is None
        if lenient:
            mol = lenient_mol(smiles)
            if mol is None:
                raise DataError(f"RDKit cannot parse SMILES {smiles!r}, even without the "
                                "valence check")
        if smiles in GOOD_ERA_SCAFFOLDS:
            return GOOD_ERA_SCAFFOLDS[smiles], lenient
        try:
            return _scaffold_of_mol(mol, strict=not lenient), lenient
        except Exception as exc:
            raise DataError(f"cannot compute the scaffold of SMILES {smiles!r} "
                            f"({type(exc).__name__}: {exc})") from None


def compute_scaffolds(smiles: Sequence[str], where: str = "SMILES",
                      rows: Sequence[int] | None = None) -> list[str]:
    """Scaffold of every molecule (:func:`murcko_scaffold`).

    Parameters
    ----------
    smiles : sequence of str, length G
    where : str
        Source named in errors (a file).
    rows : sequence of int, length G, optional
        Source row of each molecule, named in errors; positions by default.

    Returns
    -------
    list of str, length G

    Raises
    ------
    DataError
        Naming ``where`` and the row of a molecule RDKit cannot parse.
    """
    out = []
    for i, s in enumerate(smiles):
        try:
            out.append(murcko_scaffold(s)[0])
        except DataError as exc:
            row = i if rows is None else int(rows[i])
            raise DataError(f"{where}, row {row}: {exc}") from None
    return out


def domain_ids(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Sort molecules by domain value and number the domains.

    Parameters
    ----------
    values : sequence, length G
        Domain value of each molecule (scaffold str or atom count int);
        all of one type.

    Returns
    -------
    order : np.ndarray of int64, shape (G,)
        Molecules sorted by value, stable (ties in increasing index).
    domain : np.ndarray of int64, shape (G,)
        Domain id of each molecule: rank of its value among the distinct
        values, ascending, so ``domain[order]`` is non-decreasing.

    Examples
    --------
    >>> order, domain = domain_ids(["b", "a", "b", ""])
    >>> order.tolist(), domain.tolist()
    ([3, 1, 0, 2], [2, 1, 2, 0])
    """
    values = list(values)
    order = sorted(range(len(values)), key=values.__getitem__)
    domain = np.zeros(len(values), dtype=np.int64)
    current, prev = -1, object()
    for i in order:
        if current < 0 or values[i] != prev:
            current, prev = current + 1, values[i]
        domain[i] = current
    return np.asarray(order, dtype=np.int64), domain


# -- splits -------------------------------------------------------------------
def good_rng(seed: int, n: int) -> random.Random:
    """``random.Random(seed)`` advanced past GOOD's no-shift split of ``n`` molecules.

    GOOD builds its no-shift split first (a shuffle of all ``n`` molecules,
    then ``randint(0, 9)`` for each of the ``int(0.6 n)`` training ones); the
    covariate and concept draws follow in the same stream.

    Parameters
    ----------
    seed : int
        GOOD's ``random_seed``.
    n : int
        Number of molecules.

    Returns
    -------
    random.Random
        Ready for :func:`covariate_split`, then :func:`concept_split`.
    """
    rng = random.Random(int(seed))
    rng.shuffle(list(range(n)))
    for _ in range(int(n * NO_SHIFT_TRAIN_FRACTION)):
        rng.randint(0, 9)
    return rng


def _carve(pool: list[int], num: int) -> tuple[list[int], list[int], list[int]]:
    """Split a shuffled pool into (rest, second-to-last ``num``, last ``num``)."""
    cut = max(len(pool) - 2 * num, 0)
    return pool[:cut], pool[cut:cut + num], pool[cut + num:]


def _as_parts(train, ood_valid, ood_test, id_valid, id_test) -> dict[str, np.ndarray]:
    return {k: np.sort(np.asarray(v, dtype=np.int64)) for k, v in
            (("train", train), ("valid", ood_valid), ("test", ood_test),
             ("id-valid", id_valid), ("id-test", id_test))}


def _cut_at_domain_changes(walk: list[int], domain: np.ndarray, cuts) -> list[int]:
    """Group of each position of ``walk``: group ``g + 1`` starts at the first domain
    change at or after position ``cuts[g]`` (GOOD moves each cut to a domain boundary)."""
    out, group, prev = [], 0, None
    for pos, i in enumerate(walk):
        if group < len(cuts) and pos >= cuts[group] and prev is not None and domain[i] != prev:
            group += 1
        prev = domain[i]
        out.append(group)
    return out


def covariate_split(domain: np.ndarray, order: np.ndarray, rng: random.Random,
                    largest_first: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """GOOD's covariate-shift split (module docstring).

    Parameters
    ----------
    domain : np.ndarray of int64, shape (G,)
        Domain id per molecule (:func:`domain_ids`).
    order : np.ndarray of int64, shape (G,)
        Molecules in domain order (:func:`domain_ids`).
    rng : random.Random
        Consumed by one shuffle of the training pool (:func:`good_rng`).
    largest_first : bool
        Walk the domains in reverse (``size``: largest molecules in training).

    Returns
    -------
    parts : dict of str to np.ndarray of int64
        ``train``, ``valid`` (OOD), ``test`` (OOD), ``id-valid``, ``id-test``:
        sorted, pairwise disjoint, covering ``0 .. G-1``.
    envs : np.ndarray of int64, shape (G,)
        Training environment 0..9 for ``train``, -1 elsewhere.
    """
    walk = [int(i) for i in (order[::-1] if largest_first else order)]
    n = len(walk)
    cuts = (int(n * COVARIATE_FRACTIONS[0]), int(n * sum(COVARIATE_FRACTIONS)))
    groups: list[list[int]] = [[], [], []]
    for i, part in zip(walk, _cut_at_domain_changes(walk, domain, cuts)):
        groups[part].append(i)
    pool, ood_valid, ood_test = groups
    rng.shuffle(pool)
    train, id_valid, id_test = _carve(pool, int(n * COVARIATE_ID_FRACTION))
    envs = np.full(n, -1, dtype=np.int64)
    per_env = len(train) // COVARIATE_NUM_ENVS
    env_cuts = [per_env * (k + 1) for k in range(COVARIATE_NUM_ENVS - 1)]
    envs[train] = _cut_at_domain_changes(train, domain, env_cuts)
    return _as_parts(train, ood_valid, ood_test, id_valid, id_test), envs


def concept_split(domain: np.ndarray, order: np.ndarray, labels: np.ndarray,
                  rng: random.Random) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """GOOD's concept-shift split (module docstring).

    Parameters
    ----------
    domain : np.ndarray of int64, shape (G,)
        Domain id per molecule (:func:`domain_ids`).
    order : np.ndarray of int64, shape (G,)
        Molecules in domain order (:func:`domain_ids`).
    labels : np.ndarray of int, shape (G,)
        Binary class of each molecule.
    rng : random.Random
        Consumed by two draws per molecule and set, then one shuffle
        (continue the stream :func:`covariate_split` used, as GOOD does).

    Returns
    -------
    parts : dict of str to np.ndarray of int64
        ``train``, ``valid`` (OOD), ``test`` (OOD), ``id-valid``, ``id-test``:
        sorted, pairwise disjoint, covering ``0 .. G-1``.
    envs : np.ndarray of int64, shape (G,)
        Training environment 0..2 for ``train``, ``id-valid`` and ``id-test``;
        -1 for the OOD parts.
    """
    labels = np.asarray(labels, dtype=np.float64).reshape(-1)
    n = len(labels)
    groups: list[list[int]] = []
    for i in (int(j) for j in order):
        if not groups or domain[i] != domain[groups[-1][0]]:
            groups.append([])
        groups[-1].append(i)
    signal = labels - labels.mean()  # > 0 for label 1, < 0 for label 0
    sign, seen = [], 0
    for members in groups:
        sign.append(1 if seen < n / 2 else -1)
        seen += len(members)
    sets: list[list[int]] = [[] for _ in CONCEPT_BIAS]
    envs = np.full(n, -1, dtype=np.int64)
    env = -1
    last = len(CONCEPT_BIAS) - 1
    for s, (bias, ratio) in enumerate(zip(CONCEPT_BIAS, CONCEPT_RATIO)):
        if CONCEPT_IS_TRAIN[s]:
            env += 1
        for d, members in enumerate(groups):
            direction = sign[d] if CONCEPT_IS_TRAIN[s] else -sign[d]
            chosen: list[int] = []
            present, joined = [False, False], [False, False]
            left_out: list[int | None] = [None, None]
            for i in members:
                pick, u = rng.random(), rng.random()
                if s == last:
                    chosen.append(i)
                    continue
                kind = 0 if direction * signal[i] > 0 else 1
                present[kind] = True
                takes = u < bias if kind == 0 else u > bias
                if takes and pick < ratio:
                    joined[kind] = True
                    chosen.append(i)
                else:
                    left_out[kind] = i
            if all(present) and any(joined):
                extra = None
                for kind in (0, 1):
                    if not joined[kind]:
                        extra = left_out[kind]
                if extra is not None:
                    chosen.append(extra)
            sets[s].extend(chosen)
            if CONCEPT_IS_TRAIN[s]:
                envs[chosen] = env
            if chosen:
                gone = set(chosen)
                groups[d] = [i for i in members if i not in gone]
    pool = [i for s, part in enumerate(sets) if CONCEPT_IS_TRAIN[s] for i in part]
    rng.shuffle(pool)
    train, id_valid, id_test = _carve(pool, int(len(pool) * CONCEPT_ID_FRACTION))
    parts = _as_parts(train, sets[CONCEPT_OOD_VALID_SET], sets[CONCEPT_OOD_TEST_SET],
                      id_valid, id_test)
    return parts, envs


def good_split(values: Sequence[Any], labels: Sequence[int], *, domain: str, shift: str,
               seed: int) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """GOOD-HIV's split of molecules with the given domain values.

    Parameters
    ----------
    values : sequence, length G
        Domain value per molecule: scaffold SMILES (``domain="scaffold"``) or
        number of atoms (``domain="size"``).
    labels : sequence of int, length G
        Binary class per molecule.
    domain : {"scaffold", "size"}
        ``size`` puts the largest molecules in training.
    shift : {"covariate", "concept"}
    seed : int
        Seed of GOOD's random stream (:func:`good_rng`).

    Returns
    -------
    parts : dict of str to np.ndarray of int64
        ``train``, ``valid`` (OOD), ``test`` (OOD), ``id-valid``, ``id-test``.
    envs : np.ndarray of int64, shape (G,)
        Training environment per molecule, -1 where GOOD gives none.
    n_domains : int

    Raises
    ------
    GrpruneError
        On an unknown ``domain`` or ``shift`` (the message lists the choices)
        or mismatched lengths.

    Examples
    --------
    >>> parts, envs, n = good_split([5, 3, 9, 9, 1, 7, 2, 8, 6, 4], [0, 1] * 5,
    ...                             domain="size", shift="covariate", seed=0)
    >>> {k: v.tolist() for k, v in parts.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'train': [0, 1, 2, 3, 5, 8], 'valid': [6], 'test': [4],
     'id-valid': [9], 'id-test': [7]}
    >>> envs.tolist(), n
    ([1, 3, 0, 5, -1, 2, -1, -1, 4, -1], 9)
    """
    if domain not in DOMAINS:
        raise GrpruneError(f"unknown GOOD-HIV domain {domain!r}. Choices: {', '.join(DOMAINS)}")
    if shift not in SHIFTS:
        raise GrpruneError(f"unknown shift {shift!r} for good-hiv. Choices: {', '.join(SHIFTS)}")
    values = list(values)
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    if len(values) != len(labels):
        raise GrpruneError(f"{len(values)} domain values for {len(labels)} labels")
    order, dom = domain_ids(values)
    rng = good_rng(seed, len(values))
    parts, envs = covariate_split(dom, order, rng, largest_first=(domain == "size"))
    if shift == "concept":
        parts, envs = concept_split(dom, order, labels, rng)
    n_domains = int(dom.max()) + 1 if len(dom) else 0
    return parts, envs, n_domains


# -- scaffold cache -------------------------------------------------------------
def cached_scaffolds(smiles: Sequence[str], key: dict[str, Any], path: Path,
                     where: str = "SMILES",
                     rows: Sequence[int] | None = None) -> tuple[list[str], str]:
    """Scaffolds of ``smiles`` from a JSON cache valid for ``key``, else computed and cached.

    See :func:`grprune.data.cache.cached_strings` (checksummed, written atomically).

    Parameters
    ----------
    smiles : sequence of str, length G
    key : dict
        JSON values the cache must hold unchanged (source sha256, RDKit
        version, recipe version).
    path : Path
        The cache file.
    where, rows
        See :func:`compute_scaffolds`.

    Returns
    -------
    scaffolds : list of str, length G
    status : str
        ``"hit"``, ``"built"``, ``"rebuilt (<reason>)"`` or ``"not written (<error>)"``.

    Raises
    ------
    DataError
        See :func:`compute_scaffolds`.
    """
    return cached_strings(path, key, lambda: compute_scaffolds(smiles, where, rows),
                          len(smiles))


# -- the dataset ----------------------------------------------------------------
@DATASETS.register("good-hiv", aliases=("goodhiv",))
class GoodHiv(DatasetSource):
    """GOOD-HIV (Gui et al. 2022): MoleculeNet HIV with scaffold or size domains
    under covariate or concept shift, OGB features, ROC-AUC; five parts
    (train, ID-valid, ID-test, OOD-valid ``valid``, OOD-test ``test``)."""

    splits = DOMAINS
    parts = ("train", "valid", "test", "id-valid", "id-test")
    params = {
        "split": Param("scaffold", "domain: scaffold (Bemis-Murcko scaffold) or size (atoms; "
                                   "largest in train)"),
        "shift": Param("covariate", "covariate (unseen domains in valid/test) or concept "
                                    "(label-domain bias)", choices=SHIFTS),
        "seed": Param(123, "seed of GOOD's random stream (ID carve-out, environments, concept "
                           "sampling); GOOD's default random_seed is 123", low=0),
    }
    metric = "rocauc"
    num_classes = 2
    # PrunE appendix: 4 layers, 128 hidden, no virtual node, no early stopping
    recommended = {"encoder.layers": 4, "encoder.hidden": 128,
                   "encoder.virtual_node": False, "train.warmup_epochs": 10}
    description = ("GOOD-HIV (41127 molecules, binary, ROC-AUC); scaffold or size domain, "
                   "covariate or concept shift, ID and OOD valid/test")

    def load(self, *, root: Path, download: bool = False, split: str = "scaffold",
             shift: str = "covariate", seed: int = 123) -> GraphDataset:
        """Load GOOD-HIV; see :meth:`DatasetSource.load` and the module docstring.

        Parameters
        ----------
        root : Path
            Data root; graphs are cached in ``<root>/ogbg_molhiv/grprune_v1``
            (shared with ``ogbg-molhiv``), scaffolds in
            ``<root>/good_hiv/grprune_v1``.
        download : bool
            Ignored: GOOD's splits are computed from the bundled CSV.
        split : {"scaffold", "size"}
            The domain.
        shift : {"covariate", "concept"}
        seed : int
            Seed of GOOD's random stream.

        Returns
        -------
        GraphDataset
            41,127 graphs with parts ``train``, ``valid`` (OOD), ``test``
            (OOD), ``id-valid``, ``id-test``; ``envs`` as in the module
            docstring; ``info`` with the split sizes and cache status.

        Raises
        ------
        GrpruneError
            Unknown split or shift (the message lists the choices).
        DataError
            Missing or corrupt bundled CSV, or a molecule RDKit cannot parse.
        """
        split = self.resolve_split(split)
        if shift not in SHIFTS:
            raise GrpruneError(f"unknown shift {shift!r} for dataset good-hiv. "
                               f"Choices: {', '.join(SHIFTS)}")
        root = Path(root)
        csv = ogbg.OgbgMolhiv().bundled_csv()
        if not csv.is_file():
            raise DataError(f"bundled data file is missing: {csv} (reinstall grprune)")
        mg, graph_status = ogbg.hiv_molecules(root)
        source_sha = file_sha256(csv)
        if split == "scaffold":
            import rdkit

            key = {"recipe_version": RECIPE_VERSION, "domain": "scaffold",
                   "source_file": csv.name, "source_sha256": source_sha,
                   "source_rows_sha256": hashlib.sha256(
                       np.asarray(mg.source_rows, dtype=np.int64).tobytes()).hexdigest(),
                   "rdkit_version": rdkit.__version__}
            path = root / FOLDER / CACHE_DIRNAME / SCAFFOLD_FILE
            values, domain_status = cached_scaffolds(mg.smiles, key, path, f"data file {csv}",
                                                     mg.source_rows)
        else:
            values = [int(n) for n in graph_sizes(mg.graphs)[0]]
            domain_status = "not needed (sizes are the graphs' node counts)"
        parts, envs, n_domains = good_split(values, mg.labels, domain=split, shift=shift,
                                            seed=seed)
        info = {
            "dataset": self.registered_name or "good-hiv",
            "split": split,
            "shift": shift,
            "seed": int(seed),
            "source": f"bundled {csv.name}",
            "source_sha256": source_sha,
            "n_source_rows": int(mg.n_source_rows),
            "n_skipped": len(mg.skipped_rows),
            "skipped_rows": [int(r) for r in mg.skipped_rows],
            "n_lenient": len(mg.lenient_rows),
            "lenient_rows": [int(r) for r in mg.lenient_rows],
            "n_graphs": len(mg.graphs),
            "split_sizes": {k: int(len(v)) for k, v in parts.items()},
            "n_domains": n_domains,
            "n_train_envs": int(len(np.unique(envs[parts["train"]]))),
            "cache": graph_status,
            "domain_cache": domain_status,
            "split_source": "computed (GOOD recipe)",
        }
        return GraphDataset(
            self.registered_name or "good-hiv",
            mg.graphs,
            torch.from_numpy(mg.labels),
            parts,
            num_classes=self.num_classes,
            metric=self.metric,
            atom_encoder="ogb",
            envs=envs,
            smiles=mg.smiles,
            source_rows=mg.source_rows,
            info=info,
        )
