"""``calibration.json``: a post-hoc calibration of a binary classifier's class-1
probability, fitted on the run's validation split by ``grprune calibrate``
(:func:`grprune.calibration.calibrate_run`) and applied by ``grprune predict --calibrated``.

Format 1 (``"format": 1``), one JSON object:

``method``
    ``temperature`` (Guo et al. 2017), ``platt`` (Platt 1999) or ``isotonic``
    (Zadrozny and Elkan 2002).
``params``
    ``temperature``: ``{"temperature": T}``; ``platt``: ``{"slope": a, "intercept": b}``;
    ``isotonic``: ``{"x": [...], "y": [...]}`` (the fitted step function's thresholds,
    applied by linear interpolation, clipped at the ends, as scikit-learn's
    ``IsotonicRegression(out_of_bounds="clip")`` predicts).
``checkpoint_sha256``
    The sha256 of the ``checkpoint.pt`` it was fitted on: a calibration of an earlier
    model (the run was trained again) is refused, not applied.
``bins``
    The number of equal-width confidence bins of the ECE.
``valid``, ``test``
    Per split: ``n`` (graphs), and ``before`` / ``after``, each ``{"ece", "brier",
    "nll"}``; ``test`` also has ``reliability``: ``before`` / ``after`` lists of bins
    ``{"lo", "hi", "count", "confidence", "accuracy"}`` (empty bins have null means).

Imports nothing of grprune but :mod:`grprune.errors` (the record layer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from grprune.errors import GrpruneError

#: the version of the format this module writes and reads
FORMAT = 1
#: the fitting methods, and the keys of their parameters
METHODS: dict[str, tuple[str, ...]] = {"temperature": ("temperature",),
                                       "platt": ("slope", "intercept"),
                                       "isotonic": ("x", "y")}


@dataclass(frozen=True)
class CalibrationRecord:
    """A fitted calibration and its report, as ``calibration.json`` holds it (module
    docstring).

    Attributes
    ----------
    method : str
        A key of :data:`METHODS`.
    params : dict
        The method's parameters (:data:`METHODS`).
    checkpoint_sha256 : str
        The model it was fitted on.
    bins : int
    valid, test : dict
        ``n``, ``before``, ``after`` (and for ``test``, ``reliability``).
    """

    method: str
    params: dict
    checkpoint_sha256: str
    bins: int = 15
    valid: dict = field(default_factory=dict)
    test: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "method": self.method, "params": dict(self.params),
                "checkpoint_sha256": self.checkpoint_sha256, "bins": self.bins,
                "valid": dict(self.valid), "test": dict(self.test)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "calibration.json"
                  ) -> "CalibrationRecord":
        """Read one ``calibration.json`` object.

        Raises
        ------
        GrpruneError
            One line naming ``where``: another format, an unknown method, parameters
            missing or not numbers.
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise GrpruneError(f"{where} is not a calibration of format {FORMAT} (format "
                               f"{got!r}); run `grprune calibrate` again")
        method = data.get("method")
        if method not in METHODS:
            raise GrpruneError(f"{where}: unknown method {method!r}; choices: "
                               f"{', '.join(METHODS)}")
        params = data.get("params")
        if not isinstance(params, Mapping) or any(k not in params for k in METHODS[method]):
            raise GrpruneError(f"{where}: {method} needs the parameters "
                               f"{', '.join(METHODS[method])}; run `grprune calibrate` again")
        _check_numbers(method, params, where)
        return cls(method=str(method), params=dict(params),
                   checkpoint_sha256=str(data.get("checkpoint_sha256", "")),
                   bins=int(data.get("bins", 15)), valid=dict(data.get("valid") or {}),
                   test=dict(data.get("test") or {}))


def _check_numbers(method: str, params: Mapping[str, Any], where: str) -> None:
    """Raise a one-line GrpruneError when a parameter is not a (finite) number, or the
    isotonic thresholds are not two equally long lists."""
    import math

    def finite(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if method == "isotonic":
        x, y = params["x"], params["y"]
        ok = (isinstance(x, list) and isinstance(y, list) and len(x) == len(y) >= 1
              and all(map(finite, x)) and all(map(finite, y)))
    else:
        ok = all(finite(params[k]) for k in METHODS[method])
        ok = ok and (method != "temperature" or params["temperature"] > 0)
    if not ok:
        raise GrpruneError(f"{where}: the {method} parameters are not valid numbers; run "
                           f"`grprune calibrate` again")


def read_calibration(path: Path, checkpoint: Path) -> CalibrationRecord | None:
    """The calibration at ``path`` (``RUN/calibration.json``), checked against the model
    it calibrates.

    Parameters
    ----------
    path : Path
        ``calibration.json``.
    checkpoint : Path
        The run's ``checkpoint.pt``.

    Returns
    -------
    CalibrationRecord or None
        None when there is no ``path``.

    Raises
    ------
    GrpruneError
        One line: the file is unreadable or not JSON, of another format
        (:meth:`CalibrationRecord.from_dict`), or was fitted on another ``checkpoint.pt``
        (its sha256 differs: the run was trained again since).
    """
    import json

    from grprune.record.files import file_sha256, read_run_file
    if not path.is_file():
        return None
    try:
        data = json.loads(read_run_file(path))  # at most MAX_JSON_BYTES
    except (OSError, ValueError, RecursionError) as exc:
        raise GrpruneError(f"cannot read {path} ({type(exc).__name__}); run `grprune "
                           f"calibrate {path.parent}` again") from None
    rec = CalibrationRecord.from_dict(data, str(path))
    try:
        current = file_sha256(checkpoint)
    except OSError:
        current = ""
    if rec.checkpoint_sha256 != current:
        raise GrpruneError(f"{path} was fitted on another checkpoint.pt (the run was trained "
                           f"again since); run `grprune calibrate {path.parent}` again")
    return rec


def calibration_file(run_dir: str | Path) -> Path:
    """``RUN_DIR/calibration.json``, for messages (read and write it through
    :class:`grprune.record.rundir.RunDir`)."""
    from grprune.record.files import CALIBRATION
    return Path(run_dir) / CALIBRATION
