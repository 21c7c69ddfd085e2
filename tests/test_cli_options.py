"""The CLI's shared options (``run`` and ``sweep`` declare them once), its light start
(``--help`` and ``collect`` import neither RDKit nor OGB) and ``--plugin MODULE``, which
reaches a sweep's child runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from grprune.record.files import CONFIG, RESULTS, SUMMARY, read_records
from grprune.cli import main
from grprune.cli.options import SHARED
from test_collect import prune_eta_grid

# -- one declaration for run and sweep -----------------------------------------------

#: how a variant key of SharedOption.sweep shows in click's info dict of the option
_INFO_KEYS = {"decls": ("name", "opts", "secondary_opts"), "type": ("type",),
              "multiple": ("multiple", "default"), "help": ("help",), "metavar": ()}


def _param(command: str, decls) -> click.Parameter:
    name = click.Option(list(decls)).name
    matches = [p for p in main.commands[command].params if p.name == name]
    assert len(matches) == 1, f"{command} has no option {name!r}"
    return matches[0]


@pytest.mark.parametrize("key", list(SHARED))
def test_run_and_sweep_share_the_declaration(key):
    shared = SHARED[key]
    run = _param("run", shared.decls)
    sweep = _param("sweep", shared.sweep.get("decls", shared.decls))
    run_info, sweep_info = run.to_info_dict(), sweep.to_info_dict()
    differs = {info for k in shared.sweep for info in _INFO_KEYS[k]}
    assert set(shared.sweep) <= set(_INFO_KEYS), "a variant this test does not know"
    for info_key in run_info.keys() - differs:
        assert run_info[info_key] == sweep_info[info_key], (key, info_key)
    assert run.help and run.help == shared.declare("run")(lambda: None).__click_params__[0].help
    if "help" not in shared.sweep:
        assert sweep.help == run.help
    if "metavar" in shared.sweep:
        assert sweep.metavar == shared.sweep["metavar"]
    else:
        assert sweep.metavar == run.metavar


def test_help_lists_the_registered_parts():
    res = CliRunner().invoke(main, ["sweep", "--help"])
    assert res.exit_code == 0
    assert "gumbel-gin" in res.output and "eps-align" in res.output
    assert "ogbg-molbbbp" in res.output


# -- a light start --------------------------------------------------------------------

HEAVY = ("rdkit", "ogb", "torch_geometric")
PROBE = ("import sys; from click.testing import CliRunner; from grprune.cli import main; "
         "res = CliRunner().invoke(main, sys.argv[1:]); "
         "assert res.exit_code == 0, res.output; "
         f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")


def _heavy_imports(*args) -> str:
    proc = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_help_imports_neither_rdkit_nor_ogb():
    assert _heavy_imports("--help") == "[]"


def test_collect_imports_neither_rdkit_nor_ogb(tmp_path):
    prune_eta_grid(tmp_path)
    assert _heavy_imports("collect", tmp_path) == "[]"
    assert (tmp_path / "results.md").is_file()


# -- --plugin -------------------------------------------------------------------------

PLUGIN = textwrap.dedent('''
    import torch
    from grprune.batch import segment_mean
    from grprune.hparams import hparam
    from grprune.regularizers import REGULARIZERS, Regularizer


    @REGULARIZERS.register("edge-entropy")
    class EdgeEntropy(Regularizer):
        """Mean binary entropy of the edge keep probabilities."""

        requires = frozenset({"selector"})

        class Hparams(Regularizer.Hparams):
            weight: float = hparam(0.1, "weight of the entropy term", low=0.0)
            floor: float = hparam(1e-6, "clamp for p before the log", low=0.0, high=0.5)

        hp: Hparams

        def loss(self, ctx):
            p = ctx.selection.edge_prob.clamp(self.hp.floor, 1 - self.hp.floor)
            h = -(p * p.log() + (1 - p) * (1 - p).log())
            per_graph = segment_mean(h, ctx.batch.edge_graph, ctx.batch.num_graphs)
            return per_graph[ctx.batch.num_edges > 0].mean() if h.numel() else h.sum()
''')
# the paper preset: its regularizers count from the first epoch (official warms up for 10)
TINY = ["--data", "ogbg-molbbbp", "--preset", "paper", "--epochs", "1", "-H", "data.limit=48",
        "-H", "train.batch_size=32", "--device", "cpu", "--progress", "none"]


@pytest.fixture
def plugin_dir(tmp_path, data_root):
    """A directory holding my_regs.py, and the environment of a grprune started there."""
    (tmp_path / "my_regs.py").write_text(PLUGIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPRUNE_")}
    env.update(GRPRUNE_DATA_ROOT=str(data_root), OMP_NUM_THREADS="1")
    return tmp_path, env


def _grprune(args, env, cwd):
    return subprocess.run([sys.executable, "-m", "grprune", *map(str, args)], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def _entropy_losses(run_dir: Path) -> list[float]:
    return [rec["loss"]["edge-entropy"] for rec in read_records(run_dir / RESULTS)]


def test_run_with_a_plugin_module(plugin_dir):
    here, env = plugin_dir
    out = here / "run"
    proc = _grprune(["--plugin", "my_regs", "run", "--reg", "size,eps-align,edge-entropy",
                     *TINY, "--out", out], env, here)
    assert proc.returncode == 0, proc.stderr
    config = json.loads((out / CONFIG).read_text())
    assert list(config["reg"]) == ["size", "eps-align", "edge-entropy"]
    assert config["reg"]["edge-entropy"] == {"weight": 0.1, "floor": 1e-6}
    losses = _entropy_losses(out)
    assert len(losses) == 1 and losses[0] > 0


def test_sweep_children_import_the_plugin(plugin_dir):
    """Two runs on two local child processes, which import the module that --plugin
    names (GRPRUNE_PLUGINS is not set here: the sweep sets it for them)."""
    here, env = plugin_dir
    root = here / "sweep"
    proc = _grprune(["--plugin", "my_regs", "sweep", "--reg", "size,eps-align,edge-entropy",
                     "--seeds", "0-1", *TINY, "--workers", "2", "--out", root], env, here)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 done, 0 skipped (already finished), 0 failed" in proc.stdout
    run_dirs = sorted(p.parent for p in root.glob("*/*/" + SUMMARY))
    assert len(run_dirs) == 2
    for run_dir in run_dirs:
        assert len(_entropy_losses(run_dir)) == 1
    plan = json.loads((root / "sweep.json").read_text())
    assert plan["command"].startswith("grprune --plugin my_regs sweep ")


def test_plugins_from_the_environment_and_the_option(plugin_dir, monkeypatch):
    """GRPRUNE_PLUGINS (a file) and --plugin (the same module by name): imported once."""
    here, env = plugin_dir
    monkeypatch.chdir(here)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        res = CliRunner().invoke(main, ["--plugin", "my_regs", "ls", "regularizers"],
                                 env={"GRPRUNE_PLUGINS": str(here / "my_regs.py")})
        assert res.exit_code == 0, res.output
        assert "edge-entropy" in res.output and "reg.edge-entropy.floor" in res.output
    finally:
        from grprune.regularizers import REGULARIZERS
        REGULARIZERS.unregister("edge-entropy")
        sys.modules.pop("my_regs", None)


def test_an_unknown_plugin_is_one_line_and_exit_2(plugin_dir, monkeypatch):
    here, env = plugin_dir
    proc = _grprune(["--plugin", "my_regz", "run", *TINY], env, here)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "grprune: error: --plugin my_regz: no module named 'my_regz' in the current "
        "directory or on the Python path. Did you mean 'my_regs'?"]
    (here / "broken.py").write_text("import no_such_package_xyz\n")
    monkeypatch.chdir(here)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for args, message in (
            (["--plugin", "broken"], "grprune: error: --plugin broken failed to import: "
                                     "ModuleNotFoundError: No module named "
                                     "'no_such_package_xyz'"),
            (["--plugin", "nowhere/my_regs.py"], "grprune: error: --plugin "
                                                 f"{here / 'nowhere/my_regs.py'}: no such file")):
        res = CliRunner().invoke(main, [*args, "ls", "regularizers"])
        assert res.exit_code == 2 and res.output.strip() == message


@pytest.mark.parametrize("args", [["run", "--epochs"], ["run", "--seed"], ["tune", "--trials"],
                                  ["sweep", "--workers"], ["calibrate", "--bins"]])
def test_a_number_of_100000_digits_is_one_short_usage_error(args):
    res = CliRunner().invoke(main, [*args, "9" * 100_000])
    assert res.exit_code == 2
    last = res.output.strip().splitlines()[-1]
    assert len(last) < 220 and "100,000 characters" in last, last
