"""What a finished ``grprune tune`` leaves for its user: the trials, the best one, its
configuration as YAML and Optuna's plots.

Files written into ``--out``:

``best.yaml``
    The best trial's resolved configuration (its run directory's ``config.json``), as
    YAML that ``grprune run --config best.yaml`` takes (a new seed: ``--seed N``).
``trials.csv``
    One row per trial: number, state, value, run directory, parameters.
``history.png``, ``importances.png``
    ``optuna.visualization.matplotlib``'s optimization history and parameter importances
    (headless, Agg); importances need at least two completed trials and are skipped with
    a note otherwise.
"""

from __future__ import annotations

import csv
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grprune.record.marks import read_pruned
from grprune.record.rundir import RunDir


@dataclass(frozen=True)
class TrialRow:
    """One trial as reported: ``value`` is the validation metric (None unless COMPLETE),
    ``epochs`` the epochs its run trained (0 for a trial that repeated an earlier trial's
    configuration, ``repeat_of`` that trial's number), ``run_dir`` relative to ``--out``."""

    number: int
    state: str
    value: float | None
    run_dir: str
    epochs: int
    params: dict[str, Any] = field(default_factory=dict)
    repeat_of: int | None = None


def trial_rows(study: Any, root: Path) -> list[TrialRow]:
    """Every trial of ``study`` but the WAITING ones, in order."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state.name == "WAITING":
            continue
        rel = str(t.user_attrs.get("grprune.run_dir", ""))
        epochs = len(RunDir(root / rel).records()) if rel else 0
        pruned = read_pruned(root / rel) if rel else None
        if t.state.name == "PRUNED" and pruned is not None:
            epochs = min(epochs, pruned.epoch + 1) if epochs else pruned.epoch + 1
        repeat = t.user_attrs.get("grprune.repeat_of")
        rows.append(TrialRow(t.number, t.state.name, t.value, rel,
                             0 if repeat is not None else epochs, dict(t.params),
                             None if repeat is None else int(repeat)))
    return rows


def warmup_note(rows: list[TrialRow], root: Path) -> str | None:
    """A warning when finished trials selected an ERM warm-up epoch
    (``summary.json``'s ``selected_phase``, the preset's ``train.select_warmup``): such a
    trial's value is the warm-up model's, the same whatever the searched keys of the
    regularizers and the selector, so the study cannot tell them apart. None when none
    did, or the runs have no warm-up."""
    done = [r for r in rows if r.state == "COMPLETE" and r.repeat_of is None and r.run_dir]
    warm = 0
    for r in done:
        summary = RunDir(root / r.run_dir).status().summary
        if summary is not None and summary.selected_phase == "warmup" and (
                summary.selector != "none" or summary.reg):  # ERM's warm-up is ERM
            warm += 1
    if not warm:
        return None
    return (f"{warm} of {len(done)} finished trials selected an ERM warm-up epoch: their "
            f"value is the warm-up model's, whatever the searched values; "
            f"-H train.select_warmup=false chooses among the epochs after the warm-up")


def best_row(study: Any, rows: list[TrialRow]) -> TrialRow | None:
    """The best COMPLETE trial's row (None when none completed)."""
    done = [r for r in rows if r.state == "COMPLETE" and r.value is not None]
    if not done:
        return None
    better = max if study.direction.name == "MAXIMIZE" else min
    return better(done, key=lambda r: r.value if r.value is not None else 0.0)


def write_best_yaml(root: Path, best: TrialRow) -> Path:
    """``<root>/best.yaml``: the best run's configuration (``grprune run --config``)."""
    import yaml

    config = RunDir(root / best.run_dir).read_config() or {}
    config = {k: v for k, v in dict(config).items() if k != "features"}
    head = (f"# grprune tune: the best trial ({best.number}, valid {best.value:.4f}) of "
            f"{root}; run it with: grprune run --config best.yaml --seed N\n")
    path = root / "best.yaml"
    path.write_text(head + yaml.safe_dump(config, sort_keys=False))
    return path


def write_trials_csv(root: Path, rows: list[TrialRow]) -> Path:
    """``<root>/trials.csv``: one row per trial (``repeat_of``: the trial whose
    configuration it repeated, whose result it was told; empty for a trial that trained)."""
    keys = sorted({k for r in rows for k in r.params})
    path = root / "trials.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["trial", "state", "value", "epochs", "run_dir", "repeat_of", *keys])
        for r in rows:
            w.writerow([r.number, r.state, "" if r.value is None else r.value, r.epochs,
                        r.run_dir, "" if r.repeat_of is None else r.repeat_of,
                        *[r.params.get(k, "") for k in keys]])
    return path


def write_plots(study: Any, root: Path) -> list[str]:
    """``history.png`` and ``importances.png``; returns notes on what was skipped."""
    import matplotlib
    matplotlib.use("Agg")
    from optuna.visualization import matplotlib as ovm

    notes = []
    completed = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ExperimentalWarning of the matplotlib backend
        if completed:
            _save(ovm.plot_optimization_history(study), root / "history.png")
        else:
            notes.append("history.png skipped: no completed trial")
        distinct = {tuple(sorted(t.params.items())) for t in completed}
        if len(completed) >= 2 and len(distinct) >= 2:
            try:
                _save(ovm.plot_param_importances(study), root / "importances.png")
            except (ValueError, RuntimeError) as exc:
                notes.append(f"importances.png skipped: {exc}")
        else:
            notes.append("importances.png skipped: it needs at least 2 completed trials "
                         "with different values")
    return notes


def _save(ax: Any, path: Path) -> None:
    """Save the figure of a matplotlib ``Axes`` as a PNG and close it."""
    import matplotlib.pyplot as plt
    fig = ax.figure
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
