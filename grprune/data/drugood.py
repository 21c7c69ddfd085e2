"""DrugOOD LBAP-core EC50 (Ji et al., 2022): ligand-based affinity prediction
under assay, scaffold and molecule-size shift.

The data
--------
One JSON file per split, ``lbap_core_ec50_<split>.json`` (optionally
gzip-compressed), as DrugOOD's curator writes it::

    {"cfg": {...curation config...},
     "split": {"train": [...], "iid_val": [...], "iid_test": [...],
               "ood_val": [...], "ood_test": [...]},
     "statistics": {...}}

Each entry is ``{"smiles", "reg_label", "assay_id", "cls_label", "domain_id"}``;
grprune uses ``smiles``, ``cls_label`` (0/1: pEC50 below/above the curation's
threshold) and ``domain_id`` (the assay, scaffold or size bin), and ignores the
rest. The bundled files (``grprune/data/files/drugood``) are the ChEMBL-29
curation published by the MoleOOD authors; their provenance is recorded in
the project's data PROVENANCE notes. A user's own curation is read through the
``path`` hyperparameter (``-H data.path=...``): a JSON or JSON.gz file, or a
folder holding ``lbap_core_ec50_<split>.json.gz`` (or ``.json``). Gzip is
detected from the file's first bytes, not its name.

Choices
-------
* **Parts.** ``train`` -> ``train``, ``ood_val`` -> ``valid``, ``ood_test`` ->
  ``test``, ``iid_val`` -> ``id-valid``, ``iid_test`` -> ``id-test``. Other
  keys under ``split`` are ignored (and listed in ``info["ignored_parts"]``).
* **Graph order and** ``source_rows``. The JSON parts are concatenated in the
  fixed order of :data:`~grprune.data.drugood_curation.JSON_PARTS` (``train, ood_val, ood_test, iid_val,
  iid_test``; the order DrugOOD writes them and grprune lists its parts), each
  in file order. ``source_rows[i]`` is the position of graph ``i``'s entry in
  that concatenation, so ``grprune data export`` writes positions in it.
* **Unparsable molecules** are skipped and counted: ``info["skipped_rows"]``
  holds their positions in the concatenation and ``info["skipped_entries"]``
  the same as ``[json_part, index_in_part]`` pairs. (All 12,661 bundled SMILES
  parse.) An entry that is malformed (no ``smiles``/``cls_label``/
  ``domain_id``, a label other than 0/1, a non-integer domain) is an error, not
  a skip.
* **Environments.** ``envs`` is ``domain_id`` remapped to ``0 .. D-1`` by rank
  among the distinct ``domain_id`` values of the loaded graphs (the identity
  for the bundled files, whose ids already run from 0; ``info["domain_ids_remapped"]``
  says whether anything changed). The OOD parts' domains are disjoint from the
  in-distribution pool's and from each other's; this is the curation's
  property, not enforced here.
* **Featurization and cache.** OGB features via
  :func:`grprune.data.molecules.smiles_to_graph` (as for ogbg-molbbbp).
  Molecules are featurized once per *distinct SMILES*, sorted, and cached
  under ``<root>/drugood_ec50/grprune_v1/molecules-<h>`` where ``<h>`` starts
  the sha256 of that sorted SMILES list. The cache key holds that sha256, the
  number of molecules, the RDKit and OGB versions and
  :data:`~grprune.data.drugood_graphs.FORMAT_VERSION`,
  so a source file with other molecules or a new library version rebuilds it.
  Graphs depend only on the SMILES, so labels, domains and parts are always
  read from the JSON itself; the three bundled splits hold the same 12,661
  molecules and share one cache (about 12 s to build on one core, about 2 s to
  read). A molecule that occurs in several entries is one shared, read-only
  ``DGLGraph`` object.
* ``download`` is accepted and ignored: DrugOOD has no download route here.

Example
-------
>>> from grprune.data import load_dataset
>>> ds = load_dataset("drugood-ec50", split="scaffold")            # doctest: +SKIP
>>> {k: len(v) for k, v in ds.splits.items()}                      # doctest: +SKIP
{'train': 2570, 'valid': 2532, 'test': 2533, 'id-valid': 580, 'id-test': 4446}
>>> mine = load_dataset("ec50", path="my_curation/")               # doctest: +SKIP
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from grprune.data.cache import CACHE_DIRNAME
from grprune.data.dataset import GraphDataset
from grprune.data.drugood_curation import JSON_PARTS, Curation, find_curation_file, read_curation
from grprune.data.drugood_graphs import EntryGraphs, entry_graphs
from grprune.data.registry import DATASETS, DatasetSource
from grprune.errors import DataError
from grprune.hparams import Param
from grprune.record.files import file_sha256

#: dataset folder and cache folder under the data root
FOLDER = "drugood_ec50"


def _curation_facts(cur: Curation) -> dict[str, Any]:
    """A few JSON facts from the file's ``cfg`` and ``statistics``, where present."""
    cfg, stats = cur.cfg, cur.statistics
    facts: dict[str, Any] = {}

    def get(d: Any, *keys: str) -> Any:
        for k in keys:
            if not isinstance(d, dict) or k not in d:
                return None
            d = d[k]
        return d

    for name, value in (
        ("subset", get(cfg, "path", "task", "subset")),
        ("domain_name", get(cfg, "domain", "domain_name")),
        ("domain_generate_field", get(cfg, "domain", "domain_generate_field")),
        ("measurement_type", get(cfg, "noise_filter", "assay", "measurement_type")),
        ("classification_threshold", get(cfg, "classification_threshold")),
        ("fractions", get(cfg, "fractions")),
        ("thr_for_cls", get(stats, "thr_for_cls")),
    ):
        if value is not None:
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                continue
            facts[name] = value
    return facts


def _warn_if_other_split(facts: dict[str, Any], source: Path, split: str,
                         splits: Sequence[str]) -> None:
    """Warn when the file's ``cfg`` names another of ``splits`` than the one loaded."""
    subset = facts.get("subset")
    if isinstance(subset, str):
        other = [s for s in splits if s != split and subset.endswith(f"_{s}")]
        if other:
            warnings.warn(f"grprune: {source} is a {subset!r} curation, loaded as the "
                          f"{split!r} split")


def _source_info(cur: Curation, source: Path, bundled: bool,
                 eg: EntryGraphs) -> dict[str, Any]:
    """The ``info`` entries about the source file and which of its entries became graphs."""
    return {
        "source": f"bundled {source.name}" if bundled else str(source.resolve()),
        "source_sha256": file_sha256(source),
        "graph_order": ", ".join(p for p, _ in JSON_PARTS),
        "part_map": {grp: jp for jp, grp in JSON_PARTS},
        "source_part_sizes": dict(cur.part_sizes),
        "ignored_parts": cur.ignored_parts,
        "n_source_rows": len(cur.smiles),
        "n_molecules": eg.n_molecules,
        "n_skipped": len(eg.skipped),
        "skipped_rows": eg.skipped,
        "skipped_entries": [[JSON_PARTS[int(cur.part[r])][0], int(cur.index_in_part[r])]
                            for r in eg.skipped],
        "n_graphs": len(eg.graphs),
    }


@DATASETS.register("drugood-ec50", aliases=("ec50", "lbap-core-ec50"))
class DrugoodEc50(DatasetSource):
    """DrugOOD LBAP-core EC50 (Ji et al., 2022): binary pEC50 activity of ChEMBL
    molecules, OOD by assay, scaffold or molecule size, with in-distribution
    hold-outs; OGB atom/bond features, ROC-AUC. See the module docstring for the
    file format, graph order, environments and cache."""

    splits = ("assay", "scaffold", "size")
    parts = ("train", "valid", "test", "id-valid", "id-test")
    params = {
        "split": Param("assay", "domain that defines the shift: assay, scaffold or size"),
        "path": Param("", "your own DrugOOD curation: a lbap_core_ec50_<split>.json[.gz] file "
                          "or a folder holding one; empty = the bundled ChEMBL-29 curation"),
    }
    metric = "rocauc"
    num_classes = 2
    recommended = {
        "encoder.layers": 4,
        "encoder.virtual_node": False,
        "train.warmup_epochs": 10,
        "train.patience": 10,
    }
    description = (
        "DrugOOD LBAP-core EC50 (12661 ChEMBL-29 molecules, binary, ROC-AUC, "
        "ID + OOD parts); assay, scaffold or size split"
    )

    def load(self, *, root: Path, download: bool = False, split: str = "assay",
             path: str = "") -> GraphDataset:
        """Load one split of DrugOOD LBAP-core EC50.

        Parameters
        ----------
        root : Path
            Data root; the graph cache lives in ``<root>/drugood_ec50/grprune_v1``.
        download : bool
            Ignored (there is no download route; the curation is bundled).
        split : str
            ``"assay"``, ``"scaffold"`` or ``"size"``.
        path : str
            ``""`` for the bundled curation, else a curation file or a folder
            holding ``lbap_core_ec50_<split>.json[.gz]``.

        Returns
        -------
        GraphDataset
            G graphs (entries whose SMILES parse), labels (G,) in {0, 1}, envs
            (G,) in ``0 .. D-1``, parts ``train``, ``valid``, ``test`` (OOD),
            ``id-valid``, ``id-test``; ``info`` as described in the module
            docstring (source, source_sha256, n_source_rows, n_skipped,
            skipped_rows, skipped_entries, n_graphs, split_sizes, n_domains,
            curation, cache).

        Raises
        ------
        GrpruneError
            On an unknown split (listing the choices).
        DataError
            On a missing path, an unreadable, corrupt or malformed file (see
            :func:`~grprune.data.drugood_curation.read_curation`), or a file without
            any parseable molecule in ``train``.
        """
        split = self.resolve_split(split)
        root = Path(root)
        source = find_curation_file(split, path)
        cur = read_curation(source)
        facts = _curation_facts(cur)
        _warn_if_other_split(facts, source, split, self.splits)
        eg = entry_graphs(cur, root / FOLDER / CACHE_DIRNAME)
        kept, graphs = eg.kept, eg.graphs
        part_of = cur.part[kept]
        parts = {grp: np.flatnonzero(part_of == k) for k, (_, grp) in enumerate(JSON_PARTS)}
        if len(parts["train"]) == 0:
            raise DataError(f"{source}: split part 'train' has no molecule RDKit can parse "
                            f"({cur.part_sizes['train']} entries)")
        raw_domains = cur.domains[kept]
        domain_values, envs = np.unique(raw_domains, return_inverse=True)
        envs = envs.astype(np.int64).reshape(-1)
        remapped = bool(len(domain_values)) and not np.array_equal(
            domain_values, np.arange(len(domain_values)))

        info: dict[str, Any] = {
            "dataset": self.registered_name,
            "split": split,
            **_source_info(cur, source, str(path).strip() == "", eg),
            "split_sizes": {grp: int(len(idx)) for grp, idx in parts.items()},
            "n_domains": {"all": int(len(domain_values)),
                          **{grp: int(len(np.unique(envs[idx]))) for grp, idx in parts.items()}},
            "domain_ids_remapped": remapped,
            "curation": facts,
            "cache": eg.status,
            "cache_dir": str(eg.cache_dir),
        }
        return GraphDataset(
            self.registered_name,
            graphs,
            cur.labels[kept],
            parts,
            num_classes=self.num_classes,
            metric=self.metric,
            atom_encoder="ogb",
            envs=envs,
            smiles=[cur.smiles[r] for r in kept],
            source_rows=kept,
            info=info,
        )
