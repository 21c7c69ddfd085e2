"""Scripts under ``benchmarks/`` that read sweep results (no training)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
from test_collect import fake_run

from grprune.record.files import RESULTS, SUMMARY, write_records

ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath):
    spec = importlib.util.spec_from_file_location(Path(relpath).stem, ROOT / relpath)
    assert spec is not None and spec.loader is not None, relpath
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_epochs(run_dir, valid, test, metric="rocauc"):
    write_records(run_dir / RESULTS, [{"epoch": i, "valid": {metric: v}, "test": {metric: t}}
                                          for i, (v, t) in enumerate(zip(valid, test))])


def test_epochs_script_reports_valid_test_agreement(tmp_path, capsys):
    epochs = load_script("benchmarks/accuracy/epochs.py")
    # ERM: test rises with valid (rho +1); PrunE: test falls as valid rises (rho -1).
    erm = fake_run(tmp_path, reg="none", valid=0.9, test=0.8)
    write_epochs(erm, [0.6, 0.7, 0.8, 0.9], [0.5, 0.6, 0.7, 0.8])
    prune = fake_run(tmp_path, valid=0.9, test=0.5)
    write_epochs(prune, [0.6, 0.7, 0.8, 0.9], [0.8, 0.7, 0.6, 0.5])
    out = tmp_path / "epochs.md"
    assert epochs.main([str(tmp_path), "--out", str(out)]) == 0
    rows = {line.split("|")[2].strip(): [c.strip() for c in line.split("|")[3:-1]]
            for line in out.read_text().splitlines()[2:]}
    assert rows["ERM"] == ["1", "+1.00", "0.0", "65.0", "80.0", "80.0"]
    assert rows["PrunE"] == ["1", "-1.00", "0.0", "65.0", "80.0", "50.0"]
    assert out.read_text() == capsys.readouterr().out


def test_epochs_script_skips_warmup_epochs_and_bad_roots(tmp_path, capsys):
    epochs = load_script("benchmarks/accuracy/epochs.py")
    run = fake_run(tmp_path, overrides=["train.warmup_epochs=2"], test=0.4)
    # The two warm-up epochs would make rho negative; after them valid and test agree.
    write_epochs(run, [0.9, 0.1, 0.2, 0.3, 0.4], [0.1, 0.9, 0.2, 0.3, 0.4])
    assert epochs.main([str(tmp_path)]) == 0
    assert "| PrunE | 1 | +1.00 |" in capsys.readouterr().out
    assert epochs.main([str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_choose_script_switches_a_preset_only_on_a_validation_margin(tmp_path, capsys):
    """The prior is ``official``; ``paper`` replaces it only on a PrunE validation margin of
    2 standard errors, whatever ERM or the test score say."""
    choose = load_script("benchmarks/accuracy/prune/choose.py")
    assert choose.FALLBACK == "official"
    assert round(choose.margin((0.8659, 0.0229, 4), (0.8368, 0.0146, 4)), 2) == 2.14
    # scaffold: paper clearly better on valid; its test score is worse and ERM validates
    # higher with the official model, and neither counts
    for seed in range(4):
        fake_run(tmp_path / "sc", seed=seed, valid=0.90 + 0.002 * seed, test=0.80,
                 preset="official")
        fake_run(tmp_path / "sc", seed=seed, valid=0.93 + 0.002 * seed, test=0.60,
                 preset="paper")
        fake_run(tmp_path / "sc", reg="none", seed=seed, valid=0.95, preset="official")
        fake_run(tmp_path / "sc", reg="none", seed=seed, valid=0.90, preset="paper")
    # size: paper a little better on valid (z < 2): the prior stays
    for seed, (a, b) in enumerate([(0.951, 0.950), (0.949, 0.950), (0.952, 0.949),
                                   (0.950, 0.951)]):
        fake_run(tmp_path / "si", seed=seed, valid=b, preset="official",
                 overrides=["data.split=size"])
        fake_run(tmp_path / "si", seed=seed, valid=a, preset="paper",
                 overrides=["data.split=size"])
    # a shortened protocol (fewer graphs) is decided and reported, but sets no default
    for seed in range(4):
        fake_run(tmp_path / "short", seed=seed, valid=0.8 + 0.001 * seed, preset="official",
                 overrides=["data.limit=300"])
        fake_run(tmp_path / "short", seed=seed, valid=0.9 + 0.001 * seed, preset="paper",
                 overrides=["data.limit=300"])
    # an ablation run in the same directory is not a preset as it is: left out
    fake_run(tmp_path / "si", seed=0, valid=0.99, preset="paper",
             overrides=["data.split=size", "reg.size.form=official"])
    out = tmp_path / "evidence.md"
    assert choose.main([str(tmp_path), "--out", str(out)]) == 0
    text = out.read_text()
    assert text == capsys.readouterr().out
    assert "| z vs official |" in text
    assert "- ogbg-molbbbp/scaffold: **paper** (paper: PrunE z = " in text
    assert "- ogbg-molbbbp/size: **official** (paper: PrunE's validation margin z = 0.65 < 2)" in text
    assert "```yaml\nogbg-molbbbp/scaffold: paper\n```" in text
    assert ("- ogbg-molbbbp/scaffold (shortened protocol): **paper** (paper: PrunE z = "
            in text) and text.count(", not applied") == 1
    assert "99.00" not in text
    # fewer seeds than asked for: no switch
    assert choose.main([str(tmp_path), "--min-seeds", "5"]) == 0
    assert "4 seeds, fewer than 5" in capsys.readouterr().out


def test_choose_script_reads_runs_csv_files(tmp_path, capsys):
    """Committed ``.runs.csv`` files decide like run directories: only rows labelled as a
    preset as it is count, and they set a default only when declared the presets' own
    protocol (``--csv-protocol full``)."""
    import pandas as pd

    choose = load_script("benchmarks/accuracy/prune/choose.py")
    rows = []
    for seed in range(4):
        rows += [{"split": "size", "label": "paper", "seed": seed, "valid": 0.89 + 0.001 * seed,
                  "test": 0.5},
                 {"split": "size", "label": "official", "seed": seed,
                  "valid": 0.80 + 0.01 * seed, "test": 0.6},
                 {"split": "size", "label": "ERM (official model)", "seed": seed,
                  "valid": 0.91, "test": 0.5},
                 {"split": "size", "label": "ERM (paper model)", "seed": seed,
                  "valid": 0.85 + 0.001 * seed, "test": 0.5},
                 # an ablation row: left out, however good
                 {"split": "size", "label": "paper + L_e form", "seed": seed, "valid": 0.99,
                  "test": 0.9}]
    csv = tmp_path / "study.runs.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    assert choose.main([str(csv), "--csv-protocol", "full"]) == 0
    text = capsys.readouterr().out
    # by hand: paper 89.15 ± 0.129, official 81.50 ± 1.291 (sample stds):
    # z = 7.65 / sqrt((0.129² + 1.291²) / 4) = 11.79; ERM validating lower with the paper
    # model does not hold the switch back
    assert "- good-motif/size: **paper** (paper: PrunE z = 11.79 >= 2" in text
    assert "```yaml\ngood-motif/size: paper\n```" in text and "99.00" not in text
    # the default --csv-protocol is the shortened one: reported, never applied; so is a
    # table named FILE.csv:cpu
    for args in ([str(csv)], [f"{csv}:cpu", "--csv-protocol", "full"]):
        assert choose.main(args) == 0
        text = capsys.readouterr().out
        assert "good-motif/size (shortened protocol): **paper**" in text
        assert text.count(", not applied") == 1 and "```yaml\n{}\n```" in text
    pd.DataFrame([{"split": "size", "label": "paper"}]).to_csv(csv, index=False)
    with pytest.raises(SystemExit) as stop:
        choose.main([str(csv)])
    assert stop.value.code == 2 and "lacks the columns" in capsys.readouterr().err


def test_choose_script_lets_the_later_source_replace_a_setting(tmp_path, capsys):
    """Sources are read in the order given: a ``table1.py runs`` table made at HEAD, given
    after an older study table, replaces that table's ``official`` rows (and the decision
    they gave); given first, it is the one replaced."""
    import pandas as pd

    choose = load_script("benchmarks/accuracy/prune/choose.py")
    old, new = [], []
    for seed in range(4):
        old += [{"split": "size", "label": label, "seed": seed, "valid": v + 0.001 * seed,
                 "test": 0.5} for label, v in (("official", 0.80), ("paper", 0.90))]
        new.append({"dataset": "good-motif", "split": "size", "method": "PrunE",
                    "preset": "official", "protocol": "paper", "seed": seed,
                    "valid": 0.95 + 0.001 * seed, "test": 0.5, "commit": "abc1234"})
    study, head = tmp_path / "study.runs.csv", tmp_path / "head.runs.csv"
    pd.DataFrame(old).to_csv(study, index=False)
    pd.DataFrame(new).to_csv(head, index=False)
    assert choose.main([f"{study}:full", f"{head}:full"]) == 0
    text = capsys.readouterr().out
    assert "| good-motif/size | PrunE | official | 95.15 ± 0.13 (n=4) |" in text
    assert "- good-motif/size: **official**" in text
    assert choose.main([f"{head}:full", f"{study}:full"]) == 0
    assert "- good-motif/size: **paper**" in capsys.readouterr().out


def test_table1_runs_table_grows_over_sessions_and_feeds_choose(tmp_path, capsys):
    """``table1.py runs`` writes one row per finished run that is a preset as it is (the
    protocol told from the configuration), keeps the rows already in the file, and
    ``choose.py`` decides from that file as from the run directories."""
    import pandas as pd

    table1 = load_script("benchmarks/accuracy/table1.py")
    choose = load_script("benchmarks/accuracy/prune/choose.py")
    env = {"commit": "abc1234", "cpu": "AMD EPYC", "cpu_count": 2, "gpu": None}
    for seed in (0, 1):
        for preset, v in (("official", 0.80), ("paper", 0.90)):
            fake_run(tmp_path / "s1", data="drugood-ec50", overrides=["data.split=assay"],
                     seed=seed, valid=v + 0.01 * seed, test=0.7, preset=preset,
                     environment=env)
            fake_run(tmp_path / "s1", data="drugood-ec50", reg="none",
                     overrides=["data.split=assay"], seed=seed, valid=0.85, test=0.6,
                     preset=preset, environment=env)
    # shortened and ablation runs: the first is kept and labelled, the second left out
    fake_run(tmp_path / "s1", data="drugood-ec50", overrides=["data.split=assay",
             "data.limit=100"], seed=0, preset="paper", environment=env)
    fake_run(tmp_path / "s1", data="drugood-ec50", overrides=["data.split=assay",
             "reg.size.eta=0.5"], seed=0, preset="paper", environment=env)
    out = tmp_path / "ec50.runs.csv"
    assert table1.main(["runs", str(tmp_path / "s1"), "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert len(df) == 9 and set(df["protocol"]) == {"paper", "shortened"}
    assert set(df["hardware"]) == {"2 cores of an AMD EPYC (CPU)"}
    assert set(df["commit"]) == {"abc1234"}
    # a later session: two more seeds in a new root, the first file's rows kept
    for seed in (2, 3):
        for preset, v in (("official", 0.80), ("paper", 0.90)):
            fake_run(tmp_path / "s2", data="drugood-ec50", overrides=["data.split=assay"],
                     seed=seed, valid=v + 0.01 * seed, test=0.7, preset=preset,
                     environment=env)
    assert table1.main(["runs", str(tmp_path / "s2"), "--out", str(out)]) == 0
    assert "(4 new)" in capsys.readouterr().out
    df = pd.read_csv(out)
    prune = df[(df["method"] == "PrunE") & (df["protocol"] == "paper")]
    assert sorted(prune.groupby("preset").size()) == [4, 4]
    assert choose.main([str(out)]) == 0
    text = capsys.readouterr().out
    assert "- drugood-ec50/assay: **paper** (paper: PrunE z = " in text
    assert "```yaml\ndrugood-ec50/assay: paper\n```" in text


def test_table1_per_run_and_per_epoch_rows_derive_every_mark(tmp_path, capsys):
    """``runs`` and ``epochs`` write one row per run and per epoch (the epochs' floats as
    Python wrote them, so they read back bit for bit); a run made again replaces its row;
    a cell counts warm-up selections from ``selected_phase`` and runs that keep at least
    95 % of test bonds, from the rows alone; PrunE - ERM gets its 95 % interval."""
    import pandas as pd

    table1 = load_script("benchmarks/accuracy/table1.py")
    env = {"commit": "abc1234", "cpu": "AMD EPYC", "cpu_count": 2, "gpu": None}
    for seed, (phase, kept) in enumerate([("warmup", 1.0), ("train", 0.55), ("train", 0.97)]):
        run = fake_run(tmp_path / "s", data="ogbg-molbbbp", overrides=["data.split=size"],
                       seed=seed, valid=0.85, test=0.70 + 0.01 * seed, preset="official",
                       environment=env, selected_phase=phase, kept_edge_fraction=kept)
        write_records(run / RESULTS, [
            {"epoch": e, "phase": "warmup" if e < 1 else "train", "lr": 0.001,
             "loss": {"total": 0.1 + e / 3}, "valid": {"rocauc": 0.8, "kept_edge_fraction": 1.0},
             "test": {"rocauc": 0.7 + e / 7, "kept_edge_fraction": kept}} for e in range(2)])
        fake_run(tmp_path / "s", data="ogbg-molbbbp", reg="none", overrides=["data.split=size"],
                 seed=seed, valid=0.85, test=0.66, preset="official", environment=env,
                 selected_phase="train", kept_edge_fraction=1.0)
    out, eps = tmp_path / "x.runs.csv", tmp_path / "x.epochs.csv"
    assert table1.main(["runs", str(tmp_path / "s"), "--out", str(out)]) == 0
    assert table1.main(["epochs", str(tmp_path / "s"), "--out", str(eps)]) == 0
    assert "wrote" in capsys.readouterr().out
    runs = pd.read_csv(out)
    assert len(runs) == 6 and set(runs["config_hash"].str.len()) == {12}
    epochs = pd.read_csv(eps, dtype={"test": str})
    assert len(epochs) == 6 and (epochs["test"].map(float) == [0.7, 0.7 + 1 / 7] * 3).all()
    # the same run made again at another commit replaces its row, not adds one
    again = runs.assign(commit="def5678").iloc[:1]
    monkey = table1.run_rows
    table1.run_rows = lambda dirs: again.to_dict("records")
    try:
        assert table1.main(["runs", str(tmp_path / "s"), "--out", str(out)]) == 0
    finally:
        table1.run_rows = monkey
    runs = pd.read_csv(out)
    assert len(runs) == 6 and sorted(set(runs["commit"])) == ["abc1234", "def5678"]
    cells = {c["method"]: c for c in table1._group_cells(runs.assign(protocol="paper"))}
    prune, erm = cells["PrunE"], cells["ERM"]
    assert (prune["warmup_selected"], prune["not_pruning"]) == (1, 2)
    assert erm["not_pruning"] is None
    assert table1.cell_text({**prune, "reproduces": "yes"}) == \
        "71.00 ± 1.00 (n=3) (warm-up 1/3) (does not prune 2/3)"
    d, lo, hi = table1.difference(prune, erm)
    assert round(d, 2) == 5.0 and round(lo, 2) == 2.52 and round(hi, 2) == 7.48
    assert math.isnan(table1.difference({**prune, "n": 1}, erm)[1])  # no interval at n = 1


def test_table1_gains_the_tuned_column_where_the_equal_budget_rows_exist(tmp_path):
    """table1.md's tuned column (issue 62) reads the equal-budget comparison's ``tuned``
    rows, marks warm-up selections, and prints PrunE - ERM after tuning with its interval;
    without the file the column is empty and the README's table has no such column."""
    import pandas as pd

    table1 = load_script("benchmarks/accuracy/table1.py")
    rows = table1.build()
    missing = table1.markdown(rows, tuned_runs=tmp_path / "none.csv")
    assert "tuned, equal budget: ERM / PrunE" in missing and "empty until" in missing
    assert "tuned, equal budget" not in table1.readme_table(rows)
    runs = [{"dataset": "ogbg-molbbbp", "split": "scaffold", "method": m, "kind": kind,
             "seed": seed, "valid": 0.9, "test": t + 0.01 * seed,
             "selected_phase": "warmup" if (m, seed) == ("PrunE", 0) else "train"}
            for m, t in (("ERM", 0.60), ("PrunE", 0.70)) for seed in range(3)
            for kind in ("tuned", "default")]
    pd.DataFrame(runs).to_csv(tmp_path / "runs.csv", index=False)
    text = table1.markdown(rows, tuned_runs=tmp_path / "runs.csv")
    line = next(x for x in text.splitlines() if x.startswith("| ogbg-molbbbp scaffold"))
    assert line.endswith("| 61.00 ± 1.00 (n=3) / 71.00 ± 1.00 (n=3) (warm-up 1/3) |")
    assert "- ogbg-molbbbp scaffold, both tuned at an equal budget: +10.00 " in text
    assert "PrunE above ERM" in text


def test_evalnoise_reselects_per_key_and_reports_the_noise_share():
    """``evalnoise.py``'s summary: each noise key selects its own best-valid epoch (warm-up
    epochs too, as ``official`` selects), so a key whose tie breaks the other way reports
    another test score; the within-seed variance over keys is set against the across-seed
    variance of the run's own key."""
    import pandas as pd

    evalnoise = load_script("benchmarks/accuracy/prune/evalnoise.py")
    rows = []
    for seed, own_test in ((0, 0.60), (1, 0.70)):
        for key in ("0", "1", "M4"):
            # epoch 1 and 2 tie within the noise: key 0 of seed 0 prefers epoch 1
            v1, v2 = (0.81, 0.80) if (seed, key) == (0, "0") else (0.80, 0.81)
            for epoch, phase, valid, test in ((0, "warmup", 0.5, 0.5), (1, "train", v1, own_test),
                                              (2, "train", v2, 0.76)):
                rows.append({"seed": seed, "epoch": epoch, "phase": phase, "key": key,
                             "valid": valid, "test": test})
    s = evalnoise.summary(pd.DataFrame(rows), select_warmup=True)
    assert s["n"] == 2 and s["keys"] == 2 and s["draws"] == 4
    assert [round(x, 2) for x in s["reported"]] == [68.0, 11.31]  # 60 and 76
    assert round(s["noise_sd"], 2) == 8.0 and round(s["share"], 2) == 0.5
    assert [round(x, 2) for x in s["rescored"]] == [76.0, 0.0]
    assert "| 0 | 60.00 (ep 1) | 76.00 (ep 2) | 11.31 | 76.00 (ep 2) |" in \
        evalnoise.report(pd.DataFrame(rows), True, "# t")


def test_evalnoise_resumes_an_interrupted_seed_with_the_same_rows(tmp_path, monkeypatch):
    """A seed killed after an epoch's ``state.pt`` but before its rows were kept resumes:
    that epoch is scored from the restored state, the rest trains on, and every row equals
    an uninterrupted measurement's (the keyed scores bit for bit)."""
    import pandas as pd

    import grprune.record.files as files

    evalnoise = load_script("benchmarks/accuracy/prune/evalnoise.py")
    argv = ["--data", "ogbg-molbbbp", "--split", "scaffold", "--seeds", "0", "--keys", "2",
            "--draws", "2", "-H", "data.limit=60", "-H", "train.epochs=4",
            "-H", "train.warmup_epochs=1", "-H", "train.eval_train=false"]
    assert evalnoise.main(argv + ["--runs", str(tmp_path / "a"),
                                  "--out", str(tmp_path / "a" / "out")]) == 0
    real, calls = files.atomic_write_bytes, []

    def dies_at_the_third_epoch(path, data):
        if str(path).endswith(".evalnoise.csv"):
            calls.append(path)
            if len(calls) == 3:
                raise KeyboardInterrupt
        real(path, data)

    monkeypatch.setattr(files, "atomic_write_bytes", dies_at_the_third_epoch)
    run_b = ["--runs", str(tmp_path / "b"), "--out", str(tmp_path / "b" / "out")]
    with pytest.raises(KeyboardInterrupt):
        evalnoise.main(argv + run_b)
    rows = pd.read_csv(tmp_path / "b" / "ogbg-molbbbp-scaffold-official-seed0.evalnoise.csv")
    assert sorted(set(rows["epoch"])) == [0, 1]  # epoch 2 trained, its rows lost
    monkeypatch.setattr(files, "atomic_write_bytes", real)
    assert evalnoise.main(argv + run_b) == 0
    a, b = (pd.read_csv(tmp_path / d / "out.epochs.csv", dtype={"key": str})
            for d in "ab")
    assert len(a) == 4 * 3 and a.equals(b)
    # after warm-up, test is scored exactly where a key's valid beats every earlier epoch
    # selection may pick (official selects warm-up epochs too, whose rows are the run's
    # own); key 0 is the run's own, complete
    for key, rows in a.groupby("key"):
        best = rows["valid"].cummax().shift(fill_value=-1.0)
        scored, trained = rows["test"].notna(), rows["phase"] != "warmup"
        assert scored.all() if key == "0" else \
            scored[trained].equals((rows["valid"] > best)[trained])
        picked = evalnoise.select(rows, select_warmup=True)
        assert not math.isnan(picked["test"])


def test_table1_runs_refuses_a_missing_directory(tmp_path, capsys):
    table1 = load_script("benchmarks/accuracy/table1.py")
    with pytest.raises(SystemExit) as stop:
        table1.main(["runs", str(tmp_path / "missing"), "--out", str(tmp_path / "x.csv")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().startswith("table1.py: not a directory")


def test_table1_build_picks_each_columns_default_preset_and_protocol(tmp_path, monkeypatch):
    """Per column and method: the preset ``--preset auto`` uses, the paper's protocol with
    4 seeds over a shortened one, the later source on a tie; GOOD-protocol ERM rows apart."""
    import pandas as pd

    table1 = load_script("benchmarks/accuracy/table1.py")
    runs = []
    for seed in range(4):
        for preset, method, test in (("official", "PrunE", 0.78), ("paper", "PrunE", 0.70),
                                     ("official", "ERM", 0.64), ("good", "ERM", 0.60)):
            runs.append({"dataset": "drugood-ec50", "split": "size", "method": method,
                         "preset": preset, "protocol": "paper", "seed": seed,
                         "valid": 0.8, "test": test + 0.01 * seed, "commit": "c2",
                         "hardware": "H"})
    pd.DataFrame(runs).to_csv(tmp_path / "ec50.runs.csv", index=False)
    bbbp = pd.DataFrame([
        {"dataset": "ogbg-molbbbp", "split": "scaffold", "method": m, "preset": p,
         "protocol": "paper", "seed": seed, "valid": 0.9,
         "test": t + 0.01 * (-1.5 ** 0.5, 0, 0, 1.5 ** 0.5)[seed], "commit": "c1",  # sd 1
         "hardware": "CPU"}
        for m, p, t in (("PrunE", "official", 0.69), ("ERM", "official", 0.68),
                        ("PrunE", "paper", 0.99)) for seed in range(4)])
    bbbp.to_csv(tmp_path / "bbbp.runs.csv", index=False)
    bbbp.assign(test=0.5, protocol="shortened", commit="c3").to_csv(
        tmp_path / "bbbp-short.runs.csv", index=False)
    sources = [("bbbp.runs.csv", "runs"),
               ("bbbp-short.runs.csv", "runs"),
               ("ec50.runs.csv", "runs")]
    rows = table1.build(sources, tmp_path)
    got = {(r["dataset"], r["split"], r["method"], r["protocol"]): r for r in rows}
    # molbbbp scaffold's default is official (defaults.yaml lists no other): paper's 99 is
    # not read, and the shortened table (later, same n) loses to the full protocol
    bbbp = got[("ogbg-molbbbp", "scaffold", "PrunE", "official schedule")]
    assert (bbbp["preset"], bbbp["test_mean"], bbbp["commit"]) == ("official", 69.0, "c1")
    ec50 = got[("drugood-ec50", "size", "PrunE", "official-preset schedule")]
    assert ec50["preset"] == "official" and round(ec50["test_mean"], 2) == 79.5
    assert (ec50["paper_mean"], ec50["paper_std"], ec50["n"]) == (65.46, 0.88, 4)
    assert round(got[("drugood-ec50", "size", "ERM", "good")]["test_mean"], 2) == 61.5
    assert len(rows) == 5
    text = table1.markdown(rows)
    # the official preset's schedule is labelled as the official code's; no official-code
    # runs in these sources: that column says so
    assert "| DrugOOD EC50 size (ROC-AUC) | `official` | official-preset schedule | " \
        "65.50 ± 1.29 | 79.50 ± 1.29 † | not run |" in text
    assert "| GOOD-Motif basis (accuracy) | `–` | – | not run | not run | not run |" in text
    # c1 is no commit of this repository: the official PrunE cell is flagged stale
    assert ("| ogbg-molbbbp scaffold (ROC-AUC) | `official` | official schedule | 68.00 ± 1.00 "
            "| 69.00 ± 1.00 † |") in text
    assert "- ogbg-molbbbp scaffold: 69.00 against 70.32" in text


def test_table1_takes_good_protocol_erm_only_with_four_finished_seeds(tmp_path, capsys):
    """GOOD-protocol ERM (``good_erm.py``'s table) enters Table 1 once a column has 4
    finished seeds, as mean ± sample std of GOOD's selection; before that table1.md says
    where each seed stands and the table has no row for it; another table exits with 2."""
    import pandas as pd

    table1 = load_script("benchmarks/accuracy/table1.py")
    runs = pd.DataFrame([
        {"dataset": "good-motif", "split": "basis", "seed": s, "preset": "good",
         "finished": s < 3, "epochs_done": 200 if s < 3 else 57, "epochs": 200,
         "best_epoch": 9, "valid": 80.0, "test": t, "commit": "c9", "hardware": "CPU"}
        for s, t in enumerate((60.0, 62.0, 64.0, 30.0))])
    path = tmp_path / "good.runs.csv"
    runs.to_csv(path, index=False)
    cells, pending = table1.good_cells(path)
    assert cells == []
    assert pending == ["good-motif basis: 3 of 4 seeds finished (0, 1, 2); seed 3 at 57 of "
                       "200 epochs",
                       "good-motif size: not run"]
    assert "is unfinished or not run, so it draws no conclusion there" in \
        table1.markdown([], path)
    rows = table1.build([("good.runs.csv", "good")], tmp_path)
    assert rows == []

    runs.loc[3, ["finished", "epochs_done", "test"]] = [True, 200, 66.0]
    runs.to_csv(path, index=False)
    rows = table1.build([("good.runs.csv", "good")], tmp_path)
    assert [(r["method"], r["preset"], r["protocol"], r["n"]) for r in rows] == \
        [("ERM", "good", "good", 4)]
    assert (round(rows[0]["test_mean"], 2), round(rows[0]["test_std"], 2)) == (63.0, 2.58)
    assert (rows[0]["valid_mean"], rows[0]["commit"], rows[0]["paper_mean"]) == \
        (80.0, "c9", 68.66)
    assert "| GOOD-Motif basis (accuracy) | `good` | good | 63.00 ± 2.58 |" in \
        table1.readme_table(rows)
    text = table1.markdown(rows, path)
    assert "good-motif basis: 3 of 4" not in text and "good-motif size: not run" in text
    # the row beside GOOD's leaderboard (63.80 ± 10.36, 10 runs), the end condition of
    # prune/README.md decided from the numbers
    assert ("- good-motif basis: 63.00 ± 2.58 against 63.80 ± 10.36; t = -0.23, p = 0.824; "
            "within one leaderboard sd, as GOOD's protocol would give on GOOD's own draw; at "
            "n = 4 the 95 % interval of the difference, [-8.5, +6.9], does not exclude an "
            "effect of grprune's draw of the data.") in text
    low = [{**rows[0], "test_mean": 45.0}]
    assert "under 50: GOOD's selection itself" in table1.good_verdicts(low)[-1]
    assert table1.good_verdicts([]) == []
    # no table yet: no row, no line
    assert table1.build([("none.csv", "good")], tmp_path) == []
    assert table1.good_pending(tmp_path / "none.csv") == ""
    runs.drop(columns=["finished"]).to_csv(path, index=False)
    with pytest.raises(SystemExit) as e:
        table1.good_cells(path)
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == \
        f"table1.py: {path} is not good_erm.py's table: no column finished"


def test_readme_results_table_is_table1(capsys):
    """The README's results table is the one ``table1.py build`` writes from the committed
    tables, and table1.md/.csv are up to date with them."""
    import pandas as pd

    table1 = load_script("benchmarks/accuracy/table1.py")
    rows = table1.build()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(table1.BEGIN, 1)[1].split(table1.END, 1)[0]
    assert block == "\n" + table1.readme_table(rows)
    # the audit's marks, derived from the per-run rows: cells where `official` selected an
    # ERM warm-up epoch, runs that do not prune, cells HEAD does not reproduce; the
    # official code's schedule named as such (the preset's own where it has no recipe)
    names = {(d, s): name for d, s, name in table1.COLUMNS}
    for r in rows:
        if r["method"] != "PrunE":
            continue
        line = next(x for x in block.splitlines()
                    if x.startswith(f"| {names[(r['dataset'], r['split'])]} |"))
        for key, mark in (("warmup_selected", "warm-up"), ("not_pruning", "does not prune")):
            if r[key]:
                assert f"({mark} {r[key]}/{r['n']})" in line, line
        assert ("†" in line) == (r["reproduces"] != "yes"), line
        if r["preset"] == "official":
            assert any(p in line for p in ("official schedule", "official-preset schedule",
                                           "shortened")), line
    assert (ROOT / "benchmarks/accuracy/table1.md").read_text(encoding="utf-8") == \
        table1.markdown(rows)
    committed = pd.read_csv(ROOT / "benchmarks/accuracy/table1.csv")
    assert len(committed) == len(rows)
    assert list(committed["test_mean"]) == [round(r["test_mean"], 2) for r in rows]


def test_the_accuracy_tables_share_one_markdown_renderer():
    """mdtable.py renders table1.py's and official/table.py's rows, cells and README blocks."""
    md = load_script("benchmarks/accuracy/mdtable.py")
    assert md.header(["column", "n"]) == ["| column | n |", "|---|---|"]
    assert md.row(["a", 4, ""]) == "| a | 4 | |"
    cells = [md.mean_std(63.0, 2.5, n) for n in (0, 1, 3, 4)]
    assert cells == ["not run", "63.00 (n=1)", "63.00 ± 2.50 (n=3)", "63.00 ± 2.50 (n=4)"]
    assert md.mean_std(63.0, 2.5, 3, n_below=4) == "63.00 ± 2.50 (n=3)"
    assert md.mean_std(63.0, 2.5, 4, n_below=4) == md.mean_std(63.0, 2.5) == "63.00 ± 2.50"
    assert md.splice("a\n<!-- b -->\nold\n<!-- /b -->\nz\n", "<!-- b -->", "<!-- /b -->",
                     "new\n") == "a\n<!-- b -->\nnew\n<!-- /b -->\nz\n"
    with pytest.raises(ValueError, match="no '<!-- b -->' ... '<!-- /b -->' block"):
        md.splice("a\n<!-- b -->\n", "<!-- b -->", "<!-- /b -->", "new\n")
    table1 = load_script("benchmarks/accuracy/table1.py")
    official = load_script("benchmarks/accuracy/official/table.py")
    assert table1.fmt(63.0, 2.5, 3) == md.mean_std(63.0, 2.5, 3, n_below=4)
    assert table1.splice is official.splice is sys.modules["benchmarks.accuracy.mdtable"].splice


def test_table1_build_refuses_a_readme_without_its_block(tmp_path, capsys):
    table1 = load_script("benchmarks/accuracy/table1.py")
    readme = tmp_path / "README.md"
    readme.write_text("# no table here\n")
    with pytest.raises(SystemExit) as exc:
        table1.main(["build", "--out", str(tmp_path / "t1"), "--readme", str(readme)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"table1.py: {readme} has no '<!-- table1:") and "\n" not in err
    assert readme.read_text() == "# no table here\n"


def test_probe_script_scores_ground_truth_masks(tmp_path, capsys):
    import json

    import torch

    from grprune.run import execute
    from test_prune_options import _cfg

    probe = load_script("benchmarks/accuracy/prune/probe.py")
    motif = torch.tensor([1.0, 0.0, 1.0, 0.0])
    masks = probe._masks(torch.tensor([1.0, 1.0, 0.0, 0.0]), motif)
    assert masks["motif only"].tolist() == [1, 0, 1, 0]
    assert masks["no motif"].tolist() == [0, 1, 0, 1]
    assert masks["selector + motif"].tolist() == [1, 1, 1, 0]
    assert masks["selector - motif"].tolist() == [0, 1, 0, 0]
    # a tiny paper-preset run: threshold evaluation, so the probe's selector row is the
    # trainer's test accuracy of the selected checkpoint
    run = tmp_path / "run"
    execute(_cfg(data="good-motif", reg="size,eps-align", limit=48,
                 overrides=["train.warmup_epochs=0"]), run, log=lambda m: None)
    out = tmp_path / "probe.json"
    probe.main([str(run), "--parts", "test,id-valid", "--json", str(out)])
    result = json.loads(out.read_text())[str(run)]
    summary = json.loads((run / SUMMARY).read_text())
    assert result["test"]["graphs"] == 48 and result["test"]["split"] == "basis"
    assert result["test"]["accuracy"]["selector"] == summary["test"]
    for part in ("test", "id-valid"):
        assert set(result[part]["accuracy"]) == set(probe.MASKS)
        assert 0 <= result[part]["kept_motif"] <= 1 and 0 <= result[part]["kept_other"] <= 1
    assert "| no motif |" in capsys.readouterr().out
    # --from-json summarises runs probed before, and --split keeps the runs of one split
    probe.main(["--from-json", str(out), "--split", "basis"])
    assert "mean ± std over 1 runs" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        probe.main(["--from-json", str(out), "--split", "size"])
    assert exc.value.code == 2


def test_probe_summary_is_mean_and_sample_std():
    probe = load_script("benchmarks/accuracy/prune/probe.py")

    def one(acc: float, kept: float) -> dict:
        return {"test": {"accuracy": {m: acc for m in probe.MASKS}, "kept_motif": kept,
                         "kept_other": kept, "kept_motif_by_class": {"0": kept}}}

    text = probe.summary({"a": one(0.8, 0.2), "b": one(0.9, 0.4)})
    # by hand: mean 85, sample std sqrt(((80-85)^2 + (90-85)^2) / 1) = 7.07
    assert "| selector | 85.00 ± 7.07 |" in text
    assert "| selector keeps, motif edges of class 0 | 0.300 ± 0.141 |" in text


def test_ablation_labels_runs_by_what_they_are():
    from grprune.resolve import resolve_config

    ablation = load_script("benchmarks/accuracy/prune/ablation.py")
    ablation._register_oracle()
    cpu = [f"{k}={v}" for k, v in ablation.PROTOCOL.items()]

    def cfg(reg="size,eps-align", preset="official", extra=(), selector=None, protocol=cpu):
        return resolve_config(data="good-motif", reg=reg, preset=preset, selector=selector,
                              flags={"data.split": "size"}, overrides=[*protocol, *extra])

    assert ablation.label(cfg()) == "official"
    assert ablation.label(cfg(reg="none", preset="paper")) == "ERM (paper model)"
    assert ablation.label(cfg(extra=["reg.size.form=paper"])) == "official - L_e form"
    assert (ablation.label(cfg(extra=["reg.size.eta=0.5"]))
            == "official with reg.size.eta=0.5")
    oracle = cfg(reg="none", selector="oracle-motif", extra=["train.warmup_epochs=0"])
    assert (ablation.label(oracle)
            == "oracle-motif selector (official model) with train.warmup_epochs=0")
    # the full protocol: each preset's own schedule, all graphs
    full = cfg(protocol=["train.eval_train=false"])
    assert ablation.label(full, ablation.FULL_PROTOCOL) == "official"
    assert ablation.label(full).startswith("official with ")


def test_ablation_table_grows_from_earlier_runs_csv_files(tmp_path, capsys):
    """An earlier session's ``.runs.csv`` is a source beside run directories: rows are
    pooled by (split, label), a (split, label, seed) seen twice keeps the first source's
    row, and the CPU and kernels of each row are named."""
    import pandas as pd

    ablation = load_script("benchmarks/accuracy/prune/ablation.py")
    row = dict.fromkeys(ablation.COLUMNS)
    old = pd.DataFrame([{**row, "split": "size", "label": "official", "seed": 0, "valid": 0.7,
                         "test": 0.40},
                        {**row, "split": "size", "label": "official", "seed": 1, "valid": 0.7,
                         "test": 0.50}])
    old_csv = tmp_path / "old.runs.csv"
    old.drop(columns=["cpu"]).to_csv(old_csv, index=False)  # written before the CPU was
    new = pd.DataFrame([{**row, "split": "size", "label": "official", "seed": 1, "valid": 0.8,
                         "test": 0.60, "kernels": "AVX512", "cpu": "AMD EPYC"},
                        {**row, "split": "size", "label": "official", "seed": 2, "valid": 0.8,
                         "test": 0.60, "kernels": "AVX512"},
                        {**row, "split": "size", "label": "official", "seed": 3, "valid": 0.8,
                         "test": 0.60, "kernels": "AVX2", "cpu": "Intel Xeon",
                         "gpu": "NVIDIA H100"}])
    new_csv = tmp_path / "new.runs.csv"
    new.to_csv(new_csv, index=False)

    df = ablation.gather([new_csv, old_csv])
    assert sorted(df["seed"]) == [0, 1, 2, 3]
    assert df.set_index("seed").loc[1, "test"] == 0.60  # the first source wins
    ablation.table([new_csv, old_csv], tmp_path / "merged")
    text = (tmp_path / "merged.md").read_text()
    # by hand: tests 40, 60, 60, 60 -> mean 55, sample std sqrt((15^2 + 3 * 5^2) / 3) = 10;
    # valid 70, 80, 80, 80 -> 77.5 ± 5
    assert "| official | 4 | 77.50 ± 5.00 | 55.00 ± 10.00 |" in text
    # each distinct machine of the row: its GPU if one trained it, else (CPU, kernels); a
    # row with no CPU recorded gives its kernels
    assert text.rstrip().endswith("| AMD EPYC AVX512, AVX512, NVIDIA H100 |")
    assert len(pd.read_csv(tmp_path / "merged.runs.csv")) == 4
    # a preamble written by hand above the tables survives the next regeneration
    (tmp_path / "merged.md").write_text("# Study\n\nRan at abc123.\n" + text)
    ablation.table([new_csv, old_csv], tmp_path / "merged")
    again = (tmp_path / "merged.md").read_text()
    assert again.startswith("# Study\n\nRan at abc123.\n\n### GOOD-Motif size")
    assert again.count("### GOOD-Motif size") == 1
    capsys.readouterr()

    with pytest.raises(SystemExit) as stop:
        ablation.gather([tmp_path / "missing.runs.csv"])
    assert stop.value.code == 2
    assert "no such file" in capsys.readouterr().err


def test_kept_per_graph_compares_a_run_mask_with_a_per_graph_budget():
    import numpy as np

    from grprune.evaluation import GraphScore

    kpg = load_script("benchmarks/accuracy/prune/kept_per_graph.py")

    def graph(logits, kept, gt):  # a path of bonds, each as its two directed edges
        n = len(logits)
        src = np.array([[k, k + 1] for k in range(n)]).reshape(-1)
        dst = np.array([[k + 1, k] for k in range(n)]).reshape(-1)
        logits = np.repeat(np.float32(logits), 2)
        return GraphScore(prob=np.zeros(2, np.float32), src=src, dst=dst, edge_logits=logits,
                          edge_prob=1 / (1 + np.exp(-logits)),
                          edge_weight=np.repeat(np.float32(kept), 2),
                          edge_gt=np.repeat(np.int64(gt), 2), num_nodes=n + 1)

    # graph 0: 4 bonds, the run keeps 3 (the first three); graph 1: 2 bonds, keeps none
    scores = [graph([2.0, -1.0, 1.0, -2.0], [1, 1, 1, 0], [1, 1, 0, 0]),
              graph([0.5, -0.5], [0, 0], [1, 1])]
    out = kpg.compare(scores, 0.5)
    # by hand, budget ceil(0.5 * U) by logit: graph 0 keeps bonds 0 and 2, graph 1 bond 0
    assert out["graphs"] == 2
    assert out["kept_mean"] == pytest.approx((0.75 + 0.0) / 2)
    assert out["jaccard"] == pytest.approx((2 / 3 + 0 / 1) / 2)
    assert out["dropped_by_budget"] == pytest.approx((1 / 3 + 0) / 2)  # bond 1 of graph 0
    assert out["recall_run"] == pytest.approx((1.0 + 0.0) / 2)
    assert out["recall_budget"] == pytest.approx((0.5 + 0.5) / 2)
    assert out["near_budget"] == 0.0  # |0.75 - 0.5| and |0 - 0.5| are both over 0.1
    assert out["r_kept_gt"] == pytest.approx(-1.0)  # kept 0.75, 0 against motif share 0.5, 1


def test_ablation_summary_writes_the_readme_table_of_one_direction(tmp_path, monkeypatch,
                                                                  capsys):
    """``ablation.py summary``: ERM, the base preset, the other preset, choices ablated
    together, then single choices in :data:`CHOICES` order; mean ± sample std, the
    pruning rule (kept < 60 % at Precision@50 ≥ 0.88), per-seed scores by seed; rows of
    the other direction and the other split are left out; bad input exits 2."""
    import pandas as pd

    ablation = load_script("benchmarks/accuracy/prune/ablation.py")
    row = dict.fromkeys(ablation.COLUMNS)

    def r(label, seed, test, kept=1.0, p50=None, split="basis", valid=0.9):
        return {**row, "split": split, "label": label, "seed": seed, "valid": valid,
                "test": test, "kept": kept, "p50": p50}

    csv = tmp_path / "study.runs.csv"
    pd.DataFrame([
        r("paper + L_e form", 1, 0.90, kept=0.35, p50=0.91),
        r("paper + L_e form", 0, 0.40, kept=0.55, p50=0.87),  # p50 under 0.88: no
        r("paper", 0, 0.48, kept=0.80, p50=0.66),
        r("official", 0, 0.88, kept=0.39, p50=0.91),
        r("paper + L_e form + tau 0.2", 0, 0.60, kept=0.59, p50=0.88),  # on the line: yes
        r("paper + L_s form", 0, 0.50, kept=0.70, p50=0.70),
        r("ERM (paper model)", 0, 0.45),
        r("ERM (official model)", 0, 0.39),  # the other direction's ERM: left out
        r("official - L_e form", 0, 0.39),  # the other direction: left out
        r("paper + L_e form", 2, 0.10, split="size"),  # the other split: left out
    ]).to_csv(csv, index=False)

    text = ablation.summary([csv], "basis", "add", ["test", "prune", "kept", "per_seed"])
    assert text.splitlines() == [
        "| official choice added to `paper` | seeds | OOD-test | runs that prune | "
        "test bonds kept | OOD-test per seed |",
        "|---|---|---|---|---|---|",
        "| ERM (paper model) | 1 | 45.00 | 0 of 1 | 1.000 | 45.0 |",
        "| none (`paper`) | 1 | 48.00 | 0 of 1 | 0.800 | 48.0 |",
        "| all of them (`official`) | 1 | 88.00 | 1 of 1 | 0.390 | 88.0 |",
        "| L_e form + tau 0.2 | 1 | 60.00 | 1 of 1 | 0.590 | 60.0 |",
        # by hand: mean 65, sample std sqrt(2 * 25^2) = 35.36; kept 0.45 ± 0.141
        "| L_e form | 2 | 65.00 ± 35.36 | 1 of 2 | 0.450 ± 0.141 | 40.0, 90.0 |",
        "| L_s form | 1 | 50.00 | 0 of 1 | 0.700 | 50.0 |",
    ]
    remove = ablation.summary([csv], "basis", "remove", ["valid"])
    assert remove.splitlines()[2:] == ["| ERM (official model) | 1 | 90.00 |",
                                       "| none (`official`) | 1 | 90.00 |",
                                       "| all of them (`paper`) | 1 | 90.00 |",
                                       "| L_e form | 1 | 90.00 |"]
    with pytest.raises(ValueError, match="choose from valid, test"):
        ablation.summary([csv], "basis", "add", ["accuracy"])
    # the command line: the table on stdout; a bad column is one line and exit 2
    script = str(ROOT / "benchmarks/accuracy/prune/ablation.py")
    monkeypatch.setattr("sys.argv", [script, "summary", str(csv), "--split", "basis",
                                     "--direction", "add", "--columns", "test"])
    ablation.main()
    assert capsys.readouterr().out.splitlines()[2] == "| ERM (paper model) | 1 | 45.00 |"
    monkeypatch.setattr("sys.argv", [script, "summary", str(csv), "--split", "basis",
                                     "--direction", "add", "--columns", "test,accuracy"])
    with pytest.raises(SystemExit) as e:
        ablation.main()
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown column 'accuracy'" in err


def test_good_erm_reports_finished_and_unfinished_good_protocol_runs(tmp_path, capsys):
    """``good_erm.py`` reads GOOD-protocol runs finished or not: GOOD's selection (the
    first epoch with the best OOD-valid), the test score there, and the epochs done;
    runs of other presets are left out, and a missing folder exits with 2."""
    import pandas as pd

    script = load_script("benchmarks/accuracy/prune/good_erm.py")
    env = {"commit": "abc1234", "cpu": "AMD EPYC", "cpu_count": 2, "gpu": None}
    done = fake_run(tmp_path, data="good-motif", reg="none", preset="good", seed=0,
                    overrides=["data.split=basis"], environment=env)
    write_epochs(done, [0.5, 0.9, 0.9, 0.7], [0.4, 0.6, 0.8, 0.5], metric="accuracy")
    going = fake_run(tmp_path, data="good-motif", reg="none", preset="good", seed=1,
                     overrides=["data.split=basis"])
    (going / SUMMARY).unlink()
    write_epochs(going, [0.6, 0.8], [0.45, 0.55], metric="accuracy")
    other = fake_run(tmp_path, data="good-motif", reg="none", preset="official", seed=0,
                     overrides=["data.split=basis"])
    write_epochs(other, [0.9], [0.9], metric="accuracy")
    out, curves = tmp_path / "good.runs.csv", tmp_path / "good.epochs.csv"
    assert script.main([str(tmp_path), "--out", str(out), "--commit", "def5678",
                        "--hardware", "a laptop", "--curves", str(curves)]) == 0
    epochs = pd.read_csv(curves)
    assert list(zip(epochs["seed"], epochs["epoch"])) == [(0, 0), (0, 1), (0, 2), (0, 3),
                                                          (1, 0), (1, 1)]
    assert epochs["test"].tolist() == [40.0, 60.0, 80.0, 50.0, 45.0, 55.0]
    df = pd.read_csv(out).set_index("seed")
    assert list(df.index) == [0, 1]
    assert df.loc[0, ["finished", "epochs_done", "epochs", "best_epoch"]].tolist() == \
        [True, 4, 200, 1]
    assert df.loc[0, ["valid", "test", "test_last", "test_max"]].tolist() == \
        [90.0, 60.0, 50.0, 80.0]
    assert (df.loc[0, "commit"], df.loc[0, "hardware"]) == \
        ("abc1234", "2 cores of an AMD EPYC (CPU)")
    assert df.loc[1, ["finished", "epochs_done", "best_epoch", "test"]].tolist() == \
        [False, 2, 1, 55.0]
    assert (df.loc[1, "commit"], df.loc[1, "hardware"]) == ("def5678", "a laptop")
    with pytest.raises(SystemExit) as e:
        script.main([str(tmp_path / "missing")])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith("good_erm.py: no such directory")


def test_study_run_tables_share_table1s_per_run_format():
    """``ablation.py``'s ``.runs.csv`` is ``table1.py``'s per-run format with the study's
    diagnostics after it, and every committed one is in it, so ``table1.py`` reads them
    all with its one reader."""
    import pandas as pd
    table1 = load_script("benchmarks/accuracy/table1.py")
    ablation = load_script("benchmarks/accuracy/prune/ablation.py")
    assert ablation.COLUMNS[:len(table1.RUN_FIELDS)] == table1.RUN_FIELDS
    study = sorted((ROOT / "benchmarks/accuracy/prune").glob("motif-*/motif-*.runs.csv"))
    study = [p for p in study if "label" in pd.read_csv(p, nrows=0).columns]
    assert study
    for path in study:
        assert list(pd.read_csv(path, nrows=0).columns) == ablation.COLUMNS, path
    assert {kind for _, kind in table1.SOURCES} == {"runs", "official", "good"}
    assert ablation.method_preset("official - L_e form") == ("PrunE", "official - L_e form")
