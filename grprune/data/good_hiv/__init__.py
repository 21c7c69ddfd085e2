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
    scaffolds takes about 15 s; they are cached. The scaffold code lives in
    :mod:`grprune.data.good_hiv.scaffolds`.
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

Importing this package registers ``good-hiv`` in :data:`grprune.data.DATASETS`;
:mod:`.dataset` holds the source, :mod:`.scaffolds` the scaffold domain and
:mod:`.splits` GOOD's split recipe.
"""

from grprune.data.good_hiv.dataset import FOLDER, RECIPE_VERSION, SCAFFOLD_FILE, GoodHiv
from grprune.data.good_hiv.scaffolds import (
    GOOD_ERA_SCAFFOLDS,
    cached_scaffolds,
    compute_scaffolds,
    murcko_scaffold,
)
from grprune.data.good_hiv.splits import (
    CONCEPT_BIAS,
    CONCEPT_ID_FRACTION,
    CONCEPT_IS_TRAIN,
    CONCEPT_OOD_TEST_SET,
    CONCEPT_OOD_VALID_SET,
    CONCEPT_RATIO,
    COVARIATE_FRACTIONS,
    COVARIATE_ID_FRACTION,
    COVARIATE_NUM_ENVS,
    DOMAINS,
    NO_SHIFT_TRAIN_FRACTION,
    SHIFTS,
    concept_split,
    covariate_split,
    domain_ids,
    good_rng,
    good_split,
)

__all__ = [
    "CONCEPT_BIAS", "CONCEPT_ID_FRACTION", "CONCEPT_IS_TRAIN", "CONCEPT_OOD_TEST_SET",
    "CONCEPT_OOD_VALID_SET", "CONCEPT_RATIO", "COVARIATE_FRACTIONS", "COVARIATE_ID_FRACTION",
    "COVARIATE_NUM_ENVS", "DOMAINS", "FOLDER", "GOOD_ERA_SCAFFOLDS", "GoodHiv",
    "NO_SHIFT_TRAIN_FRACTION", "RECIPE_VERSION", "SCAFFOLD_FILE", "SHIFTS", "cached_scaffolds",
    "compute_scaffolds", "concept_split", "covariate_split", "domain_ids", "good_rng",
    "good_split", "murcko_scaffold",
]
