"""GOOD-HIV's domains and splits: GOOD's covariate- and concept-shift recipes.

The recipe, its randomness and the resulting sizes are described in
:mod:`grprune.data.good_hiv`'s docstring; the functions here are pure (molecules'
domain values and labels in, index arrays out) and importable from
:mod:`grprune.data.good_hiv` too. :func:`good_split` is the entry point.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

import numpy as np

from grprune.errors import GrpruneError

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


# -- domains ------------------------------------------------------------------
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
    """GOOD's covariate-shift split (:mod:`grprune.data.good_hiv`'s docstring).

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
    """GOOD's concept-shift split (:mod:`grprune.data.good_hiv`'s docstring).

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
            chosen = _draw_from_domain(members, direction, signal, bias, ratio, rng,
                                       take_all=(s == last))
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


def _draw_from_domain(members: list[int], direction: int, signal: np.ndarray, bias: float,
                      ratio: float, rng: random.Random, take_all: bool = False) -> list[int]:
    """The molecules of one domain that join a concept set, in GOOD's draw order.

    Two uniform draws ``p, u`` per member (made even when ``take_all``). A member
    with ``direction * signal > 0`` joins when ``u < bias`` and ``p < ratio``, any
    other when ``u > bias`` and ``p < ratio``; if the domain holds both kinds, at
    least one joined and all of one kind stayed out, the last of that kind to stay
    out joins too (:mod:`grprune.data.good_hiv`'s docstring).

    Parameters
    ----------
    members : list of int
        The domain's molecules still unassigned, in domain order.
    direction : {1, -1}
        The domain's sign, negated for the OOD sets.
    signal : np.ndarray of float64, shape (G,)
        Per molecule, ``label - mean label``.
    bias, ratio : float
        The set's label-to-domain bias and picking ratio.
    rng : random.Random
        GOOD's stream.
    take_all : bool
        The last set (OOD-valid): every member joins.

    Returns
    -------
    list of int
        The joining members, in domain order (a guard's extra member last).
    """
    chosen: list[int] = []
    present, joined = [False, False], [False, False]
    left_out: list[int | None] = [None, None]
    for i in members:
        pick, u = rng.random(), rng.random()
        if take_all:
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
    return chosen


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
    label_arr = np.asarray(labels, dtype=np.int64).reshape(-1)
    if len(values) != len(label_arr):
        raise GrpruneError(f"{len(values)} domain values for {len(label_arr)} labels")
    order, dom = domain_ids(values)
    rng = good_rng(seed, len(values))
    parts, envs = covariate_split(dom, order, rng, largest_first=(domain == "size"))
    if shift == "concept":
        parts, envs = concept_split(dom, order, label_arr, rng)
    n_domains = int(dom.max()) + 1 if len(dom) else 0
    return parts, envs, n_domains
