"""``grprune sweep``: grid expansion, specs, the plan file, statuses, and a mini sweep."""

from __future__ import annotations

from typing import Any
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from grprune.record.files import CONFIG, RESULTS, SUMMARY, atomic_write_json, read_records
from grprune.record.rundir import RunDir
from grprune.cli import main
from grprune.resolve import resolve_config
from grprune.errors import GrpruneError
from grprune.regularizers import REGULARIZERS
from grprune.record.files import ERROR, LOG
from grprune.sweep import (PLAN, expand, grid_from_options, load_spec, parse_hparams,
                           parse_reg, parse_seeds, run_status)
from grprune.sweep.expansion import run_command
from grprune.sweep.plan import Job, child_args, run_dir_of

# the paper preset: regularizers count from the first epoch (official warms up for 10)
SMALL = ["--preset", "paper", "--epochs", "2", "-H", "data.limit=48"]


def sweep(*args, env=None):
    return CliRunner().invoke(main, ["sweep", *map(str, args)], env=env,
                              catch_exceptions=False)


def configs(**options):
    return expand([grid_from_options(**options)])


# -- grid units ----------------------------------------------------------------------

def test_parse_seeds_ranges_and_lists():
    assert parse_seeds("1-4") == [1, 2, 3, 4]
    assert parse_seeds("0,2,5") == [0, 2, 5]
    assert parse_seeds("0-2,1,7") == [0, 1, 2, 7]
    assert parse_seeds([3, "5-6"]) == [3, 5, 6]
    for bad in ("1-x", "4-1", "", "1,,2", "one"):
        with pytest.raises(GrpruneError, match="seeds"):
            parse_seeds(bad)


def test_reg_sets_repeat_and_semicolon():
    assert parse_reg(["size,eps-align", "size;none"]) == ["size,eps-align", "size", "none"]
    with pytest.raises(GrpruneError, match="empty regularizer set"):
        parse_reg(["size;;none"])
    ex = configs(reg=["size,eps-align", "size;eps-align", "none"], data="ogbg-molbbbp")
    assert [sorted(c.cfg["reg"]) for c in ex.configs] == [
        ["eps-align", "size"], ["size"], ["eps-align"], []]
    assert ex.varying == ["reg"]


def test_hparam_lists_expand_and_escape_commas():
    assert parse_hparams(["reg.size.eta=0.75,0.85", "reg.size.eta=0.5", "train.lr=1e-3"]) == {
        "reg.size.eta": ["0.75", "0.85", "0.5"], "train.lr": ["1e-3"]}
    assert parse_hparams([r"data.path=a\,b.json"]) == {"data.path": ["a,b.json"]}
    with pytest.raises(GrpruneError, match="expected section.key=value"):
        parse_hparams(["eta=0.5"])


def test_cartesian_product_comma_lists_and_seeds():
    ex = configs(data="ogbg-molbbbp", split="scaffold,size", epochs="3,5", seeds="0-1",
                 hparams=["reg.size.eta=0.75,0.85"])
    assert ex.points == len(ex.configs) == 16 and ex.duplicates == 0
    assert ex.varying == ["split", "epochs", "seed", "reg.size.eta"]
    seen = {(c.cfg["data"]["split"], c.cfg["train"]["epochs"], c.cfg["train"]["seed"],
             c.cfg["reg"]["size"]["eta"]) for c in ex.configs}
    assert len(seen) == 16
    # the seed varies fastest
    assert [c.cfg["train"]["seed"] for c in ex.configs[:4]] == [0, 1, 0, 1]


def test_inapplicable_overrides_are_dropped_then_deduplicated():
    ex = configs(reg=["size", "none"], seeds="0", hparams=["reg.size.eta=0.75,0.85",
                                                           "selector.tau=0.5"])
    assert ex.points == 4 and len(ex.configs) == 3 and ex.duplicates == 1
    erm = [c for c in ex.configs if not c.cfg["reg"]]
    assert len(erm) == 1 and erm[0].cfg["selector"]["name"] == "none"
    assert erm[0].dropped == ["reg.size.eta=0.75", "selector.tau=0.5", "reg.size.eta=0.85"]
    assert ex.values(erm[0]) == {"reg": "none", "reg.size.eta": None, "selector.tau": None}
    sized = [c for c in ex.configs if c.cfg["reg"]]
    assert [c.cfg["reg"]["size"]["eta"] for c in sized] == [0.75, 0.85]
    assert all(c.cfg["selector"]["tau"] == 0.5 and not c.dropped for c in sized)


def test_dedupe_by_resolved_hash():
    ex = configs(selector="auto,gumbel-gin", reg=["size,eps-align"], seeds="0,0",
                 hparams=["reg.size.eta=0.85"])  # auto is gumbel-gin, 0.85 the default
    assert ex.points == 2 and len(ex.configs) == 1 and ex.varying == []


def test_dry_run_prints_plan_and_commands(tmp_path):
    res = sweep("--reg", "size", "--reg", "none", "-H", "reg.size.eta=0.75,0.85",
                "--seeds", "0-1", "--out", tmp_path / "sw", "--dry-run", "--show-commands")
    assert res.exit_code == 0, res.output
    assert "6 configurations" in res.output and "8 grid points, 2 duplicates removed" in res.output
    assert "ogbg-molbbbp/erm-seed1-" in res.output and "reg.size.eta=0.75,0.85" in res.output
    assert "6 pending" in res.output
    commands = [line for line in res.output.splitlines() if line.startswith("grprune run")]
    assert len(commands) == 6
    assert "grprune run --reg none --seed 0 --out" in commands[-2]
    assert not (tmp_path / "sw").exists()  # a dry run writes nothing


def test_run_command_resolves_to_the_same_hash():
    ex = configs(reg=["size", "none"], seeds="3", epochs="4",
                 hparams=["reg.size.eta=0.6", "train.lr=0.002"])
    for conf in ex.configs:
        args = run_command(conf)[1:]
        reg = args[args.index("--reg") + 1]
        overrides = [args[i + 1] for i, a in enumerate(args) if a == "-H"]
        cfg = resolve_config(reg=reg, flags={"train.seed": 3, "train.epochs": 4},
                             overrides=overrides)
        assert cfg["hash"] == conf.hash


def test_written_config_resolves_to_the_same_hash(tmp_path):
    """The child runs ``--config <run_dir>/config.json --device D --root R``."""
    ex = configs(reg=["gsat", "size,eps-align", "none"], seeds="2", device="cpu",
                 root=str(tmp_path / "data"), hparams=["selector.tau=0.5"])
    for conf in ex.configs:
        run_dir = run_dir_of(conf, tmp_path)
        atomic_write_json(run_dir / CONFIG, conf.cfg)
        args = child_args(conf, run_dir)
        assert args[:2] == ["run", "--config"] and args[-4:] == [
            "--device", "cpu", "--root", str(tmp_path / "data")]
        cfg = resolve_config(file=run_dir / CONFIG,
                             flags={"train.device": "cpu", "data.root": str(tmp_path / "d2")})
        assert cfg["hash"] == conf.hash == run_dir.name.rsplit("-", 1)[1]


def test_env_vars_feed_the_options(tmp_path):
    res = sweep("--dry-run", "--out", tmp_path, env={"GRPRUNE_SWEEP_SEEDS": "0-2",
                                                     "GRPRUNE_SWEEP_REG": "size none"})
    assert res.exit_code == 0, res.output
    assert "6 configurations" in res.output


@pytest.mark.parametrize("args, message", [
    (["--reg", "none", "-H", "reg.size.eta=0.5"],
     "grid point reg=none, reg.size.eta=0.5: reg.size.eta is set but regularizer 'size'"),
    (["--split", "scaffold,nosuch", "--seeds", "0-2"],
     "grid point split=nosuch, seed=0 (and 2 more grid points): "),
    (["--reg", "size,eps-algn"], "Did you mean 'eps-align'?"),
    (["--seeds", "1-x"], "bad seeds value '1-x'"),
    (["--epochs", "5,x"], "bad --epochs value"),
    (["-H", "nope.x=1"], "unknown section 'nope'"),
    (["--config", "missing.yaml"], "config file not found"),
])
def test_bad_grids_exit_2_before_anything_runs(tmp_path, args, message):
    res = sweep(*args, "--out", tmp_path / "sw")
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert not (tmp_path / "sw").exists()


# -- YAML specs ----------------------------------------------------------------------

def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_spec_mapping_and_cli_override(tmp_path):
    spec = write(tmp_path / "s.yaml", """
data: ogbg-molbbbp
reg: [size, "size,eps-align", [size, eps-align], none]
seeds: 0-1
epochs: [3, 4]
hparams:
  reg.size.eta: [0.75, 0.85]
  train.lr: 0.002
""")
    grids = load_spec(spec)
    assert grids[0].axes["reg"] == ["size", "size,eps-align", "none"]
    ex = expand(grids)
    assert len(ex.configs) == (2 + 2 + 1) * 2 * 2  # reg sets x epochs x seeds
    assert {c.cfg["train"]["lr"] for c in ex.configs} == {0.002}
    # command-line options override the spec's
    cli = grid_from_options(seeds="5", hparams=["train.lr=0.01"])
    ex = expand([g.update(cli) for g in grids])
    assert {c.cfg["train"]["seed"] for c in ex.configs} == {5}
    assert {c.cfg["train"]["lr"] for c in ex.configs} == {0.01}
    res = sweep("--spec", spec, "--seeds", "7", "--dry-run", "--out", tmp_path / "sw")
    assert res.exit_code == 0 and "10 configurations" in res.output


def test_spec_list_of_grids_is_a_union(tmp_path):
    spec = write(tmp_path / "s.yaml", """
- {reg: [none], seeds: [0, 1]}
- {reg: ["size,eps-align"], seeds: 0, hparams: {reg.size.eta: "0.75,0.85"}}
- {reg: none, seeds: 1}          # duplicates a configuration of the first grid
""")
    ex = expand(load_spec(spec))
    assert ex.points == 5 and len(ex.configs) == 4 and ex.duplicates == 1
    assert ex.varying == ["reg", "seed", "reg.size.eta"]


@pytest.mark.parametrize("text, message", [
    ("- 1\n- 2\n", "grid 1 must be a mapping of options"),
    ("just a string\n", "must hold a mapping of options"),
    ("", "must hold a mapping of options"),
    ("seed: 1\nsed: 2\n", "unknown key 'sed' in sweep spec"),
    ("data: [ogbg-molbbbp\n", "cannot parse sweep spec"),
    ("hparams: [1, 2]\n", "hparams must be a mapping"),
    ("reg: []\n", "reg must be a list of regularizer sets"),
    ("seeds: x-y\n", "bad seeds value 'x-y'"),
])
def test_bad_specs_exit_2(tmp_path, text, message):
    spec = write(tmp_path / "s.yaml", text)
    res = sweep("--spec", spec, "--out", tmp_path / "sw")
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1


def test_missing_spec_and_did_you_mean(tmp_path):
    res = sweep("--spec", tmp_path / "nope.yaml", "--out", tmp_path / "sw")
    assert res.exit_code == 2 and "sweep spec not found" in res.output
    spec = write(tmp_path / "s.yaml", "hparam: {a.b: 1}\n")
    res = sweep("--spec", spec, "--out", tmp_path / "sw")
    assert res.exit_code == 2 and "Did you mean 'hparams'?" in res.output


# -- statuses, plan, launchers ---------------------------------------------------------

def test_run_status(tmp_path):
    conf = configs(seeds="0").configs[0]
    d = run_dir_of(conf, tmp_path)
    assert run_status(conf.cfg, d)[0] == "pending"
    d.mkdir(parents=True)
    (d / LOG).write_text("old log\n")
    assert run_status(conf.cfg, d)[0] == "pending"
    (d / "notes.txt").write_text("mine")
    assert run_status(conf.cfg, d) == ("foreign", "a non-empty directory without "
                                                   "config.json (notes.txt, ...)")
    (d / CONFIG).write_text("{torn")
    assert run_status(conf.cfg, d)[0] == "foreign"
    atomic_write_json(d / CONFIG, {**conf.cfg, "train": {**conf.cfg["train"], "seed": 9},
                                       "hash": "x"})
    assert "holds another configuration" in run_status(conf.cfg, d)[1]
    atomic_write_json(d / CONFIG, {**conf.cfg, "train": {**conf.cfg["train"],
                                                             "device": "cuda"}})
    assert run_status(conf.cfg, d)[0] == "interrupted"  # volatile keys do not count
    atomic_write_json(d / ERROR, {"message": "boom"})
    assert run_status(conf.cfg, d) == ("failed", "boom")
    atomic_write_json(d / SUMMARY, {"test": 0.5})  # no metric: corrupt, left alone
    assert run_status(conf.cfg, d) == ("foreign", "summary.json has no 'metric'")
    atomic_write_json(d / SUMMARY, {"metric": "rocauc", "test": 0.5})
    assert run_status(conf.cfg, d)[0] == "finished"


def test_a_bad_plan_file_is_never_overwritten(tmp_path):
    (tmp_path / PLAN).write_text("not json")
    res = sweep("--seeds", "0", "--out", tmp_path)
    assert res.exit_code == 2 and "is not a grprune sweep plan" in res.output
    assert (tmp_path / PLAN).read_text() == "not json"


def test_ray_launcher_without_ray(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    res = sweep("--launcher", "ray", "--out", tmp_path)
    assert res.exit_code == 2 and "pip install 'grprune[ray]'" in res.output


def test_local_launcher_stops_children_on_interrupt(tmp_path, monkeypatch):
    from grprune.sweep import launchers
    procs = []

    def fake_start(args, env, log, cwd):
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
        return procs[-1]

    monkeypatch.setattr(launchers, "start_child", fake_start)
    jobs = [Job(c, run_dir_of(c, tmp_path), {}) for c in configs(seeds="0-2").configs]

    def on_start(job):
        if len(procs) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        launchers.launch_local(jobs, on_start, lambda *a: None, workers=2)
    assert len(procs) == 2 and all(p.poll() is not None for p in procs)  # children ended
    assert all((j.run_dir / CONFIG).is_file() for j in jobs[:2])  # prepared, interrupted
    assert not jobs[2].run_dir.exists()  # never started: still pending


def test_interrupt_exits_130_with_a_resume_hint(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    # where the command imports it from: the module that defines it
    monkeypatch.setattr("grprune.sweep.plan.run_sweep", interrupted)
    res = sweep("--seeds", "0", "--out", tmp_path, "--progress", "none")
    assert res.exit_code == 130
    assert "run the same command again to resume" in res.output
    assert (tmp_path / PLAN).is_file()


def test_a_run_another_sweep_took_after_the_plan_is_not_a_failure(tmp_path, capsys):
    """Two sweeps over one root: both plan a pending run, the other one starts it first,
    and this sweep's child exits on the held lock. That run is 'not run', not failed,
    and nothing is written into the directory the other process is running."""
    from grprune.sweep.plan import Outcome, run_sweep

    ex = configs(seeds="0", data="ogbg-molbbbp", epochs="2")
    seen: list[tuple[str, Any]] = []

    def launch(jobs, started, done):
        for job in jobs:
            started(job)
            # the other sweep's child holds the lock now; ours exits 2 on it
            with RunDir(job.run_dir).lock():
                done(job, 2)

    outcome = run_sweep(ex, tmp_path, launch, env={},
                        on_done=lambda job, ok, msg: seen.append(("done", ok)),
                        on_foreign=lambda job, detail: seen.append(("foreign", detail)))
    run_dir = run_dir_of(ex.configs[0], tmp_path)
    assert isinstance(outcome, Outcome) and outcome.failed == []
    assert [d for d, _ in outcome.foreign] == [run_dir]
    assert seen == [("foreign", outcome.foreign[0][1])] and "another process" in seen[0][1]
    assert not (run_dir / ERROR).exists()
    # the CLI's display says so and counts it out of the total
    from grprune.cli.sweep import SweepDisplay
    display = SweepDisplay("plain", 1, tmp_path)
    job = Job(ex.configs[0], run_dir, {})
    display.start(job)
    display.foreign(job, outcome.foreign[0][1])
    assert (display.total, display.running, display.failed) == (0, 0, 0)
    assert f"not run {run_dir.relative_to(tmp_path).as_posix()}: another process" in (
        capsys.readouterr().err)
    # a child that fails on its own, with no lock held, is still a failure
    def fail_all(jobs, started, done) -> None:
        for j in jobs:
            done(j, 1)

    outcome = run_sweep(ex, tmp_path, fail_all, env={})
    assert [d for d, _ in outcome.failed] == [run_dir] and outcome.foreign == []


# -- a mini sweep end to end -----------------------------------------------------------

BOOM = """
from grprune.regularizers import REGULARIZERS, Regularizer


@REGULARIZERS.register("boom")
class Boom(Regularizer):
    \"\"\"Resolves like any regularizer and fails in the first training step.\"\"\"

    def loss(self, ctx):
        raise ValueError("boom in training")
"""


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    """Two sweeps into one sweep root, eta in {0.75, 0.85} x seeds {0, 1}.

    Seed 0 of both etas is run beforehand in this process (as ``grprune run --out
    <planned run dir>`` would), and the first sweep, over seed 0, only finds them
    finished. Then seed 1 of eta 0.75 is made an interrupted run (config.json only)
    and seed 1 of eta 0.85 a failed one (with a stale error.json). The second sweep,
    from a spec with two grids, is eta x seeds 0-1 (two finished, two to restart) plus
    the plugin regularizer ``boom`` (passes resolution, fails in training; the children
    get it from ``GRPRUNE_PLUGINS``) for eta 0.75, and for eta 0.85 a foreign directory
    at its run dir; it runs 3 children with --workers 2.
    """
    from grprune.cli import plugins
    from grprune.run import execute
    root = tmp_path_factory.mktemp("sweep")
    boom = write(root.parent / "boom_reg.py", BOOM)
    plugins.load([str(boom)])
    spec = write(root.parent / "spec.yaml", """
- {seeds: 0-1, hparams: {reg.size.eta: [0.75, 0.85]}}
- {seeds: 0, reg: "size,eps-align,boom", hparams: {reg.size.eta: [0.75, 0.85]}}
""")
    cli = grid_from_options(preset="paper", epochs="2", hparams=["data.limit=48"])
    ex = expand([g.update(cli) for g in load_spec(spec)])
    by = {(c.cfg["reg"]["size"]["eta"], c.cfg["train"]["seed"], "boom" in c.cfg["reg"]): c
          for c in ex.configs}
    for eta in (0.75, 0.85):
        conf = by[(eta, 0, False)]
        execute(conf.cfg, run_dir_of(conf, root), log=lambda msg: None)
    finished = {p: (p / SUMMARY).stat().st_mtime_ns for p in root.glob("*/*") if p.is_dir()}
    first = sweep("-H", "reg.size.eta=0.75,0.85", "--seeds", "0", *SMALL, "--workers", "2",
                  "--out", root, "--progress", "plain")
    plan1 = json.loads((root / PLAN).read_text())

    interrupted = run_dir_of(by[(0.75, 1, False)], root)
    atomic_write_json(interrupted / CONFIG, by[(0.75, 1, False)].cfg)
    failed = run_dir_of(by[(0.85, 1, False)], root)
    atomic_write_json(failed / CONFIG, by[(0.85, 1, False)].cfg)
    atomic_write_json(failed / ERROR, {"message": "old failure"})
    assert run_status(by[(0.85, 1, False)].cfg, failed)[0] == "failed"
    foreign = run_dir_of(by[(0.85, 0, True)], root)
    foreign.mkdir(parents=True)
    (foreign / "notes.txt").write_text("my notes")
    second = sweep("--spec", spec, *SMALL, "--workers", "2", "--out", root,
                   "--progress", "plain", env={plugins.ENV: str(boom)})
    yield dict(root=root, first=first, second=second, plan1=plan1, finished=finished,
               interrupted=interrupted, failed=failed, foreign=foreign,
               crashed=run_dir_of(by[(0.75, 0, True)], root), ex=ex)
    REGULARIZERS.unregister("boom")


def test_first_sweep_finds_the_finished_runs(mini):
    assert mini["first"].exit_code == 0, mini["first"].output
    assert "0 done, 2 skipped (already finished), 0 failed" in mini["first"].output
    assert len(mini["plan1"]["configs"]) == 2 and len(mini["finished"]) == 2
    assert {mini["root"] / c["run_dir"] for c in mini["plan1"]["configs"]} == set(
        mini["finished"])
    for entry in mini["plan1"]["configs"]:  # what ran, without parsing directory names
        cfg = json.loads((mini["root"] / entry["run_dir"] / "config.json").read_text())
        assert (entry["dataset"], entry["seed"]) == (cfg["data"]["name"], cfg["train"]["seed"])
        assert entry["method"] == "+".join(cfg["reg"]) and entry["hash"] == cfg["hash"]


def test_finished_runs_are_skipped(mini):
    assert "2 done, 2 skipped (already finished), 1 failed" in mini["second"].output
    for run_dir, mtime in mini["finished"].items():
        assert (run_dir / SUMMARY).stat().st_mtime_ns == mtime


def test_interrupted_and_failed_runs_restart_and_complete(mini):
    for run_dir in (mini["interrupted"], mini["failed"]):
        assert run_status(json.loads((run_dir / CONFIG).read_text()),
                          run_dir)[0] == "finished"
        assert not (run_dir / ERROR).exists()  # the stale error.json is gone
        assert len(read_records(run_dir / RESULTS)) == 2


def test_a_failed_run_keeps_error_json_and_others_go_on(mini):
    assert mini["second"].exit_code == 1
    error = json.loads((mini["crashed"] / ERROR).read_text())
    assert error["message"] == "ValueError: boom in training"
    assert error["returncode"] == 1 and error["stderr_tail"][-1] == error["message"]
    assert set(error) >= {"time", "command", "hash"}
    assert not (mini["crashed"] / SUMMARY).exists()
    rel = mini["crashed"].relative_to(mini["root"]).as_posix()
    assert f"failed: {rel}: ValueError: boom in training" in mini["second"].output


def test_foreign_directory_is_reported_and_left_alone(mini):
    foreign = mini["foreign"]
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    rel = foreign.relative_to(mini["root"]).as_posix()
    assert f"not run: {rel}: a non-empty directory without config.json" in mini["second"].output
    assert "1 not run (foreign, or running elsewhere)" in mini["second"].output


def test_plan_is_the_union_of_both_sweeps(mini):
    plan = json.loads((mini["root"] / PLAN).read_text())
    assert plan["version"] == 1
    assert plan["command"].startswith("grprune --plugin ") and " sweep --spec " in plan["command"]
    hashes = [c["hash"] for c in plan["configs"]]
    assert hashes[:2] == [c["hash"] for c in mini["plan1"]["configs"]]
    assert set(hashes) == {c.hash for c in mini["ex"].configs} and len(hashes) == 6
    for entry in plan["configs"]:
        run_dir = mini["root"] / entry["run_dir"]
        assert run_dir.name.endswith(entry["hash"]) and run_dir.is_dir()
        assert set(entry["values"]) <= {"seed", "reg.size.eta", "reg"}
    assert [len(s["configs"]) for s in plan["sweeps"][:2]] == [2, 6]
    assert [s["added"] for s in plan["sweeps"][:2]] == [2, 4]
    assert plan["configs"][0]["values"] == {"reg.size.eta": 0.75}


def test_rerun_after_everything_finished_runs_nothing(mini):
    """Re-running the first grid, now with both seeds, finds all four finished."""
    res = sweep("-H", "reg.size.eta=0.75,0.85", "--seeds", "0-1", *SMALL,
                "--out", mini["root"], "--progress", "none")
    assert res.exit_code == 0, res.output
    assert "0 done, 4 skipped (already finished), 0 failed" in res.output


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_sigint_stops_the_sweep_and_its_children(tmp_path):
    root = tmp_path / "sw"
    # Many epochs, and the signal only once an epoch has been saved: the runs must be
    # mid-way, however fast the machine. A shell starts background jobs with SIGINT
    # ignored, and the ignore is inherited: when the tests themselves run in the
    # background, give the sweep the disposition of a foreground command (as in a terminal).
    proc = subprocess.Popen([sys.executable, "-m", "grprune", "sweep", "--seeds", "0-1",
                             *SMALL, "--epochs", "500", "--workers", "2", "--out", str(root),
                             "--progress", "plain"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not list(root.glob("*/*/state.pt")) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # as Ctrl-C
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "run the same command again to resume" in err and "Traceback" not in err
    assert _processes_mentioning(str(root)) == []
    ex = configs(seeds="0-1", preset="paper", epochs="500", hparams=["data.limit=48"])
    statuses = {run_status(c.cfg, run_dir_of(c, root))[0] for c in ex.configs}
    assert "interrupted" in statuses and "failed" not in statuses
    assert len(json.loads((root / PLAN).read_text())["configs"]) == 2


def test_make_launcher_keeps_every_job_in_flight_on_a_cluster_without_workers():
    """``--launcher ray --address X`` without ``--workers`` submits every run at once
    (the help's "[default: all]"); with ``--workers N``, N; locally ``None`` is 1."""
    from grprune.sweep.launchers import launch_local, launch_ray, make_launcher
    launch, _ = make_launcher("ray", None, "auto")
    assert launch.func is launch_ray and launch.keywords["max_in_flight"] is None
    assert make_launcher("ray", 4, "auto")[0].keywords["max_in_flight"] == 4
    assert make_launcher("ray", None, None)[0].keywords["max_in_flight"] is None
    local, env = make_launcher("local", None)
    assert local.func is launch_local and local.keywords["workers"] == 1


def test_reuse_links_a_finished_run_of_another_root_instead_of_training_it(tmp_path):
    """``--reuse DIR``: a configuration finished under another sweep root (the same
    relative run directory, named by its config hash) is linked in, not trained again;
    ``collect`` reads it through the link; a directory already there is left alone."""
    from grprune.collect import scan_runs
    a, b = tmp_path / "a", tmp_path / "b"
    first = sweep("--reg", "none", "--seeds", "0", *SMALL, "--out", a, "--progress", "plain")
    assert first.exit_code == 0, first.output
    [erm] = [p for p in a.glob("*/*") if p.is_dir()]
    mtime = (erm / SUMMARY).stat().st_mtime_ns
    second = sweep("--reg", "none", "--reg", "size,eps-align", "--seeds", "0", *SMALL,
                   "--out", b, "--reuse", a, "--progress", "plain")
    assert second.exit_code == 0, second.output
    assert "1 finished run(s) linked from" in second.output
    assert "1 done, 1 skipped (already finished), 0 failed" in second.output
    linked = b / erm.relative_to(a)
    assert linked.is_symlink() and linked.resolve() == erm.resolve()
    assert (erm / SUMMARY).stat().st_mtime_ns == mtime  # not trained again
    assert sorted(r.path.name for r in scan_runs(b).runs) == sorted(
        p.name for p in b.glob("*/*"))
    assert " --reuse " in json.loads((b / PLAN).read_text())["command"]
    again = sweep("--reg", "none", "--seeds", "0", *SMALL, "--out", b, "--reuse", a,
                  "--progress", "plain")
    assert "linked" not in again.output and "1 skipped" in again.output
    assert sweep("--reg", "none", "--seeds", "0", *SMALL, "--out", b, "--reuse",
                 tmp_path / "nope").exit_code == 2
    # a glob takes every root it matches (--out itself left out), and may match none
    c = tmp_path / "c"
    third = sweep("--reg", "none", "--seeds", "0", *SMALL, "--out", c, "--reuse",
                  tmp_path / "[ab]", "--reuse", tmp_path / "z*", "--progress", "plain")
    assert third.exit_code == 0 and "1 finished run(s) linked from" in third.output
    assert (c / erm.relative_to(a)).resolve() == erm.resolve()
    # the run linked to is gone: the dangling link is dropped and the run trains in c
    import shutil
    shutil.rmtree(a)
    fourth = sweep("--reg", "none", "--seeds", "0", *SMALL, "--out", c, "--progress", "plain")
    assert fourth.exit_code == 0 and "1 done" in fourth.output, fourth.output
    assert not (c / erm.relative_to(a)).is_symlink()
