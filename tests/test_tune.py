"""``grprune tune`` (issue 62): trials are run directories, the study survives SIGKILL,
pruned runs are marked pruned, ``collect`` reads a tune directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grprune.cli import main
from grprune.record.marks import PrunedRecord, read_pruned, write_pruned
from grprune.record.rundir import RunDir
from grprune.tune.space import Space

optuna = pytest.importorskip("optuna")

TINY = ["--data", "ogbg-molbbbp", "--reg", "size,eps-align", "-H", "data.limit=100",
        "--epochs", "2"]


def _tune(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "grprune", "tune", *TINY, "--workers", "2",
            "--storage", f"sqlite:///{out}/study.db", "--out", str(out), *extra]


def _study(out: Path):
    return optuna.load_study(study_name="tune", storage=f"sqlite:///{out}/study.db")


def _counted(study) -> list:
    """The finished or pruned trials that trained a configuration (not repeats)."""
    return [t for t in study.get_trials(deepcopy=False)
            if t.state.name in ("COMPLETE", "PRUNED") and "grprune.repeat_of" not in t.user_attrs]


def test_a_space_file_reads_ranges_and_choices_and_refuses_bad_ones(tmp_path):
    good = tmp_path / "space.yaml"
    good.write_text("train.lr: {low: 0.0001, high: 0.01, log: true}\n"
                    "encoder.hidden: {low: 32, high: 128, step: 32}\nselector.layers: [2, 3]\n")
    space = Space.from_file(good)
    assert space.axes["encoder.hidden"].kind == "int"
    assert space.grid() is None and space.size() is None  # a float range: no grid
    assert Space.from_mapping({"a.b": [1, 2], "c.d": {"low": 1, "high": 3}}, "x").size() == 6
    for text, message in (("[1, 2]", "non-empty mapping"), ("a.b: {low: 2, high: 1}", "low < high"),
                          ("a.b: {low: 1}", "low and high"), ("a.b: []", "empty list")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        result = CliRunner().invoke(main, ["tune", *TINY, "--trials", "1", "--space", str(bad),
                                           "--out", str(tmp_path / "o")])
        assert result.exit_code == 2 and message in result.output, result.output
        assert "Traceback" not in result.output


def test_bad_tune_input_is_one_line_and_exit_2(tmp_path):
    runner = CliRunner()
    for args, message in (
            (["--trials", "2", "--data", "ogbg-molbbbp,good-motif"], "one value"),
            (["--trials", "2", "--reg", "none"], "nothing to search"),
            (["--reg", "size"], "--trials is needed"),
            (["--trials", "2", "--reg", "size", "--storage", "nosuch://x"], "--storage"),
            (["--trials", "2", "--reg", "size", "--study", " "], "--study is empty")):
        result = runner.invoke(main, ["tune", *args, "--out", str(tmp_path / "o")])
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output, result.output


def test_a_missing_optuna_exits_2_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    result = CliRunner().invoke(main, ["tune", *TINY, "--trials", "1", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "grprune: error: grprune tune needs the optuna package: pip install 'grprune[tune]'"]


def _spec(out: Path, **options):
    """A TuneSpec of molbbbp ERM (``options`` as ``grprune run`` takes them), its space a
    log-uniform learning rate: a repeated value can only be a repeated random stream."""
    from grprune.tune.setup import base_and_space
    from grprune.tune.spec import TuneSpec
    (out / "space.yaml").parent.mkdir(parents=True, exist_ok=True)
    (out / "space.yaml").write_text("train.lr: {low: 0.0001, high: 0.01, log: true}\n")
    base, space = base_and_space({"data": "ogbg-molbbbp", "reg": "none", **options},
                                 out / "space.yaml")
    return TuneSpec(base=base, space=space, root=out, trials=4)


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_a_resumed_study_does_not_propose_the_first_process_values_again(tmp_path, sampler):
    """A seeded sampler starts its stream again in a new process: the study's second
    Tuner must not ask the first one's values (at 634a799 trials 7-9 of a resumed
    equal-budget study repeated trials 0-2), while a fresh study's first values stay."""
    from grprune.tune.study import Tuner

    def asked(n: int) -> list[float]:
        spec = _spec(tmp_path / "tune")
        spec.sampler = sampler
        study = Tuner(spec).study
        values = []
        for _ in range(n):
            trial = study.ask()
            values.append(spec.space.suggest(trial)["train.lr"])
            study.tell(trial, 0.5)
        return values

    first, second = asked(2), asked(2)
    assert not set(first) & set(second), (first, second)
    again = tmp_path / "fresh"
    spec = _spec(again)
    spec.sampler = sampler
    assert spec.space.suggest(Tuner(spec).study.ask())["train.lr"] == first[0]


@pytest.mark.slow
def test_a_configuration_asked_twice_at_once_trains_once(tmp_path):
    """Two trials with the same values in flight at once (the sampler asked again for a
    configuration in training; here enqueued): the second waits for the first's run and is
    told its result; the run directory trains once (at 634a799 the second resumed the
    first's pruned run to its end, one run directory behind two trials)."""
    from grprune.tune.study import Tuner
    out = tmp_path / "tune"
    spec = _spec(out, epochs=2, overrides=["data.limit=60"])
    spec.workers, spec.trials, spec.pruner = 2, 2, "none"
    spec.env = {"OMP_NUM_THREADS": "1"}
    ended: list[tuple[int, str, str]] = []
    tuner = Tuner(spec, on_end=lambda n, state, value, detail, secs:
                  ended.append((n, state, detail)))
    for _ in range(2):
        tuner.study.enqueue_trial({"train.lr": 0.003})
    tuner.run()
    trials = tuner.study.get_trials()  # the repeat is not counted: a third trial trains
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3, ended
    assert trials[0].value == trials[1].value
    assert trials[1].user_attrs["grprune.repeat_of"] == 0
    dirs = {t.user_attrs["grprune.run_dir"] for t in trials[:2]}
    assert len(dirs) == 1
    log = (out / dirs.pop() / "sweep.log").read_text()
    assert log.count("=== grprune sweep") == 1, log  # one child trained it
    assert any(detail == "already in its run directory" for _, _, detail in ended)


def test_a_repeated_configuration_is_told_its_result_and_not_counted(tmp_path):
    """The budget counts trainings: a trial whose values repeat a finished trial's is told
    that result (``grprune.repeat_of``) and the study asks on; a space with fewer
    configurations than --trials ends short, saying so."""
    from grprune.tune.study import Tuner
    out = tmp_path / "tune"
    spec = _spec(out, epochs=1, overrides=["data.limit=40"])
    (out / "space.yaml").write_text("train.lr: [0.001, 0.003]\n")
    from grprune.tune.space import Space
    spec.space = Space.from_file(out / "space.yaml")
    spec.trials, spec.pruner, spec.sampler = 3, "none", "random"
    spec.env = {"OMP_NUM_THREADS": "1"}
    tuner = Tuner(spec)
    for lr in ("0.001", "0.001", "0.003"):
        tuner.study.enqueue_trial({"train.lr": lr})
    tuner.run()
    trials = tuner.study.get_trials()
    assert tuner.counted() == 2 and len({t.user_attrs["grprune.run_dir"] for t in trials}) == 2
    assert trials[1].user_attrs["grprune.repeat_of"] == 0
    assert trials[1].value == trials[0].value and trials[2].state.name == "COMPLETE"
    assert tuner.note == "the space has 2 configurations, all tried"
    assert tuner.repeated >= 1
    from grprune.tune.report import trial_rows, write_trials_csv
    rows = trial_rows(tuner.study, out)
    assert [(r.repeat_of, r.epochs) for r in rows] == [(None, 1), (0, 0), (None, 1)]
    import csv
    table = list(csv.DictReader(open(write_trials_csv(out, rows))))
    assert [r["repeat_of"] for r in table] == ["", "0", ""]


def test_a_study_refuses_a_command_with_another_base_configuration(tmp_path):
    """Trials of one study share everything but the searched keys: resuming it with another
    preset (or fixed value) is refused with exit 2, naming what differs."""
    from grprune.errors import GrpruneError
    from grprune.tune.study import Tuner
    out = tmp_path / "tune"
    Tuner(_spec(out, preset="paper"))
    Tuner(_spec(out, preset="paper"))  # the same command goes on
    with pytest.raises(GrpruneError, match="another configuration: .*encoder.hidden"):
        Tuner(_spec(out, preset="paper", overrides=["encoder.hidden=32"]))
    with pytest.raises(GrpruneError, match="another configuration"):
        Tuner(_spec(out, preset="official"))
    result = CliRunner().invoke(main, ["tune", "--data", "ogbg-molbbbp", "--reg", "none",
                                       "--space", str(out / "space.yaml"), "--preset",
                                       "official", "--trials", "1", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "another configuration" in result.output
    assert "Traceback" not in result.output


def test_the_end_warns_when_trials_selected_an_erm_warmup_epoch(tmp_path):
    """A PrunE trial that selected an ERM warm-up epoch reports the warm-up model: the
    study cannot tell its values apart, and the end of tune says so (16 of 20 PrunE trials
    of the equal-budget study on molbbbp scaffold did, under the official preset)."""
    from grprune.record.summary import RunSummary
    from grprune.tune.report import TrialRow, warmup_note
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", *TINY, "--epochs", "1", "--preset", "official",
                                       "--out", str(run_dir), "--progress", "none"])
    assert result.exit_code == 0, result.output
    summary = RunDir(run_dir).status().summary
    assert isinstance(summary, RunSummary) and summary.selected_phase == "warmup"
    row = TrialRow(0, "COMPLETE", summary.valid, "run", 1)
    note = warmup_note([row, TrialRow(1, "COMPLETE", summary.valid, "run", 0, repeat_of=0)],
                       tmp_path)
    assert note is not None and note.startswith("1 of 1 finished trials selected an ERM")
    assert "train.select_warmup=false" in note
    assert warmup_note([TrialRow(0, "PRUNED", None, "run", 1)], tmp_path) is None


def test_a_pruned_run_directory_is_pruned_not_failed_and_resumes(tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", *TINY, "--epochs", "1", "--out", str(run_dir),
                                       "--progress", "none"])
    assert result.exit_code == 0, result.output
    rd = RunDir(run_dir)
    rd.remove_state()
    write_pruned(run_dir, PrunedRecord(epoch=0, value=0.5, metric="rocauc", study="s", trial=1))
    # a summary wins: it finished; without one, pruned
    assert rd.status().state == "finished"
    (run_dir / "summary.json").unlink()
    assert rd.status().state == "pruned"
    assert read_pruned(run_dir) == PrunedRecord(epoch=0, value=0.5, metric="rocauc",
                                                study="s", trial=1)
    from grprune.collect.reading import read_run
    assert read_run(run_dir).kind == "pruned"  # type: ignore[union-attr]


@pytest.mark.slow
def test_tune_killed_and_rerun_ends_with_exactly_the_trials_and_collect_reads_them(tmp_path):
    """Killed (SIGKILL) once two trials have ended, with another running, and run again:
    the study ends with 6 finished or pruned trials, a stale trial re-asked once."""
    out = tmp_path / "tune"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(_tune(out, "--trials", "6"), stderr=subprocess.PIPE, text=True,
                            env=env, stdout=subprocess.DEVNULL)
    done = 0
    assert proc.stderr is not None
    for line in proc.stderr:  # killed at the first trial started after two ended
        if " finished" in line or " pruned" in line:
            done += 1
        elif " start " in line and done >= 2:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    assert done >= 2
    assert any(t.state.name == "RUNNING" for t in _study(out).get_trials())  # stale ones
    second = subprocess.run(_tune(out, "--trials", "6"), capture_output=True, text=True,
                            env=env)
    assert second.returncode == 0, second.stderr
    study = _study(out)
    counted = _counted(study)
    assert len(counted) == 6
    assert not [t for t in study.get_trials() if t.state.name == "RUNNING"]
    retried = [t.user_attrs["grprune.retry_of"] for t in study.get_trials()
               if "grprune.retry_of" in t.user_attrs]
    assert len(retried) == len(set(retried))  # each stale trial re-asked once
    for t in counted:  # each an ordinary run directory, finished or marked pruned
        state = RunDir(out / t.user_attrs["grprune.run_dir"]).status().state
        assert state == ("finished" if t.state.name == "COMPLETE" else "pruned")
    assert (out / "best.yaml").is_file() and (out / "history.png").is_file()
    assert "best: trial" in second.stdout and "trials (valid rocauc)" in second.stdout
    # best.yaml is a configuration grprune run takes
    from grprune.record.userfiles import load_config_file
    assert load_config_file(out / "best.yaml")["data"]["name"] == "ogbg-molbbbp"
    # collect reads every trial: the finished ones as runs, the pruned ones as pruned
    from grprune.collect.reading import scan_runs
    runs, problems = scan_runs(out)
    dirs = {out / t.user_attrs["grprune.run_dir"] for t in counted}
    read = {r.path for r in runs} | {p.path for p in problems if p.kind == "pruned"}
    assert dirs <= read, dirs - read
    table = CliRunner().invoke(main, ["collect", str(out), "--select", "all", "--layout",
                                      "long", "--out", str(tmp_path / "table")])
    assert table.exit_code == 0, table.output
    assert (tmp_path / "table.csv").read_text().count("\n") >= 1 + len(runs)


def test_the_trial_hook_reports_each_epoch_and_prunes_into_the_run_directory(tmp_path):
    """The child's epoch callback: the valid metric is reported at step = epoch; when the
    pruner says so, pruned.json is written and RunPruned raised (not a failure)."""
    import json

    from grprune.errors import RunPruned
    from grprune.record.epoch import EpochRecord
    from grprune.tune.trial import TRIAL_ENV, trial_hook
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=url, study_name="s", direction="maximize")
    for _ in range(2):  # two trials at 0.5, then 0.9
        done = study.ask()
        done.report(0.5, 0)
        done.report(0.9, 1)
        study.tell(done, 0.9)
    trial = study.ask()
    env = {TRIAL_ENV: json.dumps({"storage": url, "study": "s", "trial": trial.number,
                                  "pruner": "median", "epochs": 3})}
    hook = trial_hook(tmp_path, env)
    assert hook is not None and trial_hook(tmp_path, {}) is None
    hook(EpochRecord(epoch=0, scores={"valid": {"rocauc": 0.6}}))  # above the median: on
    with pytest.raises(RunPruned, match="after epoch 1"):
        hook(EpochRecord(epoch=1, scores={"valid": {"rocauc": 0.7}}))
    assert read_pruned(tmp_path) == PrunedRecord(
        epoch=1, value=0.7, metric="rocauc", study="s", trial=trial.number,
        time=read_pruned(tmp_path).time)  # type: ignore[union-attr]
    frozen = optuna.load_study(study_name="s", storage=url).trials[trial.number]
    assert frozen.intermediate_values == {0: 0.6, 1: 0.7}


def test_no_trial_is_pruned_during_warmup_or_the_first_quarter():
    from grprune.tune.trial import make_pruner, prune_after_default
    assert prune_after_default(100, 10) == 25 and prune_after_default(30, 10) == 10
    assert prune_after_default(3, 0) == 0
    study = optuna.create_study(direction="maximize",
                                pruner=make_pruner("median", 40, after=10))
    for value in (0.9, 0.9):  # two finished trials at 0.9 every epoch
        t = study.ask()
        for epoch in range(12):
            t.report(value, epoch)
        study.tell(t, value)
    low = study.ask()
    low.report(0.1, 9)
    assert not low.should_prune()  # epoch 9 < 10: kept however low
    low.report(0.1, 10)
    assert low.should_prune()


def test_a_space_file_with_a_huge_integer_is_one_short_line(tmp_path):
    from grprune.errors import GrpruneError
    (tmp_path / "s.yaml").write_text("train.lr: " + "9" * 100_000 + "\n")
    with pytest.raises(GrpruneError) as err:
        Space.from_file(tmp_path / "s.yaml")
    assert len(str(err.value)) < 300 and "100,000 characters" in str(err.value)
