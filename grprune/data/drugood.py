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
  fixed order of :data:`JSON_PARTS` (``train, ood_val, ood_test, iid_val,
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
  number of molecules, the RDKit and OGB versions and :data:`FORMAT_VERSION`,
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

import gzip
import hashlib
import json
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np
import torch

from grprune.data.cache import CACHE_DIRNAME, load_or_build
from grprune.data.dataset import GraphDataset
from grprune.data.molecules import featurize_smiles
from grprune.record.files import file_sha256
from grprune.data.packed import PackedGraphs
from grprune.hparams import Param
from grprune.data.registry import DATASETS, DatasetSource
from grprune.errors import DataError

#: bundled curation files
FILES = Path(__file__).resolve().parent / "files" / "drugood"
#: dataset folder and cache folder under the data root
FOLDER = "drugood_ec50"
#: bump when the cached graphs' format changes
FORMAT_VERSION = 1
#: (JSON part, grprune part), in graph order
JSON_PARTS: tuple[tuple[str, str], ...] = (
    ("train", "train"),
    ("ood_val", "valid"),
    ("ood_test", "test"),
    ("iid_val", "id-valid"),
    ("iid_test", "id-test"),
)
#: keys every entry must have
REQUIRED_KEYS = ("smiles", "cls_label", "domain_id")


def curation_file_name(split: str) -> str:
    """``lbap_core_ec50_<split>.json.gz``: the bundled (and expected) file name."""
    return f"lbap_core_ec50_{split}.json.gz"


def find_curation_file(split: str, path: str | Path = "") -> Path:
    """The JSON file to read for ``split``.

    Parameters
    ----------
    split : str
        ``"assay"``, ``"scaffold"`` or ``"size"``.
    path : str or Path
        ``""``: the bundled file. A file: that file, whatever its name. A
        folder: ``lbap_core_ec50_<split>.json.gz`` in it, else
        ``lbap_core_ec50_<split>.json``.

    Returns
    -------
    Path

    Raises
    ------
    DataError
        If the path, or the expected file in the folder, does not exist.
    """
    if str(path).strip() == "":
        bundled = FILES / curation_file_name(split)
        if not bundled.is_file():
            raise DataError(f"bundled data file is missing: {bundled} (reinstall grprune)")
        return bundled
    from grprune.record.userfiles import expand_user
    given = expand_user(path, "data.path")
    if given.is_dir():
        candidates = [given / curation_file_name(split),
                      given / curation_file_name(split)[: -len(".gz")]]
        for c in candidates:
            if c.is_file():
                return c
        raise DataError(
            f"data.path folder {given} holds no DrugOOD EC50 {split!r} file "
            f"(looked for {candidates[0].name} and {candidates[1].name})")
    if not given.exists():
        raise DataError(f"data.path: no such file or folder: {given}")
    if not given.is_file():
        raise DataError(f"data.path {given} is neither a file nor a folder")
    return given


def read_json_file(path: Path) -> Any:
    """Parse a JSON file, gunzipping it first if it starts with gzip's magic bytes.

    Raises
    ------
    DataError
        If the file cannot be read, is a corrupt or truncated gzip stream, is
        not UTF-8, or is not valid JSON; the message names the file.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(
                f"cannot decompress {path}: {type(exc).__name__}: {exc} (the gzip file is "
                "corrupt or truncated; restore or re-create it)") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text (byte {exc.start}); expected JSON") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None


def _as_int(value: Any) -> int | None:
    """``value`` as an int if it is a (non-bool) integer or an integral float, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


@dataclass
class Curation:
    """The entries of one DrugOOD curation file, concatenated in :data:`JSON_PARTS` order.

    Attributes
    ----------
    path : Path
    smiles : list of str, length R
    labels : np.ndarray of int64, shape (R,)
        ``cls_label``, 0 or 1.
    domains : np.ndarray of int64, shape (R,)
        ``domain_id`` as written in the file.
    part : np.ndarray of int64, shape (R,)
        Index into :data:`JSON_PARTS` of each entry's part.
    index_in_part : np.ndarray of int64, shape (R,)
        Position of each entry in its JSON part.
    part_sizes : dict of str to int
        Entries per JSON part.
    ignored_parts : list of str
        Keys under ``split`` that are not in :data:`JSON_PARTS`.
    cfg, statistics : dict
        The file's ``cfg`` and ``statistics`` (empty if absent).
    """

    path: Path
    smiles: list[str]
    labels: np.ndarray
    domains: np.ndarray
    part: np.ndarray
    index_in_part: np.ndarray
    part_sizes: dict[str, int]
    ignored_parts: list[str] = field(default_factory=list)
    cfg: dict = field(default_factory=dict)
    statistics: dict = field(default_factory=dict)


def read_curation(path: str | Path) -> Curation:
    """Read and check a DrugOOD LBAP curation file (the layout in the module docstring).

    Parameters
    ----------
    path : str or Path
        JSON file, plain or gzip-compressed.

    Returns
    -------
    Curation
        R entries (R = sum of the five parts' lengths).

    Raises
    ------
    DataError
        If the file is missing, unreadable, corrupt, truncated or not JSON; if
        it has no ``split`` object or lacks one of the five parts (named); or if
        an entry is not an object, lacks ``smiles``, ``cls_label`` or
        ``domain_id``, has a non-string SMILES, a label other than 0/1 or a
        non-integer domain (the message names the file, part and entry index).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    data = read_json_file(path)
    split = _split_object(path, data)
    smiles: list[str] = []
    labels: list[int] = []
    domains: list[int] = []
    part_of: list[int] = []
    index_in_part: list[int] = []
    sizes: dict[str, int] = {}
    for k, (json_part, _) in enumerate(JSON_PARTS):
        entries = _part_entries(path, split, json_part)
        for i, entry in enumerate(entries):
            s, label, domain = _checked_entry(f"{path}, split part {json_part!r}, entry {i}",
                                              entry)
            smiles.append(s)
            labels.append(label)
            domains.append(domain)
            part_of.append(k)
            index_in_part.append(i)
        sizes[json_part] = len(entries)
    known = {p for p, _ in JSON_PARTS}
    cfg, stats = data.get("cfg"), data.get("statistics")
    return Curation(
        path=path, smiles=smiles,
        labels=np.asarray(labels, dtype=np.int64),
        domains=np.asarray(domains, dtype=np.int64),
        part=np.asarray(part_of, dtype=np.int64),
        index_in_part=np.asarray(index_in_part, dtype=np.int64),
        part_sizes=sizes,
        ignored_parts=[str(p) for p in split if p not in known],
        cfg=cfg if isinstance(cfg, dict) else {},
        statistics=stats if isinstance(stats, dict) else {},
    )


def _split_object(path: Path, data: Any) -> dict:
    """The ``split`` object of a parsed curation file; DataError if the layout is wrong."""
    layout = "DrugOOD's {\"cfg\", \"split\", \"statistics\"} layout"
    if not isinstance(data, dict):
        raise DataError(f"{path}: the JSON is a {type(data).__name__}, expected an object in "
                        f"{layout}")
    if "split" not in data:
        raise DataError(f"{path} has no 'split' key (top-level keys: "
                        f"{', '.join(map(str, data)) or 'none'}; expected {layout})")
    split = data["split"]
    if not isinstance(split, dict):
        raise DataError(f"{path}: 'split' is a {type(split).__name__}, expected an object "
                        f"with parts {', '.join(p for p, _ in JSON_PARTS)}")
    return split


def _part_entries(path: Path, split: dict, json_part: str) -> list:
    """The entries of one JSON part; DataError if the part is missing or not a list."""
    if json_part not in split:
        raise DataError(
            f"{path}: split part {json_part!r} is missing (parts present: "
            f"{', '.join(map(str, split)) or 'none'}; expected "
            f"{', '.join(p for p, _ in JSON_PARTS)})")
    entries = split[json_part]
    if not isinstance(entries, list):
        raise DataError(f"{path}: split part {json_part!r} is a {type(entries).__name__}, "
                        "expected a list of entries")
    return entries


def _checked_entry(where: str, entry: Any) -> tuple[str, int, int]:
    """``(smiles, cls_label, domain_id)`` of one entry; DataError naming ``where`` (file,
    part and index) if it is not an object with a string SMILES, a 0/1 label and an
    integer domain."""
    if not isinstance(entry, dict):
        raise DataError(f"{where}: expected an object with keys "
                        f"{', '.join(REQUIRED_KEYS)}, got {type(entry).__name__}")
    missing = [key for key in REQUIRED_KEYS if key not in entry]
    if missing:
        raise DataError(f"{where} has no {', '.join(map(repr, missing))} "
                        f"(keys: {', '.join(map(str, entry)) or 'none'})")
    s, label, domain = entry["smiles"], _as_int(entry["cls_label"]), \
        _as_int(entry["domain_id"])
    if not isinstance(s, str):
        raise DataError(f"{where}: smiles {s!r} is not a string")
    if label not in (0, 1):
        raise DataError(f"{where}: cls_label {entry['cls_label']!r} is not 0 or 1")
    if domain is None:
        raise DataError(f"{where}: domain_id {entry['domain_id']!r} is not an integer")
    return s, label, domain


def smiles_sha256(unique_smiles: list[str]) -> str:
    """Hex sha256 of a list of SMILES, serialized as a JSON array (unambiguous)."""
    return hashlib.sha256(json.dumps(unique_smiles).encode("utf-8")).hexdigest()


def cached_molecule_graphs(
    unique_smiles: list[str], cache_root: Path
) -> tuple[Sequence, np.ndarray, str, Path]:
    """Graphs of distinct SMILES, through an on-disk cache keyed by their content.

    Parameters
    ----------
    unique_smiles : list of str, length U
        Distinct SMILES, sorted (the order fixes the cache's contents).
    cache_root : Path
        ``<root>/drugood_ec50/grprune_v1``; the cache is the sub-folder
        ``molecules-<first 16 hex digits of smiles_sha256(unique_smiles)>``.

    Returns
    -------
    graphs : sequence of dgl.DGLGraph, length U' <= U
        (``ndata['feat']`` int64 (N, 9), ``edata['feat']`` int64 (E, 3)): the
        parsable molecules, a :class:`~grprune.data.packed.PackedGraphs` (graphs
        are built on first access).
    graph_of : np.ndarray of int64, shape (U,)
        Position in ``graphs`` of each SMILES, -1 where RDKit cannot parse it.
    status : str
        ``"hit"``, ``"built"``, ``"rebuilt (<reason>)"`` or ``"not written (...)"``.
    cache_dir : Path
    """
    import ogb
    import rdkit

    digest = smiles_sha256(unique_smiles)
    cache_dir = cache_root / f"molecules-{digest[:16]}"
    key = {"format_version": FORMAT_VERSION, "dataset": "drugood-ec50 molecules",
           "smiles_sha256": digest, "n_molecules": len(unique_smiles),
           "rdkit_version": rdkit.__version__, "ogb_version": ogb.__version__}

    def build():
        graphs, kept = featurize_smiles(unique_smiles)
        unparsable = sorted(set(range(len(unique_smiles))) - set(kept.tolist()))
        return graphs, {"mol_index": torch.from_numpy(kept)}, {"unparsable": unparsable}

    graphs, tensors, _, status = load_or_build(cache_dir, key, build, ("unparsable",),
                                               ("mol_index",))
    mol_index = tensors["mol_index"].numpy().astype(np.int64)
    if len(mol_index) and (mol_index.min() < 0 or mol_index.max() >= len(unique_smiles)):
        raise DataError(f"graph cache {cache_dir} is inconsistent (molecule index out of "
                        "range); delete that folder to rebuild it")
    graph_of = np.full(len(unique_smiles), -1, dtype=np.int64)
    graph_of[mol_index] = np.arange(len(mol_index), dtype=np.int64)
    return graphs, graph_of, status, cache_dir


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


class _EntryGraphs(NamedTuple):
    """The graphs of a curation's entries (see :func:`_entry_graphs`)."""

    graphs: Sequence          # G graphs, one per kept entry, in entry order
    kept: np.ndarray          # int64 (G,): entry of each graph
    skipped: list[int]        # entries whose SMILES RDKit cannot parse
    n_molecules: int          # distinct SMILES
    status: str               # graph cache status
    cache_dir: Path


def _entry_graphs(cur: Curation, cache_root: Path) -> _EntryGraphs:
    """One graph per entry whose SMILES parses, featurized once per distinct SMILES
    through the cache (:func:`cached_molecule_graphs`); entries sharing a SMILES share
    one graph object."""
    unique = sorted(set(cur.smiles))
    position = {s: j for j, s in enumerate(unique)}
    mol_graphs, graph_of, status, cache_dir = cached_molecule_graphs(unique, cache_root)
    per_entry = graph_of[np.asarray([position[s] for s in cur.smiles], dtype=np.int64)]
    kept = np.flatnonzero(per_entry >= 0).astype(np.int64)
    skipped = [int(r) for r in np.flatnonzero(per_entry < 0)]
    packed = PackedGraphs.from_graphs(mol_graphs) if len(mol_graphs) else None
    graphs = packed.take(per_entry[kept]) if packed is not None else []
    return _EntryGraphs(graphs, kept, skipped, len(unique), status, cache_dir)


def _source_info(cur: Curation, source: Path, bundled: bool,
                 eg: _EntryGraphs) -> dict[str, Any]:
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
            :func:`read_curation`), or a file without any parseable molecule
            in ``train``.
        """
        split = self.resolve_split(split)
        root = Path(root)
        source = find_curation_file(split, path)
        cur = read_curation(source)
        facts = _curation_facts(cur)
        _warn_if_other_split(facts, source, split, self.splits)
        eg = _entry_graphs(cur, root / FOLDER / CACHE_DIRNAME)
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
