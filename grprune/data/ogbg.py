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
(``split_source = "computed"``).
"""

from __future__ import annotations

import builtins
import contextlib
import shutil
import sys
import warnings
from pathlib import Path
from typing import Iterator

import numpy as np
import ogb
import rdkit
import torch

from grprune.data.cache import read_graph_cache, write_graph_cache
from grprune.data.dataset import GraphDataset
from grprune.data.molecules import (
    file_sha256,
    graph_from_arrays,
    load_molecule_csv,
    read_molecule_csv,
)
from grprune.data.registry import DATASETS, DatasetSource
from grprune.data.splits import check_split, load_split_files, size_split
from grprune.errors import DataError

FILES = Path(__file__).resolve().parent / "files"
CACHE_DIRNAME = "grprune_v1"
CACHE_FORMAT = 1


@contextlib.contextmanager
def _no_input() -> Iterator[None]:
    """Make ``input()`` raise instead of blocking (OGB prompts on stale folders)."""

    def refuse(prompt: str = "") -> str:
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
    csv_name: str = ""  # bundled CSV under files/<folder>/
    smiles_column: str = "smiles"
    label_column: str = ""
    splits = ("scaffold", "size")
    defaults = {"split": "scaffold", "split_seed": 0}
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
        self, *, split: str, root: Path, download: bool = False, split_seed: int = 0
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
            parts = size_split([g.num_nodes() for g in graphs], seed=split_seed)
            info.update(split_source="computed", split_seed=int(split_seed))
        else:
            parts = data["official_split"]()
        info.update(
            dataset=self.registered_name,
            split=split,
            n_graphs=len(graphs),
            split_sizes={k: int(len(v)) for k, v in parts.items()},
        )
        return GraphDataset(
            self.registered_name,
            graphs,
            data["labels"],
            parts,
            num_classes=self.num_classes,
            metric=self.metric,
            atom_encoder="ogb",
            smiles=data["smiles"],
            source_rows=data["source_rows"],
            info=info,
        )

    def _from_bundled(self, root: Path) -> dict:
        csv = FILES / self.folder / self.csv_name
        if not csv.is_file():
            raise DataError(f"bundled data file is missing: {csv} (reinstall grprune)")
        key = {
            "format_version": CACHE_FORMAT,
            "source_file": self.csv_name,
            "source_sha256": file_sha256(csv),
            "rdkit_version": rdkit.__version__,
            "ogb_version": ogb.__version__,
        }
        cache_dir = root / self.folder / CACHE_DIRNAME
        cached, reason = read_graph_cache(
            cache_dir, key, ("skipped_rows", "n_source_rows"), ("labels", "source_rows")
        )
        if cached is not None:
            graphs, tensors, meta = cached
            labels, source_rows = tensors["labels"], tensors["source_rows"].numpy()
            all_smiles, _ = read_molecule_csv(csv, self.smiles_column, self.label_column)
            smiles = [all_smiles[i] for i in source_rows]
            skipped, n_rows, status = meta["skipped_rows"], meta["n_source_rows"], "hit"
        else:
            mg = load_molecule_csv(csv, self.smiles_column, self.label_column)
            graphs, smiles, source_rows = mg.graphs, mg.smiles, mg.source_rows
            labels, skipped, n_rows = torch.from_numpy(mg.labels), mg.skipped_rows, mg.n_source_rows
            status = "built" if reason == "no cache" else f"rebuilt ({reason})"
            try:
                write_graph_cache(
                    cache_dir,
                    key,
                    graphs,
                    {"labels": labels, "source_rows": torch.from_numpy(source_rows)},
                    {"n_source_rows": n_rows, "skipped_rows": skipped},
                )
            except Exception as exc:  # read-only root, full disk: work without a cache
                status = f"not written ({type(exc).__name__}: {exc})"
                warnings.warn(f"grprune: could not write the dataset cache in {cache_dir}: {exc}")
        split_dir = FILES / self.folder / "split" / "scaffold"
        return {
            "graphs": graphs,
            "labels": labels,
            "smiles": smiles,
            "source_rows": source_rows,
            "official_split": lambda: load_split_files(split_dir, len(graphs)),
            "info": {
                "source": f"bundled {self.csv_name}",
                "source_sha256": key["source_sha256"],
                "n_source_rows": int(n_rows),
                "n_skipped": len(skipped),
                "skipped_rows": [int(r) for r in skipped],
                "split_source": "ogb-official",
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
            "official_split": lambda: self._ogb_split(ds, folder, len(graphs)),
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
