"""``grprune collect`` and ``grprune.collect``: fake run directories with hand-chosen
numbers (no training), plus one end-to-end check on two tiny real runs."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil

import pytest
from click.testing import CliRunner

from grprune.collect import (CSV_COLUMNS, LAYOUTS, aggregate, mean_std, method_label, notes_for,
                             scan_runs, sensitivity, sweep_report, to_markdown)
from grprune.record.files import CONFIG, RESULTS, STATE, SUMMARY, atomic_write_json, write_records
from grprune.record.rundir import RunDir
from grprune.cli import main
from grprune.resolve import resolve_config
from grprune.errors import GrpruneError
from grprune.run import default_run_dir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fake_run(root, *, reg="size,eps-align", seed=0, valid=0.9, test=0.7, data="ogbg-molbbbp",
             overrides=(), selector=None, out=None, preset="paper", **summary_extra):
    """Write a finished run directory (config.json from resolve_config + summary.json);
    ``preset`` is the paper's unless named (``None``: ``--preset auto``'s)."""
    cfg = resolve_config(data=data, reg=reg, selector=selector, preset=preset,
                         flags={"train.seed": seed}, overrides=overrides)
    run_dir = out or default_run_dir(cfg, root)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / CONFIG, cfg)
    metric = "accuracy" if data in ("good-motif", "spmotif") else "rocauc"
    summary = {"dataset": cfg["data"]["name"], "split": cfg["data"].get("split"),
               "selector": cfg["selector"]["name"], "reg": list(cfg["reg"]), "seed": seed,
               "metric": metric, "best_epoch": 3, "valid": valid, "test": test,
               "kept_edge_fraction": 0.8, "motif_edge_rocauc": None, "wall_time_s": 1.0,
               "epoch_time_s_median": 0.1, "peak_mem_mib": 600.0, "device": "cpu",
               "config_hash": cfg["hash"], **summary_extra}
    atomic_write_json(run_dir / SUMMARY, summary)
    return run_dir


def prune_eta_grid(root):
    """PrunE with eta 0.5 (best valid) and eta 0.85 (best test), 3 seeds; ERM, 2 seeds."""
    for seed, (v, t) in enumerate([(0.90, 0.60), (0.92, 0.64), (0.94, 0.62)]):
        fake_run(root, seed=seed, valid=v, test=t, overrides=["reg.size.eta=0.5"])
    for seed, (v, t) in enumerate([(0.80, 0.70), (0.82, 0.74), (0.84, 0.78)]):
        fake_run(root, seed=seed, valid=v, test=t, overrides=["reg.size.eta=0.85"])
    for seed, (v, t) in enumerate([(0.85, 0.68), (0.86, 0.70)]):
        fake_run(root, reg="none", seed=seed, valid=v, test=t)


def collect(*args):
    return CliRunner().invoke(main, ["collect", *map(str, args)])


def by_method(rows):
    return {r["method"]: r for r in rows}


def read_csv(path):
    return list(csv.DictReader(io.StringIO(path.read_text())))


# --- aggregation and model selection ---------------------------------------------------

def test_mean_std_over_seeds_and_validation_selection(tmp_path):
    prune_eta_grid(tmp_path)
    runs, problems = scan_runs(tmp_path)
    assert len(runs) == 8 and problems == []
    rows = by_method(aggregate(runs))
    prune, erm = rows["PrunE"], rows["ERM"]
    # eta=0.5 has the best mean validation (0.92 vs 0.82): its test 0.60, 0.64, 0.62
    assert prune["hparams"] == {"reg.size.eta": 0.5} and prune["varying"] == ["reg.size.eta"]
    assert prune["test_mean"] == pytest.approx(0.62) and prune["test_std"] == pytest.approx(0.02)
    assert prune["valid_mean"] == pytest.approx(0.92)
    assert prune["valid_std"] == pytest.approx(0.02)
    assert (prune["n"], prune["seeds"], prune["n_settings"]) == (3, [0, 1, 2], 2)
    assert prune["valid_choice"] and not prune["oracle_choice"]
    assert prune["selection"] == "valid" and prune["reg"] == "size,eps-align"
    # ERM: 0.68, 0.70 -> mean 0.69, sample std sqrt(2 * 0.01**2 / 1)
    assert erm["test_mean"] == pytest.approx(0.69)
    assert erm["test_std"] == pytest.approx(math.sqrt(2 * 0.01 ** 2))
    assert erm["hparams"] == {} and erm["reg"] == "" and erm["selector"] == "none"


def test_oracle_picks_by_test_and_differs(tmp_path):
    prune_eta_grid(tmp_path)
    runs, _ = scan_runs(tmp_path)
    prune = by_method(aggregate(runs, select="oracle"))["PrunE"]
    assert prune["hparams"] == {"reg.size.eta": 0.85} and prune["selection"] == "oracle"
    assert prune["test_mean"] == pytest.approx(0.74) and prune["test_std"] == pytest.approx(0.04)
    assert prune["oracle_choice"] and not prune["valid_choice"]
    every = aggregate(runs, select="all")
    assert len(every) == 3 and {r["selection"] for r in every} == {"all"}


def test_one_seed_has_zero_std_and_ties_are_deterministic(tmp_path):
    fake_run(tmp_path, seed=0, valid=0.9, test=0.61, overrides=["reg.size.eta=0.5"])
    fake_run(tmp_path, seed=0, valid=0.9, test=0.71, overrides=["reg.size.eta=0.7"])
    runs, _ = scan_runs(tmp_path)
    first = aggregate(runs)
    assert first[0]["test_std"] == 0.0 and first[0]["n"] == 1
    assert aggregate(list(reversed(runs))) == first
    assert first[0]["ties"] == 1
    assert "tied with 1 other setting, broken by more seeds" in to_markdown(first)


def test_oracle_is_labelled_in_every_output(tmp_path):
    prune_eta_grid(tmp_path)
    res = collect(tmp_path, "--select", "oracle")
    assert res.exit_code == 0, res.output
    assert "ORACLE" in res.stdout
    md = (tmp_path / "results.md").read_text()
    assert md.startswith("## Test performance (ORACLE selection")
    assert "**Test ROC-AUC (%)" in md and "ORACLE selection" in md.splitlines()[2]
    rows = read_csv(tmp_path / "results.csv")
    assert {r["selection"] for r in rows} == {"oracle"}
    prune = next(r for r in rows if r["method"] == "PrunE")
    assert json.loads(prune["hparams"]) == {"reg.size.eta": 0.85}
    assert prune["oracle_choice"] == "True" and prune["valid_choice"] == "False"


def test_markdown_and_csv_contents(tmp_path):
    prune_eta_grid(tmp_path)
    res = collect(tmp_path)
    assert res.exit_code == 0, res.output
    assert "62.00 ± 2.00" in res.stdout and "69.00 ± 1.41" in res.stdout
    md = (tmp_path / "results.md").read_text()
    assert "| Method | ogbg-molbbbp/scaffold |" in md
    lines = md.splitlines()
    erm, prune = lines.index("| ERM | **69.00 ± 1.41 (n=2)** |"), \
        lines.index("| PrunE | 62.00 ± 2.00 (n=3) |")
    assert erm < prune  # paper order: baselines first, PrunE last
    assert "model selection: per method and dataset, the setting with the best mean " \
           "validation score" in md
    assert "- PrunE, ogbg-molbbbp/scaffold: reg.size.eta=0.5 (chosen from 2 settings; " \
           "valid 92.00 ± 2.00)" in md
    rows = {r["method"]: r for r in read_csv(tmp_path / "results.csv")}
    assert list(rows["PrunE"]) == CSV_COLUMNS
    assert float(rows["PrunE"]["test_mean"]) == pytest.approx(0.62)
    assert float(rows["PrunE"]["test_std"]) == pytest.approx(0.02)
    assert rows["PrunE"]["n"] == "3" and rows["PrunE"]["seeds"] == "0;1;2"
    assert rows["PrunE"]["selection"] == "valid" and rows["ERM"]["reg"] == ""
    assert rows["ERM"]["id_test_mean"] == ""  # no ID parts: empty, not "nan"
    assert len(rows["PrunE"]["dirs"].split(";")) == 3


def test_long_layout_and_out_prefix(tmp_path):
    prune_eta_grid(tmp_path / "runs")
    res = collect(tmp_path / "runs", "--select", "all", "--layout", "long",
                  "--out", tmp_path / "tables" / "eta")
    assert res.exit_code == 0, res.output
    md = (tmp_path / "tables" / "eta.md").read_text()
    assert md.count("| ogbg-molbbbp/scaffold | PrunE |") == 2
    assert "reg.size.eta=0.85" in md and "every setting listed" in md
    assert "| test edges kept |" in md and "| 0.800 |" in md  # fake runs keep 0.8
    assert len(read_csv(tmp_path / "tables" / "eta.csv")) == 3
    assert not (tmp_path / "runs" / "results.md").exists()


def test_id_metrics_and_shift_columns(tmp_path):
    for seed, (t, it) in enumerate([(0.60, 0.80), (0.64, 0.84)]):
        fake_run(tmp_path, data="good-hiv", reg="none", seed=seed, test=t,
                 overrides=["data.shift=concept"], id_valid=0.9, id_test=it)
    fake_run(tmp_path, data="good-hiv", reg="none", seed=0, test=0.5)
    runs, _ = scan_runs(tmp_path)
    rows = {r["column"]: r for r in aggregate(runs)}
    assert set(rows) == {"good-hiv/scaffold/concept", "good-hiv/scaffold/covariate"}
    concept = rows["good-hiv/scaffold/concept"]
    assert concept["id_test_mean"] == pytest.approx(0.82) and concept["n"] == 2
    assert concept["id_test_std"] == pytest.approx(math.sqrt(2 * 0.02 ** 2))
    assert "82.00 ± 2.83" in to_markdown(aggregate(runs), layout="long")


def test_data_parameters_make_separate_columns(tmp_path):
    for bias, t in ((0.7, 0.5), (0.9, 0.4)):
        fake_run(tmp_path, data="spmotif", reg="none", test=t, overrides=[f"data.bias={bias}"])
    runs, _ = scan_runs(tmp_path)
    rows = aggregate(runs)
    assert [r["column"] for r in rows] == ["spmotif/correlation (bias=0.7)",
                                           "spmotif/correlation (bias=0.9)"]
    assert all(r["n_settings"] == 1 for r in rows)  # never "selected" across biases
    points = sensitivity(runs, "data.bias")
    assert [(p["value"], p["test_mean"]) for p in points] == [(0.7, 0.5), (0.9, 0.4)]


def test_method_labels():
    assert method_label(["eps-align", "size"], "gumbel-gin") == "PrunE"
    assert method_label(["size", "eps-align"], "gumbel-gcn") == "PrunE [gumbel-gcn]"
    assert method_label([], "none") == "ERM"
    assert method_label(["gsat"], "gumbel-gin") == "GSAT"
    assert method_label(["ciga"], "gumbel-gin") == "CIGA"
    assert method_label(["irm"], "none") == "IRM"
    assert method_label([], "drop-edge") == "DropEdge"
    assert method_label(["size"], "gumbel-gin") == "size"
    assert method_label(["size", "gsat"], "gumbel-gin") == "size+gsat"
    assert method_label([], "gumbel-gin") == "none [gumbel-gin]"
    assert method_label(["irm"], "gumbel-gin") == "IRM [gumbel-gin]"


# --- layouts -------------------------------------------------------------------------

def test_ablation_row_order(tmp_path):
    for i, reg in enumerate(["gsat", "none", "eps-align", "size", "size,eps-align"]):
        fake_run(tmp_path, reg=reg, test=0.5 + i / 100)
        fake_run(tmp_path, reg=reg, test=0.6 + i / 100, data="good-motif")
    res = collect(tmp_path, "--layout", "ablation")
    assert res.exit_code == 0, res.output
    md = (tmp_path / "results.md").read_text()
    assert "| Regularizers | good-motif/basis | ogbg-molbbbp/scaffold |" in md
    rows = [line.split(" | ")[0][2:] for line in md.splitlines()
            if line.startswith("| ") and "---" not in line][1:]
    assert rows == ["size,eps-align", "size", "eps-align", "none", "gsat"]
    assert "Test ROC-AUC / accuracy (%)" in md
    assert "| size,eps-align | **64.00 (n=1)** | **54.00 (n=1)** |" in md


def test_table_layout_method_order(tmp_path):
    for reg in ["size,eps-align", "ciga", "gsat", "none", "vrex", "size"]:
        fake_run(tmp_path, reg=reg)
    runs, _ = scan_runs(tmp_path)
    md = to_markdown(aggregate(runs), layout="table")
    rows = [line.split(" | ")[0][2:] for line in md.splitlines()
            if line.startswith("| ") and "---" not in line][1:]
    assert rows == ["ERM", "VREx", "GSAT", "CIGA", "size", "PrunE"]


# --- sensitivity -----------------------------------------------------------------------

def eta_k_grid(root, best=(0.7, 50)):
    """eta in {0.5, 0.7, 0.85} at K=50, and K=30 at eta=0.85; 2 seeds each."""
    settings = [(0.5, 50), (0.7, 50), (0.85, 50), (0.85, 30)]
    tests = {(0.5, 50): (0.60, 0.62), (0.7, 50): (0.70, 0.74), (0.85, 50): (0.65, 0.65),
             (0.85, 30): (0.50, 0.56)}
    for eta, k in settings:
        for seed, t in enumerate(tests[(eta, k)]):
            fake_run(root, seed=seed, test=t, valid=0.95 if (eta, k) == best else 0.8,
                     overrides=[f"reg.size.eta={eta}", f"reg.eps-align.k={k}"])


def test_sensitivity_numbers_and_plot(tmp_path):
    eta_k_grid(tmp_path)
    fake_run(tmp_path, reg="none")
    runs, _ = scan_runs(tmp_path)
    points = sensitivity(runs, "reg.size.eta")
    assert [p["value"] for p in points] == [0.5, 0.7, 0.85]
    assert [p["test_mean"] for p in points] == pytest.approx([0.61, 0.72, 0.65])
    assert [p["test_std"] for p in points] == pytest.approx(
        [math.sqrt(2 * 0.01 ** 2), math.sqrt(2 * 0.02 ** 2), 0.0])
    assert all(p["fixed"] == {"reg.eps-align.k": 50.0} for p in points)
    assert points[0]["fixed_note"] == "held at the validation-selected values"
    assert {p["method"] for p in points} == {"PrunE"} and points[0]["n"] == 2

    res = collect(tmp_path, "--sensitivity", "reg.size.eta")
    assert res.exit_code == 0, res.output
    png = tmp_path / "sensitivity-reg.size.eta.png"
    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000
    assert "72.00 ± 2.83" in res.stdout and "reg.eps-align.k=50" in res.stdout
    rows = read_csv(png.with_suffix(".csv"))
    assert [float(r["test_mean"]) for r in rows] == pytest.approx([0.61, 0.72, 0.65])

    plot = tmp_path / "plots" / "k.png"
    res = collect(tmp_path, "--sensitivity", "reg.eps-align.k", "--plot", plot)
    assert res.exit_code == 0, res.output
    assert plot.read_bytes().startswith(PNG_MAGIC)
    k_points = sensitivity(runs, "reg.eps-align.k")
    assert [(p["value"], p["fixed"]) for p in k_points] == [
        (30.0, {"reg.size.eta": 0.85}), (50.0, {"reg.size.eta": 0.85})]


def test_sensitivity_falls_back_when_selected_values_cover_one_point(tmp_path):
    eta_k_grid(tmp_path, best=(0.85, 30))  # K=30 only has eta=0.85
    runs, _ = scan_runs(tmp_path)
    points = sensitivity(runs, "reg.size.eta")
    assert [p["value"] for p in points] == [0.5, 0.7, 0.85]
    assert points[0]["fixed"] == {"reg.eps-align.k": 50.0}
    assert "validation-selected setting has only reg.size.eta=0.85" in points[0]["fixed_note"]


def test_sensitivity_unknown_and_constant_keys(tmp_path):
    eta_k_grid(tmp_path)
    res = collect(tmp_path, "--sensitivity", "reg.size.etta")
    assert res.exit_code == 2
    assert "Did you mean 'reg.size.eta'?" in res.output and "Traceback" not in res.output
    res = collect(tmp_path, "--sensitivity", "train.lr")
    assert res.exit_code == 2
    assert "train.lr does not vary" in res.output
    assert "reg.eps-align.k, reg.size.eta" in res.output


# --- files ------------------------------------------------------------------------------

def test_outputs_are_rewritten_atomically(tmp_path):
    prune_eta_grid(tmp_path)
    assert collect(tmp_path).exit_code == 0
    md, cs = tmp_path / "results.md", tmp_path / "results.csv"
    before = (md.stat().st_ino, cs.stat().st_ino)
    fake_run(tmp_path, reg="none", seed=2, valid=0.9, test=0.72)
    res = collect(tmp_path)
    assert res.exit_code == 0, res.output
    assert (md.stat().st_ino, cs.stat().st_ino) != before  # replaced, not truncated
    text = md.read_text()
    assert "| ERM | **70.00 ± 2.00** |" in text and "over 3 seeds" in text
    assert not list(tmp_path.glob(".results*"))  # no temporary files left


# --- bad input ------------------------------------------------------------------------

def test_foreign_and_corrupt_run_dirs_are_reported_and_skipped(tmp_path):
    good = fake_run(tmp_path, reg="none")
    bad_cfg = tmp_path / "x" / "bad-config"
    bad_cfg.mkdir(parents=True)
    (bad_cfg / CONFIG).write_text("{not json")
    bad_sum = fake_run(tmp_path, reg="none", seed=1, out=tmp_path / "x" / "bad-summary")
    (bad_sum / SUMMARY).write_text('{"dataset": "ogbg-molbbbp", "te')
    no_metric = fake_run(tmp_path, reg="none", seed=2, out=tmp_path / "x" / "no-metric")
    summary = json.loads((no_metric / SUMMARY).read_text())
    del summary["metric"]
    atomic_write_json(no_metric / SUMMARY, summary)
    foreign = tmp_path / "x" / "foreign"
    foreign.mkdir()
    (foreign / CONFIG).write_text('{"model": "resnet"}')
    lone = tmp_path / "x" / "lone-summary"
    lone.mkdir()
    (lone / SUMMARY).write_text('{"metric": "rocauc", "test": 0.5}')
    dup = tmp_path / "x" / "copy"
    shutil.copytree(good, dup)

    runs, problems = scan_runs(tmp_path)
    assert [r.path for r in runs] == [good]
    reasons = {p.path.name: (p.kind, p.reason) for p in problems}
    assert reasons["bad-config"] == ("corrupt", reasons["bad-config"][1])
    assert "config.json is not valid JSON" in reasons["bad-config"][1]
    assert "summary.json is not valid JSON" in reasons["bad-summary"][1]
    assert reasons["no-metric"] == ("corrupt", "summary.json has no 'metric'")
    assert reasons["foreign"][0] == "foreign"
    assert reasons["lone-summary"] == ("foreign", "summary.json without config.json")
    assert reasons["copy"][0] == "duplicate"

    res = collect(tmp_path)
    assert res.exit_code == 0 and "Traceback" not in res.output
    assert "68.00" not in res.stdout and "70.00 (n=1)" in res.stdout
    for name in ("bad-config", "bad-summary", "no-metric", "foreign", "lone-summary", "copy"):
        assert name in res.stderr
    assert "corrupt: " in res.stderr and "summary.json has no 'metric'" in res.stderr


def test_empty_directory_exits_1_with_a_message(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    res = collect(tmp_path / "empty")
    assert res.exit_code == 1
    assert "no finished runs under" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "empty" / "results.md").exists()


def test_nonexistent_directory_exits_2_with_one_line(tmp_path):
    res = collect(tmp_path / "nope")
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"grprune: error: no such directory: "
                                               f"{tmp_path / 'nope'}"]


def test_partial_sweep_reports_missing_failed_and_unfinished_runs(tmp_path):
    root = tmp_path / "sweep"
    planned = []
    for seed in range(5):
        cfg = resolve_config(reg="size,eps-align", flags={"train.seed": seed})
        planned.append((cfg, default_run_dir(cfg, root)))
    for cfg, d in planned[:2]:
        fake_run(root, seed=cfg["train"]["seed"], test=0.7, out=d, preset=None)
    cfg, failed = planned[2]
    failed.mkdir(parents=True)
    atomic_write_json(failed / CONFIG, cfg)
    atomic_write_json(failed / "error.json",  # grprune sweep's error.json
                        {"message": "RuntimeError: CUDA out of memory\nTraceback ...",
                         "returncode": 1, "log": "sweep.log", "stderr_tail": ["..."]})
    cfg, unfinished = planned[3]
    unfinished.mkdir(parents=True)
    atomic_write_json(unfinished / CONFIG, cfg)
    write_records(unfinished / RESULTS, [{"epoch": 0}, {"epoch": 1}])
    (unfinished / STATE).write_bytes(b"state")
    (planned[4][1]).mkdir(parents=True)
    (planned[4][1] / "sweep.log").write_text("=== grprune sweep: queued\n")
    atomic_write_json(root / "sweep.json", {  # the layout grprune sweep writes
        "version": 1, "command": "grprune sweep ...",
        "configs": [{"hash": c["hash"], "run_dir": str(d.relative_to(root)),
                     "values": {"seed": c["train"]["seed"]}, "dropped": []}
                    for c, d in planned],
        "sweeps": []})

    scan = scan_runs(root)
    groups = sweep_report(scan)
    assert len(groups) == 1
    g = groups[0]
    assert g["group"] == "ogbg-molbbbp/size+eps-align"
    assert (g["planned"], g["finished"], g["failed"], g["unfinished"], g["unreadable"],
            g["not_started"]) == (5, 2, 1, 1, 0, 1)
    assert (g["seeds_done"], g["seeds_planned"]) == ([0, 1], [0, 1, 2, 3, 4])

    res = collect(root)
    assert res.exit_code == 0, res.output
    assert "70.00 ± 0.00" in res.stdout
    err = res.stderr
    assert "incomplete: ogbg-molbbbp/size+eps-align" in err
    assert "2/5 runs finished, 1 failed, 1 unfinished, 1 not started" in err
    assert "seeds done 0,1 of 0,1,2,3,4" in err
    assert f"failed: {failed}: RuntimeError: CUDA out of memory Traceback ..." in err
    assert f"unfinished: {unfinished}: 2/100 epochs; state.pt present" in err
    assert f"not started: {planned[4][1]}" in err
    md = (root / "results.md").read_text()
    assert "Notes:" in md and "2/5 runs finished" in md


def test_running_run_of_a_sweep_is_counted_once_as_running(tmp_path):
    root = tmp_path / "sweep"
    planned = []
    for seed in (0, 1):
        cfg = resolve_config(reg="size,eps-align", flags={"train.seed": seed})
        planned.append((cfg, default_run_dir(cfg, root)))
    fake_run(root, seed=0, out=planned[0][1], preset=None)
    cfg, running = planned[1]
    running.mkdir(parents=True)
    atomic_write_json(running / CONFIG, cfg)
    atomic_write_json(root / "sweep.json", {
        "version": 1, "configs": [{"hash": c["hash"], "run_dir": str(d.relative_to(root)),
                                   "values": {"seed": c["train"]["seed"]}}
                                  for c, d in planned]})
    with RunDir(running).lock():  # another process is training it
        scan = scan_runs(root)
        (g,) = sweep_report(scan)
        notes = notes_for(scan, [g])
    assert (g["finished"], g["running"], g["not_started"]) == (1, 1, 0)
    assert [p.kind for p in scan.problems] == ["running"]
    assert "1/2 runs finished, 1 running" in notes[0]
    assert not any(n.startswith("not started") for n in notes)


def test_presets_select_chooses_the_preset_on_validation(tmp_path):
    # official has the better validation score, paper the better test score
    for seed in (0, 1):
        fake_run(tmp_path, seed=seed, valid=0.95, test=0.66, preset="official")
        fake_run(tmp_path, seed=seed, valid=0.93, test=0.70, preset="paper")
        fake_run(tmp_path, reg="none", seed=seed, valid=0.90, test=0.68, preset="official")
    runs, _ = scan_runs(tmp_path)

    separate = by_method(aggregate(runs))
    assert set(separate) == {"PrunE", "PrunE (official)", "ERM (official)"}

    rows = aggregate(runs, presets="select")
    assert [r["method"] for r in rows] == ["ERM", "PrunE"]
    prune = by_method(rows)["PrunE"]
    assert prune["preset"] == "official" and prune["n_settings"] == 2
    assert prune["hparams"] == {"preset": "official"} and prune["varying"] == ["preset"]
    assert prune["test_mean"] == pytest.approx(0.66)
    oracle = by_method(aggregate(runs, select="oracle", presets="select"))["PrunE"]
    assert oracle["preset"] == "paper"
    assert by_method(rows)["ERM"]["hparams"] == {}   # one preset only: nothing chosen

    res = CliRunner().invoke(main, ["collect", str(tmp_path), "--presets", "select"])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "results.md").read_text()
    assert "- PrunE, ogbg-molbbbp/scaffold: preset=official (chosen from 2 settings" in md
    with pytest.raises(GrpruneError, match="unknown preset rule 'both'. Choices: separate, select"):
        aggregate(runs, presets="both")
    res = CliRunner().invoke(main, ["collect", str(tmp_path), "--presets", "both"])
    assert res.exit_code == 2 and "separate" in res.output


def test_sweep_with_nothing_finished_exits_1(tmp_path):
    cfg = resolve_config(reg="none")
    d = default_run_dir(cfg, tmp_path)
    d.mkdir(parents=True)
    atomic_write_json(d / CONFIG, cfg)
    atomic_write_json(d / "error.json", {"message": "boom"})
    atomic_write_json(tmp_path / "sweep.json", {"version": 1, "configs": [
        {"hash": cfg["hash"], "run_dir": str(d.relative_to(tmp_path)), "values": {}}]})
    res = collect(tmp_path)
    assert res.exit_code == 1
    assert "no finished runs" in res.stderr and "failed: " in res.stderr and "boom" in res.stderr


# --- end to end -------------------------------------------------------------------------

def test_end_to_end_two_real_runs(tmp_path):
    small = ["--data", "ogbg-molbbbp", "--preset", "paper", "--epochs", "2", "-H", "data.limit=48",
             "--progress", "none", "--device", "cpu", "--reg", "none"]
    for seed in (0, 1):
        out = tmp_path / "runs" / f"erm-{seed}"
        res = CliRunner().invoke(main, ["run", *small, "--seed", str(seed), "--out", str(out)])
        assert res.exit_code == 0, res.output
    res = collect(tmp_path / "runs", "--layout", "long")
    assert res.exit_code == 0, res.output
    summaries = [json.loads((tmp_path / "runs" / f"erm-{s}" / SUMMARY).read_text())
                 for s in (0, 1)]
    rows = read_csv(tmp_path / "runs" / "results.csv")
    assert len(rows) == 1 and rows[0]["method"] == "ERM" and rows[0]["n"] == "2"
    mean, std, n = mean_std(s["test"] for s in summaries)
    if math.isnan(mean):
        assert rows[0]["test_mean"] == ""
    else:
        assert float(rows[0]["test_mean"]) == pytest.approx(mean)
        assert float(rows[0]["test_std"]) == pytest.approx(std)
    assert "ogbg-molbbbp/scaffold" in res.stdout


def test_seeds_sort_numerically(tmp_path):
    for seed in (10, 2, 1):
        fake_run(tmp_path, reg="none", seed=seed, test=0.5 + seed / 100)
    runs, _ = scan_runs(tmp_path)
    (row,) = aggregate(runs)
    assert row["seeds"] == [1, 2, 10]
    assert row["test_mean"] == pytest.approx((0.51 + 0.52 + 0.60) / 3)


def test_sweep_run_dir_holding_another_configuration_is_reported(tmp_path):
    cfg = resolve_config(reg="none")
    d = default_run_dir(cfg, tmp_path)
    fake_run(tmp_path, reg="none", seed=7, out=d)  # another seed than planned
    atomic_write_json(tmp_path / "sweep.json", {"version": 1, "configs": [
        {"hash": cfg["hash"], "run_dir": str(d.relative_to(tmp_path)), "values": {}}]})
    scan = scan_runs(tmp_path)
    (g,) = sweep_report(scan)
    assert (g["finished"], g["unreadable"]) == (0, 1)
    assert any(p.kind == "foreign" and f"planned {cfg['hash']}" in p.reason
               for p in scan.problems)


def test_bracketed_labels_survive_rich_markup(tmp_path):
    fake_run(tmp_path, selector="gumbel-gcn", test=0.61)
    fake_run(tmp_path, reg="none", selector="gumbel-gin", test=0.62)
    res = collect(tmp_path)
    assert res.exit_code == 0, res.output
    assert "PrunE [gumbel-gcn]" in res.stdout and "none [gumbel-gin]" in res.stdout
    assert "| PrunE [gumbel-gcn] | 61.00 (n=1) |" in (tmp_path / "results.md").read_text()


def test_a_table_of_shortened_runs_says_how_they_were_trained(tmp_path):
    for seed in (0, 1):
        fake_run(tmp_path / "smoke", seed=seed, preset="official",
                 overrides=["data.limit=300", "train.epochs=2"])
    res = collect(tmp_path / "smoke", "--out", tmp_path / "t")
    assert res.exit_code == 0, res.output
    line = "shortened protocol: train.epochs=2, data.limit=300; preset official; device cpu"
    assert f"Trained with: {line}" in res.output
    assert f"- trained with: {line}" in (tmp_path / "t.md").read_text()
    assert {r["trained_with"] for r in read_csv(tmp_path / "t.csv")} == {line}
    # runs on their preset's own protocol: nothing to say
    fake_run(tmp_path / "full", preset="official")
    res = collect(tmp_path / "full", "--out", tmp_path / "f")
    assert "Trained with" not in res.output
    assert {r["trained_with"] for r in read_csv(tmp_path / "f.csv")} == {""}
    # a preset other than the split's default is named with the default
    fake_run(tmp_path / "other", preset="paper")
    res = collect(tmp_path / "other", "--out", tmp_path / "o")
    assert "preset paper (--preset auto takes official)" in res.output


def test_one_seed_prints_no_sd_in_any_layout(tmp_path):
    """One seed's standard deviation is undefined: ``63.35 (n=1)``, never ``± 0.00``."""
    for eta, test in ((0.5, 0.6335), (0.85, 0.64)):
        fake_run(tmp_path, test=test, overrides=[f"reg.size.eta={eta}"])
    fake_run(tmp_path, reg="none", test=0.70, valid=0.90)
    fake_run(tmp_path, reg="none", seed=1, test=0.72, valid=0.92)  # two seeds: mean ± sd
    for layout in LAYOUTS:
        res = collect(tmp_path, "--layout", layout, "--select", "all", "--out", tmp_path / layout)
        assert res.exit_code == 0, res.output
        md = (tmp_path / f"{layout}.md").read_text()
        for text in (md, res.stdout):
            assert "63.35 (n=1)" in text and "± 0.00" not in text
            assert "71.00 ± 1.41" in text
    res = collect(tmp_path, "--sensitivity", "reg.size.eta", "--plot", tmp_path / "eta.png")
    assert res.exit_code == 0, res.output
    assert "63.35 (n=1)" in res.stdout and "± 0.00" not in res.stdout


def test_a_warm_up_model_is_marked_and_explained(tmp_path):
    fake_run(tmp_path, test=0.61, use_selector=False, selected_phase="warmup")
    fake_run(tmp_path, test=0.63, seed=1, use_selector=True, selected_phase="train")
    fake_run(tmp_path, reg="none", test=0.70, use_selector=False, selected_phase="warmup")
    res = collect(tmp_path)
    assert res.exit_code == 0, res.output
    md = (tmp_path / "results.md").read_text()
    assert "| PrunE | 62.00 ± 1.41 (n=2) † |" in md and "| ERM | **70.00 (n=1)** |" in md
    assert ("† ERM warm-up model: the selected epoch is an ERM warm-up epoch, so the model "
            "does not use the selector and keeps every bond (PrunE, ogbg-molbbbp/scaffold: "
            "1 of 2 seeds).") in md
    assert "62.00 ± 1.41 †" in res.stdout and "1 of 2 seeds" in res.stdout
    rows = by_method(read_csv(tmp_path / "results.csv"))
    assert (rows["PrunE"]["warmup_seeds"], rows["ERM"]["warmup_seeds"]) == ("1", "0")
