"""A DrugOOD LBAP curation file (Ji et al., 2022) found, read and checked: the bundled
``lbap_core_ec50_<split>.json.gz`` or a user's own, plain or gzip-compressed JSON, its
entries concatenated into one :class:`Curation` in the graph order of :data:`JSON_PARTS`.
The layout is described in :mod:`grprune.data.drugood`.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from grprune.errors import DataError

#: bundled curation files
FILES = Path(__file__).resolve().parent / "files" / "drugood"
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
    """Read and check a DrugOOD LBAP curation file (the layout in :mod:`grprune.data.drugood`).

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
