"""The typed run configuration: the model section, older layouts, the FeatureSpec record,
and the declared search spaces (``grprune sweep --search default``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
import json
import shutil
import warnings

import pytest
from click.testing import CliRunner

from grprune.record.files import CONFIG, SUMMARY
from grprune.record.rundir import RunDir
from grprune.cli import main
from grprune.errors import GrpruneError
from grprune.record.settings import ModelSettings, config_hash
from grprune.resolve import resolve_config
from grprune.encoders import ENCODERS
from grprune.inference import load_run
from grprune.regularizers import REGULARIZERS
from grprune.record.runconfig import FeatureSpec, RunConfig, upgrade
from grprune.selectors import SELECTORS
from grprune.sweep.grid import Grid
from grprune.sweep.search import search_space, with_search


@pytest.fixture(scope="module")
def bbbp_run(tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("bbbp") / "run"
    res = CliRunner().invoke(main, ["run", "--data", "ogbg-molbbbp", "--preset", "paper",
                                    "--epochs", "1", "-H", "data.limit=40",
                                    "-H", "model.head_layers=3",
                                    "--progress", "none", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _v1(cfg: Mapping[str, Any]) -> dict:
    """A configuration as version 1 wrote it: readout and head in the encoder section."""
    old = json.loads(json.dumps(cfg.to_dict() if isinstance(cfg, RunConfig) else cfg))
    old["encoder"].update(old.pop("model"))
    old.pop("features", None)
    old["version"] = 1
    return old


# -- the model section ------------------------------------------------------------------------
def test_model_section_holds_the_classifier_settings_not_the_encoder():
    cfg = resolve_config(data="good-motif", preset="official")
    assert isinstance(cfg, RunConfig) and cfg["version"] == 2
    assert cfg["model"] == {"readout": "sum-l2", "head_layers": 3}
    assert "readout" not in cfg["encoder"] and "head_layers" not in cfg["encoder"]
    assert "readout" not in ENCODERS.get("gin").defaults
    assert "readout" not in SELECTORS.get("gumbel-gin").defaults  # its GNN inherits nothing
    assert set(ModelSettings.defaults) == {"readout", "head_layers"}
    assert cfg.data.name == "good-motif" and cfg.selector.name == "gumbel-gin"
    assert list(cfg.reg) == ["size", "eps-align"] and cfg.preset == "official"


def test_old_encoder_keys_are_moved_with_one_note():
    with pytest.warns(UserWarning, match="encoder.readout is now model.readout"):
        cfg = resolve_config(overrides=["encoder.readout=mean"])
    assert cfg["model"]["readout"] == "mean"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new key: no note
        assert resolve_config(overrides=["model.readout=mean"])["hash"] == cfg["hash"]


def test_an_old_config_keeps_its_hash_and_loads_in_the_new_layout(tmp_path):
    new = resolve_config(data="good-motif", preset="official")
    old = _v1(new)
    assert config_hash(old) == config_hash(new) == new["hash"]
    up = upgrade(old)
    assert up["model"] == new["model"] and "readout" not in up["encoder"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(old))
    with pytest.warns(UserWarning, match="moved"):
        again = resolve_config(file=path)  # `grprune run --config old/config.json`
    assert again["hash"] == new["hash"] and again["model"] == new["model"]


def test_a_version_1_run_directory_is_refused_and_remade_with_the_command_it_names(
        bbbp_run, tmp_path):
    """Run directories are read from MIN_VERSION on: an older one is ``outdated``, refused
    with one exit-2 message naming its version and the command that re-makes it, which does
    (the version-1 config.json read in the current layout, to the same hash)."""
    from grprune.record.runconfig import MIN_VERSION
    old_dir = tmp_path / "old"
    shutil.copytree(bbbp_run, old_dir)
    cfg = json.loads((old_dir / CONFIG).read_text())
    (old_dir / CONFIG).write_text(json.dumps(_v1(cfg)))
    status = RunDir(old_dir).status(cfg)
    assert status.state == "outdated" and status.config is None
    assert MIN_VERSION == 2 and "version 1;" in status.reason
    with pytest.raises(GrpruneError, match="reads run directories of version 2 and later"):
        load_run(old_dir)
    for args in (["explain", str(old_dir)], ["run", "--config", str(old_dir / CONFIG),
                                             "--out", str(old_dir)]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # run --config: the moved keys' notes
            res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, res.output
        assert "config.json is of version 1" in res.output
        assert f"grprune run --config {old_dir / CONFIG} --out {old_dir} --force" in " ".join(
            res.output.split())
    with pytest.warns(UserWarning, match="moved"):
        res = CliRunner().invoke(main, ["run", "--config", str(old_dir / CONFIG), "--out",
                                        str(old_dir), "--force", "--progress", "none"])
    assert res.exit_code == 0, res.output
    remade = load_run(old_dir)
    assert remade.cfg["version"] == MIN_VERSION and remade.cfg.hash == cfg["hash"]
    assert sum(isinstance(m, __import__("torch").nn.Linear) for m in remade.model.head) == 3


# -- the FeatureSpec record ---------------------------------------------------------------------
def test_config_json_records_the_features(bbbp_run):
    cfg = RunConfig.from_dict(json.loads((bbbp_run / CONFIG).read_text()))
    summary = json.loads((bbbp_run / SUMMARY).read_text())
    assert cfg.features == FeatureSpec(kind="ogb", node_dim=9, edge_dim=3, classes=2)
    assert cfg.features == FeatureSpec.from_dict(summary["model"])  # the older record agrees
    assert cfg["hash"] == summary["config_hash"]


def test_load_run_builds_the_model_without_the_dataset(bbbp_run, tmp_path, monkeypatch):
    copy = tmp_path / "run"
    shutil.copytree(bbbp_run, copy)
    summary = json.loads((copy / SUMMARY).read_text())
    summary.pop("model")
    (copy / SUMMARY).write_text(json.dumps(summary))

    def no_data(*a, **k):
        raise AssertionError("the dataset was loaded")
    monkeypatch.setattr("grprune.inference.load_config_dataset", no_data)
    run = load_run(copy)
    assert run.features.classes == 2 and run.num_classes == 2 and not run.model.training


def test_feature_spec_refuses_an_incomplete_record():
    from grprune.errors import GrpruneError
    with pytest.raises(GrpruneError, match="bad features record"):
        FeatureSpec.from_dict({"kind": "ogb", "node_dim": 9})


# -- declared search spaces ---------------------------------------------------------------------
def _all_parts():
    for prefix, registry in (("reg.{}.", REGULARIZERS), ("selector.", SELECTORS),
                             ("encoder.", ENCODERS)):
        for name in registry.names():
            yield prefix.format(name), registry.get(name)


def test_every_declared_search_value_is_in_its_domain():
    for prefix, cls in _all_parts():
        for key, param in cls.params.items():
            for value in param.search:
                assert param.contains(value), f"{prefix}{key}: {value!r} not in {param.domain()}"


def test_prune_search_is_the_papers_grid():
    space = search_space([("reg.size.", REGULARIZERS.get("size")),
                          ("reg.eps-align.", REGULARIZERS.get("eps-align")),
                          ("selector.", SELECTORS.get("gumbel-gin"))])
    assert space == {"reg.size.weight": ["10.0", "40.0"], "reg.size.eta": ["0.5", "0.75", "0.85"],
                     "reg.eps-align.weight": ["0.1", "0.01", "0.001"],
                     "reg.eps-align.k": ["50.0", "70.0", "90.0"], "selector.layers": ["2", "3"]}


def test_search_keeps_given_keys_and_skips_parts_the_grid_lacks():
    grid = with_search(Grid(axes={"reg": ["irm"]}, hparams={"reg.irm.weight": ["5"]}))
    assert grid.hparams == {"reg.irm.weight": ["5"]}  # IRM needs no selector: no selector.*
    assert with_search(Grid(), "none").hparams == {}


def test_sweep_search_default_expands_the_declared_grid(tmp_path, data_root):
    args = ["sweep", "--data", "good-motif", "--reg", "size,eps-align", "--reg", "vrex",
            "--search", "default", "-H", "reg.size.eta=0.85", "--seeds", "0",
            "--out", str(tmp_path / "s"), "--dry-run"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    # PrunE: 2 (lambda_1) x 3 (lambda_2) x 3 (K) x 2 (selector layers), eta given; VREx: 4
    assert "sweep plan: 40 configurations" in res.output
    res = CliRunner().invoke(main, ["ls", "regularizers"])
    assert res.exit_code == 0 and "0.5, 0.75, 0.85" in res.output


def test_run_dir_gives_typed_summary_and_records(bbbp_run):
    from grprune.record.epoch import EpochRecord
    from grprune.record.summary import RunSummary
    status = RunDir(bbbp_run).status()
    summary = status.summary
    assert isinstance(summary, RunSummary) and isinstance(status.config, RunConfig)
    assert summary.metric == "rocauc" and summary.score("test") == summary.test
    assert summary.selected in ("best-valid", "last-epoch") and summary.use_selector is True
    records = RunDir(bbbp_run).records()
    assert records and all(isinstance(r, EpochRecord) for r in records)
    last = records[-1]
    assert last.epoch == len(records) - 1 and not last.warmup
    assert last.score("valid", "rocauc") == last.scores["valid"]["rocauc"]
    assert load_run(bbbp_run).summary.best_epoch == summary.best_epoch


def test_a_run_writes_config_json_once_with_its_features(tmp_path, monkeypatch, data_root):
    from grprune.record.summary import RunSummary
    from grprune.record import rundir
    from grprune.run import execute, plan_run

    writes = []
    real = rundir.atomic_write_json

    def counted(path, obj):
        writes.append((path.name, dict(obj)))
        real(path, obj)
    monkeypatch.setattr(rundir, "atomic_write_json", counted)  # RunDir: the one writer
    plan = plan_run(data="ogbg-molbbbp", epochs=1, hparams={"data.limit": 40},
                    progress="none", out=tmp_path / "run")
    status, summary = execute(plan.cfg, plan.run_dir, log=lambda msg: None)
    configs = [obj for name, obj in writes if name == CONFIG]
    assert status == "completed" and len(configs) == 1 and "features" in configs[0]
    assert [name for name, _ in writes] == [CONFIG, SUMMARY]
    assert isinstance(summary, RunSummary) and summary.config_hash == plan.cfg.hash
    stored = json.loads((plan.run_dir / SUMMARY).read_text())
    assert RunSummary.from_dict(stored).to_dict() == stored
    assert list(stored)[-3:] == ["data_load_s", "wall_time_s", "dataset_info"]
