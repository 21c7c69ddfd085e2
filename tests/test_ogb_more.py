"""ogbg-molbace, ogbg-molhiv, domains as environments, and `grprune data info/export`."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from grprune.cli import main
from grprune.data import load_dataset
from grprune.data.molecules import smiles_to_graph
from grprune.data.ogbg import FILES
from grprune.data.splits import murcko_scaffolds, scaffold_split
from grprune.errors import DataError, GrpruneError

HIV_LENIENT_ROWS = [137, 987, 12882, 18293, 30784, 30785, 35728]


@pytest.fixture(scope="module")
def bace():
    return load_dataset("ogbg-molbace")


@pytest.fixture(scope="module")
def molhiv():
    return load_dataset("ogbg-molhiv", split="scaffold")


def test_molbace_contents_and_scaffold_split(bace):
    df = pd.read_csv(FILES / "moleculenet" / "bace.csv.gz")
    assert len(bace) == len(df) == 1513
    assert bace.smiles == df["mol"].tolist()
    assert bace.labels.tolist() == df["Class"].tolist()
    assert {k: len(v) for k, v in bace.splits.items()} == {"train": 1210, "valid": 151,
                                                           "test": 152}
    assert bace.info["n_skipped"] == 0 and bace.metric == "rocauc"
    # the split is the OGB rule applied to the SMILES, and envs are its scaffold domains
    again = scaffold_split(bace.smiles)
    assert all(np.array_equal(again[k], bace.splits[k]) for k in again)
    scaffolds = np.asarray(murcko_scaffolds(bace.smiles))
    for a, b in [(0, 1), (2, 3)]:
        assert (bace.envs[a] == bace.envs[b]) == (scaffolds[a] == scaffolds[b])
    assert bace.info["n_domains"] == len(set(scaffolds.tolist()))
    # no scaffold domain is split across parts
    train_envs = set(bace.envs[bace.splits["train"]].tolist())
    assert not train_envs & set(bace.envs[bace.splits["test"]].tolist())


def test_molhiv_keeps_all_41127_molecules(molhiv):
    assert len(molhiv) == 41127
    assert molhiv.info["n_skipped"] == 0
    assert molhiv.info["lenient_rows"] == HIV_LENIENT_ROWS
    # the sizes of OGB's ogbg-molhiv scaffold split
    assert {k: len(v) for k, v in molhiv.splits.items()} == {"train": 32901, "valid": 4113,
                                                             "test": 4113}
    assert int(molhiv.labels.sum()) == 1443
    g = molhiv.graphs[137]  # O=C1O[Al]23(...): hypervalent Al, parsed leniently
    assert g.num_nodes() == 19 and g.num_edges() == 42
    with pytest.raises(DataError, match="RDKit cannot parse"):
        smiles_to_graph(molhiv.smiles[137])
    assert smiles_to_graph(molhiv.smiles[137], lenient=True).num_nodes() == 19


def test_size_split_envs_are_size_domains(bace):
    ds = load_dataset("molbace", split="size")
    sizes = np.asarray([g.num_nodes() for g in ds.graphs])
    order = np.argsort(sizes)
    assert np.all(np.diff(ds.envs.numpy()[order]) >= 0)
    assert ds.info["n_domains"] == len(np.unique(sizes))
    assert sizes[ds.splits["train"]].min() >= sizes[ds.splits["test"]].max()


def test_shift_is_rejected_where_it_does_not_apply():
    with pytest.raises(GrpruneError, match="has no shift variants"):
        load_dataset("ogbg-molbbbp", shift="concept")
    with pytest.raises(GrpruneError, match="unknown hyperparameter data.bias"):
        load_dataset("ogbg-molbbbp", bias=0.5)


# -- grprune data info / export -------------------------------------------------
def test_data_info_json_and_table():
    res = CliRunner().invoke(main, ["data", "info", "ogbg-molbace", "--json"])
    assert res.exit_code == 0, res.output
    facts = json.loads(res.output)
    assert facts["splits"] == {"train": 1210, "valid": 151, "test": 152}
    part = facts["parts"]["train"]
    assert part["graphs"] == 1210 and sum(part["label_counts"].values()) == 1210
    assert 30 < part["mean_nodes"] < 40 and part["mean_edges"] > part["mean_nodes"]
    assert facts["n_envs"] > 100 and facts["n_skipped"] == 0
    res = CliRunner().invoke(main, ["data", "info", "bbbp", "--split", "size"])
    assert res.exit_code == 0, res.output
    for text in ("train", "1631", "mean nodes", "skipped (RDKit cannot parse): 11", "cache"):
        assert text in res.output, text


def test_data_export_writes_ogb_format(tmp_path):
    out = tmp_path / "split"
    res = CliRunner().invoke(main, ["data", "export", "ogbg-molbbbp", "--out", str(out)])
    assert res.exit_code == 0, res.output
    # the official split exported as rows of the source CSV (11 unparsable rows skipped)
    ds = load_dataset("ogbg-molbbbp")
    for part in ("train", "valid", "test"):
        data = gzip.decompress((out / f"{part}.csv.gz").read_bytes()).decode().split()
        rows = np.asarray(data, dtype=np.int64)
        assert np.array_equal(rows, np.sort(ds.source_rows[ds.splits[part]]))
    first = (out / "train.csv.gz").read_bytes()
    res = CliRunner().invoke(main, ["data", "export", "ogbg-molbbbp", "--out", str(out)])
    assert res.exit_code == 0 and "unchanged" in res.output
    assert (out / "train.csv.gz").read_bytes() == first  # byte-identical (no gzip mtime)
    # a different split is not written over an existing one without --force
    res = CliRunner().invoke(main, ["data", "export", "bbbp", "--split", "size",
                                    "--out", str(out)])
    assert res.exit_code == 2 and "--force" in res.output and "Traceback" not in res.output
    assert (out / "train.csv.gz").read_bytes() == first
    res = CliRunner().invoke(main, ["data", "export", "bbbp", "--split", "size",
                                    "--out", str(out), "--force"])
    assert res.exit_code == 0 and (out / "train.csv.gz").read_bytes() != first


@pytest.mark.parametrize("args, message", [
    (["info", "mystery"], "unknown dataset 'mystery'"),
    (["info", "bbbp", "--split", "random"], "Choices: scaffold, size"),
    (["info", "bbbp", "--shift", "concept"], "has no shift variants"),
    (["info", "bbbp", "-H", "data.nope=1"], "unknown hyperparameter data.nope"),
    (["export", "bbbp"], "Missing option '--out'"),
])
def test_data_bad_input_exits_2(args, message):
    res = CliRunner().invoke(main, ["data", *args])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


def test_run_rejects_shift_for_molecules(tmp_path):
    res = CliRunner().invoke(main, ["run", "--shift", "concept", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "has no shift variants" in res.output


@pytest.mark.parametrize("path, sha256", [
    ("moleculenet/hiv.csv.gz", "81c0dc45814deb6ee9d8cc83078e06b95736fb2eb78d747b0d055fee1c6ec4c5"),
    ("moleculenet/bace.csv.gz", "d47ddbc32083646d50d71e8a5b393b8b0341cf7fc0243266cb09fd20a806e882"),
    ("drugood/lbap_core_ec50_assay.json.gz",
     "76a6751aa5ddf29d13772138a4400cd1ec19cb789ad7a9c6d6c6ae0254304ca0"),
    ("drugood/lbap_core_ec50_scaffold.json.gz",
     "1d194cd1275e59f807200948d7c9712a22912654b04a1e6c18daafb1e462996f"),
    ("drugood/lbap_core_ec50_size.json.gz",
     "d0dfe9c88d08087bf77061f03bdd8b0c3ffeab584e4c04e52fc8c54bd290cdde"),
])
def test_bundled_files_are_the_documented_bytes(path, sha256):
    from grprune.record.files import file_sha256
    assert file_sha256(FILES / path) == sha256


def test_packed_graphs_behave_like_a_list(bace):
    from grprune.data.packed import PackedGraphs, graph_sizes

    graphs = bace.graphs
    assert isinstance(graphs, PackedGraphs)  # read from the packed cache
    view = graphs.take([5, 2, 5])
    assert len(view) == 3 and view[0] is graphs[5] and view[2] is view[0]
    nodes, edges = graph_sizes(view)
    assert nodes.tolist() == [graphs[i].num_nodes() for i in (5, 2, 5)]
    assert edges.tolist() == [graphs[i].num_edges() for i in (5, 2, 5)]
    fresh = smiles_to_graph(bace.smiles[2])
    assert all(torch_equal(a, b) for a, b in zip(fresh.edges(), graphs[2].edges()))
    assert torch_equal(fresh.ndata["feat"], graphs[2].ndata["feat"])
    assert torch_equal(fresh.edata["feat"], graphs[2].edata["feat"])
    assert len(list(graphs[:4])) == 4


def test_old_cache_layout_is_rebuilt(tmp_path, bace):
    from grprune.data.ogbg import CACHE_DIRNAME

    load_dataset("ogbg-molbace", root=tmp_path)
    meta_path = tmp_path / "ogbg_molbace" / CACHE_DIRNAME / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta.pop("layout")
    meta_path.write_text(json.dumps(meta))
    ds = load_dataset("ogbg-molbace", root=tmp_path)
    assert ds.info["cache"] == "rebuilt (cache layout changed)"
    assert load_dataset("ogbg-molbace", root=tmp_path).info["cache"] == "hit"


def torch_equal(a, b) -> bool:
    import torch
    return bool(torch.equal(a, b))
