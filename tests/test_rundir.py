"""Every state of a run directory, judged once (RunDir.status) and acted on the same way by
``grprune run``, ``grprune sweep --dry-run`` and ``grprune collect``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from grprune.cli import main
from grprune.collect import scan_runs
from grprune.record.files import CONFIG, ERROR, SUMMARY, atomic_write_json
from grprune.record.rundir import RunDir
from grprune.run import execute
from grprune.sweep import expand, grid_from_options
from grprune.sweep.plan import run_dir_of

FLAGS = ["--reg", "none", "--epochs", "2", "-H", "data.limit=32", "-H", "train.batch_size=16",
         "--device", "cpu"]

#: state -> (RunDir state, `grprune run`: exit code and words, sweep status, collect kind)
EXPECT = {
    "empty": ("empty", 0, "", "pending", None),
    "foreign": ("foreign", 2, "not a grprune run directory", "foreign", None),
    "corrupt config": ("corrupt", 2, "config.json is corrupt", "foreign", "corrupt"),
    "another hash": ("other-config", 2, "different configuration", "foreign", "run"),
    "interrupted": ("interrupted", 0, "resuming", "interrupted", "unfinished"),
    "failed": ("failed", 0, "resuming", "failed", "failed"),
    "finished": ("finished", 0, "already holds this finished run", "finished", "run"),
    "locked": ("running", 2, "being run by another process", "running", "running"),
    "outdated": ("outdated", 2, "grprune reads run directories of version 2 and later",
                 "foreign", "outdated"),
}


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    """A sweep root with one run directory per state (seed i for the i-th state)."""
    root = tmp_path_factory.mktemp("states")
    confs = expand([grid_from_options(reg=["none"], epochs="2", seeds="0-8", device="cpu",
                                      hparams=["data.limit=32", "train.batch_size=16"])])
    dirs = {name: run_dir_of(conf, root) for name, conf in zip(EXPECT, confs.configs)}
    cfgs = {name: conf.cfg for name, conf in zip(EXPECT, confs.configs)}

    def stop(record):
        raise KeyboardInterrupt

    dirs["empty"].mkdir(parents=True)
    dirs["foreign"].mkdir(parents=True)
    (dirs["foreign"] / "notes.txt").write_text("mine")
    dirs["corrupt config"].mkdir(parents=True)
    (dirs["corrupt config"] / CONFIG).write_text("{torn")
    execute(cfgs["finished"], dirs["finished"], log=lambda m: None)
    other = expand([grid_from_options(reg=["none"], epochs="2", seeds="100", device="cpu",
                                      hparams=["data.limit=32", "train.batch_size=16"])])
    execute(other.configs[0].cfg, dirs["another hash"], log=lambda m: None)  # seed 100 in 3's place
    for name in ("interrupted", "failed", "locked"):
        with pytest.raises(KeyboardInterrupt):
            execute(cfgs[name], dirs[name], on_epoch=stop, log=lambda m: None)
    atomic_write_json(dirs["failed"] / ERROR, {"message": "boom"})
    execute(cfgs["outdated"], dirs["outdated"], log=lambda m: None)  # then as version 1 wrote it
    old = json.loads((dirs["outdated"] / CONFIG).read_text())
    old["encoder"].update(old.pop("model"))
    old.pop("features")
    atomic_write_json(dirs["outdated"] / CONFIG, {**old, "version": 1})
    return root, dirs, cfgs


def test_every_state_is_judged_once_and_acted_on_alike(states):
    root, dirs, cfgs = states
    with RunDir(dirs["locked"]).lock():  # another process is running it
        for name, (state, *_rest) in EXPECT.items():
            assert RunDir(dirs[name]).status(cfgs[name]).state == state, name
        # sweep --dry-run: one status per configuration
        res = CliRunner().invoke(main, ["sweep", *FLAGS[:4], "--seeds", "0-8", "-H",
                                        "data.limit=32", "-H", "train.batch_size=16",
                                        "--device", "cpu", "--out", str(root), "--dry-run"])
        assert res.exit_code == 0, res.output
        rows = {line.split("│")[2].strip(): line for line in res.output.splitlines()
                if line.count("│") > 3 and "seed" in line}
        for name, (_, _, _, sweep_status, _) in EXPECT.items():
            rel = dirs[name].relative_to(root).as_posix()
            assert sweep_status in rows[rel], (name, rows[rel])
        # collect: finished runs collected, the others reported by kind
        scan = scan_runs(root)
        kinds = {p.path: p.kind for p in scan.problems}
        kinds.update({r.path: "run" for r in scan.runs})
        for name, (*_, collect_kind) in EXPECT.items():
            assert kinds.get(dirs[name]) == collect_kind, name
        # run: what `grprune run` does with each (the locked one while the lock is held)
        res = CliRunner().invoke(main, ["run", *FLAGS, "--seed", "7", "--out",
                                        str(dirs["locked"]), "--progress", "none"])
        assert res.exit_code == 2 and EXPECT["locked"][2] in res.output, res.output
    for name, (_, code, words, _, _) in EXPECT.items():
        if name == "locked":
            continue
        seed = list(EXPECT).index(name)
        res = CliRunner().invoke(main, ["run", *FLAGS, "--seed", str(seed), "--out",
                                        str(dirs[name]), "--progress", "none"])
        assert res.exit_code == code and words in res.output, (name, res.output)
        if code == 2:
            assert len([x for x in res.output.splitlines() if x.strip()]) == 1
    assert (dirs["foreign"] / "notes.txt").read_text() == "mine"  # left alone
    assert json.loads((dirs["failed"] / SUMMARY).read_text())["epochs_run"] == 2
