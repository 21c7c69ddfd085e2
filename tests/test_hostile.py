"""Hostile sizes and foreign inputs (issue 52): each case ends in exit 0 with nothing lost,
or exit 2 with one ``grprune: error:`` line, in bounded memory and time.

The table :data:`REFUSED` holds the command lines refused before anything large is built
(huge hyper-parameters, seed ranges, YAML alias bombs, paths with an unknown ``~user``,
config files that are not UTF-8); the tests below it cover molecules over the atom limit,
``state.pt`` files that are not this run's, degenerate evaluation splits, symbolic links,
progress without a terminal, and SIGTERM during featurization. Structured mutations of
``state.pt`` are in ``tests/test_fuzz.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from grprune.cli import main
from grprune.record.files import RESULTS, STATE, read_records

#: a YAML file of about 1 KB whose ``data.limit`` names 9**9 (387 million) strings
ALIAS_BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
data: {limit: *h}
"""
#: a run that would train (the refusals below come before any data is loaded)
RUN = ["run", "--data", "ogbg-molbbbp", "--epochs", "1", "--device", "cpu", "--progress",
       "none"]
#: a short molecule run on a CSV, after ``-H data.path=FILE``
CSV_RUN = ["run", "--data", "molecule-csv", "--reg", "none", "--preset", "paper", "--epochs",
           "1", "--device", "cpu", "--progress", "none"]


def one_error(res) -> str:
    """The one ``grprune: error:`` line of an exit-2 result (no traceback, nothing else)."""
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("grprune: error: "), res.output
    assert len(lines[0]) < 600, lines[0]
    return lines[0]


def _files(tmp: Path) -> dict[str, Path]:
    bomb = tmp / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB)
    latin = tmp / "latin.yaml"
    latin.write_bytes("train:\n  epochs: 2  # caf\u00e9\n".encode("latin-1"))
    return {"bomb": bomb, "latin": latin}


#: (issue 52 row, arguments with {bomb} / {latin} / {tmp} filled in, words of the message,
#: environment)
REFUSED = [
    (3, [*RUN, "-H", "model.head_layers=1000000000"], "model.head_layers: expected an integer "
                                                      "in [1, 64]", {}),
    (3, [*RUN, "--epochs", "10000000000"], "train.epochs: expected an integer in [1, 100000]",
     {}),
    (3, [*RUN, "-H", "train.batch_size=" + "9" * 5000], "train.batch_size", {}),
    (4, [*RUN, "--config", "{bomb}"], "uses a YAML alias", {}),
    (5, ["sweep", "--seeds", "0-1000000000", "--dry-run", "--out", "{tmp}/sw"],
     "more than 10,000 seeds", {}),
    (5, ["sweep", "--seeds", "0-100000", "--dry-run", "--out", "{tmp}/sw"],
     "more than 10,000 seeds", {}),
    (5, ["sweep", "--seeds", "0-99", "--reg", "none", "-H",
         "train.lr=" + ",".join(str(k / 1000) for k in range(1, 201)), "--dry-run", "--out",
         "{tmp}/sw"], "the grid has 20,000 points", {}),
    (6, [*RUN, "--config", "{latin}"], "is not UTF-8 text", {}),
    (7, [*RUN, "--root", "~nosuchuser52/x"], "cannot expand '~'", {}),
    (7, [*RUN], "cannot expand '~'", {"GRPRUNE_DATA_ROOT": "~nosuchuser52"}),
    (7, [*CSV_RUN, "-H", "data.path=~nosuchuser52/x.csv"], "cannot expand '~'", {}),
]


@pytest.mark.parametrize("row, args, words, env", REFUSED,
                         ids=[f"row{r}-{i}" for i, (r, *_) in enumerate(REFUSED)])
def test_a_hostile_value_is_refused_in_one_line_before_anything_is_built(
        tmp_path, monkeypatch, row, args, words, env):
    files = {**_files(tmp_path), "tmp": tmp_path}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)  # where a run would make runs/
    res = CliRunner().invoke(main, [a.format(**files) for a in args])
    assert words in one_error(res)
    assert not (tmp_path / "runs").exists()  # no run directory, not even its lock


def test_a_message_never_expands_the_value_it_names():
    from grprune.errors import GrpruneError
    from grprune.coerce import coerce
    from grprune.hparams import Param
    from grprune.messages import short_repr
    nested: list = ["lol"] * 9
    for _ in range(8):  # 9**9 elements if expanded: the reference is shared
        nested = [nested] * 9
    for default in (0, "", 0.5, True):
        with pytest.raises(GrpruneError) as err:
            coerce("data.limit", nested, default)
        assert len(str(err.value)) < 400 and "a list of 9 items" in str(err.value)
    assert len(short_repr("C" * 20000)) <= 200
    assert not Param(1, low=1).contains(2**40)  # every integer has an upper bound


# ------------------------------------------------------------------ row 1: huge molecules

def _bace_rows(n: int) -> list[tuple[str, int]]:
    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES
    smiles, labels = read_molecule_csv(FILES / "moleculenet" / "bace.csv.gz", "mol", "Class")
    return [(s, int(y)) for s, y in zip(smiles[:n], labels[:n])]


def test_a_molecule_over_the_atom_limit_is_skipped_before_rdkit_sees_it(tmp_path):
    from grprune.data.molecules import MAX_ATOMS, atom_count, smiles_to_graph
    from grprune.errors import DataError
    rows = _bace_rows(60)
    rows[7] = ("C" * 20000, 1)
    rows[9] = ("C" * 2000 + "." + "O" * 2000, 0)
    csv = tmp_path / "huge.csv"
    pd.DataFrame(rows, columns=["smiles", "label"]).to_csv(csv, index=False)
    res = CliRunner().invoke(main, ["data", "info", "molecule-csv", "-H", f"data.path={csv}",
                                    "-H", "data.split=random"])
    assert res.exit_code == 0, res.output
    assert "row 7: too large: 20,000 atoms (the limit is 500" in res.output
    assert "row 9: too large: 4,000 atoms" in res.output
    assert "skipped: 2" in res.output
    with pytest.raises(DataError, match="too large"):
        smiles_to_graph("C" * 20000)
    assert MAX_ATOMS == 500 and atom_count("C" * 501) == 501
    smiles_to_graph("C" * 501, max_atoms=0)  # 0: no limit


def test_the_atom_limit_is_a_setting(tmp_path):
    rows = _bace_rows(40)
    csv = tmp_path / "mols.csv"
    pd.DataFrame(rows, columns=["smiles", "label"]).to_csv(csv, index=False)
    res = CliRunner().invoke(main, ["data", "info", "molecule-csv", "-H", f"data.path={csv}",
                                    "-H", "data.split=random", "-H", "data.max_atoms=30"])
    assert res.exit_code == 0, res.output
    assert "too large" in res.output and "the limit is 30," in res.output


# ------------------------------------------------------------------ rows 8-10, 16, 17

@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, data_root):
    """A three-epoch molecule run stopped after epoch 1 (``state.pt`` counts 2 epochs)."""
    from grprune.resolve import resolve_config
    from grprune.run import execute
    cfg = resolve_config(reg="none", preset="paper", flags={
        "train.epochs": 3, "data.limit": 48, "train.batch_size": 32, "train.device": "cpu"})
    out = tmp_path_factory.mktemp("hostile") / "run"

    def stop(record):
        if record.epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(cfg, out, on_epoch=stop, log=lambda m: None)
    return out


#: the command that resumes :func:`interrupted`
RESUME = ["run", "--reg", "none", "--preset", "paper", "--epochs", "3", "-H", "data.limit=48",
          "-H", "train.batch_size=32", "--device", "cpu", "--progress", "none"]


def test_a_state_of_another_run_or_range_is_refused_then_the_run_starts_over(
        interrupted, tmp_path):
    import shutil

    import torch
    good = torch.load(interrupted / STATE, weights_only=True)
    cases = {"row 9: epoch only": ({"epoch": 1}, "it lacks model"),
             "row 10: epoch -5": ({**good, "epoch": -5}, "its epoch is -5, outside this "
                                                         "run's epochs 0..2")}
    for name, (state, words) in cases.items():
        run = tmp_path / name.replace(" ", "-").replace(":", "")
        shutil.copytree(interrupted, run)
        torch.save(state, run / STATE)
        line = one_error(CliRunner().invoke(main, [*RESUME, "--out", str(run)]))
        assert words in line and "run the same command again" in line, (name, line)
        assert (run / "state.rejected.pt").is_file()
        res = CliRunner().invoke(main, [*RESUME, "--out", str(run)])
        assert res.exit_code == 0, (name, res.output)
        assert [r["epoch"] for r in read_records(run / RESULTS)] == [0, 1, 2]


def test_a_damaged_record_before_the_last_says_what_to_do(interrupted, tmp_path):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(interrupted, run)
    lines = (run / RESULTS).read_text().splitlines()
    lines[0] = lines[0][:-9]  # the first of the two records, damaged
    (run / RESULTS).write_text("\n".join(lines) + "\n")
    line = one_error(CliRunner().invoke(main, [*RESUME, "--out", str(run)]))
    assert "does not hold the 2 epoch records state.pt counts (epochs 0..1)" in line
    assert "where epoch 0 belongs" in line and "--force" in line
    assert "sound epoch records where" not in line  # the old, self-contradicting wording


def test_a_symlinked_lock_and_a_dangling_out_say_what_to_do(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(tmp_path / "elsewhere")
    line = one_error(CliRunner().invoke(main, [*RESUME, "--out", str(run)]))
    assert "is a symbolic link" in line and "remove it" in line
    assert not (tmp_path / "elsewhere").exists()  # the link was not followed
    dangling = tmp_path / "out"
    dangling.symlink_to(tmp_path / "missing")
    line = one_error(CliRunner().invoke(main, [*RESUME, "--out", str(dangling)]))
    assert "which does not exist; create that folder, remove the link" in line


def test_a_dangling_out_link_is_explained_by_every_command_that_writes(tmp_path):
    """explain --out, predict --draw and sweep --out meet a link to nothing as run does:
    one line that names the link and its target, exit 2."""
    from conftest import tiny_molbbbp_run
    run = tiny_molbbbp_run(tmp_path / "run", 40)
    dangling = tmp_path / "out"
    dangling.symlink_to(tmp_path / "missing")
    for args in (["explain", str(run), "--no-fidelity", "--out", str(dangling)],
                 ["predict", str(run), "--smiles", "CCO", "--draw", str(dangling)],
                 ["sweep", "--epochs", "1", "-H", "data.limit=20", "--out", str(dangling)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, (args, res.output)
        line = res.output.strip().splitlines()[-1]  # after explain's progress line
        assert line.startswith("grprune: error: ") and f"{dangling} is a symbolic link to {tmp_path / 'missing'}, which does not " \
               f"exist" in line, (args, line)
        assert not (tmp_path / "missing").exists()


# ------------------------------------------------------------------ row 15

def test_a_valid_split_of_one_class_stops_selection_unless_another_metric_is_chosen(tmp_path):
    rows = [(s, 0) for s, _ in _bace_rows(300)]
    rows[5] = (rows[5][0], 1)
    rows[6] = (rows[6][0], 1)  # train needs both classes; valid and test get none
    csv = tmp_path / "one-positive.csv"
    pd.DataFrame(rows, columns=["smiles", "label"]).to_csv(csv, index=False)
    args = [*CSV_RUN, "-H", f"data.path={csv}", "--split", "random", "-H",
            "data.limit=300", "-H", "train.batch_size=100"]
    from grprune.data import load_dataset
    ds = load_dataset("molecule-csv", path=str(csv), split="random")
    labels = ds.labels.numpy()
    assert labels[ds.splits["valid"]].max() == 0 and labels[ds.splits["train"]].max() == 1
    line = one_error(CliRunner().invoke(main, [*args, "--out", str(tmp_path / "a")]))
    assert "every valid label is 0" in line and "no epoch can be selected" in line
    assert "data.metric=accuracy" in line
    res = CliRunner().invoke(main, [*args, "-H", "data.metric=accuracy",
                                    "--out", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "nan" not in res.stdout.lower()


def test_an_undefined_score_is_printed_as_undefined():
    from grprune.progress import _fmt
    assert _fmt(float("nan")) == "undefined" and _fmt(0.5) == "0.5000"


# ------------------------------------------------------------------ rows 13, 14

def test_progress_without_a_terminal_is_plain_lines_at_start_and_on_a_clock():
    import io

    from grprune.data.featurize import Progress
    out = io.StringIO()
    bar = Progress(100, "mols.csv", "plain", stream=out, interval_s=0.0, note="of 300 rows")
    bar.advance(1)  # 1 %: not a tenth, but the clock says a line is due
    bar.advance(99)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "featurizing mols.csv: 100 molecules (of 300 rows)"
    assert lines[1].startswith("featurizing mols.csv: 1/100 molecules (1%)")
    assert lines[2].startswith("featurizing mols.csv: 100/100 molecules (100%)")


def test_scaffolds_are_computed_once_per_distinct_molecule(monkeypatch):
    from grprune.data import featurize, splits
    seen: list[str] = []
    real = splits.murcko_scaffolds

    def counting(smiles, include_chirality=True):
        seen.extend(smiles)
        return real(smiles, include_chirality)

    monkeypatch.setattr(splits, "murcko_scaffolds", counting)
    smiles = ["c1ccccc1O", "CCO", "c1ccccc1O", "C1CCCCC1N", "CCO"] * 20
    out = featurize.parallel_scaffolds(smiles, workers=0)
    assert sorted(seen) == sorted(set(smiles))
    assert out == real(smiles)


def _hiv_csv(path: Path, n: int) -> Path:
    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES
    smiles, labels = read_molecule_csv(FILES / "moleculenet" / "hiv.csv.gz", "smiles",
                                       "HIV_active")
    pd.DataFrame({"smiles": smiles[:n], "label": labels[:n]}).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def worker_csv(tmp_path_factory):
    """6,000 distinct molecules: enough for featurization's worker processes."""
    from grprune.data.featurize import PARALLEL_MIN_ROWS
    return _hiv_csv(tmp_path_factory.mktemp("workers") / "mols.csv", PARALLEL_MIN_ROWS + 1000)


def _data_info(csv: Path, root: Path) -> subprocess.Popen:
    env = {**os.environ, "GRPRUNE_DATA_ROOT": str(root), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "grprune", "data", "info", "molecule-csv",
                             "-H", f"data.path={csv}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def test_sigterm_during_featurization_is_one_line_without_worker_tracebacks(
        worker_csv, tmp_path):
    proc = _data_info(worker_csv, tmp_path / "root")
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the plain start line: the workers are at work
    assert first.startswith("featurizing mols.csv"), first
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "Terminated" not in err.replace("terminated", ""), err
    if proc.returncode != 0:  # (0: it finished before the signal came)
        assert proc.returncode == 143, err
        assert err.strip().splitlines()[-1] == ("grprune: terminated; run the same command "
                                                "again to resume")


def test_a_build_with_worker_processes_ends_without_worker_tracebacks(worker_csv, tmp_path):
    proc = _data_info(worker_csv, tmp_path / "root")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    assert "featurizing mols.csv: 6,000 molecules" in err and "scaffolds of mols.csv" in err
