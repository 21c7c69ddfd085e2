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
    :mod:`grprune.data.good_hiv_scaffolds`.
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
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grprune.data import ogbg
from grprune.data.cache import CACHE_DIRNAME
from grprune.data.dataset import GraphDataset
# the scaffold domain's functions, importable from here as before
from grprune.data.good_hiv_scaffolds import (  # noqa: F401
    GOOD_ERA_SCAFFOLDS,
    cached_scaffolds,
    compute_scaffolds,
    murcko_scaffold,
)
# the split recipe, importable from here as before
from grprune.data.good_hiv_splits import (  # noqa: F401
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
from grprune.record.files import file_sha256
from grprune.data.packed import graph_sizes
from grprune.hparams import Param
from grprune.data.registry import DATASETS, DatasetSource
from grprune.errors import DataError, GrpruneError

#: bump when the domain or split recipe changes (invalidates cached scaffolds)
RECIPE_VERSION = 1
FOLDER = "good_hiv"
SCAFFOLD_FILE = "scaffolds.json"


# -- the dataset ----------------------------------------------------------------
def _domain_values(split: str, mg: Any, csv: Path, source_sha: str,
                   root: Path) -> tuple[list, str]:
    """The domain value of every molecule and how it was obtained.

    Parameters
    ----------
    split : {"scaffold", "size"}
    mg : grprune.data.molecules.MoleculeGraphs
        The featurized HIV molecules (:func:`grprune.data.ogbg.hiv_molecules`).
    csv : Path
        The bundled HIV CSV.
    source_sha : str
        Its sha256 (part of the scaffold cache's key).
    root : Path
        Data root; scaffolds are cached in ``<root>/good_hiv/grprune_v1``.

    Returns
    -------
    values : list, length G
        Scaffold SMILES (``scaffold``) or number of atoms (``size``).
    status : str
        The scaffold cache's status, or why no cache is needed.
    """
    values: list[str] | list[int]
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
    return values, domain_status


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
        values, domain_status = _domain_values(split, mg, csv, source_sha, root)
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
