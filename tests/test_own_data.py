"""Your own data: ``molecule-csv`` (a CSV of SMILES and labels) and ``dgl-graphs`` (a
``dgl.save_graphs`` file, or graphs in Python through ``from_graphs``)."""

from __future__ import annotations

from typing import Any
import hashlib
import json

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from grprune.cli import main
from grprune.compat import dgl
from grprune.resolve import resolve_config
from grprune.data import DATASETS, from_graphs, load_dataset, save_dataset
from grprune.data.dgl_graphs import example_graphs
from grprune.data.molecule_featurizers import dgllife_graph, run_featurizer
from grprune.record.runconfig import FeatureSpec, RunConfig
from grprune.data.molecules import smiles_to_graph
from grprune.data.ogbg import FILES
from grprune.errors import DataError

BAD_ROWS = {3: "RDKit cannot parse", 7: "missing label", 11: "label '2' is not 0 or 1"}


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_error(res) -> str:
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.startswith("grprune: error")]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    return lines[0]


@pytest.fixture(scope="module")
def bace_csv(tmp_path_factory):
    """Every 15th molecule of the bundled BACE CSV (101 rows, both classes), columns
    renamed, rows 3, 7 and 11 broken (bad SMILES, missing label, label 2)."""
    df = pd.read_csv(FILES / "moleculenet" / "bace.csv.gz")
    d = df[["mol", "Class"]].rename(columns={"mol": "SMI", "Class": "active"})
    d = d.iloc[::15].reset_index(drop=True).astype({"active": str})
    d.loc[3, "SMI"], d.loc[7, "active"], d.loc[11, "active"] = "C1CC(", "", "2"
    path = tmp_path_factory.mktemp("own") / "bace.csv"
    d.to_csv(path, index=False)
    return path


def _csv_args(path, *more):
    return ["--data", "molecule-csv", "-H", f"data.path={path}", "-H", "data.smiles_column=SMI",
            "-H", "data.label_column=active", *more]


@pytest.fixture(scope="module")
def csv_run(bace_csv, tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("csv-run") / "run"
    # its scaffold split's valid part is all actives: ROC-AUC could select nothing there
    res = _cli("run", *_csv_args(bace_csv, "-H", "data.metric=accuracy"), "--epochs", "1",
               "--progress", "none", "--device", "cpu", "--out", out)
    assert res.exit_code == 0, res.output
    # the run says that rows were skipped, and why, not only summary.json
    assert ("3 of 101 source rows were skipped (unparsable SMILES 1; missing label 1; label "
            "not 0/1 1)") in res.output
    return out


def test_csv_run_reports_bad_rows(csv_run, bace_csv):
    summary = json.loads((csv_run / "summary.json").read_text())
    info = summary["dataset_info"]
    assert info["n_source_rows"] == 101 and info["n_skipped"] == 3
    assert info["skipped_rows"] == sorted(BAD_ROWS)
    for bad in info["bad_rows"]:
        assert BAD_ROWS[bad["row"]] in bad["reason"]
    assert summary["model"]["feature_kind"] == "ogb"
    cfg = json.loads((csv_run / "config.json").read_text())
    assert cfg["data"]["path"] == str(bace_csv.resolve())


def test_data_info_lists_bad_rows(bace_csv, data_root):
    res = _cli("data", "info", "molecule-csv", "-H", f"data.path={bace_csv}", "-H",
               "data.smiles_column=SMI", "-H", "data.label_column=active", "--json")
    assert res.exit_code == 0, res.output
    facts = json.loads(res.output)
    assert facts["n_skipped"] == 3 and facts["n_graphs"] == 98
    assert [b["row"] for b in facts["info"]["bad_rows"]] == sorted(BAD_ROWS)
    assert facts["n_envs"] > 2  # scaffold domains
    text = _cli("data", "info", "molecule-csv", "-H", f"data.path={bace_csv}", "-H",
                "data.smiles_column=SMI", "-H", "data.label_column=active", "--split", "size")
    assert text.exit_code == 0, text.output
    assert "skipped: 3" in text.output and "RDKit cannot parse)" not in text.output
    for row, reason in BAD_ROWS.items():
        assert f"row {row}: " in text.output and reason in text.output


def test_predict_and_explain_on_csv_run(csv_run, tmp_path):
    res = _cli("predict", csv_run, "--smiles", "CCO", "--smiles", "C1CC(", "--device", "cpu",
               "--out", tmp_path / "p.csv")
    assert res.exit_code == 0, res.output
    preds = pd.read_csv(tmp_path / "p.csv")
    assert preds["status"].tolist() == ["ok", "unparsable SMILES"]
    assert 0 <= preds["prob_1"][0] <= 1
    res = _cli("explain", csv_run, "--out", tmp_path / "ex")  # the first 8 test graphs
    assert res.exit_code == 0, res.output
    edges = pd.read_csv(tmp_path / "ex" / "edges.csv")
    assert len(edges) and "smiles" in edges.columns


def test_csv_errors_exit_2_with_one_line(bace_csv, tmp_path):
    line = _one_error(_cli("run", *_csv_args(tmp_path / "nope.csv"), "--out", tmp_path / "a"))
    assert "not found" in line and "nope.csv" in line
    # every missing column in one message, with the columns present
    line = _one_error(_cli("run", "--data", "molecule-csv", "-H", f"data.path={bace_csv}",
                           "-H", "data.smiles_column=smile", "-H", "data.id_column=cmpd",
                           "--out", tmp_path / "b"))
    assert ("no columns 'smile' (data.smiles_column) Did you mean 'SMI'?; 'label' "
            "(data.label_column); 'cmpd' (data.id_column). Its columns: SMI, active") in line
    line = _one_error(_cli("data", "info", "molecule-csv", "-H", f"data.path={bace_csv}",
                           "-H", "data.smiles_column=SMI"))
    assert "no column 'label' (data.label_column)" in line and "columns: SMI, active" in line
    line = _one_error(_cli("data", "info", "molecule-csv"))
    assert "-H data.path=FILE" in line


def test_csv_cache_follows_file_content(bace_csv, tmp_path):
    kw = dict(path=str(bace_csv), smiles_column="SMI", label_column="active",
              root=tmp_path, split="random")
    first = load_dataset("molecule-csv", **kw)
    again = load_dataset("molecule-csv", **kw)
    assert first.info["cache"] == "built" and again.info["cache"] == "hit"
    assert again.smiles == first.smiles and torch.equal(again.labels, first.labels)
    edited = tmp_path / "edited.csv"
    edited.write_text(bace_csv.read_text() + "CCO,1\n")
    kw["path"] = str(edited)
    grown = load_dataset("molecule-csv", **kw)
    assert grown.info["cache"] == "built" and len(grown) == len(first) + 1
    assert sorted(np.concatenate(list(first.splits.values())).tolist()) == list(range(98))


def test_dgllife_featurizer(bace_csv, tmp_path, data_root):
    g, ref = dgllife_graph("CC(=O)O"), smiles_to_graph("CC(=O)O")
    assert g.ndata["feat"].shape == (4, 74) and g.edata["feat"].shape == (6, 12)
    assert all(torch.equal(a, b) for a, b in zip(g.edges(), ref.edges()))  # RDKit bond order
    assert dgllife_graph("C").edata["feat"].shape == (0, 12)
    with pytest.raises(DataError):
        dgllife_graph("C1CC(")
    out = tmp_path / "run"
    res = _cli("run", *_csv_args(bace_csv, "-H", "data.featurizer=dgllife-canonical"),
               "--split", "size", "--reg", "irm", "--epochs", "1", "--progress", "none",
               "--device", "cpu", "--out", out)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["feature_kind"] == "linear" and summary["model"]["node_dim"] == 74
    res = _cli("predict", out, "--smiles", "CCO", "--smiles", "C", "--device", "cpu")
    assert res.exit_code == 0, res.output
    cfg = json.loads((out / "config.json").read_text())
    features = FeatureSpec.from_dict(summary["model"])
    assert run_featurizer(RunConfig.from_dict(cfg), features) is dgllife_graph
    motif = RunConfig.from_dict({"data": {"name": "good-motif"}})
    assert run_featurizer(motif, FeatureSpec("linear", 1, 0, 3)) is None


def test_dgl_graphs_file_reports_motif_metrics(tmp_path, data_root):
    graphs, labels, envs = example_graphs()
    path = tmp_path / "graphs.bin"
    dgl.save_graphs(str(path), graphs, {"label": labels, "env": envs})
    out = tmp_path / "run"
    res = _cli("run", "--data", "dgl-graphs", "--preset", "paper", "-H", f"data.path={path}",
               "--epochs", "1",
               "--progress", "none", "--device", "cpu", "--out", out)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert isinstance(summary["motif_edge_rocauc"], float)
    assert summary["model"]["feature_kind"] == "linear" and summary["model"]["node_dim"] == 3
    res = _cli("data", "info", "dgl-graphs", "-H", f"data.path={path}", "--split", "env",
               "--json")
    facts = json.loads(res.output)
    assert facts["has_edge_gt"] and facts["splits"] == {"train": 20, "valid": 10, "test": 10}
    line = _one_error(_cli("data", "info", "dgl-graphs", "-H", f"data.path={path}",
                           "--split", "file"))
    assert "needs a 'split' tensor" in line and "label, env" in line
    line = _one_error(_cli("predict", out, "--smiles", "CCO"))
    assert "molecule models" in line


def test_from_graphs_python_entry_point(tmp_path, data_root):
    from grprune.trainer import Trainer

    one_way = dgl.graph(([0, 1], [1, 2]), num_nodes=3)  # no reverse edges, no features
    one_way.edata["edge_gt"] = torch.tensor([1, 0])
    ds = from_graphs([one_way] * 10, [0, 1] * 5, env=[0, 1] * 5)
    g = ds.graphs[0]
    assert ds.atom_encoder == "linear" and g.num_edges() == 4 and g.ndata["feat"].shape == (3, 1)
    assert g.edata["edge_gt"].tolist() == [1, 0, 1, 0]
    ogb = from_graphs([(smiles_to_graph("CCO"), 1), (smiles_to_graph("CC"), 0)] * 5)
    assert ogb.atom_encoder == "ogb" and ogb.metric == "rocauc"  # (graph, label) pairs
    graphs, labels, envs = example_graphs(24)
    ds = from_graphs(graphs, labels, envs, split="env", metric="accuracy")  # valid: one class
    path = save_dataset(ds, tmp_path / "saved.bin")
    back = load_dataset("dgl-graphs", path=str(path), split="file")
    assert {k: v.tolist() for k, v in back.splits.items()} == \
        {k: v.tolist() for k, v in ds.splits.items()}
    cfg = resolve_config(data="dgl-graphs", preset="paper",
                         flags={"train.epochs": 1, "train.device": "cpu"},
                         overrides=[f"data.path={path}", "data.split=file"])
    summary = Trainer(cfg, ds, tmp_path / "py-run").fit()
    assert summary.motif_edge_rocauc is not None
    with pytest.raises(DataError, match="shape"):
        from_graphs(graphs, labels[:3])


@pytest.mark.parametrize("name", ["molecule-csv", "dgl-graphs"])
def test_example_params_load(name, tmp_path):
    """What the registry-wide contract test can load these datasets with."""
    source = DATASETS.get(name)
    ds = load_dataset(name, root=tmp_path, **source.example_params(tmp_path))
    assert ds.metric == source.metric and ds.num_classes == source.num_classes
    assert all(len(ds.splits[p]) for p in source.parts)


def test_an_edited_file_is_a_new_run_not_a_finished_one(bace_csv, tmp_path):
    """The file's sha256 is part of the configuration (data.source_sha256), so the run's
    hash follows the file's content and a re-run after an edit is not skipped."""
    csv = tmp_path / "mine.csv"
    csv.write_text(bace_csv.read_text())
    args: dict[str, Any] = dict(data="molecule-csv", overrides=[f"data.path={csv}", "data.smiles_column=SMI",
                                                "data.label_column=active"])
    before = resolve_config(**args)
    assert before["data"]["source_sha256"] == hashlib.sha256(csv.read_bytes()).hexdigest()
    assert resolve_config(**args)["hash"] == before["hash"]  # same file: same run
    csv.write_text(bace_csv.read_text() + "CCO,1\n")
    after = resolve_config(**args)
    assert after["hash"] != before["hash"]
    # a previous run's config.json replays with the file's current digest
    stored = tmp_path / "config.json"
    stored.write_text(json.dumps(before.to_dict()))
    assert resolve_config(file=stored)["hash"] == after["hash"]


def test_predict_from_a_csv_keeps_the_inputs_own_columns(csv_run, tmp_path):
    """Each output row joins back to its compound: the CSV's ID column and the rest ride
    beside the scores, bad rows included."""
    mine = tmp_path / "mine.csv"
    pd.DataFrame({"cmpd_id": ["A-1", "A-2", "A-3"], "SMILES": ["CCO", "C1CC(", "c1ccccc1O"],
                  "smiles": ["x", "y", "z"], "batch": [7, 7, 8]}).to_csv(mine, index=False)
    res = _cli("predict", csv_run, "--csv", mine, "--smiles-column", "SMILES", "--device",
               "cpu", "--out", tmp_path / "p.csv")
    assert res.exit_code == 0, res.output
    preds = pd.read_csv(tmp_path / "p.csv")
    assert preds["cmpd_id"].tolist() == ["A-1", "A-2", "A-3"]
    assert preds["row"].tolist() == [0, 1, 2] and preds["batch"].tolist() == [7, 7, 8]
    assert preds["status"].tolist() == ["ok", "unparsable SMILES", "ok"]
    assert preds["input_smiles"].tolist() == ["x", "y", "z"]  # a clash keeps both, prefixed
    assert preds["smiles"].tolist() == ["CCO", "C1CC(", "c1ccccc1O"]
    res = _cli("predict", csv_run, "--csv", mine, "--smiles-column", "SMILES",
               "--keep-columns", "CMPD_ID", "--device", "cpu", "--out", tmp_path / "q.csv")
    assert res.exit_code == 0, res.output
    assert list(pd.read_csv(tmp_path / "q.csv").columns[:3]) == ["row", "cmpd_id", "smiles"]
    line = _one_error(_cli("predict", csv_run, "--csv", mine, "--smiles-column", "SMILES",
                           "--keep-columns", "id,name", "--device", "cpu"))
    assert "no columns 'id'; 'name'" in line


@pytest.fixture(scope="module")
def id_run(bace_csv, tmp_path_factory, data_root):
    """The broken BACE CSV with a compound-ID column in front, trained with
    ``data.id_column``; returns (run directory, the input as a DataFrame)."""
    df = pd.read_csv(bace_csv, dtype=str, keep_default_na=False)
    df.insert(0, "Compound ID", [f"B {i:03d}/x" for i in range(len(df))])
    path = tmp_path_factory.mktemp("ids") / "with-ids.csv"
    df.to_csv(path, index=False)
    out = tmp_path_factory.mktemp("id-run") / "run"
    res = _cli("run", *_csv_args(path, "-H", "data.id_column=compound id", "-H",
                                 "data.metric=accuracy"), "--epochs", "1",
               "--progress", "none", "--device", "cpu", "--out", out)
    assert res.exit_code == 0, res.output
    return out, path, df


def test_a_csv_with_ids_joins_back_through_run_explain_and_predict(id_run, tmp_path, data_root):
    """Every row explain and predict write joins to its input row by ID, and the
    source row numbering is the CSV's (bad rows 3, 7 and 11 skipped, not renumbered)."""
    run_dir, path, inputs = id_run
    by_id = inputs.set_index("Compound ID")
    ds = load_dataset("molecule-csv", path=str(path), smiles_column="SMI",
                      label_column="active", id_column="Compound ID", root=data_root)
    a, b, c = (int(ds.source_rows[i]) for i in ds.splits["train"][-3:])
    assert c > 11  # past the skipped rows: graph index and source row differ
    ids = [inputs["Compound ID"][r] for r in (a, b, c)]
    res = _cli("explain", run_dir, "--part", "train", "--graphs", f"id:{ids[0]},{ids[1]},row:{c}",
               "--out", tmp_path / "ex")
    assert res.exit_code == 0, res.output
    edges = pd.read_csv(tmp_path / "ex" / "edges.csv", keep_default_na=False)
    assert list(edges.columns[:3]) == ["graph_index", "source_row", "id"]
    assert list(dict.fromkeys(edges["id"])) == ids
    for rec in edges.itertuples(index=False):  # ID, source row and SMILES all agree
        assert inputs["Compound ID"][rec.source_row] == rec.id
        assert by_id.loc[rec.id, "SMI"] == rec.smiles
    names = sorted(p.name for p in (tmp_path / "ex").glob("graph-*.png"))
    assert len(names) == 3 and all("_id-B_" in n and n.endswith("_x.png") for n in names)
    assert f"graph-{ds.splits['train'][-1]}_row-{c}_id-B_{c:03d}_x.png" in names, names
    # the default pictures of the test part carry IDs too
    res = _cli("explain", run_dir, "--out", tmp_path / "ex2")
    assert res.exit_code == 0, res.output
    edges = pd.read_csv(tmp_path / "ex2" / "edges.csv", keep_default_na=False)
    assert all(inputs["Compound ID"][r] == i for r, i in zip(edges["source_row"], edges["id"]))
    # a skipped row, an unknown ID and a graph of another part: one line each
    line = _one_error(_cli("explain", run_dir, "--graphs", "row:3", "--out", tmp_path / "e3"))
    assert "source row 3 is not in molecule-csv (it was skipped: RDKit cannot parse" in line
    assert "not valid SMILES syntax" in line and "Error" not in line
    line = _one_error(_cli("explain", run_dir, "--graphs", "id:B 5", "--out", tmp_path / "e4"))
    assert "no graph of molecule-csv has ID 'B 5'" in line
    line = _one_error(_cli("explain", run_dir, "--graphs", ids[2], "--out", tmp_path / "e5"))
    assert f"(row {c}, ID {ids[2]}) is not in part 'test'" in line and "--part train" in line
    # predict: the CSV's ID column (the run's data.id_column) names rows and pictures
    res = _cli("predict", run_dir, "--csv", path, "--smiles-column", "smi", "--device", "cpu",
               "--out", tmp_path / "p.csv", "--draw", tmp_path / "pics")
    assert res.exit_code == 0, res.output
    preds = pd.read_csv(tmp_path / "p.csv", keep_default_na=False)
    assert preds["Compound ID"].tolist() == inputs["Compound ID"].tolist()
    assert preds["row"].tolist() == list(range(len(inputs)))
    assert "SMI" not in preds.columns  # the input's SMILES is the output's smiles
    assert preds["smiles"].tolist() == inputs["SMI"].str.strip().tolist()
    pics = {p.name for p in (tmp_path / "pics").glob("*.png")}
    assert "mol-0_id-B_000_x.png" in pics and "mol-3_id-B_003_x.png" not in pics  # row 3: bad


def test_dgl_graphs_ids_reach_explain(tmp_path, data_root):
    graphs, labels, envs = example_graphs(40)
    path = tmp_path / "g.bin"
    dgl.save_graphs(str(path), graphs, {"label": labels, "env": envs,
                                        "id": torch.arange(1000, 1040)})
    ds = load_dataset("dgl-graphs", path=str(path), root=tmp_path, split="random")
    assert ds.ids == [str(i) for i in range(1000, 1040)]
    again = load_dataset("dgl-graphs", path=str(save_dataset(ds, tmp_path / "again.bin")),
                         root=tmp_path, split="file")
    assert again.ids == ds.ids
    from grprune.explain import parse_graph_ids, resolve_graph_ids
    assert resolve_graph_ids(ds, parse_graph_ids("id:1007,3,row:5")) == [7, 3, 5]


def test_data_takes_a_file_and_picks_the_source_that_reads_it(bace_csv, tmp_path):
    """``--data FILE`` is ``--data <source> -H data.path=FILE`` for the source whose file
    endings match (the same configuration, hence the same run); anything else is refused
    with the datasets and the endings."""
    more = ["data.smiles_column=SMI", "data.label_column=active"]
    short = resolve_config(data=str(bace_csv), overrides=more)
    long = resolve_config(data="molecule-csv", overrides=[f"data.path={bace_csv}", *more])
    assert short == long and short.data.name == "molecule-csv"
    graphs = tmp_path / "mine.bin"
    graphs.write_bytes(b"")
    assert resolve_config(data=str(graphs)).data.name == "dgl-graphs"
    # a -H data.path given as well wins, as a later value does
    assert resolve_config(data=str(graphs), overrides=[f"data.path={tmp_path / 'b.bin'}"]
                          ).data.params["path"] == str(tmp_path / "b.bin")
    line = _one_error(_cli("run", "--data", tmp_path / "mols.txt", "--out", tmp_path / "a"))
    assert "unknown dataset" in line and ".csv, .csv.gz (molecule-csv)" in line
    # a missing file is refused before anything is planned: no run directory, no trial
    for command in ("run", "sweep", "tune"):
        out = tmp_path / command
        res = _cli(command, "--data", tmp_path / "nope.csv", "--out", out)
        _one_error(res)  # (sweep: its line heads the grid point's reason)
        assert "--data" in res.output and "nope.csv: no such file" in res.output
        assert "molecule-csv" in res.output
        assert not out.exists() or not any(out.rglob("config.json")), command
