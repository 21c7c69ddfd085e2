"""Compound IDs everywhere (issue 50, item 3): duplicate IDs reported by ``data info``,
``run`` and ``explain``; the ID of a skipped row gives its skip reason; ``edge_probs.npz``
carries each graph's source row and ID, and is checked as a whole when read."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from grprune.cli import main
from grprune.evaluation import edge_arrays_problem
from grprune.inference import load_run
from grprune.record.files import EDGE_PROBS
from grprune.record.rundir import RunDir


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def id_csv(tmp_path_factory):
    """160 BBBP molecules with IDs: rows 10 and 50 share ID 'DUP', row 7's SMILES is bad."""
    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES
    smiles, labels = read_molecule_csv(FILES / "ogbg_molbbbp/bbbp.csv.gz", "smiles", "p_np")
    df = pd.DataFrame({"cid": [f"M-{i}" for i in range(160)], "smiles": list(smiles[:160]),
                       "y": [int(v) for v in labels[:160]]})
    df.loc[[10, 50], "cid"] = "DUP"
    df.loc[7, "smiles"] = "C1CC("
    path = tmp_path_factory.mktemp("ids") / "lib.csv"
    df.to_csv(path, index=False)
    return path


def _data_args(path):
    return ["--data", "molecule-csv", "-H", f"data.path={path}", "-H", "data.smiles_column=smiles",
            "-H", "data.label_column=y", "-H", "data.id_column=cid", "-H", "data.metric=accuracy"]


@pytest.fixture(scope="module")
def id_run(id_csv, tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("id-run") / "run"
    res = _cli("run", *_data_args(id_csv), "--epochs", "1", "-H", "train.warmup_epochs=0",
               "--progress", "none",
               "--device", "cpu", "--out", out)
    assert res.exit_code == 0, res.output
    assert "1 graph of molecule-csv repeat" in res.output and "'DUP' at rows 10, 50" in res.output
    return out


def test_data_info_reports_duplicate_ids(id_csv, data_root):
    res = _cli("data", "info", *_data_args(id_csv)[1:2], *_data_args(id_csv)[2:])
    assert res.exit_code == 0, res.output
    assert "duplicate IDs: 1 graph of molecule-csv repeat" in res.output
    assert "'DUP' at rows 10, 50" in res.output


def test_edge_probs_carry_row_and_id(id_run):
    npz = np.load(id_run / EDGE_PROBS)
    run = load_run(id_run)
    ds = run.load_dataset()
    gi = npz["graph_index"]
    assert (npz["row"] == ds.source_rows[gi]).all()
    assert npz["id"].tolist() == [ds.ids[i] for i in gi]
    assert edge_arrays_problem(dict(npz)) is None


def test_inconsistent_edge_probs_are_recomputed(id_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(id_run, run_dir)
    sound = {k: v for k, v in np.load(run_dir / EDGE_PROBS).items()}
    test_graph = int(sound["graph_index"][0])
    res = _cli("explain", run_dir, "--graphs", test_graph, "--out", tmp_path / "a")
    assert res.exit_code == 0 and "edge_probs.npz" in res.output, res.output
    expected = pd.read_csv(tmp_path / "a" / "edges.csv")
    for damage in ("ptr", "length", "index", "node"):
        bad = dict(sound)
        if damage == "ptr":
            bad["edge_ptr"] = bad["edge_ptr"][::-1].copy()
        elif damage == "length":
            bad["edge_prob"] = bad["edge_prob"][:-3]
        elif damage == "index":
            bad["graph_index"] = bad["graph_index"] + 10**6
        else:
            bad["src"] = bad["src"] + 1000
        assert damage == "index" or edge_arrays_problem(bad) is not None
        RunDir(run_dir).write_edge_arrays(bad)
        # --no-fidelity: fidelity scores every graph of the part, this counts the one asked
        res = _cli("explain", run_dir, "--graphs", test_graph, "--no-fidelity",
                   "--out", tmp_path / damage)
        assert res.exit_code == 0, (damage, res.output)
        assert "scoring 1 graphs" in res.output, (damage, res.output)
        got = pd.read_csv(tmp_path / damage / "edges.csv")
        np.testing.assert_allclose(got["edge_prob"], expected["edge_prob"], atol=1e-6)


def test_explain_lists_every_graph_of_a_duplicate_id(id_run, tmp_path):
    run = load_run(id_run)
    ds = run.load_dataset()
    dup = [i for i, x in enumerate(ds.ids) if x == "DUP"]
    assert len(dup) == 2
    part = {i: p for p, idx in ds.splits.items() for i in np.asarray(idx).tolist() if i in dup}
    res = _cli("explain", id_run, "--graphs", "id:DUP", "--part", part[dup[0]],
               "--out", tmp_path / "ex")
    assert res.exit_code == 0, res.output
    assert "ID 'DUP' names 2 graphs (duplicate IDs)" in res.output
    assert f"graph {dup[0]}" in res.output and f"graph {dup[1]}" in res.output


def test_the_id_of_a_skipped_row_gives_its_reason(id_run, tmp_path):
    res = _cli("explain", id_run, "--graphs", "id:M-7", "--out", tmp_path / "ex")
    assert res.exit_code == 2, res.output
    assert "ID 'M-7' is not in molecule-csv: source row 7 was skipped" in res.output
    assert "Did you mean" not in res.output and "Traceback" not in res.output
