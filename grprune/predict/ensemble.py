"""Several finished runs scored as one model: an ensemble's mean and standard deviation per
compound, and a run's fitted calibration applied to its scores (``grprune predict`` with
several ``--run``, a sweep directory, or ``--calibrated``).

Each member scores every molecule exactly as ``grprune predict`` scores it with that run
alone (its own evaluation seed and noise keys, :attr:`grprune.inference.Run.prediction_seed`),
calibrated first with its own ``calibration.json`` when asked
(:func:`grprune.calibration.calibrator_of`). Over the ``M`` members' scores
:math:`s_1 .. s_M` of a molecule, the table has

.. math::

    \\bar s = \\frac1M \\sum_k s_k,\\qquad
    \\mathrm{sd} = \\sqrt{\\frac{1}{M - 1} \\sum_k (s_k - \\bar s)^2}

(the sample standard deviation, the spread of the members as in deep ensembles,
Lakshminarayanan et al. 2017; chemprop's ``ensemble`` uncertainty), as ``score_mean`` and
``score_sd`` for a binary run's class-1 probability (``prob_k_mean``, ``prob_k_sd`` per
class otherwise), ``ensemble_size`` (the members that scored it: all of them, or none for
a row that is not scored) and ``pred_label`` (of the mean). ``bonds_kept`` and the bond
table are one model's and are not written for an ensemble.

The members must be compatible (:func:`check_compatible`): one dataset, task, metric and
featurizer. Members are named by run directory, or by a directory holding several finished
runs (a sweep's output; :func:`grprune.collect.reading.scan_runs`).

:meth:`Ensemble.chunk_table` is what the streamed screen (:func:`grprune.predict.stream.screen_csv`)
scores a chunk with, :func:`score_smiles` what the in-memory path scores with, for a single
run or an ensemble.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from grprune.calibration import Calibrator, calibrator_of, check_binary
from grprune.errors import GrpruneError
from grprune.predict.memory import Prediction, predict_smiles
from grprune.predict.chunk import ChunkGraphs, chunk_table, score_chunk
from grprune.predict.columns import has_label, shown_score_columns


class Ensemble:
    """Finished molecule runs of one dataset and task, scored as one model (module docstring).

    A single run with ``calibrated=True`` is an ensemble of one: its table is the run's own
    (``prob_1``, ...) with calibrated probabilities.

    Parameters
    ----------
    runs : sequence of grprune.inference.Run, length M >= 1
    calibrated : bool
        Apply each member's ``calibration.json``.

    Raises
    ------
    GrpruneError
        Incompatible runs (:func:`check_compatible`); with ``calibrated``, a member
        without a calibration or one that is not a binary classifier.
    """

    def __init__(self, runs: Sequence[Any], calibrated: bool = False) -> None:
        if not runs:
            raise GrpruneError("an ensemble needs at least one run")
        check_compatible(runs)
        self.members = tuple(runs)
        self.calibrated = calibrated
        cals: list[Calibrator | None] = []
        for r in self.members:
            if calibrated:
                check_binary(r)
            cals.append(calibrator_of(r) if calibrated else None)
        self.calibrators = tuple(cals)

    def __len__(self) -> int:
        return len(self.members)

    def __repr__(self) -> str:
        return f"Ensemble({[str(r.run_dir) for r in self.members]!r}, calibrated={self.calibrated})"

    # what the screen and the printed table read: the members share them (check_compatible)
    @property
    def cfg(self):
        return self.members[0].cfg

    @property
    def features(self):
        return self.members[0].features

    @property
    def dataset_name(self) -> str:
        return self.members[0].dataset_name

    @property
    def featurizer(self):
        return self.members[0].featurizer

    @property
    def num_classes(self) -> int:
        return self.members[0].num_classes

    @property
    def device(self):
        return self.members[0].device

    @property
    def name(self) -> str:
        """How tables title it: the run's directory name, or ``ensemble of M runs``."""
        one = self.members[0].run_dir.name
        if len(self) > 1:
            return f"ensemble of {len(self)} runs"
        return one + (" (calibrated)" if self.calibrated else "")

    @property
    def warmup_note(self) -> str | None:
        """The members' :attr:`grprune.inference.Run.warmup_note`, each naming its run."""
        notes = [f"{r.run_dir.name}: {r.warmup_note}" if len(self) > 1 else r.warmup_note
                 for r in self.members if r.warmup_note]
        return "; ".join(notes) or None

    def stamp(self) -> dict[str, Any]:
        """What a resumed screen must share with the interrupted one: every member's
        :func:`run_stamp` and calibration (a retrained or recalibrated member changes it)."""
        return {"members": [run_stamp(r) for r in self.members],
                "calibration": [None if c is None else [c.method, c.params]
                                for c in self.calibrators]}

    def chunk_table(self, df, keep: Sequence[str], rows: np.ndarray, smiles: Sequence[str],
                    graphs: ChunkGraphs, batch_size: int):
        """One chunk's output rows (:func:`grprune.predict.chunk.chunk_table` per member,
        combined by :func:`combine`) and, for one member, its scores (else None)."""
        tables, scores = [], None
        for run, cal in zip(self.members, self.calibrators):
            scores = score_chunk(run, graphs, batch_size=batch_size, seed=run.prediction_seed)
            if cal is not None and scores is not None and len(scores):
                scores = dataclasses.replace(scores, prob=cal.apply(scores.prob)
                                             .astype(np.float32))
            tables.append(chunk_table(run, df, keep, rows, smiles, graphs, scores))
        if len(self) == 1:
            return tables[0], scores
        return combine(tables, label=has_label(self.members[0])), None

    def predict_smiles(self, smiles: Sequence[str], batch_size: int = 256) -> Prediction:
        """:func:`grprune.predict.memory.predict_smiles` per member, calibrated and combined; for
        several members, ``bonds`` is empty and ``scores`` the first member's."""
        preds = [_calibrated(predict_smiles(r, smiles, batch_size=batch_size), cal)
                 for r, cal in zip(self.members, self.calibrators)]
        if len(self) == 1:
            return preds[0]
        first = preds[0]
        return Prediction(molecules=combine([p.molecules for p in preds],
                                            label=has_label(self.members[0])),
                          bonds=first.bonds.iloc[0:0], items=first.items, scores={},
                          bond_ids={})


def _calibrated(pred: Prediction, cal: Calibrator | None) -> Prediction:
    """``pred`` with ``prob_*`` and ``pred_label`` of its scored rows recomputed from the
    full-precision class probabilities through ``cal`` (no change without one)."""
    if cal is None or not pred.scores:
        return pred
    rows = sorted(pred.scores)
    prob = cal.apply(np.stack([pred.scores[r].prob for r in rows]))
    df = pred.molecules.set_index("row")
    df.loc[rows, "prob_1"] = prob[:, 1]
    df.loc[rows, "pred_label"] = prob.argmax(1)
    pred.molecules = df.reset_index()[list(pred.molecules.columns)]
    return pred


def combine(tables: Sequence[Any], label: bool = True):
    """The members' molecule tables (same rows, in order) as one: their score columns
    (:func:`grprune.predict.columns.shown_score_columns`: ``prob_*``, ``pred_*``) replaced by
    the mean and sample standard deviation over members (module docstring),
    ``ensemble_size`` and ``pred_label`` of the mean; ``bonds_kept`` dropped.

    Parameters
    ----------
    tables : sequence of pandas.DataFrame, length M
        Each with the same ``row`` column; scores float, NaN where not scored.
    label : bool
        Whether the runs predict a class (``pred_label``: of the mean; else empty).

    Returns
    -------
    pandas.DataFrame
        The first table's other columns, with the scores where its ``prob_*`` were.
    """
    import pandas as pd
    base = tables[0]
    cols = shown_score_columns([str(c) for c in base.columns])
    if not cols:
        raise GrpruneError("the runs' tables have no scores (prob_*, pred_*) to average")
    for t in tables[1:]:
        if len(t) != len(base) or not np.array_equal(t["row"].to_numpy(), base["row"].to_numpy()):
            raise GrpruneError("the ensemble's members scored different rows")
    stack = np.stack([t[cols].to_numpy(dtype=np.float64) for t in tables])  # (M, N, S)
    mean = stack.mean(axis=0)
    sd = (stack.std(axis=0, ddof=1) if len(tables) > 1
          else np.full_like(mean, np.nan))
    names = (["score"] if cols == ["prob_1"] else cols)
    out = base.drop(columns=[*cols, "pred_label", "bonds_kept"], errors="ignore")
    at = list(base.columns).index(cols[0])
    new: dict[str, Any] = {}
    for j, name in enumerate(names):
        new[f"{name}_mean"], new[f"{name}_sd"] = mean[:, j], sd[:, j]
    size = (~np.isnan(stack).any(axis=2)).sum(axis=0)  # (N,): members that scored it
    new["ensemble_size"] = size.astype(np.int64)
    pred = ((mean[:, 0] > 0.5).astype(np.int64) if cols == ["prob_1"]
            else np.nan_to_num(mean, nan=-np.inf).argmax(axis=1))
    new["pred_label"] = pd.array([int(v) if n and label else pd.NA
                                  for v, n in zip(pred, size)], dtype="Int64")
    out.columns = [f"input_{c}" if c in new else c for c in out.columns]  # an input's
    for k, (name, values) in enumerate(new.items()):
        out.insert(at + k, name, values)
    return out


def check_compatible(runs: Sequence[Any]) -> None:
    """Refuse runs that cannot be averaged: another dataset, task, metric, featurizer or
    output width than the first's.

    Raises
    ------
    GrpruneError
        One line naming the first run that differs and how.
    """
    def key(r: Any) -> dict[str, Any]:
        return {"dataset": r.dataset_name, "task": r.features.task,
                "metric": r.summary.metric,
                "featurizer": r.cfg.setting("data.featurizer") or "ogb",
                "features": r.features.to_dict()}

    first = key(runs[0])
    for r in runs[1:]:
        other = key(r)
        for k, v in first.items():
            if other[k] != v:
                raise GrpruneError(f"runs {runs[0].run_dir} and {r.run_dir} cannot form an "
                                   f"ensemble: {k} {v!r} vs {other[k]!r}")


def run_stamp(run: Any) -> dict[str, Any]:
    """A run's identity for a resumed screen: its directory and its checkpoint's size and
    modification time (ns), so that a run trained again changes it."""
    try:
        st = run.rundir.checkpoint_path.stat()
        ckpt = [st.st_size, st.st_mtime_ns]
    except OSError:
        ckpt = None
    return {"run": str(Path(run.run_dir).resolve()), "checkpoint": ckpt}


def model_stamp(model: Any) -> Any:
    """What a resumed screen must share with the interrupted one about the model:
    :meth:`Ensemble.stamp`, or a run's :func:`run_stamp`."""
    return model.stamp() if isinstance(model, Ensemble) else run_stamp(model)


def score_smiles(model: Any, smiles: Sequence[str], batch_size: int = 256
                 ) -> Prediction:
    """:func:`grprune.predict.memory.predict_smiles` of a run, or :meth:`Ensemble.predict_smiles`."""
    if isinstance(model, Ensemble):
        return model.predict_smiles(smiles, batch_size=batch_size)
    return predict_smiles(model, smiles, batch_size=batch_size)
