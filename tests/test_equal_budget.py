"""``benchmarks/tune/equal_budget.py`` (issue 62): the equal-budget comparison's stages on
a tiny spec, their committed outputs, a re-run that skips them, and the table."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("optuna")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_equal_budget_stages_commit_their_results_and_a_rerun_skips_them(tmp_path):
    (tmp_path / "space.yaml").write_text("train.lr: [0.001, 0.01]\n")
    spec = tmp_path / "eb.yaml"
    spec.write_text("data: ogbg-molbbbp\nsplits: [scaffold]\ntrials: 2\nsampler: random\n"
                    "pruner: none\nworkers: 2\nseeds: 0-1\nepochs: 2\npreset: official\n"
                    "hparams: {data.limit: 48}\n"
                    "methods:\n  ERM: {reg: none, space: space.yaml}\n"
                    "  GSAT: {reg: gsat, hparams: {train.select_warmup: false}}\n")
    cmd = [sys.executable, "-m", "benchmarks.tune.equal_budget", "run", "--spec", str(spec),
           "--runs", str(tmp_path / "runs")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "eb"
    for method in ("ERM", "GSAT"):
        assert (out / f"scaffold-{method}.best.yaml").is_file()
        trials = list(csv.DictReader(open(out / f"scaffold-{method}.trials.csv")))
        assert len(trials) == 2
    rows = list(csv.DictReader(open(out / "runs.csv")))
    kinds = sorted({(r["method"], r["kind"]) for r in rows})
    # ERM's defaults are committed (molbbbp-n10), GSAT's are run here
    assert kinds == [("ERM", "tuned"), ("GSAT", "default"), ("GSAT", "tuned")]
    assert all(sorted(int(r["seed"]) for r in rows if (r["method"], r["kind"]) == k)
               == [0, 1] for k in kinds)
    assert all(r["selected_phase"] in ("warmup", "train") for r in rows)
    # a method's own hparams hold in its study and tuned runs, not in its default runs
    import json
    chosen = {kind: {json.loads(c.read_text())["train"]["select_warmup"]
                     for c in (tmp_path / "runs" / kind / "scaffold-GSAT").rglob("config.json")}
              for kind in ("tuned", "default")}
    assert chosen == {"tuned": {False}, "default": {True}}
    assert "select_warmup: false" in (out / "scaffold-GSAT.best.yaml").read_text()
    assert all(r["config_hash"] for r in rows)
    md = (tmp_path / "eb.md").read_text()
    assert "| ERM |" in md and "| GSAT |" in md and "(n=2)" in md and "(n=10)" in md
    # everything committed: a re-run trains nothing
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    assert again.returncode == 0 and "+ grprune" not in again.stderr
