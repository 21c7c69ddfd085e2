"""The official-code harness (``benchmarks/accuracy/official/``) under hostile input
(issue 65, row 9): seed ranges are bounded before any list is built, an unwritable target
and a malformed record are one line each with exit 2, and a missing results file is exit
2, not an empty table."""

from __future__ import annotations

import json

import pytest
from test_benchmarks import load_script

HERE = "benchmarks/accuracy/official"
RECORD = {"dataset": "ogbg-molbbbp", "split": "size", "seed": 0, "valid": 90.0, "test": 60.0,
          "best_epoch": 12, "official_commit": "7b41dae", "grprune_commit": "abc1234",
          "hardware": "1 core of an AMD EPYC (CPU)"}


def _one_line(err: str, *words: str) -> None:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert len(lines[0]) < 300 and all(w in lines[0] for w in words), lines[0]


@pytest.fixture(scope="module")
def runs():
    return load_script(f"{HERE}/runs.py")


def test_seed_ranges_are_bounded_before_any_list_is_built(runs, capsys):
    assert runs.parse_seeds("0-999") == list(range(1000))
    for text in ("0-1000000000", "0-999,1000", "0-" + "9" * 100_000, "9" * 100_000):
        with pytest.raises(ValueError, match="more than 1,000 seeds|at most 18 digits") as err:
            runs.parse_seeds(text)
        assert len(str(err.value)) < 200
    with pytest.raises(SystemExit) as stop:
        runs.main(["--seeds", "0-1000000000"])
    assert stop.value.code == 2 and "more than 1,000 seeds" in capsys.readouterr().err


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A stand-in checkout (``run.py``) and export, enough to pass ``runs.py``'s checks."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "run.py").write_text("")
    export = tmp_path / "data" / "ogbg_molbbbp"
    export.mkdir(parents=True)
    (export / "grprune.json").write_text("{}")
    monkeypatch.setenv("OFFICIAL_SRC", str(tmp_path / "src"))
    monkeypatch.setenv("OFFICIAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("OFFICIAL_WORK", str(tmp_path / "work"))
    return tmp_path


def test_runs_refuses_an_unwritable_or_malformed_results_file_before_any_run(
        runs, checkout, capsys, monkeypatch):
    def never(*args):
        raise AssertionError("no run may start")

    monkeypatch.setattr(runs, "run_one", never)
    afile = checkout / "afile"
    afile.write_text("")
    assert runs.main(["--seeds", "0", "--split", "size", "--results",
                      str(afile / "results.jsonl")]) == 2
    _one_line(capsys.readouterr().err, "runs.py: cannot write", "a folder is needed")
    bad = checkout / "bad.jsonl"
    bad.write_text(json.dumps(RECORD) + "\n" + json.dumps({**RECORD, "seed": "1"}) + "\n")
    assert runs.main(["--seeds", "0", "--split", "size", "--results", str(bad)]) == 2
    _one_line(capsys.readouterr().err, "bad.jsonl:2: its seed is '1', not int")


@pytest.mark.parametrize("target", ["file", "under-a-file"])
def test_export_onto_a_file_is_one_line_before_any_dataset_is_loaded(tmp_path, capsys,
                                                                      target):
    export = load_script(f"{HERE}/export.py")
    afile = tmp_path / "afile"
    afile.write_text("keep")
    root = afile if target == "file" else afile / "sub"
    assert export.main([str(root), "--dataset", "ogbg-molbbbp"]) == 2
    _one_line(capsys.readouterr().err, "export.py:", str(root))
    assert afile.read_text() == "keep"


def test_table_refuses_a_missing_file_a_record_without_a_key_and_an_unwritable_readme(
        tmp_path, capsys):
    table = load_script(f"{HERE}/table.py")
    assert table.main(["--results", str(tmp_path / "none.jsonl")]) == 2
    _one_line(capsys.readouterr().err, "no results file", "none.jsonl")
    results = tmp_path / "results.jsonl"
    for key in ("seed", "test", "hardware", "best_epoch"):
        results.write_text(json.dumps(RECORD) + "\n"
                           + json.dumps({k: v for k, v in RECORD.items() if k != key}) + "\n")
        assert table.main(["--results", str(results)]) == 2
        _one_line(capsys.readouterr().err, f"results.jsonl:2: the record has no '{key}'")
    results.write_text(json.dumps(RECORD) + "\n")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{table.BEGIN}\nold\n{table.END}\n")
    (tmp_path / "README.md.tmp").mkdir()  # the temporary file cannot be written
    assert table.main(["--results", str(results), "--readme", str(readme)]) == 2
    _one_line(capsys.readouterr().err, "table.py: cannot write")
    assert "old" in readme.read_text()
