"""Inputs without an end (issue 65, rows 5, 7 and 8): a CSV cell of many MiB, integers of
100,000 digits, keys and column names of 100 KB and 1 MB, run files that are
``/dev/zero``, a FIFO or a sparse file of GiBs. Each ends in exit 0 with the row skipped
and its reason given, or exit 2 with one line of about 200 characters at most; memory
stays bounded and nothing waits."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import tiny_molbbbp_run

from grprune.cli import main
from grprune.data.csv_cells import BoundedCells, cut_note, cut_size

NINES = "9" * 100_000


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line(res, limit: int = 400) -> str:
    """The one ``grprune: error:`` line of an exit-2 result, at most ``limit`` characters."""
    assert res.exit_code == 2, (res.exit_code, res.output[:2000])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("grprune: error: "), res.output[:2000]
    assert "Traceback" not in res.output and len(lines[0]) <= limit, lines[0][:1000]
    return lines[0]


def _write_big_cell(path, size: int, rows: int = 200, at: int = 100) -> None:
    """A CSV of ``rows`` rows (ID, smiles) whose row ``at`` holds a SMILES of ``size``
    bytes, written in blocks."""
    with open(path, "w") as fh:
        fh.write("ID,smiles\n")
        for i in range(rows):
            if i == at:
                fh.write(f"M{i},")
                for _ in range(size // (1 << 20)):
                    fh.write("C" * (1 << 20))
                fh.write("C" * (size % (1 << 20)) + "\n")
            else:
                fh.write(f"M{i},{'CCO' if i % 2 else 'c1ccccc1O'}\n")


# ------------------------------------------------------------------ row 5: cells without an end
def _bounded(data: bytes, limit: int, block: int) -> bytes:
    return BoundedCells(io.BytesIO(data), limit, block).read()


@pytest.mark.parametrize("block", [1, 3, 7, 64, 1 << 16])
def test_only_cells_over_the_limit_are_cut_whatever_the_blocks(block):
    data = (b'id,name,smiles\r\n1,"a, ""quoted""\nname",CCO\r\n2,' + b"x" * 40
            + b',"' + b'C,"",\n' * 9 + b'"\n3,,' + b"N" * 25)  # the last without a break
    got = _bounded(data, 30, block)
    assert got == (b'id,name,smiles\r\n1,"a, ""quoted""\nname",CCO\r\n2,"'
                   + cut_note(40).encode() + b'","' + cut_note(56).encode() + b'"\n3,,'
                   + b"N" * 25)
    assert _bounded(data, 1 << 20, block) == data  # nothing over the limit: the same bytes


def test_random_csvs_pass_unchanged_and_parse_as_pandas_parses_them():
    rng = random.Random(65)
    alphabet = ["a", "C", "1", ",", '"', "\n", "\r\n", "é", " "]
    for _ in range(200):
        rows = []
        for _ in range(rng.randrange(1, 6)):
            cells = []
            for _ in range(3):
                text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
                cells.append('"' + text.replace('"', '""') + '"' if rng.random() < 0.6
                             else text.replace('"', "").replace(",", "").replace("\n", "")
                             .replace("\r", ""))
            rows.append(",".join(cells))
        data = ("h1,h2,h3\n" + "\n".join(rows) + "\n").encode()
        assert _bounded(data, 1 << 20, rng.randrange(1, 50)) == data
        cut = _bounded(data, 4, rng.randrange(1, 50))
        want = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
        got = pd.read_csv(io.BytesIO(cut), dtype=str, keep_default_na=False)
        assert got.shape == want.shape  # same rows and columns: only long cells changed
        for r in range(want.shape[0]):
            for c in range(want.shape[1]):
                cell, was = got.iat[r, c], want.iat[r, c]
                size = cut_size(cell)  # its raw bytes, quotes included, over the limit
                ok = cell == was and len(was.encode()) <= 4 if size is None else size > 4
                assert ok and (size is not None or cell == was), (data, r, c, cell, was)


def test_a_64_mib_cell_is_never_held_whole(tmp_path):
    """``read_text_csv`` and the screen's chunks read a 64-MiB cell in a few MiB: the peak
    resident memory of a fresh process grows by less than the cell."""
    csv = tmp_path / "big.csv"
    _write_big_cell(csv, 64 << 20)
    script = textwrap.dedent(f"""
        import resource
        from pathlib import Path
        from grprune.data.csv_tables import read_text_csv
        from grprune.data.molecules import too_large_reason
        from grprune.predict.stream import _chunks
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        df = read_text_csv({str(csv)!r}, "--csv")
        rows = sum(len(c) for c in _chunks(Path({str(csv)!r}), 0, 50))
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(len(df), rows, grown // 1024, df["ID"][100], too_large_reason(df["smiles"][100]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    n, rows, grown_mib, cell_id, reason = out.stdout.split(" ", 4)
    assert (int(n), int(rows), cell_id) == (200, 200, "M100")
    assert int(grown_mib) < 32, f"the peak grew by {grown_mib} MiB reading a 64-MiB cell"
    assert reason.strip() == ("too large: a SMILES of 67,108,864 bytes (the limit is 100,000 "
                              "bytes; not read)")


@pytest.fixture(scope="module")
def bbbp_run(tmp_path_factory, data_root):
    return tiny_molbbbp_run(tmp_path_factory.mktemp("bounded") / "run", limit=48)


def test_a_screen_skips_a_huge_cell_with_its_reason(bbbp_run, tmp_path):
    csv = tmp_path / "lib.csv"
    _write_big_cell(csv, 8 << 20)
    out = tmp_path / "preds.csv"
    res = _cli("predict", bbbp_run, "--csv", csv, "--out", out, "--chunk-rows", 64,
               "--progress", "none", "--device", "cpu")
    assert res.exit_code == 0, res.output[-3000:]
    df = pd.read_csv(out, keep_default_na=False)
    assert len(df) == 200 and df.loc[100, "ID"] == "M100"
    assert df.loc[100, "status"] == "too large"
    assert df.loc[100, "reason"] == ("too large: a SMILES of 8,388,608 bytes (the limit is "
                                     "100,000 bytes; not read)")
    assert (df["status"] == "ok").sum() == 199
    assert out.stat().st_size < 1 << 20  # the cell is not copied to the output


# ------------------------------------------------------------------ row 7: digits, keys, names
RUN = ["run", "--data", "ogbg-molbbbp", "--epochs", "1", "--device", "cpu", "--progress",
       "none"]


@pytest.mark.parametrize("name, text", [
    ("epochs.yaml", f"train:\n  epochs: {NINES}\n"),
    ("limit.yaml", f"data:\n  limit: -{NINES}\n"),
    ("lr.yaml", f"train:\n  lr: {NINES[:400]}\n"),  # an integer too large for a float
    ("epochs.json", json.dumps({"train": {"epochs": 1}}).replace("1", NINES)),
    ("key.json", json.dumps({"train": {"k" * 100_000: 1}})),
    ("section.json", json.dumps({"s" * 100_000: {"epochs": 1}})),
    ("reg.json", json.dumps({"reg": {"r" * 100_000: {}}})),
    ("key.yaml", f"train:\n  ? {'k' * 100_000}\n  : 1\n"),
])
def test_a_config_file_of_huge_numbers_or_keys_is_one_short_line(tmp_path, monkeypatch,
                                                                   name, text):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    line = _one_line(_cli(*RUN, "--config", tmp_path / name, "--out", tmp_path / "r"), 300)
    assert ("characters" in line or "expected" in line), line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args", [
    ["-H", "k" * 100_000 + "=1"], ["-H", "train." + "k" * 100_000 + "=1"],
    ["-H", "x" * 100_000], ["-H", f"train.epochs={NINES}"], ["-H", f"train.lr={NINES}"],
    ["-H", "data.label_column=" + "c" * 100_000],
])
def test_a_huge_override_is_one_short_line(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    _one_line(_cli(*RUN, *args, "--out", tmp_path / "r"), 320)
    assert not (tmp_path / "r").exists()


def test_a_megabyte_column_name_is_shown_short(tmp_path):
    csv = tmp_path / "mols.csv"
    pd.DataFrame({"c" * 1_000_000: ["CCO", "CCN"], "label": [0, 1]}).to_csv(csv, index=False)
    line = _one_line(_cli("data", "info", "molecule-csv", "-H", f"data.path={csv}"), 300)
    assert "has no column 'smiles'" in line and "(1,000,000 characters)" in line
    from grprune.data.csv_tables import match_columns
    from grprune.errors import DataError
    with pytest.raises(DataError) as err:
        match_columns([f"col{i}" for i in range(10_000)], {"--smiles-column": "s" * 10**6},
                      "--csv")
    assert len(str(err.value)) < 400 and "(10,000 in all)" in str(err.value)


def test_a_huge_chunk_size_is_one_short_line(tmp_path):
    csv = tmp_path / "lib.csv"
    csv.write_text("smiles\nCCO\n")
    line = _one_line(_cli("predict", tmp_path / "run", "--csv", csv, "--chunk-rows", NINES))
    assert "--chunk-rows must be a whole number of rows" in line


# ------------------------------------------------------------------ row 8: run files without an end
@pytest.fixture
def run_copy(bbbp_run, tmp_path):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(bbbp_run, run)
    return run


def _replace(path, how: str) -> None:
    path.unlink()
    if how == "dev-zero":
        path.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(path)
    else:  # a sparse regular file of 20 GiB: no disk, but its size says 20 GiB
        with open(path, "wb") as fh:
            fh.truncate(20 << 30)


@pytest.mark.parametrize("how", ["dev-zero", "fifo", "sparse"])
@pytest.mark.parametrize("name", ["config.json", "summary.json"])
def test_a_run_file_without_an_end_is_refused_unread(run_copy, name, how):
    _replace(run_copy / name, how)
    line = _one_line(_cli("predict", run_copy, "--smiles", "CCO", "--device", "cpu"))
    if name == "summary.json":  # (config.json: the directory is corrupt as a whole)
        assert name in line and ("not a regular file" in line or "over 16,777,216 bytes"
                                 in line), line
    res = _cli("collect", run_copy, "--out", run_copy.parent / "tables")
    assert res.exit_code in (1, 2) and "Traceback" not in res.output, res.output[-2000:]
    assert "corrupt" in res.output


def test_run_file_readers_read_regular_files_within_their_limit(tmp_path):
    from grprune.record.files import MAX_RECORDS_BYTES, read_json, read_records, read_run_file
    sparse = tmp_path / "results.jsonl"
    with open(sparse, "wb") as fh:
        fh.truncate(MAX_RECORDS_BYTES + 1)
    with pytest.raises(OSError, match="over 268,435,456 bytes"):
        read_records(sparse)
    with pytest.raises(OSError, match="not a regular file"):
        read_run_file("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_json(fifo) is None and read_records(fifo) == []  # no wait for a writer
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert read_json(deep) is None
    digits = tmp_path / "digits.jsonl"
    digits.write_text('{"epoch": 0}\n{"epoch": ' + NINES + "}\n")
    assert read_records(digits) == [{"epoch": 0}]
