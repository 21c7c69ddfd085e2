"""The streamed screen under faults (issue 65): molecules that are all wildcards, cells
too long to parse, a featurizing worker that dies, two screens writing one file, state
files that lie, planted symbolic links."""

from __future__ import annotations

import os

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import interrupt_screen_at_chunk, tiny_molbbbp_run

from grprune.cli import main

WILDCARDS = "*" * 20000


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def bbbp_run(tmp_path_factory, data_root):
    return tiny_molbbbp_run(tmp_path_factory.mktemp("faults") / "run", limit=48)


@pytest.fixture(scope="module")
def library():
    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES
    smiles, _ = read_molecule_csv(FILES / "ogbg_molbbbp/bbbp.csv.gz", "smiles", "p_np")
    return list(smiles[:300])


def _write(path, smiles):
    pd.DataFrame({"ID": [f"M{i}" for i in range(len(smiles))], "smiles": smiles}).to_csv(
        path, index=False)
    return path


# ------------------------------------------------------------------ row 1: atoms and bytes
def test_every_atom_counts_and_long_cells_are_refused_unparsed():
    from grprune.data.molecules import MAX_SMILES_BYTES, atom_count, too_large_reason
    from grprune.predict.memory import row_problem
    assert atom_count("*C*") == 3 and atom_count("[H][H]") == 2 and atom_count("[*]") == 1
    assert row_problem(WILDCARDS) == ("too large", "too large: 20,000 atoms (the limit is "
                                                   "500, data.max_atoms)")
    assert too_large_reason("[" * 300_000 + "C]") == (
        f"too large: a SMILES of 300,002 characters (the limit is {MAX_SMILES_BYTES:,} bytes)")
    assert too_large_reason("[" * 90_000) is None  # no atom, counted in linear time
    assert too_large_reason("é" * 60_000) == (  # 120,000 bytes in 60,000 characters
        f"too large: a SMILES of 120,000 bytes (the limit is {MAX_SMILES_BYTES:,} bytes)")
    assert too_large_reason("*" * 600, max_atoms=0) is None  # 0: no limit


def test_a_wildcard_chain_is_skipped_in_a_screen_with_its_reason(bbbp_run, library, tmp_path):
    rows = list(library)
    rows[137] = WILDCARDS
    csv = _write(tmp_path / "lib.csv", rows)
    out = tmp_path / "preds.csv"
    res = _cli("predict", bbbp_run, "--csv", csv, "--out", out, "--chunk-rows", 100,
               "--progress", "none", "--device", "cpu")
    assert res.exit_code == 0, res.output
    df = pd.read_csv(out, keep_default_na=False)
    assert len(df) == 300
    assert df.loc[137, "status"] == "too large"
    assert df.loc[137, "reason"] == "too large: 20,000 atoms (the limit is 500, data.max_atoms)"
    assert (df["status"] == "ok").sum() >= 290


def test_predict_smiles_refuses_a_wildcard_chain_with_a_reason(bbbp_run):
    res = _cli("predict", bbbp_run, "--smiles", WILDCARDS, "--device", "cpu")
    assert res.exit_code == 1, res.output  # the help: exit status 1 when none is scored
    assert "too large: 20,000 atoms" in res.output
    assert "no molecule could be scored (1 too large: over the atom or size limit)" in \
        res.output
    res = _cli("predict", bbbp_run, "--smiles", WILDCARDS, "--smiles", "CCO", "--device", "cpu")
    assert res.exit_code == 0, res.output  # one scored: 0


def test_data_info_skips_a_wildcard_chain(library, tmp_path):
    rows = [(s, i % 2) for i, s in enumerate(library[:60])]
    rows[5] = (WILDCARDS, 1)
    csv = tmp_path / "mols.csv"
    pd.DataFrame(rows, columns=["smiles", "label"]).to_csv(csv, index=False)
    res = _cli("data", "info", "molecule-csv", "-H", f"data.path={csv}",
               "-H", "data.split=random")
    assert res.exit_code == 0, res.output
    assert "row 5: too large: 20,000 atoms (the limit is 500" in res.output


def _dying_featurizer(smiles):
    """A worker task that dies as RDKit crashing would, on the row ``DIE``."""
    from grprune.predict.chunk import featurize_rows
    if "DIE" in smiles:
        os._exit(11)
    return featurize_rows(smiles)


def test_a_worker_that_dies_costs_its_molecule_a_reason_not_the_screen(
        bbbp_run, library, tmp_path, monkeypatch):
    import grprune.predict.stream
    from grprune.predict.pool import WORKER_DIED
    lib = _write(tmp_path / "lib.csv", [*library[:120], "DIE", *library[121:200]])
    ref = tmp_path / "ref.csv"
    args = ("--chunk-rows", 50, "--progress", "none", "--device", "cpu")
    assert _cli("predict", bbbp_run, "--csv", lib, "--out", ref, *args).exit_code == 0
    out = tmp_path / "preds.csv"
    monkeypatch.setattr(grprune.predict.stream, "featurize_rows", _dying_featurizer)
    res = _cli("predict", bbbp_run, "--csv", lib, "--out", out, *args)
    assert res.exit_code == 0, res.output
    got, want = pd.read_csv(out, keep_default_na=False), pd.read_csv(ref, keep_default_na=False)
    assert got.loc[120, "status"] == "unparsable SMILES"
    assert got.loc[120, "reason"] == WORKER_DIED
    pd.testing.assert_frame_equal(got.drop(index=120), want.drop(index=120))


def test_a_worker_death_in_any_task_in_flight_is_retried_alone(monkeypatch):
    """Every task of a broken pool is featurized again: whichever task's worker died."""
    from grprune.predict.pool import WORKER_DIED, featurized
    chunks = [pd.DataFrame({"smiles": ["CCO", "DIE" if k == 2 else "CCN", "c1ccccc1"]})
              for k in range(6)]
    got = list(featurized(iter(chunks), lambda d: d["smiles"].tolist(), 2, _dying_featurizer))
    assert [len(df) for df, _ in got] == [3] * 6
    for k, (_, graphs) in enumerate(got):
        assert graphs.status == (["ok", "unparsable SMILES", "ok"] if k == 2 else ["ok"] * 3)
        assert graphs.reason[1] == (WORKER_DIED if k == 2 else "")
        assert len(graphs.flat) == (2 if k == 2 else 3)


# ------------------------------------------------------------------ row 3: a lock on OUT
def _screen_args(run, csv, out):
    return ("predict", run, "--csv", csv, "--out", out, "--chunk-rows", 10,
            "--progress", "none", "--device", "cpu")


def test_a_second_screen_to_the_same_out_refuses_and_the_first_is_whole(
        bbbp_run, library, tmp_path, monkeypatch):
    import grprune.predict.stream
    lib = _write(tmp_path / "lib.csv", library[:60])
    ref, out = tmp_path / "ref.csv", tmp_path / "preds.csv"
    assert _cli(*_screen_args(bbbp_run, lib, ref)).exit_code == 0
    real, second = grprune.predict.stream.save_state, []  # type: ignore[var-annotated]

    def save_state(*args, **kwargs):  # the second job starts while the first is writing
        real(*args, **kwargs)
        if not second:
            second.append(_cli(*_screen_args(bbbp_run, lib, out)))

    monkeypatch.setattr(grprune.predict.stream, "save_state", save_state)
    first = _cli(*_screen_args(bbbp_run, lib, out))
    assert first.exit_code == 0, first.output
    assert second[0].exit_code == 2, second[0].output
    assert [line for line in second[0].output.splitlines() if "grprune" in line] == [
        f"grprune: error: --out '{out}' is being written by another predict (its lock "
        f"preds.csv.lock is held); wait for it to finish, or choose another --out"]
    assert out.read_bytes() == ref.read_bytes()


# ------------------------------------------------------------------ row 4: state files that lie
@pytest.fixture
def interrupted(bbbp_run, library, tmp_path, monkeypatch):
    """A screen of 60 rows stopped (Ctrl-C) in its fourth chunk of 10, and the reference
    output of an uninterrupted one; returns (csv, out, ref)."""
    lib = _write(tmp_path / "lib.csv", library[:60])
    ref, out = tmp_path / "ref.csv", tmp_path / "preds.csv"
    assert _cli(*_screen_args(bbbp_run, lib, ref)).exit_code == 0
    with monkeypatch.context() as m:
        interrupt_screen_at_chunk(m)
        assert _cli(*_screen_args(bbbp_run, lib, out)).exit_code == 130
    return lib, out, ref


def _state(out):
    import json
    return json.loads((out.parent / (out.name + ".partial.json")).read_text())


@pytest.mark.parametrize("change", [
    {"rows": -5}, {"rows": 30000}, {"rows": 7}, {"rows": 1e8}, {"rows": "30"},
    {"rows": True}, {"bytes": 0}, {"bytes": -1}, {"bytes": 10**12}, {"bytes": "x"},
    {"bytes": None}, {"scored": 99}, {"skipped": []}, {"skipped": {"x": "y"}},
    {"stamp": 1}, "not a dict", "bytes-3", "{"])
def test_a_state_file_that_lies_starts_clean_and_says_why(bbbp_run, interrupted, change):
    import json
    lib, out, ref = interrupted
    path = out.parent / (out.name + ".partial.json")
    state = _state(out)
    assert state["rows"] == 30
    if change == "not a dict":
        path.write_text(json.dumps([state]))
    elif change == "bytes-3":
        path.write_text(json.dumps({**state, "bytes": state["bytes"] - 3}))
    elif change == "{":
        path.write_text("{" * 100000)
    else:
        path.write_text(json.dumps({**state, **change}))
    res = _cli(*_screen_args(bbbp_run, lib, out))
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output and f"starting {out} clean, because" in res.output
    assert out.read_bytes() == ref.read_bytes()


def test_an_honest_state_file_resumes(bbbp_run, interrupted):
    lib, out, ref = interrupted
    res = _cli(*_screen_args(bbbp_run, lib, out))
    assert res.exit_code == 0 and "after row 30" in res.output, res.output
    assert out.read_bytes() == ref.read_bytes()


# ------------------------------------------------------------------ row 6: links and targets
def test_a_planted_partial_link_is_never_followed(bbbp_run, library, tmp_path):
    lib = _write(tmp_path / "lib.csv", library[:30])
    ref, out = tmp_path / "ref.csv", tmp_path / "preds.csv"
    assert _cli(*_screen_args(bbbp_run, lib, ref)).exit_code == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "preds.csv.partial").symlink_to(victim)
    (tmp_path / "preds.csv.partial.json").symlink_to(victim)
    res = _cli(*_screen_args(bbbp_run, lib, out))
    assert res.exit_code == 0, res.output
    assert "is a symbolic link" in res.output
    assert victim.read_text() == "keep me"
    assert not out.is_symlink() and out.read_bytes() == ref.read_bytes()


def test_a_partial_link_to_a_real_partial_is_not_resumed(bbbp_run, interrupted, tmp_path):
    lib, out, ref = interrupted
    partial = out.parent / (out.name + ".partial")
    moved = tmp_path / "elsewhere.partial"
    partial.rename(moved)
    partial.symlink_to(moved)
    before = moved.read_bytes()
    res = _cli(*_screen_args(bbbp_run, lib, out))
    assert res.exit_code == 0 and "not a plain file" in res.output, res.output
    assert moved.read_bytes() == before and out.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize("target", ["dir", "input", "bonds-input"])
def test_out_a_directory_or_the_input_is_refused_before_any_work(library, tmp_path, target):
    lib = _write(tmp_path / "lib.csv", library[:5])
    before = lib.read_bytes()
    out = {"dir": tmp_path, "input": lib, "bonds-input": tmp_path / "x.csv"}[target]
    if target == "bonds-input":  # x.csv's bond table x.bonds.csv is the input
        (tmp_path / "x.bonds.csv").symlink_to(lib)
    res = _cli("predict", tmp_path / "no-such-run", "--csv", lib, "--out", out,
               *(("--bonds",) if target == "bonds-input" else ()))
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line]
    assert len(lines) == 1 and ("is a directory" in lines[0] or "is the input file" in
                                lines[0]), res.output
    assert lib.read_bytes() == before


# ------------------------------------------------------------------ row 10: refuse, then write
@pytest.mark.parametrize("flags", [["train.compile=default"],
                                   ["data.label_column=no_such_column"]])
def test_a_refused_run_leaves_no_run_folder(library, tmp_path, flags, data_root):
    csv = tmp_path / "mols.csv"
    pd.DataFrame({"smiles": library[:40], "label": [i % 2 for i in range(40)]}).to_csv(
        csv, index=False)
    out = tmp_path / "runs" / "run"
    res = _cli("run", "--data", "molecule-csv", "-H", f"data.path={csv}", "-H",
               "data.split=random", *[a for f in flags for a in ("-H", f)], "--epochs", 1,
               "--progress", "none", "--device", "cpu", "--out", out)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert not out.exists(), sorted(p.name for p in out.iterdir())


# ------------------------------------------------------------------ partial items
def test_a_resumed_screen_reports_the_repeated_ids_an_uninterrupted_one_does(
        bbbp_run, library, tmp_path, monkeypatch):
    """IDs repeat before and after the row the screen was stopped at (30): the resumed
    run reads the earlier rows' IDs again, and says what an uninterrupted one says."""
    lib = tmp_path / "lib.csv"
    pd.DataFrame({"ID": [f"M{i % 25}" for i in range(60)], "smiles": library[:60]}).to_csv(
        lib, index=False)
    ref, out = tmp_path / "ref.csv", tmp_path / "preds.csv"
    whole = _cli(*_screen_args(bbbp_run, lib, ref), "--id-column", "ID")
    assert whole.exit_code == 0, whole.output
    with monkeypatch.context() as m:
        interrupt_screen_at_chunk(m)
        assert _cli(*_screen_args(bbbp_run, lib, out), "--id-column", "ID").exit_code == 130
    args = [*_screen_args(bbbp_run, lib, out), "--id-column", "ID"]
    args[args.index("--progress") + 1] = "plain"
    resumed = _cli(*args)
    assert resumed.exit_code == 0 and "after row 30" in resumed.output, resumed.output
    repeats = [[x for x in r.output.splitlines() if "repeat an earlier row's ID" in x]
               for r in (whole, resumed)]
    assert repeats[0] == repeats[1] and repeats[0][0].startswith("grprune: 35 rows repeat")
    assert out.read_bytes() == ref.read_bytes()
    # off a terminal, a plain line comes at the start, before the first chunk's
    lines = [x for x in resumed.output.splitlines() if x.startswith(("screening", "predict:"))]
    assert lines[0] == ("screening lib.csv: about 60 rows, after row 30; the next line after "
                        "the first 10 are scored, then at every 10 % or 30 s"), lines
    assert lines[1].startswith("predict: 40/60 molecules"), lines


def test_progress_off_a_terminal_speaks_before_the_first_chunk():
    import io

    from grprune.predict.stream import Progress
    out = io.StringIO()
    bar = Progress(20_000, "plain", stream=out)
    bar.begin("lib.csv", 500)
    assert out.getvalue() == ("screening lib.csv: about 20,000 rows; the next line after the "
                              "first 500 are scored, then at every 10 % or 30 s\n")
    for mode in ("none", "tty"):
        quiet = io.StringIO()
        Progress(10, mode, stream=quiet).begin("lib.csv", 5)
        assert quiet.getvalue() == ""
