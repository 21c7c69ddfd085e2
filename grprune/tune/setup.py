"""From ``grprune tune``'s options to a :class:`~grprune.tune.spec.TuneSpec`, and the
trackers of a study (its MLflow parent run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from grprune.errors import GrpruneError
from grprune.sweep.grid import Grid, grid_from_options
from grprune.sweep.search import with_search
from grprune.trackers import (MLFLOW_EXPERIMENT_ENV, MLFLOW_PARENT_ENV, LogSpec, for_children,
                              log_args, parent_run)
from grprune.tune.space import Space
from grprune.tune.spec import TuneSpec


def base_and_space(options: dict[str, Any], space_file: str | Path | None) -> tuple[Grid, Space]:
    """The fixed part of every trial and the search space.

    Parameters
    ----------
    options : dict
        ``data, split, shift, selector, encoder, preset, epochs, seed, reg, overrides,
        device, root, download, config_file`` as ``grprune run`` takes them.
    space_file : path, optional
        ``--space FILE``; without it the parts' declared space.

    Raises
    ------
    GrpruneError
        On a comma list where one value is needed, a bad space, or an empty space.
    """
    o = options
    if o.get("config_file") is not None and not Path(o["config_file"]).is_file():
        raise GrpruneError(f"config file not found: {o['config_file']}")
    grid = grid_from_options(
        data=o.get("data"), split=o.get("split"), shift=o.get("shift"),
        selector=o.get("selector"), encoder=o.get("encoder"), preset=o.get("preset"),
        epochs=None if o.get("epochs") is None else str(o["epochs"]),
        seeds=None if o.get("seed") is None else str(o["seed"]),
        reg=[o["reg"]] if o.get("reg") else [], hparams=o.get("overrides") or (),
        device=o.get("device"), root=o.get("root"), download=bool(o.get("download")),
        config=o.get("config_file"))
    for axis, values in grid.axes.items():
        if len(values) > 1:
            raise GrpruneError(f"--{axis} takes one value in grprune tune (got "
                               f"{', '.join(map(str, values))}); run one tune per value")
    chosen = Space.from_choices(grid.hparams, "-H")
    if space_file is not None:
        space = Space.from_file(space_file)
    else:
        declared = with_search(Grid(dict(grid.axes)))
        space = Space.from_choices(declared.hparams, "the parts' declared search spaces")
    space.axes.update(chosen.axes)  # -H key=v1,v2 searches those values
    fixed = {k: v for k, v in grid.hparams.items() if len(v) == 1}
    for key in fixed:
        space.axes.pop(key, None)  # -H key=v fixes a key
    if not space.axes:
        raise GrpruneError("nothing to search: the parts declare no search space and no "
                           "-H key has several values; give --space FILE or -H key=v1,v2")
    return Grid(dict(grid.axes), fixed, dict(grid.fixed)), space


def track(spec: TuneSpec, logs: Sequence[LogSpec], study: Any) -> str | None:
    """Set up the children's trackers (``spec.child_args``, ``spec.env``); with MLflow,
    the study's parent run (created once, its id kept in the study's user attribute
    ``grprune.mlflow_run``), under which the trials nest. Returns the MLflow URI, if any.
    """
    children = for_children(logs, spec.root, experiment=spec.study)
    spec.child_args = spec.child_args + log_args(children)
    uri = next((s.where for s in children if s.name == "mlflow"), None)
    if uri is None:
        return None
    run_id = parent_run(uri, spec.study, f"study {spec.study}",
                        study.user_attrs.get("grprune.mlflow_run"))
    study.set_user_attr("grprune.mlflow_run", run_id)
    spec.env.update({MLFLOW_PARENT_ENV: run_id, MLFLOW_EXPERIMENT_ENV: spec.study})
    os.environ.pop(MLFLOW_PARENT_ENV, None)
    return uri


def end_tracking(uri: str | None, study: Any, best: float | None) -> None:
    """Mark the study's MLflow parent run finished, with the best value."""
    run_id = study.user_attrs.get("grprune.mlflow_run")
    if uri is None or run_id is None:
        return
    parent_run(uri, study.study_name, "", run_id,
               end={"best_valid": best} if best is not None else {})
