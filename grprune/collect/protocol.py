"""How a table's runs were trained, where that departs from their dataset's own protocol.

A table of 2-epoch runs on 300 graphs looks like a result unless it says otherwise.
:func:`trained_with` compares each run's epochs and ``data.limit`` with its preset's own
(:func:`_reference`), and names a preset other than the one ``--preset auto`` takes for the
split, and the device. ``grprune collect`` prints the result above its table and writes it into
``results.md`` (the first note) and ``results.csv`` (column ``trained_with``).
"""

from __future__ import annotations

from typing import Sequence

#: the schedule keys that make a protocol shorter than the preset's own when they differ
SCHEDULE = ("train.epochs", "data.limit")


def _reference(run) -> dict:
    """The schedule a run of its preset has unless told otherwise: the preset's
    ``train.epochs`` (recorded in ``config.json``) or the default, and every graph. Read
    from the run's own record, so that collect imports no dataset module (nor RDKit)."""
    from grprune.record.settings import TrainSettings
    epochs = run.config.preset_values.get("train.epochs", TrainSettings.params["epochs"].default)
    return {"train.epochs": epochs, "data.limit": 0}


def trained_with(runs: Sequence) -> str:
    """One line: the settings a table's runs share where they depart from their dataset's
    protocol, marked ``shortened`` when the schedule is shorter; ``""`` when there is
    nothing to say.

    Returns
    -------
    str
        E.g. ``"shortened protocol: train.epochs=2, data.limit=300; preset paper; device
        cpu"``.
    """
    if not runs:
        return ""
    departs: dict[str, set] = {}
    for run in runs:
        ref, mine = _reference(run), _schedule(run)
        for key in SCHEDULE:
            if mine[key] != ref[key]:
                departs.setdefault(key, set()).add(mine[key])
    shared = [f"{k}={next(iter(v))}" for k, v in departs.items() if len(v) == 1]
    mixed = [f"{k} in {{{', '.join(map(str, sorted(v, key=str)))}}}"
             for k, v in departs.items() if len(v) > 1]
    parts = []
    if departs:
        shorter = any(_shorter(run) for run in runs)
        head = "shortened protocol" if shorter else "protocol changed"
        parts.append(f"{head}: " + ", ".join(shared + mixed))
    from grprune.presets import default_for
    presets = sorted({str(run.preset) for run in runs})
    # defaults.yaml is read once per dataset split, not twice per run
    auto = {key: default_for(*key) for key in {(run.dataset, run.split) for run in runs}}
    other = sorted({f"{run.preset} (--preset auto takes {auto[run.dataset, run.split]})"
                    for run in runs if run.preset != auto[run.dataset, run.split]})
    if other:
        parts.append("preset " + ", ".join(other))
    if parts:
        if not other:
            parts.append(f"preset {', '.join(presets)}")
        devices = sorted({str(run.summary.device or "?") for run in runs})
        parts.append(f"device {', '.join(devices)}")
    return "; ".join(parts)


def _schedule(run) -> dict:
    """The run's own :data:`SCHEDULE` values, from its typed configuration."""
    return {"train.epochs": run.config.train.epochs, "data.limit": run.config.data.limit}


def _shorter(run) -> bool:
    mine = _schedule(run)
    return bool(mine["data.limit"]) or mine["train.epochs"] < _reference(run)["train.epochs"]
