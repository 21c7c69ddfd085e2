"""How a table's runs were trained, where that departs from their dataset's own protocol.

A table of 2-epoch runs on 300 graphs looks like a result unless it says otherwise.
:func:`trained_with` compares each run with a fresh resolution of its dataset, split and
preset (:func:`grprune.config.resolve_config`): the epochs, ``data.limit``, the warm-up and
early stopping it trained with, and the preset and device, where every run of the table
shares them. ``grprune collect`` prints the result above its table and writes it into
``results.md`` (the first note) and ``results.csv`` (column ``trained_with``).
"""

from __future__ import annotations

from typing import Sequence

#: the schedule keys that make a protocol shorter than the preset's own when they differ
SCHEDULE = ("train.epochs", "data.limit", "train.warmup_epochs", "train.patience")


def _reference(run) -> dict:
    from grprune.collect.reading import flatten_config
    from grprune.config import resolve_config
    try:
        cfg = resolve_config(data=run.dataset, reg=",".join(run.reg) or "none",
                             selector=run.selector, preset=run.preset,
                             flags={"data.split": run.split} if run.split else {})
    except Exception:  # a plugin part that is not loaded here: no reference to compare with
        return {}
    return flatten_config(cfg)


def trained_with(runs: Sequence) -> str:
    """One line: the settings a table's runs share where they depart from their dataset's
    protocol, marked ``shortened`` when the schedule is shorter; ``""`` when there is
    nothing to say.

    Returns
    -------
    str
        E.g. ``"shortened protocol: train.epochs=2, data.limit=300 (every run); preset
        official; device cpu"``.
    """
    if not runs:
        return ""
    departs: dict[str, set] = {}
    for run in runs:
        ref = _reference(run)
        for key in SCHEDULE:
            mine = run.hparams.get(key)
            if ref and mine != ref.get(key):
                departs.setdefault(key, set()).add(mine)
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
    other = sorted({f"{run.preset} (--preset auto takes {default_for(run.dataset, run.split)})"
                    for run in runs if run.preset != default_for(run.dataset, run.split)})
    if other:
        parts.append("preset " + ", ".join(other))
    if parts:
        if not other:
            parts.append(f"preset {', '.join(presets)}")
        devices = sorted({str(run.summary.get("device", "?")) for run in runs})
        parts.append(f"device {', '.join(devices)}")
    return "; ".join(parts)


def _shorter(run) -> bool:
    ref = _reference(run)
    if not ref:
        return False
    limit = run.hparams.get("data.limit") or 0
    return bool(limit) or (run.hparams.get("train.epochs", 0) < ref.get("train.epochs", 0))
