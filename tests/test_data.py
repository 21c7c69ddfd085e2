"""Tests of grprune.data: ogbg-molbbbp loading, featurization, splits, cache, errors."""

from __future__ import annotations

import builtins
import gzip
import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from ogb.utils import smiles2graph

from grprune.compat import dgl
from grprune.data import (
    DATASETS,
    GraphDataset,
    default_root,
    load_dataset,
    load_molecule_csv,
    load_split_files,
    scaffold_split,
    size_split,
    smiles_to_graph,
)
from grprune.data.ogbg import CACHE_DIRNAME, FILES
from grprune.errors import DataError, GrpruneError

SHARED = Path("/work/shared/data/moleculenet")
SKIPPED_ROWS = [59, 61, 391, 614, 642, 645, 646, 647, 648, 649, 685]
BUNDLED = FILES / "ogbg_molbbbp"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data_root")


@pytest.fixture(scope="module")
def bbbp(root) -> GraphDataset:
    return load_dataset("ogbg-molbbbp", root=root)


def cache_dir(root: Path) -> Path:
    return root / "ogbg_molbbbp" / CACHE_DIRNAME


def copy_cache(src_root: Path, dst_root: Path) -> Path:
    shutil.copytree(cache_dir(src_root), cache_dir(dst_root))
    return cache_dir(dst_root)


def same_graphs(a: Sequence, b: Sequence) -> bool:
    for ga, gb in zip(a, b, strict=True):
        if ga.num_nodes() != gb.num_nodes():
            return False
        if not all(torch.equal(x, y) for x, y in zip(ga.edges(), gb.edges())):
            return False
        if not torch.equal(ga.ndata["feat"], gb.ndata["feat"]):
            return False
        if not torch.equal(ga.edata["feat"], gb.edata["feat"]):
            return False
    return True


# -- ogbg-molbbbp contents ----------------------------------------------------
def test_molbbbp_contents(bbbp):
    assert len(bbbp) == 2039 and bbbp.name == "ogbg-molbbbp"
    assert bbbp.info["n_source_rows"] == 2050
    assert bbbp.info["n_skipped"] == 11 and bbbp.info["skipped_rows"] == SKIPPED_ROWS
    assert int(bbbp.labels.sum()) == 1560 and int((bbbp.labels == 0).sum()) == 479
    assert bbbp.labels.dtype == torch.long and bbbp.labels.shape == (2039,)
    assert bbbp.envs.dtype == torch.long and bbbp.info["n_domains"] == 1102  # scaffolds
    assert int(bbbp.envs.min()) == 0 and int(bbbp.envs.max()) == 1101
    expected_rows = np.setdiff1d(np.arange(2050), SKIPPED_ROWS)
    assert np.array_equal(bbbp.source_rows, expected_rows)
    assert (bbbp.num_classes, bbbp.metric, bbbp.atom_encoder) == (2, "rocauc", "ogb")
    assert len(bbbp.smiles) == 2039
    json.dumps(bbbp.info)  # JSON-serialisable
    g, label, env, i = bbbp[7]
    assert isinstance(g, dgl.DGLGraph) and (label, env, i) == (int(bbbp.labels[7]), int(bbbp.envs[7]), 7)
    assert isinstance(label, int) and isinstance(env, int)


def test_smiles_and_labels_match_ogb_mapping(bbbp):
    mapping = SHARED / "ogb/ogbg_molbbbp/mapping/mol.csv.gz"
    if not mapping.is_file():
        pytest.skip("OGB mapping file not available")
    df = pd.read_csv(mapping)
    assert bbbp.smiles == df["smiles"].tolist()
    assert np.array_equal(bbbp.labels.numpy(), df["p_np"].to_numpy())


def test_bundled_files_are_the_documented_bytes():
    expected = {
        "bbbp.csv.gz": "8a385979a7f94de28a5fe0ed5f4c3cbae4ab75d967446fe318b6f2a8d6eb6010",
        "split/scaffold/train.csv.gz": "e1ae77b817d05b63af3ec5aa7ab1e170ebebc0849cb7712fe11b29a48999cc75",
        "split/scaffold/valid.csv.gz": "0b20d30453c99a703a672e0c023bea9e198315db3c92c094cfc610b9853b8ca6",
        "split/scaffold/test.csv.gz": "2561d4164f8e33163d6484bcce005578b7a3de3b00b4630c072bf56219a21451",
    }
    for rel, sha in expected.items():
        assert hashlib.sha256((BUNDLED / rel).read_bytes()).hexdigest() == sha, rel
        assert sha in (FILES / "README.md").read_text()


def test_features_match_smiles2graph(bbbp):
    for i in (0, 1, 500, 2038):
        g, ref = bbbp.graphs[i], smiles2graph(bbbp.smiles[i])
        assert g.ndata["feat"].dtype == torch.int64 and g.edata["feat"].dtype == torch.int64
        assert g.ndata["feat"].shape == (ref["num_nodes"], 9)
        assert g.edata["feat"].shape == (ref["edge_index"].shape[1], 3)
        assert np.array_equal(torch.stack(g.edges()).numpy(), ref["edge_index"])
        assert np.array_equal(g.ndata["feat"].numpy(), ref["node_feat"])
        assert np.array_equal(g.edata["feat"].numpy(), ref["edge_feat"])
        src, dst = (t.tolist() for t in g.edges())
        assert set(zip(src, dst)) == set(zip(dst, src)) and g.num_edges() > 0


# -- splits ------------------------------------------------------------------
def assert_partition(splits: dict, n: int) -> None:
    assert set(splits) == {"train", "valid", "test"}
    allidx = np.concatenate(list(splits.values()))
    assert len(allidx) == n and np.array_equal(np.sort(allidx), np.arange(n))
    for v in splits.values():
        assert v.dtype == np.int64 and np.all(np.diff(v) > 0)


def test_official_scaffold_split(bbbp):
    assert bbbp.info["split"] == "scaffold" and bbbp.info["split_source"] == "ogb-official"
    assert {k: len(v) for k, v in bbbp.splits.items()} == {"train": 1631, "valid": 204, "test": 204}
    assert bbbp.info["split_sizes"] == {"train": 1631, "valid": 204, "test": 204}
    assert_partition(bbbp.splits, 2039)
    train = bbbp.subset("train")
    assert len(train) == 1631 and train[0][3] == bbbp.splits["train"][0]
    with pytest.raises(GrpruneError, match="train, valid, test"):
        bbbp.subset("ood-test")


def test_scaffold_split_reproduces_official_files(bbbp):
    computed = scaffold_split(bbbp.smiles)
    for k in ("train", "valid", "test"):
        assert np.array_equal(computed[k], bbbp.splits[k]), k


def test_size_split(root, bbbp):
    a = load_dataset("bbbp", split="size", root=root, split_seed=0)
    b = load_dataset("molbbbp", split="size", root=root, split_seed=0)
    c = load_dataset("ogbg-molbbbp", split="size", root=root, split_seed=1)
    assert a.info["split_source"] == "computed" and a.info["split_seed"] == 0
    assert {k: len(v) for k, v in a.splits.items()} == {"train": 1631, "valid": 204, "test": 204}
    assert_partition(a.splits, 2039)
    sizes = np.array([g.num_nodes() for g in a.graphs])
    rest = np.concatenate([a.splits["valid"], a.splits["test"]])
    assert sizes[a.splits["train"]].min() >= sizes[rest].max()
    assert all(np.array_equal(a.splits[k], b.splits[k]) for k in a.splits)
    assert np.array_equal(a.splits["train"], c.splits["train"])
    assert not np.array_equal(a.splits["valid"], c.splits["valid"])
    # ties: by index ascending; train does not depend on the seed
    s = size_split([3, 5, 5, 1, 3, 2, 5, 4, 2, 2], seed=0)
    assert_partition(s, 10)
    assert s["train"].tolist() == [0, 1, 2, 4, 5, 6, 7, 8]  # the size-2 tie is cut by index
    assert len(s["valid"]) == 1 and len(s["test"]) == 1


def test_load_split_files_errors(tmp_path):
    def write(name, values, gz=True):
        text = "".join(f"{v}\n" for v in values)
        path = tmp_path / (f"{name}.csv.gz" if gz else f"{name}.csv")
        path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
        return path

    write("train", [0, 1, 2]), write("valid", [3]), write("test", [4], gz=False)
    out = load_split_files(tmp_path, 5)
    assert out["test"].tolist() == [4]
    with pytest.raises(DataError, match="covers 5 of 6"):
        load_split_files(tmp_path, 6)
    write("valid", [2])
    with pytest.raises(DataError, match="train.csv.gz.*valid.csv.gz"):
        load_split_files(tmp_path, 5)
    write("valid", [9])
    with pytest.raises(DataError, match=r"valid\.csv\.gz: index 9 is out of range"):
        load_split_files(tmp_path, 5)
    write("valid", ["x3"])
    with pytest.raises(DataError, match="valid.csv.gz, line 1"):
        load_split_files(tmp_path, 5)
    (tmp_path / "valid.csv.gz").unlink()
    with pytest.raises(DataError, match="valid.csv.gz"):
        load_split_files(tmp_path, 5)


# -- cache -----------------------------------------------------------------
def test_cached_load_is_a_hit_and_equal(root, bbbp):
    again = load_dataset("ogbg-molbbbp", root=root)
    assert again.info["cache"] == "hit"
    assert same_graphs(again.graphs, bbbp.graphs)
    assert torch.equal(again.labels, bbbp.labels) and again.smiles == bbbp.smiles
    assert np.array_equal(again.source_rows, bbbp.source_rows)
    assert again.info["skipped_rows"] == SKIPPED_ROWS


def test_corrupt_cache_is_rebuilt(root, bbbp, tmp_path):
    cdir = copy_cache(root, tmp_path)
    data = (cdir / "graphs.bin").read_bytes()
    (cdir / "graphs.bin").write_bytes(data[: len(data) // 2])  # truncated
    ds = load_dataset("bbbp", root=tmp_path)
    assert ds.info["cache"].startswith("rebuilt") and "corrupt" in ds.info["cache"]
    assert same_graphs(ds.graphs, bbbp.graphs)
    assert load_dataset("bbbp", root=tmp_path).info["cache"] == "hit"
    (cdir / "meta.json").write_text("{not json")
    assert load_dataset("bbbp", root=tmp_path).info["cache"].startswith("rebuilt")
    assert not list(cdir.glob("*.tmp*"))


def test_stale_cache_is_rebuilt(root, bbbp, tmp_path):
    cdir = copy_cache(root, tmp_path)
    meta = json.loads((cdir / "meta.json").read_text())
    meta["source_sha256"] = "0" * 64
    (cdir / "meta.json").write_text(json.dumps(meta))
    ds = load_dataset("bbbp", root=tmp_path)
    assert ds.info["cache"] == "rebuilt (source_sha256 changed)"
    assert torch.equal(ds.labels, bbbp.labels)
    assert json.loads((cdir / "meta.json").read_text())["source_sha256"] == bbbp.info["source_sha256"]


# -- molecules and CSV errors ------------------------------------------------
def test_molecules_without_bonds_are_kept(tmp_path, capfd):
    g = smiles_to_graph("C")
    assert g.num_nodes() == 1 and g.num_edges() == 0 and g.edata["feat"].shape == (0, 3)
    g = smiles_to_graph("[Na+].[Cl-]")
    assert g.num_nodes() == 2 and g.num_edges() == 0 and g.ndata["feat"].shape == (2, 9)
    csv = tmp_path / "mols.csv"
    csv.write_text("smiles,y\nC,1\nC1CC,0\nN(C)(C)(C)C,0\n,1\n[Na+].[Cl-],0\nCCO,1\n")
    mg = load_molecule_csv(csv, "smiles", "y")
    assert mg.source_rows.tolist() == [0, 4, 5] and mg.skipped_rows == [1, 2, 3]
    assert mg.labels.tolist() == [1, 0, 1] and mg.smiles == ["C", "[Na+].[Cl-]", "CCO"]
    assert mg.n_source_rows == 6
    assert "valence" not in capfd.readouterr().err  # RDKit's log is silenced


def test_csv_errors(tmp_path):
    missing = tmp_path / "nope.csv.gz"
    with pytest.raises(DataError, match=f"not found: {missing}"):
        load_molecule_csv(missing, "smiles", "p_np")
    truncated = tmp_path / "bbbp.csv.gz"
    truncated.write_bytes((BUNDLED / "bbbp.csv.gz").read_bytes()[:5000])
    with pytest.raises(DataError, match=str(truncated)):
        load_molecule_csv(truncated, "smiles", "p_np")
    garbage = tmp_path / "garbage.csv.gz"
    garbage.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match=str(garbage)):
        load_molecule_csv(garbage, "smiles", "p_np")
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("smile,p_np\nC,1\n")
    with pytest.raises(DataError, match=rf"{nocol} has no column 'smiles'"):
        load_molecule_csv(nocol, "smiles", "p_np")
    badlabel = tmp_path / "badlabel.csv"
    badlabel.write_text("smiles,p_np\nC,1\nCC,yes\nCCC,\n")
    with pytest.raises(DataError, match=r"row 1 \(line 3\): label 'yes'"):
        load_molecule_csv(badlabel, "smiles", "p_np")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match=str(empty)):
        load_molecule_csv(empty, "smiles", "p_np")


# -- registry and names -------------------------------------------------------
def test_registry_and_names(monkeypatch, tmp_path):
    assert "ogbg-molbbbp" in DATASETS.names()
    src = DATASETS.get("BBBP")
    assert src.splits == ("scaffold", "size") and src.defaults["split"] == "scaffold"
    assert src.recommended["encoder.layers"] == 4 and src.recommended["encoder.virtual_node"]
    assert src.metric == "rocauc" and src.description
    with pytest.raises(GrpruneError, match="ogbg-molbbbp"):
        load_dataset("ogbg-molfoo", root=tmp_path)
    with pytest.raises(GrpruneError, match="Choices: scaffold, size"):
        load_dataset("bbbp", split="random", root=tmp_path)
    monkeypatch.setenv("GRPRUNE_DATA_ROOT", str(tmp_path / "r"))
    assert default_root() == tmp_path / "r"
    monkeypatch.delenv("GRPRUNE_DATA_ROOT")
    assert default_root() == Path.home() / ".cache" / "grprune" / "data"


# -- OGB library paths ---------------------------------------------------------
def forbid_input_and_ogb(monkeypatch):
    import ogb.graphproppred

    def no_input(*args):
        raise AssertionError("input() must not be called")

    def no_ogb(*args, **kwargs):
        raise AssertionError("OGB must not be called")

    monkeypatch.setattr(builtins, "input", no_input)
    monkeypatch.setattr(ogb.graphproppred, "DglGraphPropPredDataset", no_ogb)


def test_download_refuses_incomplete_ogb_folder(monkeypatch, tmp_path):
    forbid_input_and_ogb(monkeypatch)
    (tmp_path / "ogbg_molbbbp" / "raw").mkdir(parents=True)
    with pytest.raises(DataError, match="RELEASE_v1.txt.*Remove or rename") as err:
        load_dataset("bbbp", root=tmp_path, download=True)
    assert str(tmp_path / "ogbg_molbbbp") in str(err.value)


def test_failed_download_raises_data_error(monkeypatch, tmp_path, root):
    import ogb.graphproppred

    copy_cache(root, tmp_path)  # grprune's own cache does not block a download

    def offline(name, root):
        raise ConnectionError("network unreachable")

    monkeypatch.setattr(ogb.graphproppred, "DglGraphPropPredDataset", offline)
    with pytest.raises(DataError, match="download.*failed.*bundled copy"):
        load_dataset("bbbp", root=tmp_path, download=True)


def test_ogb_processed_folder_is_used(bbbp, tmp_path):
    n = 40
    folder = tmp_path / "ogbg_molbbbp"
    (folder / "processed").mkdir(parents=True)
    (folder / "RELEASE_v1.txt").write_text("ogbg-molbbbp\n")
    dgl.save_graphs(
        str(folder / "processed" / "dgl_data_processed"),
        list(bbbp.graphs[:n]),
        {"labels": bbbp.labels[:n].reshape(-1, 1)},
    )
    split = folder / "split" / "scaffold"
    split.mkdir(parents=True)
    for name, idx in (("train", range(0, 32)), ("valid", range(32, 36)), ("test", range(36, 40))):
        (split / f"{name}.csv.gz").write_bytes(gzip.compress("".join(f"{i}\n" for i in idx).encode()))
    (folder / "mapping").mkdir()
    pd.DataFrame({"p_np": bbbp.labels[:n].numpy(), "smiles": bbbp.smiles[:n]}).to_csv(
        folder / "mapping" / "mol.csv.gz", index=False
    )
    ds = load_dataset("bbbp", root=tmp_path)
    assert ds.info["split_source"] == "ogb-library" and len(ds) == n
    assert same_graphs(ds.graphs, bbbp.graphs[:n]) and ds.smiles == bbbp.smiles[:n]
    assert torch.equal(ds.labels, bbbp.labels[:n]) and ds.splits["valid"].tolist() == list(range(32, 36))
    sized = load_dataset("bbbp", root=tmp_path, split="size")
    assert sized.info["split_source"] == "computed" and len(sized.splits["train"]) == 32
    assert not cache_dir(tmp_path).exists()
