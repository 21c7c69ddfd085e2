"""Screening a team can trust: predict parses as strictly as training (the same rows
skipped, for the same reasons), printed tables show SMILES and IDs as they are, every
streamed run says whether it resumes, progress and resume points come after a small first
chunk whatever the chunk size, and the Python API takes tables and single selectors."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pandas as pd
import pytest
from click.testing import CliRunner

from grprune.cli import main
from grprune.inference import load_run
from grprune.predict.memory import predict_smiles

#: rows of the library that training skips, and why (the SMILES themselves below)
BROKEN = {3: "CC(C)(C)(C)(C)C", 5: "N#N#N", 8: "C1CC(", 12: ""}
BRACKETS = {20: "c1cc[nH]c1", 21: "C[n+]1ccccc1"}


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_error(res, text: str) -> None:
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("grprune: error: "), res.output
    assert text in lines[0] and "Traceback" not in res.output, res.output


@pytest.fixture(scope="module")
def lib_csv(tmp_path_factory):
    """80 BBBP molecules with IDs CMPD-0000.. in column ``cid`` and SMILES in ``SMILES``:
    two valence errors, a syntax error and an empty row (:data:`BROKEN`), and two molecules
    with bracket atoms (:data:`BRACKETS`)."""
    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES
    smiles, labels = read_molecule_csv(FILES / "ogbg_molbbbp/bbbp.csv.gz", "smiles", "p_np")
    df = pd.DataFrame({"cid": [f"CMPD-{i:04d}" for i in range(80)], "SMILES": list(smiles[:80]),
                       "y": [int(v) for v in labels[:80]]})
    for row, s in {**BROKEN, **BRACKETS}.items():
        df.loc[row, "SMILES"] = s
    path = tmp_path_factory.mktemp("trust") / "lib.csv"
    df.to_csv(path, index=False)
    return path


def _data_args(path):
    return ["-H", f"data.path={path}", "-H", "data.smiles_column=SMILES", "-H",
            "data.label_column=y", "-H", "data.id_column=cid", "-H", "data.metric=accuracy"]


@pytest.fixture(scope="module")
def strict_run(lib_csv, tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("trust-run") / "run"
    res = _cli("run", "--data", "molecule-csv", *_data_args(lib_csv), "--epochs", "1",
               "-H", "train.warmup_epochs=0", "--progress", "none", "--device", "cpu",
               "--out", out)
    assert res.exit_code == 0, res.output
    return out


def test_predict_skips_the_rows_training_skips_for_the_same_reasons(strict_run, lib_csv,
                                                                     tmp_path):
    info = _cli("data", "info", "molecule-csv", *_data_args(lib_csv), "--json")
    assert info.exit_code == 0, info.output
    trained = {b["row"]: b["reason"] for b in json.loads(info.output)["info"]["bad_rows"]}
    assert set(BROKEN) <= set(trained)  # and two BBBP molecules RDKit rejects
    assert "Explicit valence" in trained[3] and "Explicit valence" in trained[5]
    out = tmp_path / "p.csv"
    res = _cli("predict", strict_run, "--csv", lib_csv, "--smiles-column", "SMILES",
               "--out", out, "--progress", "none")
    assert res.exit_code == 0, res.output
    df = pd.read_csv(out, keep_default_na=False)
    skipped = df[df["status"] != "ok"]
    assert dict(zip(skipped["row"], skipped["reason"])) == trained  # streamed
    assert df.loc[[3, 5], "status"].tolist() == ["unparsable SMILES"] * 2
    assert "Explicit valence for atom" in res.output  # the printed table gives the reason
    mem = predict_smiles(load_run(strict_run), df["smiles"].tolist()).molecules  # in memory
    bad = mem[mem["status"] != "ok"]
    assert dict(zip(bad["row"], bad["reason"])) == trained
    assert (mem["status"] == df["status"]).all() and (df["reason"] == mem["reason"]).all()


def test_tables_show_bracket_atoms_and_ids(strict_run, lib_csv, tmp_path):
    res = _cli("predict", strict_run, "--csv", lib_csv, "--smiles-column", "SMILES",
               "--progress", "none")  # the run's data.id_column is in the file
    assert res.exit_code == 0, res.output
    header = next(x for x in res.output.splitlines() if "canonical SMILES" in x)
    assert header.split("┃")[2].strip() == "id"
    for row, s in BRACKETS.items():
        line = next(x for x in res.output.splitlines() if f" CMPD-{row:04d} " in x)
        assert f" {s} " in line, line
    # in memory (--smiles, --draw): the same, and IDs of a CSV with brackets of their own
    res = _cli("predict", strict_run, *(a for s in BRACKETS.values() for a in ("--smiles", s)))
    assert res.exit_code == 0 and all(f" {s} " in res.output for s in BRACKETS.values())
    csv = tmp_path / "ids.csv"
    pd.DataFrame({"cid": ["[b]X[/b]"], "smiles": ["c1cc[nH]c1"]}).to_csv(csv, index=False)
    res = _cli("predict", strict_run, "--csv", csv, "--draw", tmp_path / "pics")
    assert res.exit_code == 0 and " [b]X[/b] " in res.output and " c1cc[nH]c1 " in res.output
    assert "wrote 1 picture to" in res.output


@pytest.mark.parametrize("draw", [False, True])
def test_output_has_one_smiles_column(strict_run, lib_csv, tmp_path, draw):
    out = tmp_path / "p.csv"
    res = _cli("predict", strict_run, "--csv", lib_csv, "--smiles-column", "SMILES",
               "--out", out, *(("--draw", tmp_path / "pics") if draw else ()))
    assert res.exit_code == 0, res.output
    cols = pd.read_csv(out, nrows=0).columns.tolist()
    assert [c for c in cols if c.casefold() == "smiles"] == ["smiles"]
    assert cols[:3] == ["row", "cid", "y"] and "reason" in cols and "parse" not in cols


def test_state_line_and_first_progress_after_a_small_chunk(strict_run, lib_csv, tmp_path,
                                                           monkeypatch):
    import grprune.predict.stream as screen
    monkeypatch.setattr(screen, "FIRST_CHUNK_ROWS", 7)  # the default chunk size stays 20,000
    out = tmp_path / "p.csv"
    res = _cli("predict", strict_run, "--csv", lib_csv, "--smiles-column", "SMILES",
               "--out", out, "--progress", "plain")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert f"grprune: starting {out} clean, because there is no interrupted run's " \
           f"p.csv.partial.json" in lines
    progress = [x for x in lines if x.startswith("predict: ")]
    assert progress[0].startswith("predict: 7/80 molecules (9 %)"), progress
    res = _cli("predict", strict_run, "--csv", lib_csv, "--smiles-column", "SMILES",
               "--progress", "none")
    assert ("grprune: starting clean, because no output file is named (--out): nothing to "
            "resume") in res.output.splitlines()


@pytest.mark.parametrize("value, text", [("0", "--chunk-rows must be at least 1, got 0"),
                                         ("-3", "--chunk-rows must be at least 1, got -3"),
                                         ("many", "--chunk-rows must be a whole number")])
def test_chunk_rows_is_checked(strict_run, lib_csv, value, text):
    _one_error(_cli("predict", strict_run, "--csv", lib_csv, "--chunk-rows", value), text)


def test_chunk_rows_applies_to_csv_only(strict_run):
    _one_error(_cli("predict", strict_run, "--smiles", "CCO", "--chunk-rows", "5"),
               "--chunk-rows applies to --csv only")


_KILLER = """
import os, signal, sys
import grprune.predict.stream as screen
real, calls = screen.score_chunk, []
def score_chunk(*args, **kwargs):
    calls.append(1)
    if len(calls) == 3:  # in the third chunk, before it is written
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
screen.score_chunk = score_chunk
from grprune.cli import main
main(sys.argv[1:])
"""


def test_a_killed_screen_of_a_small_file_loses_one_chunk(strict_run, lib_csv, tmp_path):
    out, clean = tmp_path / "p.csv", tmp_path / "clean.csv"
    args = ["predict", str(strict_run), "--csv", str(lib_csv), "--smiles-column", "SMILES",
            "--chunk-rows", "5", "--progress", "none", "--device", "cpu"]
    proc = subprocess.run([sys.executable, "-c", _KILLER, *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not out.exists() and (tmp_path / "p.csv.partial").is_file()
    res = _cli(*args, "--out", out)
    assert res.exit_code == 0, res.output
    assert f"grprune: resuming {out} after row 10 " in res.output  # chunks 1 and 2 kept
    res = _cli(*args, "--out", clean)
    assert res.exit_code == 0 and "resuming" not in res.output
    assert out.read_bytes() == clean.read_bytes()


def test_help_prints_percent_signs():
    res = _cli("predict", "--help")
    assert res.exit_code == 0 and "%%" not in res.output
    assert "10 % or 30" in " ".join(res.output.split())


def test_python_api_takes_tables_and_single_selectors(strict_run, lib_csv, tmp_path):
    run = load_run(strict_run)
    cli_out = tmp_path / "cli.csv"
    res = _cli("predict", strict_run, "--csv", lib_csv, "--smiles-column", "SMILES",
               "--out", cli_out, "--progress", "none")
    assert res.exit_code == 0, res.output
    frame = pd.read_csv(lib_csv, dtype=str, keep_default_na=False)
    by_frame = run.predict(frame, smiles_column="SMILES")
    by_path = run.predict(str(lib_csv), smiles_column="SMILES")
    pd.testing.assert_frame_equal(by_frame, by_path)
    assert by_frame["cid"].tolist() == frame["cid"].tolist()  # the run's data.id_column
    scored = int((by_frame["status"] == "ok").sum())
    assert by_frame.loc[5, "status"] == "unparsable SMILES"
    assert by_frame["prob_1"].notna().sum() == scored == 80 - len(run.summary.dataset_info[
        "bad_rows"])
    lines: list[str] = []
    summary = run.predict(lib_csv, smiles_column="SMILES", out=tmp_path / "api.csv",
                          log=lines.append)
    assert (tmp_path / "api.csv").read_bytes() == cli_out.read_bytes()  # the same flow
    assert summary.rows == 80 and summary.scored == scored and lines[0].startswith("starting ")
    with pytest.raises(Exception, match="out= applies to a table"):
        run.predict(["CCO"], out=tmp_path / "x.csv")
    # one string is one selector, not a list of its characters
    dataset = run.load_dataset()
    graph = dataset.ids.index("CMPD-0010")
    part = next(p for p, idx in dataset.splits.items() if graph in set(map(int, idx)))
    ex = run.explain(part=part, graphs="id:CMPD-0010", out=tmp_path / "ex")
    assert ex.graphs == [graph]
    row = int(dataset.source_rows[graph])
    assert run.explain(part=part, graphs=f"row:{row}", out=tmp_path / "ex").graphs == [graph]
