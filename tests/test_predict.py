"""``grprune predict``: a molecule run on new SMILES, as the trainer evaluates it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_molbbbp_run
import torch
from click.testing import CliRunner

from grprune.record.files import CHECKPOINT, EDGE_PROBS, SUMMARY
from grprune.cli import main
from grprune.draw import parse_molecule
from grprune.inference import load_run
from grprune.predict.memory import bonds_path, predict_smiles, read_smiles_csv
from grprune.errors import GrpruneError

PNG = b"\x89PNG\r\n\x1a\n"


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def bbbp_run(tmp_path_factory, data_root):
    return tiny_molbbbp_run(tmp_path_factory.mktemp("bbbp") / "run", limit=48)


@pytest.fixture(scope="module")
def test_graphs(bbbp_run):
    """The run's test graphs: dataset, indices, and the trainer's own evaluation of them."""
    from grprune.trainer import Trainer
    run = load_run(bbbp_run)
    dataset = run.load_dataset()
    trainer = Trainer(run.cfg, dataset, bbbp_run)
    trainer.model.load_state_dict(torch.load(bbbp_run / CHECKPOINT, weights_only=True))
    ev, _ = trainer.evaluate("test", use_selector=True)
    return dataset, trainer.splits["test"], ev.prob


def test_predict_csv(bbbp_run, test_graphs, tmp_path):
    dataset, idx, prob = test_graphs
    picks = [0, 5, 11]
    known = [dataset.smiles[idx[j]] for j in picks]
    csv = tmp_path / "in.csv"
    pd.DataFrame({"name": ["a", "b", "c", "bad", "empty", "methane"],
                  "SMILES": known + ["C1CC(", "", "C"]}).to_csv(csv, index=False)
    out = tmp_path / "p.csv"
    res = _cli("predict", bbbp_run, "--csv", csv, "--out", out, "--draw", tmp_path / "pics",
               "--device", "cpu", "--bonds")
    assert res.exit_code == 0, res.output
    assert "2 of 6 molecules not scored" in res.output
    mols = pd.read_csv(out, keep_default_na=False)
    assert mols["status"].tolist() == ["ok"] * 3 + ["unparsable SMILES", "empty SMILES", "ok"]
    assert mols["row"].tolist() == list(range(6))
    ok = mols[mols["status"] == "ok"]
    p1 = ok["prob_1"].astype(float)
    assert ((p1 >= 0) & (p1 <= 1)).all()
    # the trainer's evaluation of the same test graphs
    np.testing.assert_allclose(p1.iloc[:3], prob[picks, 1], rtol=1e-4, atol=1e-6)
    assert (ok["pred_label"].astype(int).iloc[:3] == prob[picks].argmax(1)).all()

    bonds = pd.read_csv(bonds_path(out))
    npz = np.load(bbbp_run / EDGE_PROBS)
    for row, s in enumerate(known + ["C1CC(", "", "C"]):
        sub = bonds[bonds["row"] == row]
        mol = parse_molecule(s)
        assert len(sub) == (mol.GetNumBonds() if mol is not None else 0)
        if mol is None:
            continue
        assert sub["bond"].tolist() == list(range(mol.GetNumBonds()))
        for b, r in zip(mol.GetBonds(), sub.itertuples()):
            assert (r.begin_atom, r.end_atom) == (b.GetBeginAtomIdx(), b.GetEndAtomIdx())
            assert r.begin_symbol == b.GetBeginAtom().GetSymbol()
            assert r.bond_type == str(b.GetBondType())
        assert int(mols.loc[row, "bonds_kept"]) == int(sub["kept"].sum())
        if row < 3:  # the run's edge_probs.npz for that test graph
            j = npz["graph_index"].tolist().index(idx[picks[row]])
            p = npz["edge_prob"][npz["edge_ptr"][j]:npz["edge_ptr"][j + 1]]
            np.testing.assert_allclose(sub["edge_prob"], p[0::2], atol=1e-5)
    # the single atom: scored, no bonds
    assert int(mols.loc[5, "num_bonds"]) == 0 and (bonds["row"] == 5).sum() == 0
    pics = sorted(p.name for p in (tmp_path / "pics").iterdir())
    assert pics == ["mol-0.png", "mol-1.png", "mol-2.png", "mol-5.png"]
    assert all((tmp_path / "pics" / p).read_bytes().startswith(PNG) for p in pics)


def test_predict_smiles_options_and_exit_codes(bbbp_run):
    res = _cli("predict", bbbp_run, "--smiles", "CCO", "--smiles", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C")
    assert res.exit_code == 0, res.output
    assert "2/2 molecules scored" in res.output
    res = _cli("predict", bbbp_run, "--smiles", "not a smiles")
    assert res.exit_code == 1 and "no molecule could be scored" in res.output
    for args, msg in [([], "either --smiles"),
                      (["--smiles", "C", "--csv", "x.csv"], "either --smiles"),
                      (["--csv", "missing.csv"], "--csv not found")]:
        res = _cli("predict", bbbp_run, *args)
        assert res.exit_code == 2 and msg in res.output, res.output


def test_predict_api_matches_batching(bbbp_run):
    run = load_run(bbbp_run)
    smiles = ["CCO", "c1ccccc1", "C", "", "CC(=O)Oc1ccccc1C(=O)O"] * 3
    a = predict_smiles(run, smiles, batch_size=256)
    b = predict_smiles(run, smiles, batch_size=2)
    np.testing.assert_allclose(a.molecules["prob_1"].astype(float),
                               b.molecules["prob_1"].astype(float), atol=1e-6)
    assert a.n_ok == 12 and len(a.bonds) == 3 * (2 + 6 + 13)


def test_missing_column_and_case_insensitive(bbbp_run, tmp_path):
    csv = tmp_path / "in.csv"
    csv.write_text("id,Smiles\n1,CCO\n")
    assert read_smiles_csv(csv) == ["CCO"]
    with pytest.raises(GrpruneError, match="columns: id, Smiles"):
        read_smiles_csv(csv, "mol")
    res = _cli("predict", bbbp_run, "--csv", csv, "--smiles-column", "mol")
    assert res.exit_code == 2 and "has no column 'mol'" in res.output


def test_unfinished_and_synthetic_runs(bbbp_run, tmp_path):
    unfinished = tmp_path / "unfinished"
    shutil.copytree(bbbp_run, unfinished)
    (unfinished / SUMMARY).unlink()
    res = _cli("predict", unfinished, "--smiles", "CCO")
    assert res.exit_code == 2 and "unfinished run" in res.output

    motif = tmp_path / "motif"
    res = _cli("run", "--data", "good-motif", "--epochs", "1", "-H", "data.limit=16",
               "--progress", "none", "--device", "cpu", "--out", motif)
    assert res.exit_code == 0, res.output
    assert json.loads((motif / SUMMARY).read_text())["model"]["feature_kind"] == "linear"
    res = _cli("predict", motif, "--smiles", "CCO")
    assert res.exit_code == 2
    assert "predict works on molecule models; this run was trained on good-motif" in res.output


def test_draw_falls_back_to_plain_graphs(bbbp_run, tmp_path, monkeypatch):
    import grprune.draw
    monkeypatch.setattr(grprune.draw, "rdkit_drawing_error", lambda: "OSError: no libXrender")
    res = _cli("predict", bbbp_run, "--smiles", "CCO", "--draw", tmp_path, "--format", "svg")
    assert res.exit_code == 0 and "RDKit cannot draw molecules here" in res.output
    assert (tmp_path / "mol-0.svg").read_bytes().lstrip().startswith(b"<?xml")


def test_an_in_memory_prediction_is_written_whole_or_not_at_all(bbbp_run, tmp_path, monkeypatch):
    from grprune.predict.outputs import write_prediction
    pred = predict_smiles(load_run(bbbp_run), ["CCO", "c1ccccc1O"])
    out = tmp_path / "preds.csv"
    assert write_prediction(pred, out, bonds=True) == [out, bonds_path(out)]
    assert len(pd.read_csv(out)) == 2 and len(pd.read_csv(bonds_path(out))) > 0
    assert not list(tmp_path.glob("*.partial"))

    def broken(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    again = tmp_path / "again.csv"
    with pytest.raises(OSError, match="disk full"):
        write_prediction(pred, again, bonds=False)
    assert not again.exists() and not list(tmp_path.glob("*.partial"))
