"""Names and text formatting shared by the collect modules."""

from __future__ import annotations

import json
import math
from typing import Any

from grprune.record.metricinfo import FRACTION_METRICS
from grprune.record.settings import VOLATILE_KEYS

#: `grprune collect --select`: a selection method (grprune.collect.selection), or all settings
SELECT_RULES = ("valid", "oracle", "all")
LAYOUTS = ("table", "ablation", "long")
#: ``train.seed`` and the keys that do not change results are not hyperparameters
NOT_HPARAMS = {"train.seed"} | {f"{s}.{k}" for s, k in VOLATILE_KEYS}
METRIC_NAMES = {"rocauc": "ROC-AUC", "accuracy": "accuracy", "prauc": "PR-AUC",
                "rmse": "RMSE", "mae": "MAE", "r2": "R²"}
#: the paper's names of PrunE's hyperparameters (Figure 3b)
PAPER_SYMBOLS = {"reg.size.eta": "η", "reg.size.weight": "λ1", "reg.eps-align.k": "K",
                 "reg.eps-align.weight": "λ2", "selector.tau": "τ"}
#: the value shown for a hyperparameter a setting does not have
_MISSING = "<unset>"


def pm(mean: float, std: float, scale: float = 100.0, digits: int = 2,
       n: int | None = None, metric: str | None = None) -> str:
    """``"70.32 ± 1.73"`` for fractions 0.7032 and 0.0173; ``"–"`` when missing.

    With ``n`` = 1 (one seed) the standard deviation is undefined: ``"63.35 (n=1)"``,
    no ``±``. A ``metric`` that is not a fraction (``rmse``, ``mae``, ``r2``:
    :data:`grprune.record.metricinfo.FRACTION_METRICS`) is shown as it is, with 3 decimals.

    >>> pm(0.7032, 0.0173), pm(0.6335, 0.0, n=1), pm(0.8123, 0.05, metric="rmse")
    ('70.32 ± 1.73', '63.35 (n=1)', '0.812 ± 0.050')
    """
    if metric is not None and metric not in FRACTION_METRICS:
        scale, digits = 1.0, 3
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–" if mean is None else "nan"
    if n == 1:
        return f"{mean * scale:.{digits}f} (n=1)"
    s = "nan" if std is None or math.isnan(std) else f"{std * scale:.{digits}f}"
    return f"{mean * scale:.{digits}f} ± {s}"


def _value_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _kept_text(row: dict) -> str:
    """Mean fraction of test edges kept at evaluation, e.g. ``0.987`` (``–`` if unknown)."""
    kept = row.get("kept_edge_fraction_mean", float("nan"))
    return "–" if kept is None or math.isnan(kept) else f"{kept:.3f}"


def _fraction_text(row: dict, key: str) -> str:
    """``0.863 ± 0.012`` for a fraction-valued column of a row (no ``±`` for one seed);
    ``–`` when missing."""
    mean, std = row.get(f"{key}_mean", math.nan), row.get(f"{key}_std", math.nan)
    if mean is None or math.isnan(mean):
        return "–"
    return f"{mean:.3f}" + ("" if math.isnan(std) or row.get("n") == 1 else f" ± {std:.3f}")


def hparams_text(hparams: dict, short: bool = False) -> str:
    """``"reg.size.eta=0.5, train.lr=0.001"``; ``short`` drops the ``reg.`` prefix."""
    return ", ".join(f"{k[4:] if short and k.startswith('reg.') else k}={_value_text(v)}"
                     for k, v in hparams.items())
