"""The example plugin package (examples/grprune-entropy), installed and used through its entry point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "grprune-entropy"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory, data_root):
    """Environment variables of a Python that sees the installed plugin (module-wide: one install)."""
    tmp = tmp_path_factory.mktemp("plugin")
    src = tmp / "src"
    shutil.copytree(EXAMPLE, src)  # setuptools builds in the source tree: keep the checkout clean
    site = tmp / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--quiet", "--target", str(site), str(src)],
        capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.skip(f"pip cannot build the example package offline: {proc.stderr.strip()[-500:]}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["GRPRUNE_DATA_ROOT"] = str(data_root)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _grprune(args, env, cwd):
    return subprocess.run([sys.executable, "-m", "grprune", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_ls_lists_the_plugin(plugin_env, tmp_path):
    proc = _grprune(["ls", "regularizers"], plugin_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "entropy" in proc.stdout and "reg.entropy.weight" in proc.stdout
    assert "failed to load" not in proc.stdout + proc.stderr


def test_run_with_the_plugin_regularizer(plugin_env, tmp_path):
    out = tmp_path / "run"
    # the paper preset: the selector's regularizer counts from the first epoch
    proc = _grprune(["run", "--reg", "entropy", "--data", "ogbg-molbbbp", "--preset", "paper",
                     "--epochs", "1",
                     "-H", "data.limit=64", "-H", "train.batch_size=32", "-H",
                     "reg.entropy.weight=0.5", "--progress", "none", "--device", "cpu",
                     "--out", str(out)], plugin_env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["loss"]["entropy"] > 0
    config = json.loads((out / "config.json").read_text())
    assert config["reg"] == {"entropy": {"weight": 0.5, "eps": 1e-6}}
    assert config["selector"]["name"] == "gumbel-gin"  # requires a selector: auto picks one

