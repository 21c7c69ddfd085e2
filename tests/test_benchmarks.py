"""Scripts under ``benchmarks/`` that read sweep results (no training)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from test_collect import fake_run

from grprune import results as R

ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath):
    spec = importlib.util.spec_from_file_location(Path(relpath).stem, ROOT / relpath)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_epochs(run_dir, valid, test, metric="rocauc"):
    R.write_records(run_dir / R.RESULTS, [{"epoch": i, "valid": {metric: v}, "test": {metric: t}}
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
