"""Screening a library (issue 50): streamed ``grprune predict --csv``, and scores that depend
on the compound alone under the sampled evaluation mask (``selector.eval_mode=sample``)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from grprune.cli import main
from grprune.inference import load_run
from grprune.predict.memory import TOO_LARGE, predict_smiles, smiles_key
from grprune.selectors.base import keyed_uniform


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory, data_root):
    """A molecule run whose evaluation samples its mask (the official preset)."""
    out = tmp_path_factory.mktemp("official") / "run"
    res = _cli("run", "--data", "ogbg-molbbbp", "--preset", "official", "--epochs", "2",
               "-H", "data.limit=48", "-H", "train.warmup_epochs=0",
               "-H", "train.select_warmup=false", "--progress", "none", "--device", "cpu",
               "--out", out)
    assert res.exit_code == 0, res.output
    run = load_run(out)
    assert run.cfg.setting("selector.eval_mode") == "sample" and run.use_selector
    return out


@pytest.fixture(scope="module")
def library():
    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES
    smiles, _ = read_molecule_csv(FILES / "ogbg_molbbbp/bbbp.csv.gz", "smiles", "p_np")
    return list(smiles[100:160])


def test_keyed_uniform_is_a_function_of_its_keys():
    g = torch.tensor([5, 5, 9, 9, 5])
    e = torch.tensor([0, 1, 0, 1, 0])
    u = keyed_uniform(3, g, e)
    assert ((u > 0) & (u < 1)).all() and u.dtype == torch.float32
    assert u[0] == u[4] and u[0] != u[1] and u[0] != u[2]
    assert not torch.equal(u, keyed_uniform(4, g, e))          # another seed
    assert not torch.equal(u, keyed_uniform(3, g, e, draw=1))  # another draw
    big = keyed_uniform(0, torch.zeros(20000, dtype=torch.long), torch.arange(20000))
    assert abs(float(big.mean()) - 0.5) < 0.02  # uniform enough


def _by_smiles(df):
    ok = df[df["status"] == "ok"]
    return {s: (p, k) for s, p, k in zip(ok["smiles"], ok["prob_1"], ok["bonds_kept"])}


def test_predict_scores_depend_on_the_compound_alone(sampled_run, library):
    run = load_run(sampled_run)
    base = _by_smiles(predict_smiles(run, library, batch_size=256).molecules)
    rng = np.random.default_rng(0)
    shuffled = [library[i] for i in rng.permutation(len(library))]
    for smiles, bs in ((shuffled, 256), (library, 5), (["CCO", "c1ccccc1"] + library, 64)):
        other = _by_smiles(predict_smiles(run, smiles, batch_size=bs).molecules)
        for s, (p, k) in base.items():  # bit-identical score and kept bonds
            assert other[s][0] == p and other[s][1] == k, s
    assert smiles_key("CCO") != smiles_key("CCN")


def test_streamed_predict_is_order_and_batch_free(sampled_run, library, tmp_path):
    rng = np.random.default_rng(1)
    ids = [f"CMPD-{i}" for i in range(len(library))]
    a_csv, b_csv = tmp_path / "a.csv", tmp_path / "b.csv"
    pd.DataFrame({"ID": ids, "smiles": library}).to_csv(a_csv, index=False)
    perm = rng.permutation(len(library))
    pd.DataFrame({"ID": [ids[i] for i in perm], "smiles": [library[i] for i in perm]}
                 ).to_csv(b_csv, index=False)
    res = _cli("predict", sampled_run, "--csv", a_csv, "--out", tmp_path / "a.csv.out.csv",
               "--id-column", "ID", "--batch-size", "1000", "--progress", "plain",
               "--chunk-rows", "17")
    assert res.exit_code == 0, res.output
    # plain progress lines from the first chunk on, then the summary line
    assert "predict: 17/60 molecules (28 %)" in res.output and "/s, ETA " in res.output
    assert "60 of 60 molecules scored; " in res.output and " molecules/s)" in res.output
    res = _cli("predict", sampled_run, "--csv", b_csv, "--out", tmp_path / "b.out.csv",
               "--id-column", "ID", "--batch-size", "3", "--progress", "none")
    assert res.exit_code == 0, res.output
    a = pd.read_csv(tmp_path / "a.csv.out.csv", keep_default_na=False).set_index("ID")
    b = pd.read_csv(tmp_path / "b.out.csv", keep_default_na=False).set_index("ID")
    assert len(a) == len(b) == len(library)
    b = b.loc[a.index]
    assert (a["prob_1"] == b["prob_1"]).all() and (a["bonds_kept"] == b["bonds_kept"]).all()
    # the same scores as the in-memory path (to the 6 significant digits written)
    mem = predict_smiles(load_run(sampled_run), library).molecules
    np.testing.assert_allclose(a["prob_1"].to_numpy(float),
                               mem["prob_1"].to_numpy(float), rtol=1e-5)


def test_eval_metrics_do_not_depend_on_the_eval_batch_size(sampled_run, tmp_path):
    from grprune.record.runconfig import RunConfig
    from grprune.trainer import Trainer
    run = load_run(sampled_run)
    dataset = run.load_dataset()
    metrics = []
    for size in (64, 4096):
        cfg = run.cfg.to_dict()
        cfg["train"]["eval_batch_size"] = size
        trainer = Trainer(RunConfig.from_dict(cfg), dataset, tmp_path / str(size))
        trainer.model.load_state_dict(run.model.state_dict())
        metrics.append({split: trainer.evaluate(split)[0].metric for split in ("valid", "test")})
    assert metrics[0] == metrics[1]


def test_streamed_csv_statuses_ids_and_bonds(sampled_run, tmp_path):
    csv = tmp_path / "lib.csv"
    smiles = ["CCO", "", "C1CC(", "C" * 20000, "c1ccccc1O", "CCN"]
    pd.DataFrame({"name": ["a", "b", "c", "d", "a", "f"], "SMILES": smiles}).to_csv(
        csv, index=False)
    out = tmp_path / "p.csv"
    res = _cli("predict", sampled_run, "--csv", csv, "--id-column", "name", "--out", out,
               "--bonds", "--progress", "none")
    assert res.exit_code == 0, res.output
    assert "1 row repeats an earlier row's ID (row 4 has ID 'a' of row 0)" in res.output
    assert "3 of 6 molecules scored; skipped: 1 empty SMILES, 1 too large, " \
           "1 unparsable SMILES" in res.output
    df = pd.read_csv(out, keep_default_na=False)
    assert df["row"].tolist() == list(range(6)) and df["name"].tolist()[:2] == ["a", "b"]
    assert df["status"].tolist() == ["ok", "empty SMILES", "unparsable SMILES", TOO_LARGE,
                                     "ok", "ok"]
    bonds = pd.read_csv(tmp_path / "p.bonds.csv", keep_default_na=False)
    assert set(bonds["row"]) == {0, 4, 5} and bonds.columns[:2].tolist() == ["row", "id"]
    assert bonds[bonds["row"] == 4]["id"].eq("a").all() and (bonds["row"] == 4).sum() == 7
    assert not (tmp_path / "p.csv.partial").exists()


def test_too_large_molecule_is_reported_not_canonicalized(sampled_run):
    res = _cli("predict", sampled_run, "--smiles", "C" * 20000)
    assert res.exit_code == 1, res.output  # the help: 1 when no molecule was scored
    assert TOO_LARGE in res.output


def test_killed_predict_resumes_or_starts_clean(sampled_run, library, tmp_path, monkeypatch):
    import grprune.predict.stream as screen
    csv = tmp_path / "lib.csv"
    pd.DataFrame({"smiles": library}).to_csv(csv, index=False)
    out = tmp_path / "p.csv"
    monkeypatch.setenv("GRPRUNE_PREDICT_CHUNK_ROWS", "20")
    calls = {"n": 0}
    real = screen.Progress.advance

    def dies(self, n):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        real(self, n)

    monkeypatch.setattr(screen.Progress, "advance", dies)
    res = _cli("predict", sampled_run, "--csv", csv, "--out", out, "--progress", "none")
    assert res.exit_code != 0
    assert not out.exists() and (tmp_path / "p.csv.partial").exists()
    monkeypatch.setattr(screen.Progress, "advance", real)
    res = _cli("predict", sampled_run, "--csv", csv, "--out", out, "--progress", "none")
    assert res.exit_code == 0, res.output
    assert "resuming" in res.output and "after row 40" in res.output
    resumed = out.read_bytes()
    out.unlink()
    res = _cli("predict", sampled_run, "--csv", csv, "--out", out, "--progress", "none")
    assert res.exit_code == 0 and "resuming" not in res.output
    assert out.read_bytes() == resumed
    # an interrupted run of another input starts clean, and says so
    monkeypatch.setattr(screen.Progress, "advance", dies)
    calls["n"] = 0
    _cli("predict", sampled_run, "--csv", csv, "--out", out, "--progress", "none")
    monkeypatch.setattr(screen.Progress, "advance", real)
    pd.DataFrame({"smiles": library[:30]}).to_csv(csv, index=False)
    res = _cli("predict", sampled_run, "--csv", csv, "--out", out, "--progress", "none")
    assert res.exit_code == 0 and "starting" in res.output and "clean" in res.output
    assert len(pd.read_csv(out)) == 30


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is not None,
                    reason="pyarrow is installed")
def test_parquet_without_pyarrow_is_one_message(sampled_run, tmp_path):
    csv = tmp_path / "lib.csv"
    csv.write_text("smiles\nCCO\n")
    res = _cli("predict", sampled_run, "--csv", csv, "--out", tmp_path / "p.parquet")
    # one line naming the package, and no claim of an interrupted run's files
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert "Parquet output needs the pyarrow package (pip install pyarrow)" in res.output
    assert "interrupted" not in res.output and "Traceback" not in res.output
