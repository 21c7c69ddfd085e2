"""DrugOOD LBAP-core EC50: bundled sizes, part/domain structure, cache, user files, errors."""

from __future__ import annotations

import gzip
import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
import torch

from grprune.data import DATASETS, load_dataset, smiles_to_graph
from grprune.data.drugood import DrugoodEc50
from grprune.data.drugood_curation import JSON_PARTS, read_curation
from grprune.errors import DataError, GrpruneError

BUNDLED = Path(__file__).resolve().parents[1] / "grprune" / "data" / "files" / "drugood"

#: (train, OOD valid, OOD test, ID valid, ID test) of the bundled ChEMBL-29 curation
SIZES = {
    "assay": {"train": 4540, "valid": 2572, "test": 2490, "id-valid": 1502, "id-test": 1557},
    "scaffold": {"train": 2570, "valid": 2532, "test": 2533, "id-valid": 580, "id-test": 4446},
    "size": {"train": 4684, "valid": 2313, "test": 2398, "id-valid": 1513, "id-test": 1753},
}
ID_POOL = ("train", "id-valid", "id-test")


@pytest.fixture(scope="module")
def bundled(data_root):
    """All three bundled splits, loaded into the session data root (one featurization)."""
    return {split: load_dataset("drugood-ec50", split=split, root=data_root)
            for split in ("assay", "scaffold", "size")}


def same_graphs(a, b) -> bool:
    if a.num_nodes() != b.num_nodes() or a.num_edges() != b.num_edges():
        return False
    return (all(torch.equal(x, y) for x, y in zip(a.edges(), b.edges()))
            and torch.equal(a.ndata["feat"], b.ndata["feat"])
            and torch.equal(a.edata["feat"], b.edata["feat"]))


# -- the bundled curation ------------------------------------------------------
@pytest.mark.parametrize("split", ["assay", "scaffold", "size"])
def test_bundled_sizes_parts_and_domains(bundled, split):
    ds = bundled[split]
    assert len(ds) == 12661 and ds.info["n_skipped"] == 0 and ds.info["n_source_rows"] == 12661
    assert {k: len(v) for k, v in ds.splits.items()} == SIZES[split]
    assert ds.info["split_sizes"] == SIZES[split] and ds.info["split"] == split
    assert ds.metric == "rocauc" and ds.num_classes == 2 and ds.atom_encoder == "ogb"
    # pairwise disjoint, together every graph
    for a, b in combinations(ds.splits, 2):
        assert not set(ds.splits[a].tolist()) & set(ds.splits[b].tolist()), (a, b)
    assert sum(len(v) for v in ds.splits.values()) == len(ds)
    # OOD domains: disjoint from the ID pool's and from each other
    envs = ds.envs.numpy()
    dom = {p: set(envs[idx].tolist()) for p, idx in ds.splits.items()}
    pool = set().union(*(dom[p] for p in ID_POOL))
    assert not dom["valid"] & pool and not dom["test"] & pool
    assert not dom["valid"] & dom["test"]
    # labels 0/1 (both present in train), envs 0..D-1
    assert set(ds.labels.unique().tolist()) == {0, 1}
    assert set(ds.labels[ds.splits["train"]].tolist()) == {0, 1}
    assert int(ds.labels.sum()) == 10199  # positives of the curation
    assert set(envs.tolist()) == set(range(ds.info["n_domains"]["all"]))
    # graph order: JSON parts concatenated train, ood_val, ood_test, iid_val, iid_test
    assert np.array_equal(ds.source_rows, np.arange(len(ds)))
    assert ds.splits["train"][0] == 0 and ds.splits["valid"][0] == SIZES[split]["train"]


def test_bundled_rows_match_json_and_share_one_cache(bundled):
    ds = bundled["scaffold"]
    cur = read_curation(BUNDLED / "lbap_core_ec50_scaffold.json.gz")
    assert ds.smiles == cur.smiles
    assert np.array_equal(ds.labels.numpy(), cur.labels)
    start = 0
    for (json_part, part) in JSON_PARTS:
        n = cur.part_sizes[json_part]
        assert np.array_equal(ds.splits[part], np.arange(start, start + n))
        start += n
    # the three splits hold the same molecules: one featurization, one cache
    dirs = {ds.info["cache_dir"] for ds in bundled.values()}
    assert len(dirs) == 1
    assert sum(ds.info["cache"] == "hit" for ds in bundled.values()) >= 2
    again = load_dataset("ec50", split="assay")  # GRPRUNE_DATA_ROOT = session root
    assert again.info["cache"] == "hit"
    assert all(same_graphs(again.graphs[i], bundled["assay"].graphs[i])
               for i in range(0, len(again), 97))


def test_bundled_graphs_equal_fresh_featurization(bundled):
    ds = bundled["size"]
    rng = np.random.default_rng(0)
    for i in rng.choice(len(ds), size=40, replace=False).tolist():
        assert same_graphs(ds.graphs[i], smiles_to_graph(ds.smiles[i])), ds.smiles[i]


def test_registration_and_bad_split():
    cls = DATASETS.get("lbap-core-ec50")
    assert cls is DrugoodEc50 and DATASETS.get("EC50") is DrugoodEc50
    assert cls.parts == ("train", "valid", "test", "id-valid", "id-test")
    assert cls.resolve_params({}) == {"split": "assay", "path": ""}
    assert cls.recommended["encoder.layers"] == 4
    with pytest.raises(GrpruneError, match="assay, scaffold, size"):
        load_dataset("drugood-ec50", split="protein")
    with pytest.raises(GrpruneError, match="unknown hyperparameter data.paht"):
        cls.resolve_params({"paht": "x"})


# -- a user's own curation -----------------------------------------------------
TOY = {
    "train": [("CCO", 1, 10), ("c1ccccc1", 0, 10), ("CC(=O)O", 1, 11), ("C1CC", 1, 11),
              ("CCN", 0, 12)],
    "iid_val": [("CCCC", 1, 10), ("CCO", 0, 12)],   # CCO again: one molecule, two entries
    "iid_test": [("C", 1, 11)],
    "ood_val": [("c1ccncc1", 0, 40), ("CC(C)O", 1, 40)],
    "ood_test": [("C1CC1", 1, 50), ("O=C=O", 0, 51)],
}


def toy_json(split: dict | None = None, **top) -> dict:
    split = TOY if split is None else split
    return {
        "cfg": {"path": {"task": {"type": "lbap", "subset": "lbap_core_ec50_assay"}},
                "domain": {"domain_name": "assay"}},
        "split": {part: [{"smiles": s, "reg_label": 5.0, "assay_id": 1, "cls_label": y,
                          "domain_id": d} for s, y, d in rows] for part, rows in split.items()},
        "statistics": {"thr_for_cls": 5},
        **top,
    }


def write(path: Path, obj, gz: bool = False) -> Path:
    data = json.dumps(obj).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_user_file_plain_gzip_and_folder(tmp_path):
    plain = write(tmp_path / "mine.json", toy_json())
    gz = write(tmp_path / "mine.json.gz", toy_json(), gz=True)
    folder = tmp_path / "folder"
    folder.mkdir()
    write(folder / "lbap_core_ec50_size.json.gz", toy_json(), gz=True)
    root = tmp_path / "root"
    a = load_dataset("drugood-ec50", root=root, path=str(plain))
    b = load_dataset("drugood-ec50", root=root, path=str(gz))
    with pytest.warns(UserWarning, match="'lbap_core_ec50_assay' curation, loaded as the 'size'"):
        c = load_dataset("drugood-ec50", root=root, split="size", path=str(folder))
    assert a.info["cache"] == "built" and b.info["cache"] == "hit"
    assert a.info["source"] == str(plain.resolve()) and c.info["split"] == "size"
    # 12 entries, 11 distinct SMILES; "C1CC" (train, entry 3 = row 3) cannot be parsed
    assert a.info["n_source_rows"] == 12 and a.info["n_molecules"] == 11
    assert a.info["n_skipped"] == 1 and a.info["skipped_rows"] == [3]
    assert a.info["skipped_entries"] == [["train", 3]]
    assert a.info["split_sizes"] == {"train": 4, "valid": 2, "test": 2,
                                     "id-valid": 2, "id-test": 1}
    # rows of the concatenation train, ood_val, ood_test, iid_val, iid_test
    assert a.source_rows.tolist() == [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11]
    assert a.smiles is not None and a.smiles[a.splits["id-valid"][1]] == "CCO"
    assert a.labels.tolist() == [1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1]
    # domains 10, 11, 12, 40, 50, 51 -> 0..5
    assert a.envs.tolist() == [0, 0, 1, 2, 3, 3, 4, 5, 0, 2, 1]
    assert a.info["domain_ids_remapped"] is True and a.info["n_domains"]["all"] == 6
    for other in (b, c):
        assert all(same_graphs(g, h) for g, h in zip(a.graphs, other.graphs))
        assert a.labels.tolist() == other.labels.tolist()
        assert a.envs.tolist() == other.envs.tolist()


def test_user_file_deterministic_across_fresh_roots(tmp_path):
    path = write(tmp_path / "mine.json.gz", toy_json(), gz=True)
    a = load_dataset("drugood-ec50", root=tmp_path / "r1", path=str(path))
    b = load_dataset("drugood-ec50", root=tmp_path / "r2", path=str(path))
    assert a.info["cache"] == b.info["cache"] == "built"
    assert len(a) == len(b) and all(same_graphs(g, h) for g, h in zip(a.graphs, b.graphs))
    assert {k: v.tolist() for k, v in a.splits.items()} == \
        {k: v.tolist() for k, v in b.splits.items()}
    assert a.smiles == b.smiles and torch.equal(a.envs, b.envs)


def test_corrupt_cache_is_rebuilt(tmp_path):
    path = write(tmp_path / "mine.json", toy_json())
    root = tmp_path / "root"
    first = load_dataset("drugood-ec50", root=root, path=str(path))
    cache = Path(first.info["cache_dir"]) / "graphs.bin"
    blob = bytearray(cache.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    cache.write_bytes(bytes(blob))
    again = load_dataset("drugood-ec50", root=root, path=str(path))
    assert again.info["cache"].startswith("rebuilt")
    assert all(same_graphs(g, h) for g, h in zip(first.graphs, again.graphs))
    assert load_dataset("drugood-ec50", root=root, path=str(path)).info["cache"] == "hit"


# -- errors a user can cause ---------------------------------------------------
def bad_entry(part: str, index: int, **change) -> dict:
    obj = toy_json()
    entry = obj["split"][part][index]
    for k, v in change.items():
        if v is None:
            entry.pop(k)
        else:
            entry[k] = v
    return obj


@pytest.mark.parametrize("name, content, match", [
    ("broken.json", b'{"split": {"train": [', r"broken\.json is not valid JSON"),
    ("empty.json", b"", r"empty\.json is not valid JSON"),
    ("list.json", b"[1, 2]", r"list\.json: the JSON is a list"),
    ("nosplit.json", toy_json() | {"split": None}, r"nosplit\.json: 'split' is a NoneType"),
    ("nokey.json", {"cfg": {}}, r"nokey\.json has no 'split' key"),
    ("nopart.json", toy_json({k: v for k, v in TOY.items() if k != "ood_test"}),
     r"nopart\.json: split part 'ood_test' is missing"),
    ("label.json", bad_entry("ood_val", 1, cls_label=2),
     r"label\.json, split part 'ood_val', entry 1: cls_label 2 is not 0 or 1"),
    ("strlabel.json", bad_entry("train", 0, cls_label="1"),
     r"strlabel\.json, split part 'train', entry 0: cls_label '1'"),
    ("nosmiles.json", bad_entry("iid_test", 0, smiles=None),
     r"nosmiles\.json, split part 'iid_test', entry 0 has no 'smiles'"),
    ("nodomain.json", bad_entry("train", 2, domain_id=None),
     r"nodomain\.json, split part 'train', entry 2 has no 'domain_id'"),
    ("domain.json", bad_entry("train", 2, domain_id="a"),
     r"domain\.json, split part 'train', entry 2: domain_id 'a' is not an integer"),
])
def test_malformed_file_is_a_data_error(tmp_path, name, content, match):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        write(path, content)
    with pytest.raises(DataError, match=match):
        load_dataset("drugood-ec50", root=tmp_path / "root", path=str(path))


def test_truncated_or_corrupt_gzip_is_a_data_error(tmp_path):
    blob = gzip.compress(json.dumps(toy_json()).encode())
    (tmp_path / "cut.json.gz").write_bytes(blob[: len(blob) // 2])
    (tmp_path / "bad.json.gz").write_bytes(blob[:10] + b"\x00" * 40 + blob[50:])
    for name in ("cut.json.gz", "bad.json.gz"):
        with pytest.raises(DataError, match=rf"cannot decompress .*{name}.*corrupt or truncated"):
            load_dataset("drugood-ec50", root=tmp_path / "root", path=str(tmp_path / name))
    # the bundled split files are not touched by a user's path
    assert (BUNDLED / "lbap_core_ec50_assay.json.gz").is_file()


def test_missing_path_or_file_in_folder(tmp_path):
    with pytest.raises(DataError, match=r"no such file or folder: .*nowhere\.json"):
        load_dataset("drugood-ec50", root=tmp_path, path=str(tmp_path / "nowhere.json"))
    with pytest.raises(DataError, match=r"lbap_core_ec50_scaffold\.json\.gz"):
        load_dataset("drugood-ec50", root=tmp_path, split="scaffold", path=str(tmp_path))
    only_bad = toy_json({**TOY, "train": [("C1CC", 1, 10)]})
    with pytest.raises(DataError, match=r"'train' has no molecule RDKit can parse"):
        load_dataset("drugood-ec50", root=tmp_path / "r",
                     path=str(write(tmp_path / "bad_train.json", only_bad)))


def test_cli_reports_bad_file_without_traceback(tmp_path):
    from click.testing import CliRunner

    from grprune.cli import main

    path = write(tmp_path / "label.json", bad_entry("train", 4, cls_label=-1))
    res = CliRunner().invoke(main, ["data", "info", "ec50", "-H", f"data.path={path}",
                                    "--root", str(tmp_path / "root")])
    assert res.exit_code == 2, res.output
    assert "label.json, split part 'train', entry 4" in res.output
    assert "Traceback" not in res.output
