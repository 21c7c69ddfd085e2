"""Table 1 holds at HEAD: a short prefix of one committed run per preset and method, re-run
and compared with its committed epoch records bit for bit on the CPU.

The committed runs are ``benchmarks/accuracy/prune/molbbbp-n10/molbbbp-n10.*`` (``table1.py runs`` and
``table1.py epochs`` of ``molbbbp-n10.yaml``). A change that moves the numbers of a preset
fails here, and the message names the Table-1 cells made with that preset and method, to
be re-run (and the change to add to ``table1.py``'s ``NUMBER_CHANGES``).

The ``official`` preset's first 10 epochs are ERM warm-up (no selector, no sampled
evaluation), so its prefix runs 12 epochs: two of them train and evaluate the selector.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from grprune.provenance import cpu_model
from grprune.build import load_config_dataset
from grprune.run import plan_run
from grprune.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
EPOCHS = ROOT / "benchmarks/accuracy/prune/molbbbp-n10/molbbbp-n10.epochs.csv"
TABLE1 = ROOT / "benchmarks/accuracy/table1.csv"
#: where the committed records were made: bit for bit holds on this CPU kind and torch
REFERENCE = {"cpu": "AMD EPYC", "torch": "2.13.0+cpu"}
#: (method, preset) guarded -> (split, reg, epochs of the prefix)
PREFIXES = {("PrunE", "official"): ("size", "size,eps-align", 12),
            ("PrunE", "paper"): ("scaffold", "size,eps-align", 2),
            ("ERM", "official"): ("size", "none", 2),
            ("ERM", "paper"): ("scaffold", "none", 2)}
COMPARED = ["phase", "lr", "loss", "valid", "test", "kept_valid", "kept_test"]


class _Enough(Exception):
    """Raised by the epoch callback once the prefix is trained."""


def committed(method: str, preset: str, split: str) -> pd.DataFrame:
    """The committed epoch records of seed 0 of (method, preset) on ogbg-molbbbp ``split``."""
    table = pd.read_csv(EPOCHS, dtype={k: str for k in COMPARED[1:]}, keep_default_na=False)
    for key in COMPARED[1:]:  # Python's float() reads back what Python wrote, bit for bit
        table[key] = [float(v) if v else math.nan for v in table[key]]
    rows = table[(table["dataset"] == "ogbg-molbbbp") & (table["split"] == split)
                 & (table["method"] == method) & (table["preset"] == preset)
                 & (table["seed"] == 0)]
    return rows.sort_values("epoch")


def cells_of(method: str, preset: str) -> list[str]:
    """The Table-1 cells made with ``method`` under ``preset`` (``table1.csv``)."""
    table = pd.read_csv(TABLE1)
    rows = table[(table["method"] == method) & (table["preset"] == preset)]
    return [f"{r.dataset} {r.split} {method} `{preset}` ({r.protocol}, {r.commit})"
            for r in rows.itertuples()]


def run_prefix(cfg, run_dir: Path, epochs: int) -> list[dict]:
    """The first ``epochs`` epoch records of ``cfg`` trained as ``grprune run`` trains it."""
    from grprune.record.runconfig import FeatureSpec
    dataset = load_config_dataset(cfg)
    cfg = cfg.with_features(FeatureSpec.of(dataset))
    got: list[dict] = []
    metric = dataset.metric

    def on_epoch(record) -> None:
        got.append({"phase": record.phase, "lr": record.lr, "loss": record.loss["total"],
                    "valid": record.value("valid", metric),
                    "test": record.value("test", metric),
                    "kept_valid": record.scores["valid"].get("kept_edge_fraction"),
                    "kept_test": record.scores["test"].get("kept_edge_fraction")})
        if len(got) == epochs:
            raise _Enough

    with pytest.raises(_Enough):
        Trainer(cfg, dataset, run_dir, on_epoch=on_epoch).fit()
    return got


def first_difference(got: list[dict], want: pd.DataFrame) -> str | None:
    """``"epoch E: key got X, committed Y"`` for the first value that differs, else None."""
    for epoch, (mine, theirs) in enumerate(zip(got, want.to_dict("records"))):
        for key in COMPARED:
            a, b = mine[key], theirs[key]
            same = (a == b) or (isinstance(a, float) and isinstance(b, float)
                                and math.isnan(a) and math.isnan(b))
            if not same:
                return f"epoch {epoch}: {key} {a!r}, committed {b!r}"
    return None


@pytest.mark.parametrize(("method", "preset"), list(PREFIXES),
                         ids=[f"{m}-{p}" for m, p in PREFIXES])
def test_a_committed_run_still_computes_its_numbers(method, preset, tmp_path):
    split, reg, epochs = PREFIXES[(method, preset)]
    if cpu_model() != REFERENCE["cpu"] or torch.__version__ != REFERENCE["torch"]:
        pytest.skip(f"the committed records were made on {REFERENCE['cpu']} with torch "
                    f"{REFERENCE['torch']}; bit for bit holds there (this is "
                    f"{cpu_model()}, torch {torch.__version__})")
    want = committed(method, preset, split)
    assert len(want) >= epochs, f"{EPOCHS} lacks seed 0 of {method} {preset} {split}"
    plan = plan_run(data="ogbg-molbbbp", split=split, preset=preset, reg=reg, seed=0,
                    progress="none", hparams={"train.eval_train": False})
    rerun = "; re-run them: " + "; ".join(cells_of(method, preset))
    assert plan.cfg.hash == want["config_hash"].iloc[0], (
        f"{method} `{preset}` resolves to another configuration (hash {plan.cfg.hash}, "
        f"committed {want['config_hash'].iloc[0]}): its committed cells are stale{rerun}")
    got = run_prefix(plan.cfg, tmp_path / "run", epochs)
    diff = first_difference(got, want.head(epochs))
    assert diff is None, (
        f"{method} `{preset}` no longer computes its committed numbers ({diff}): add the "
        f"change to table1.py's NUMBER_CHANGES{rerun}")


def test_the_staleness_check_names_what_to_rerun():
    """The message of a failing prefix lists the cells of that method and preset, and a
    difference is reported at its first epoch and key."""
    cells = cells_of("PrunE", "official")
    assert any(c.startswith("ogbg-molbbbp size PrunE `official`") for c in cells)
    assert any(c.startswith("good-motif basis PrunE `official`") for c in cells)
    want = pd.DataFrame([{k: 0.5 for k in COMPARED} | {"phase": "train"}] * 2)
    got = want.to_dict("records")
    assert first_difference(got, want) is None
    got[1] = {**got[1], "test": 0.5 + 2 ** -40}
    assert str(first_difference(got, want)).startswith("epoch 1: test 0.5000000000009095")


def test_table1_marks_cells_made_before_a_number_change():
    """``reproduces``: a cell made before a change of NUMBER_CHANGES that applies to its
    method and preset is not what HEAD computes; other methods and presets are."""
    spec = importlib.util.spec_from_file_location("table1",
                                                  ROOT / "benchmarks/accuracy/table1.py")
    assert spec is not None and spec.loader is not None
    table1 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table1)
    change = table1.NUMBER_CHANGES[0][0]
    if table1._is_ancestor(change, "HEAD") is None:
        pytest.skip("no git history here (a shallow clone or an exported tree)")
    old = {"method": "PrunE", "preset": "official", "commit": "2820ba7"}
    assert table1.reproduces(old).startswith(f"no: made at 2820ba7, before {change}")
    assert table1.reproduces({**old, "commit": change}) == "yes"
    assert table1.reproduces({**old, "preset": "paper"}) == "yes"
    assert table1.reproduces({**old, "commit": "0000000"}) == "unknown commit 0000000"
    assert table1.reproduces({**old, "method": table1.OFFICIAL_CODE}).startswith("n/a")
