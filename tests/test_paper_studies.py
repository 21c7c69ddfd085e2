"""``benchmarks/paper/`` (issue 63): every sweep spec expands to the configurations its header
states, the README names only files that exist and names every spec, and the scripts work
end to end on a tiny GOOD-Motif run."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grprune.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "benchmarks" / "paper"
README = PAPER / "README.md"
SPECS = sorted(PAPER.rglob("*.yaml"))


def test_there_are_studies():
    assert README.is_file() and len(SPECS) >= 8


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_spec_expands_to_its_stated_configurations(spec, tmp_path):
    header = "".join(line for line in spec.read_text().splitlines(keepends=True)
                     if line.startswith("#"))
    stated = re.search(r"Configurations: (\d+)\.", header)
    assert stated, f"{spec.name}: the header states no 'Configurations: N.'"
    rel = spec.relative_to(ROOT).as_posix()
    assert rel in header, f"{spec.name}: the header's command does not name the spec itself"
    res = CliRunner().invoke(main, ["sweep", "--spec", str(spec), "--out", str(tmp_path / "sw"),
                                    "--dry-run"], catch_exceptions=False)
    assert res.exit_code == 0, res.output[-2000:]
    planned = re.search(r"sweep plan: (\d+) configurations", res.output)
    assert planned and planned.group(1) == stated.group(1), res.output[:500]
    assert not (tmp_path / "sw").exists()  # a dry run writes nothing


def test_readme_names_existing_files_and_every_spec():
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"(?:benchmarks|grprune|tests)/[\w./-]+\.(?:py|yaml)", text))
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"README.md names files that do not exist: {missing}"
    unnamed = sorted(s.relative_to(ROOT).as_posix() for s in SPECS
                     if s.relative_to(ROOT).as_posix() not in text)
    assert not unnamed, f"specs the README does not name: {unnamed}"
    modules = set(re.findall(r"python -m (benchmarks\.paper\.\w+)", text))
    assert modules, "the README names no script"
    for mod in modules:
        assert (ROOT / (mod.replace(".", "/") + ".py")).is_file(), mod


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """A 2-epoch GOOD-Motif basis run on 60 graphs a part (the first epoch ERM warm-up),
    reported after warm-up so that its selector has something to explain."""
    runs = tmp_path_factory.mktemp("paper-runs")
    res = CliRunner().invoke(main, [
        "run", "--data", "good-motif", "--split", "basis", "--preset", "official",
        "--epochs", "2", "-H", "train.warmup_epochs=1", "-H", "train.select_warmup=false",
        "-H", "train.eval_train=false", "-H", "data.limit=60", "--device", "cpu",
        "--progress", "none", "--out", str(runs / "good-motif" / "prune-seed0")],
        catch_exceptions=False)
    assert res.exit_code == 0, res.output[-2000:]
    return runs


def _script(module: str, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=300)


def test_explain_table_end_to_end(tiny_runs, tmp_path):
    out = tmp_path / "expl"
    done = _script("benchmarks.paper.explain_table", tiny_runs, "--out", out,
                   "--parts", "test", "--pictures", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    md = (tmp_path / "expl.md").read_text(encoding="utf-8")
    for heading in ("Recall@K and Precision@K", "top ⌈f·|G_c|⌉", "Edge ROC-AUC"):
        assert heading in md
    assert "| good-motif/basis | PrunE (official) | 50 |" in md
    assert "0.7356" in md and "0.9017" in md  # the paper's Motif-base numbers beside ours
    assert "- commit: " in md and "- hardware: " in md and "- protocol: " in md
    rows = list(csv.DictReader(open(tmp_path / "expl.csv", encoding="utf-8")))
    assert list(rows[0]) == ["column", "method", "setting", "part", "graphs", "metric", "mean",
                             "std", "n", "seeds", "paper"]
    metrics = {(r["graphs"], r["metric"]) for r in rows}
    expected = {"rocauc", "accuracy", "recall@10", "precision@50", "top1.5_gc", "top5_gs",
                "top1.5_gc_oracle"}
    assert {("all", m) for m in expected} <= metrics
    runs = list(csv.DictReader(open(tmp_path / "expl.runs.csv", encoding="utf-8")))
    assert {r["subset"] for r in runs} == {"all", "correct"}
    assert {"seed", "run_dir", "commit", "hardware", "precision@50"} <= set(runs[0])
    pictures = sorted((tmp_path / "expl-pictures").rglob("*.png"))
    assert len(pictures) == 2 and pictures[0].parent.name == "prune-official-seed0"


def test_provenance_states_commit_hardware_and_protocol(tiny_runs, tmp_path):
    out = tmp_path / "prov.md"
    done = _script("benchmarks.paper.provenance", tiny_runs, "--out", out)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    assert "- runs: 1 finished (good-motif/basis (1 run))" in text
    assert "- commit: " in text and "(CPU)" in text
    assert "shortened protocol" in text and "data.limit=60" in text
    empty = _script("benchmarks.paper.provenance", tmp_path / "nothing-here")
    assert empty.returncode == 2 and "no such directory" in empty.stderr
