"""The GOOD-HIV dataset source (:class:`GoodHiv`): the bundled HIV molecules, their
GOOD domains and GOOD's split, as :mod:`grprune.data.good_hiv` describes them."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grprune.data import ogbg
from grprune.data.cache import CACHE_DIRNAME
from grprune.data.dataset import GraphDataset
from grprune.data.good_hiv.scaffolds import cached_scaffolds
from grprune.data.good_hiv.splits import DOMAINS, SHIFTS, good_split
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
    mg : grprune.data.moleculenet_csv.MoleculeGraphs
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
