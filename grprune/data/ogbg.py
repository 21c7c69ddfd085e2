"""OGB graph property prediction datasets: ogbg-molbbbp.

Where the graphs come from, in this order:

1. ``<root>/ogbg_molbbbp/RELEASE_v1.txt`` exists (OGB's own processed folder):
   OGB's ``DglGraphPropPredDataset`` and its ``get_idx_split()``
   (``split_source = "ogb-library"``).
2. ``download=True``: the same OGB class, which downloads the release.
3. Otherwise the copy bundled in ``grprune/data/files/ogbg_molbbbp``: the
   MoleculeNet CSV featurized with ``ogb.utils.smiles2graph`` (cached under
   ``<root>/ogbg_molbbbp/grprune_v1/``) and OGB's official split files
   (``split_source = "ogb-official"``).

The ``size`` split is computed from the graphs in every case
(``split_source = "computed"``). Datasets without bundled official split
files (ogbg-molbace, ogbg-molhiv) get the scaffold split from
:func:`grprune.data.splits.scaffold_split`, the rule that reproduces OGB's
ogbg-molbbbp files exactly.

Environment ids (``GraphDataset.envs``) are the domains the split is made
from: for ``scaffold`` the rank of the molecule's Bemis–Murcko scaffold
(with chirality, as the split) among the sorted distinct scaffolds; for
``size`` the rank of its number of atoms among the distinct sizes. Scaffolds
are cached next to the graphs (``scaffolds.json``).
"""

from __future__ import annotations

import builtins
import contextlib
import shutil
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from grprune.data.cache import CACHE_DIRNAME, cached_strings
from grprune.data.dataset import GraphDataset
from grprune.data.moleculenet_csv import cached_molecule_csv, read_molecule_csv
from grprune.data.molecules import graph_from_arrays
from grprune.record.files import file_sha256
from grprune.data.packed import graph_sizes
from grprune.hparams import Param
from grprune.data.registry import DATASETS, DatasetSource
from grprune.data.splits import (
    check_split,
    load_split_files,
    murcko_scaffolds,
    scaffold_envs,
    scaffold_split,
    size_split,
)
from grprune.errors import DataError

FILES = Path(__file__).resolve().parent / "files"


@contextlib.contextmanager
def _no_input() -> Iterator[None]:
    """Make ``input()`` raise instead of blocking (OGB prompts on stale folders)."""

    def refuse(prompt: object = "") -> str:
        raise DataError(f"OGB asked an interactive question, which grprune refuses: {prompt!r}")

    saved = builtins.input
    builtins.input = refuse
    try:
        yield
    finally:
        builtins.input = saved


class OgbMoleculeSource(DatasetSource):
    """An OGB ``ogbg-mol*`` dataset with a bundled MoleculeNet CSV fallback.

    Subclasses set the class attributes below and register themselves.
    """

    ogb_name: str = ""  # "ogbg-molbbbp"
    csv_name: str = ""  # bundled CSV under files/<csv_folder or folder>/
    csv_folder: str = ""
    lenient: bool = False  # keep molecules that fail only RDKit's valence check
    smiles_column: str = "smiles"
    label_column: str = ""
    splits = ("scaffold", "size")
    params = {"split": Param("scaffold", "scaffold (OGB's split) or size (largest molecules "
                                         "in train)"),
              "split_seed": Param(0, "seed of the size split's valid/test shuffle", low=0)}
    metric = "rocauc"
    num_classes = 2

    @property
    def folder(self) -> str:
        """OGB's folder name (``ogbg_molbbbp``)."""
        return self.ogb_name.replace("-", "_")

    def ogb_dir(self, root: Path) -> Path:
        """The folder OGB uses under ``root`` (it prefers a ``*_dgl`` one if present)."""
        dgl_dir = root / f"{self.folder}_dgl"
        return dgl_dir if dgl_dir.exists() else root / self.folder

    # -- loading ------------------------------------------------------
    def load(
        self, *, root: Path, download: bool = False, split: str = "scaffold",
        split_seed: int = 0
    ) -> GraphDataset:
        """Load the dataset; see :meth:`DatasetSource.load` and the module docstring."""
        split = self.resolve_split(split)
        root = Path(root)
        release = self.ogb_dir(root) / "RELEASE_v1.txt"
        if release.is_file() or download:
            data = self._from_ogb(root, download=not release.is_file())
        else:
            data = self._from_bundled(root)
        graphs, info = data["graphs"], data["info"]
        if split == "size":
            sizes = graph_sizes(graphs)[0]
            parts = size_split(sizes, seed=split_seed)
            info.update(split_source="computed", split_seed=int(split_seed))
            envs = np.unique(sizes, return_inverse=True)[1]
        else:
            scaffolds = self._scaffolds(data["smiles"], root, info.get("source_sha256"))
            parts = data["official_split"](scaffolds)
            envs = (scaffold_envs(scaffolds) if scaffolds is not None
                    else np.zeros(len(graphs), dtype=np.int64))
        info.update(
            dataset=self.registered_name,
            split=split,
            n_graphs=len(graphs),
            split_sizes={k: int(len(v)) for k, v in parts.items()},
            n_domains=int(envs.max()) + 1 if len(envs) else 0,
        )
        return GraphDataset(
            self.registered_name,
            graphs,
            data["labels"],
            parts,
            num_classes=self.num_classes,
            metric=self.metric,
            atom_encoder="ogb",
            envs=envs,
            smiles=data["smiles"],
            source_rows=data["source_rows"],
            info=info,
        )

    def _scaffolds(self, smiles: list[str] | None, root: Path, sha: str | None
                   ) -> list[str] | None:
        """Scaffolds (with chirality) of ``smiles``, cached in ``scaffolds.json``
        when the source has a checksum (the bundled CSV)."""
        if smiles is None:
            return None

        def compute() -> list[str]:
            return murcko_scaffolds(smiles, include_chirality=True)

        if sha is None:
            return compute()
        import rdkit

        key = {"source_sha256": sha, "rdkit_version": rdkit.__version__, "scaffold_version": 2}
        path = root / self.folder / CACHE_DIRNAME / "scaffolds.json"
        return cached_strings(path, key, compute, len(smiles))[0]

    def bundled_csv(self) -> Path:
        """The bundled MoleculeNet CSV."""
        return FILES / (self.csv_folder or self.folder) / self.csv_name

    def _from_bundled(self, root: Path) -> dict:
        csv = self.bundled_csv()
        if not csv.is_file():
            raise DataError(f"bundled data file is missing: {csv} (reinstall grprune)")
        cache_dir = root / self.folder / CACHE_DIRNAME
        mg, status = cached_molecule_csv(csv, self.smiles_column, self.label_column, cache_dir,
                                         lenient=self.lenient)
        split_dir = FILES / self.folder / "split" / "scaffold"
        if (split_dir / "train.csv.gz").is_file():
            official = lambda scaffolds: load_split_files(split_dir, len(mg.graphs))  # noqa: E731
            split_source = "ogb-official"
        else:
            official = lambda scaffolds: scaffold_split(mg.smiles, scaffolds=scaffolds)  # noqa
            split_source = "computed (OGB's scaffold rule; official files not bundled)"
        return {
            "graphs": mg.graphs,
            "labels": torch.from_numpy(mg.labels),
            "smiles": mg.smiles,
            "source_rows": mg.source_rows,
            "official_split": official,
            "info": {
                "source": f"bundled {csv.name}",
                "source_sha256": file_sha256(csv),
                "n_source_rows": int(mg.n_source_rows),
                "n_skipped": len(mg.skipped_rows),
                "skipped_rows": [int(r) for r in mg.skipped_rows],
                "n_lenient": len(mg.lenient_rows),
                "lenient_rows": [int(r) for r in mg.lenient_rows],
                "split_source": split_source,
                "cache": status,
                "cache_dir": str(cache_dir),
            },
        }

    def _prepare_download(self, root: Path) -> None:
        """Clear the way for OGB's download without letting it prompt."""
        folder = self.ogb_dir(root)
        if not folder.is_dir():
            return
        if {p.name for p in folder.iterdir()} <= {CACHE_DIRNAME}:
            # Only grprune's own cache: OGB would ask whether to delete the folder.
            shutil.rmtree(folder)
            return
        raise DataError(
            f"{folder} exists but is not a complete OGB download (it has no RELEASE_v1.txt), "
            f"so OGB would stop to ask whether to delete it. Remove or rename {folder} and "
            "try again, or load without --download (download=False) to use grprune's "
            "bundled copy."
        )

    def _from_ogb(self, root: Path, download: bool) -> dict:
        if download:
            self._prepare_download(root)
        try:
            from ogb.graphproppred import DglGraphPropPredDataset

            with _no_input(), contextlib.redirect_stdout(sys.stderr):
                ds = DglGraphPropPredDataset(name=self.ogb_name, root=str(root))
        except (Exception, SystemExit) as exc:
            cause = f"{type(exc).__name__}: {exc}"
            if download:
                raise DataError(
                    f"downloading {self.ogb_name} through OGB into {root} failed ({cause}). "
                    f"Without --download (download=False) grprune uses its bundled copy."
                ) from None
            raise DataError(
                f"OGB could not load its {self.ogb_name} folder {self.ogb_dir(root)} ({cause}). "
                "Remove or rename that folder to use grprune's bundled copy instead."
            ) from None
        folder = self.ogb_dir(root)
        labels = ds.labels.reshape(-1)
        if labels.is_floating_point():
            if torch.isnan(labels).any():
                raise DataError(f"{folder}: some {self.ogb_name} labels are missing (NaN)")
            labels = labels.long()
        graphs = [
            graph_from_arrays(g.edges(), g.ndata["feat"], g.edata["feat"], g.num_nodes())
            for g in ds.graphs
        ]
        mapping = folder / "mapping" / "mol.csv.gz"
        smiles = None
        if mapping.is_file():
            smiles, _ = read_molecule_csv(mapping, self.smiles_column, self.label_column)
            if len(smiles) != len(graphs):
                raise DataError(f"{mapping} has {len(smiles)} rows for {len(graphs)} graphs")
        return {
            "graphs": graphs,
            "labels": labels,
            "smiles": smiles,
            "source_rows": np.arange(len(graphs), dtype=np.int64),
            "official_split": lambda scaffolds: self._ogb_split(ds, folder, len(graphs)),
            "info": {
                "source": f"OGB ({folder})",
                "n_source_rows": len(graphs),
                "n_skipped": 0,
                "skipped_rows": [],
                "split_source": "ogb-library",
                "downloaded": bool(download),
            },
        }


    @staticmethod
    def _ogb_split(ds, folder: Path, n: int) -> dict[str, np.ndarray]:
        where = folder / "split" / "scaffold"
        try:
            parts = ds.get_idx_split()
        except Exception as exc:
            raise DataError(f"cannot read OGB's split files in {where}: {exc}") from None
        return check_split({k: np.asarray(v) for k, v in parts.items()}, n, str(where))


@DATASETS.register("ogbg-molbbbp", aliases=("molbbbp", "bbbp"))
class OgbgMolbbbp(OgbMoleculeSource):
    """MoleculeNet BBBP as OGB's ogbg-molbbbp: 2039 molecules, blood-brain barrier
    penetration (binary), OGB atom/bond features, ROC-AUC; scaffold or size split."""

    ogb_name = "ogbg-molbbbp"
    csv_name = "bbbp.csv.gz"
    label_column = "p_np"
    recommended = {
        "encoder.layers": 4,
        "encoder.hidden": 64,
        "encoder.virtual_node": True,
        "train.warmup_epochs": 0,
        "train.patience": 0,
    }
    description = (
        "MoleculeNet BBBP via OGB (2039 molecules, binary, ROC-AUC); scaffold or size split"
    )


@DATASETS.register("ogbg-molbace", aliases=("molbace", "bace"))
class OgbgMolbace(OgbMoleculeSource):
    """MoleculeNet BACE as OGB's ogbg-molbace: 1513 molecules, BACE-1 inhibition
    (binary ``Class``), OGB atom/bond features, ROC-AUC; scaffold or size split."""

    ogb_name = "ogbg-molbace"
    csv_name = "bace.csv.gz"
    csv_folder = "moleculenet"
    smiles_column = "mol"
    label_column = "Class"
    recommended = dict(OgbgMolbbbp.recommended)
    description = (
        "MoleculeNet BACE via OGB (1513 molecules, binary, ROC-AUC); scaffold or size split"
    )


@DATASETS.register("ogbg-molhiv", aliases=("molhiv",))
class OgbgMolhiv(OgbMoleculeSource):
    """MoleculeNet HIV as OGB's ogbg-molhiv: 41127 molecules, HIV replication
    inhibition (binary ``HIV_active``), OGB atom/bond features, ROC-AUC; scaffold
    or size split. The 7 molecules current RDKit rejects (hypervalent Al/B/Ge)
    are kept through lenient parsing, as OGB kept them."""

    ogb_name = "ogbg-molhiv"
    csv_name = "hiv.csv.gz"
    csv_folder = "moleculenet"
    label_column = "HIV_active"
    lenient = True
    recommended = {"encoder.layers": 4, "encoder.hidden": 128, "encoder.virtual_node": False}
    description = (
        "MoleculeNet HIV via OGB (41127 molecules, binary, ROC-AUC); scaffold or size split"
    )


def hiv_molecules(root: Path):
    """The bundled MoleculeNet HIV CSV, featurized (lenient) and cached under ``root``.

    Shared by ``ogbg-molhiv`` and ``good-hiv``: one featurization (about 30 s),
    cached in ``<root>/ogbg_molhiv/grprune_v1``.

    Returns
    -------
    (MoleculeGraphs, str)
        See :func:`grprune.data.moleculenet_csv.cached_molecule_csv`.
    """
    src = OgbgMolhiv()
    return cached_molecule_csv(src.bundled_csv(), src.smiles_column, src.label_column,
                               Path(root) / src.folder / CACHE_DIRNAME, lenient=True)
