"""How far a binary classifier's probabilities can be trusted, and post-hoc calibration.

The report (:func:`reliability`, :func:`ece`, :func:`brier`, :func:`nll`) follows Guo et al.,
"On Calibration of Modern Neural Networks" (ICML 2017). For ``N`` graphs with class-1
probability :math:`p_i`, label :math:`y_i \\in \\{0, 1\\}`, prediction
:math:`\\hat y_i = [p_i > 0.5]` and confidence :math:`c_i = \\max(p_i, 1 - p_i)`, the
confidences are put in ``M`` equal-width bins :math:`B_m = \\{i : c_i \\in ((m-1)/M, m/M]\\}`
(``M = 15`` by default) and

.. math::

    \\mathrm{ECE} = \\sum_{m=1}^{M} \\frac{|B_m|}{N}
        \\left| \\mathrm{acc}(B_m) - \\mathrm{conf}(B_m) \\right|,\\qquad
    \\mathrm{acc}(B_m) = \\frac{1}{|B_m|}\\sum_{i \\in B_m} [\\hat y_i = y_i],\\quad
    \\mathrm{conf}(B_m) = \\frac{1}{|B_m|}\\sum_{i \\in B_m} c_i,

    \\mathrm{Brier} = \\frac{1}{N}\\sum_i (p_i - y_i)^2,\\qquad
    \\mathrm{NLL} = -\\frac{1}{N}\\sum_i y_i \\log p_i + (1 - y_i)\\log(1 - p_i).

The reliability diagram plots :math:`\\mathrm{acc}(B_m)` against :math:`\\mathrm{conf}(B_m)`.

Calibration maps (:class:`Calibrator`), fitted on the run's validation split, each applied to
the class-1 logit :math:`z = \\log p_1 - \\log p_0` or probability:

* ``temperature`` (Guo et al. 2017): :math:`q = \\sigma(z / T)`, ``T > 0`` minimizing the
  validation NLL (the ranking, hence ROC-AUC, and the predicted labels are unchanged);
* ``platt`` (Platt 1999): :math:`q = \\sigma(a z + b)`, a logistic regression of the labels
  on ``z`` (scikit-learn's ``LogisticRegression``, ``C = 1e6``: practically unregularized);
* ``isotonic`` (Zadrozny and Elkan 2002): a non-decreasing step function of :math:`p_1`
  (scikit-learn's ``IsotonicRegression``), interpolated linearly between its thresholds.

:func:`calibrate_run` is ``grprune calibrate``: it scores the run's validation and test
splits as the trainer evaluated them, fits the map on validation, reports ECE, Brier and NLL
before and after on both, writes ``calibration.json`` into the run directory
(:meth:`grprune.record.rundir.RunDir.write_calibration`) and draws the test split's
reliability diagram (:func:`draw_reliability`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from grprune.errors import GrpruneError
from grprune.record.calibration import METHODS, CalibrationRecord

#: the default number of equal-width confidence bins of the ECE (Guo et al. 2017)
BINS = 15
#: probabilities are clipped to [EPS, 1 - EPS] before a log
EPS = 1e-12
#: temperature scaling searches ``log T`` in [-this, this]
TEMPERATURE_LOG_MAX = 7.0
#: the picture ``grprune calibrate`` draws, in its output folder
DIAGRAM = "reliability.png"


def _binary(prob: np.ndarray, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Class-1 probabilities (N,) float64 from ``prob`` of shape (N,) or (N, 2), and the
    labels as float64 (N,) (zeros without ``y``)."""
    p = np.asarray(prob, dtype=np.float64)
    p = p[:, 1] if p.ndim == 2 else p.reshape(-1)
    t = np.zeros_like(p) if y is None else np.asarray(y, dtype=np.float64).reshape(-1)
    if len(t) != len(p):
        raise GrpruneError(f"{len(p)} probabilities but {len(t)} labels")
    return p, t


def reliability(prob: np.ndarray, y: np.ndarray, bins: int = BINS) -> list[dict[str, Any]]:
    """The confidence bins of the ECE (module docstring).

    Parameters
    ----------
    prob : np.ndarray of shape (N,) (class-1 probability) or (N, 2), values in [0, 1]
    y : np.ndarray of shape (N,), values in {0, 1}
    bins : int
        ``M``, the number of equal-width bins over [0, 1].

    Returns
    -------
    list of dict, length M
        ``lo``, ``hi`` (the bin's edges), ``count`` (:math:`|B_m|`), ``confidence`` and
        ``accuracy`` (its means; None for an empty bin).

    Examples
    --------
    >>> [b["count"] for b in reliability(np.array([0.1, 0.8, 0.95]), np.array([0, 1, 0]), 2)]
    [0, 3]
    """
    if bins < 1:
        raise GrpruneError(f"--bins must be at least 1, got {bins}")
    p, t = _binary(prob, y)
    conf = np.maximum(p, 1.0 - p)
    correct = ((p > 0.5).astype(np.float64) == t).astype(np.float64)
    idx = np.clip(np.ceil(conf * bins).astype(np.int64) - 1, 0, bins - 1)
    out = []
    for m in range(bins):
        sel = idx == m
        n = int(sel.sum())
        out.append({"lo": m / bins, "hi": (m + 1) / bins, "count": n,
                    "confidence": float(conf[sel].mean()) if n else None,
                    "accuracy": float(correct[sel].mean()) if n else None})
    return out


def ece(prob: np.ndarray, y: np.ndarray, bins: int = BINS) -> float:
    """Expected calibration error (Guo et al. 2017; module docstring), in [0, 1].

    Parameters
    ----------
    prob : np.ndarray of shape (N,) or (N, 2)
    y : np.ndarray of shape (N,), values in {0, 1}
    bins : int

    Examples
    --------
    >>> round(ece(np.array([0.9, 0.9, 0.2, 0.4]), np.array([1, 0, 0, 1]), bins=10), 4)
    0.4
    """
    table = reliability(prob, y, bins)
    n = sum(b["count"] for b in table)
    return float(sum(b["count"] / n * abs(b["accuracy"] - b["confidence"])
                     for b in table if b["count"])) if n else float("nan")


def brier(prob: np.ndarray, y: np.ndarray) -> float:
    """Brier score :math:`\\frac1N\\sum_i (p_i - y_i)^2` of the class-1 probability, in [0, 1].

    >>> brier(np.array([1.0, 0.5]), np.array([1, 0]))
    0.125
    """
    p, t = _binary(prob, y)
    return float(np.mean((p - t) ** 2)) if len(p) else float("nan")


def nll(prob: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log-likelihood (nats) of the labels under the class-1 probability
    (clipped to [:data:`EPS`, 1 - :data:`EPS`])."""
    p, t = _binary(prob, y)
    p = np.clip(p, EPS, 1 - EPS)
    return float(-np.mean(t * np.log(p) + (1 - t) * np.log1p(-p))) if len(p) else float("nan")


def logit(prob: np.ndarray) -> np.ndarray:
    """The class-1 logit :math:`z = \\log p_1 - \\log p_0`, float64 (N,), from ``prob`` of
    shape (N, 2) (both columns: exact for a softmax's output, and finite, ``|z| <= 27.7``,
    where one probability rounds to 1) or (N,) (``p_0 = 1 - p_1``).

    >>> logit(np.array([[0.5, 0.5], [0.2, 0.8]])).round(4).tolist()
    [0.0, 1.3863]
    """
    p = np.asarray(prob, dtype=np.float64)
    p0, p1 = (p[:, 0], p[:, 1]) if p.ndim == 2 else (1.0 - p, p)
    return np.log(np.clip(p1, EPS, None)) - np.log(np.clip(p0, EPS, None))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@dataclass(frozen=True)
class Calibrator:
    """A fitted calibration map (module docstring).

    Attributes
    ----------
    method : {"temperature", "platt", "isotonic"}
    params : dict
        ``temperature``; ``slope``, ``intercept``; or ``x``, ``y`` (isotonic thresholds).
    """

    method: str
    params: dict = field(default_factory=dict)

    def describe(self) -> str:
        """One phrase: ``temperature T = 1.84``, ``platt a = 0.91, b = -0.12`` or
        ``isotonic (8 thresholds)``."""
        if self.method == "isotonic":
            return f"isotonic ({len(self.params['x'])} thresholds)"
        if self.method == "temperature":
            return f"temperature T = {self.params['temperature']:.4g}"
        return f"platt a = {self.params['slope']:.4g}, b = {self.params['intercept']:.4g}"

    def apply(self, prob: np.ndarray) -> np.ndarray:
        """Calibrated probabilities.

        Parameters
        ----------
        prob : np.ndarray of shape (N, 2) (both class probabilities) or (N,) (class 1)

        Returns
        -------
        np.ndarray of float64, the shape of ``prob``
            ``[1 - q, q]`` per row for (N, 2), ``q`` for (N,).
        """
        p = np.asarray(prob, dtype=np.float64)
        if self.method == "temperature":
            q = _sigmoid(logit(p) / float(self.params["temperature"]))
        elif self.method == "platt":
            q = _sigmoid(float(self.params["slope"]) * logit(p) + float(self.params["intercept"]))
        else:
            p1 = p[:, 1] if p.ndim == 2 else p
            q = np.interp(p1, np.asarray(self.params["x"], dtype=np.float64),
                          np.asarray(self.params["y"], dtype=np.float64))
        return np.stack([1.0 - q, q], axis=1) if p.ndim == 2 else q


def fit(method: str, prob: np.ndarray, y: np.ndarray) -> Calibrator:
    """Fit a calibration map on validation probabilities.

    Parameters
    ----------
    method : {"temperature", "platt", "isotonic"}
    prob : np.ndarray of shape (N, 2) or (N,)
    y : np.ndarray of shape (N,), values in {0, 1}

    Returns
    -------
    Calibrator

    Raises
    ------
    GrpruneError
        An unknown method (the choices), no graphs, or labels of one class only.
    """
    if method not in METHODS:
        raise GrpruneError(f"unknown calibration method {method!r}. Choices: "
                           f"{', '.join(METHODS)}")
    p, t = _binary(prob, y)
    if len(p) == 0 or len(np.unique(t)) < 2:
        raise GrpruneError(f"the validation split has {len(p)} labelled graphs of "
                           f"{len(np.unique(t))} class(es); a calibration needs both classes")
    if method == "temperature":
        from scipy.optimize import minimize_scalar
        z = logit(prob)
        res = minimize_scalar(lambda s: nll(_sigmoid(z / np.exp(s)), t),
                              bounds=(-TEMPERATURE_LOG_MAX, TEMPERATURE_LOG_MAX),
                              method="bounded", options={"xatol": 1e-7})
        return Calibrator("temperature", {"temperature": float(np.exp(res.x))})
    if method == "platt":
        from sklearn.linear_model import LogisticRegression
        lr = LogisticRegression(C=1e6, max_iter=1000).fit(logit(prob)[:, None], t.astype(int))
        return Calibrator("platt", {"slope": float(lr.coef_[0, 0]),
                                    "intercept": float(lr.intercept_[0])})
    from sklearn.isotonic import IsotonicRegression
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(p, t)
    return Calibrator("isotonic", {"x": [float(v) for v in iso.X_thresholds_],
                                   "y": [float(v) for v in iso.y_thresholds_]})


def scores(prob: np.ndarray, y: np.ndarray, bins: int = BINS) -> dict[str, float]:
    """``{"ece", "brier", "nll"}`` of class-1 probabilities (module docstring)."""
    return {"ece": ece(prob, y, bins), "brier": brier(prob, y), "nll": nll(prob, y)}


def calibrator_of(run) -> Calibrator:
    """The run's fitted calibration (``calibration.json``), for ``predict --calibrated``.

    Raises
    ------
    GrpruneError
        One line: the run has none ("run `grprune calibrate RUN` first"), or its file is
        damaged or of an earlier model (:meth:`grprune.record.rundir.RunDir.calibration`).
    """
    rec = run.rundir.calibration()
    if rec is None:
        raise GrpruneError(f"{run.run_dir} has no calibration; run `grprune calibrate "
                           f"{run.run_dir}` first")
    return Calibrator(rec.method, dict(rec.params))


def check_binary(run) -> None:
    """Refuse a run whose output is not one binary classification.

    Raises
    ------
    GrpruneError
        One line for a regression, multi-label or multi-class run.
    """
    task = run.features.task
    if task != "classification" or run.num_classes != 2:
        what = task if task != "classification" else f"{run.num_classes}-class"
        raise GrpruneError(f"{run.run_dir} is a {what} run; calibration applies to binary "
                           f"classification runs only")


@dataclass
class CalibrationReport:
    """What :func:`calibrate_run` did.

    Attributes
    ----------
    record : CalibrationRecord
        As written to ``calibration.json``.
    diagram : Path
        The reliability diagram (PNG).
    """

    record: CalibrationRecord
    diagram: Path

    def lines(self) -> list[str]:
        """ECE, Brier and NLL before and after, per split, one line each."""
        out = []
        for part in ("valid", "test"):
            d = getattr(self.record, part)
            b, a = d["before"], d["after"]
            out.append(f"{part} ({d['n']} graphs): ECE {b['ece']:.4f} -> {a['ece']:.4f}, "
                       f"Brier {b['brier']:.4f} -> {a['brier']:.4f}, "
                       f"NLL {b['nll']:.4f} -> {a['nll']:.4f}")
        if self.record.method == "temperature" and \
                self.record.params["temperature"] >= 0.999 * np.exp(TEMPERATURE_LOG_MAX):
            out.append("the temperature is at its bound: on validation, a constant probability "
                       "beats the model's (its scores rank, but carry little probability)")
        return out


def split_scores(run, part: str) -> tuple[np.ndarray, np.ndarray]:
    """The run's class probabilities on a split part and its labels, scored as the trainer
    evaluated them (dataset indices as noise keys, :func:`grprune.determinism.eval_seed` of
    the run's seed and ``part``; ``data.limit`` applied).

    Returns
    -------
    prob : np.ndarray of float32, shape (N, 2)
    y : np.ndarray of int64, shape (N,)
    """
    from grprune.determinism import eval_seed
    dataset = run.load_dataset()
    if dataset.task != "classification":
        raise GrpruneError(f"{run.run_dir} is a {dataset.task} run; calibration applies to "
                           f"binary classification runs only")
    idx = run.part_indices(dataset, part)
    scored = run.score([dataset.graphs[int(i)] for i in idx], keys=[int(i) for i in idx],
                       seed=eval_seed(int(run.cfg.train.seed or 0), part))
    prob = np.stack([s.prob for s in scored]) if scored else np.zeros((0, 2), np.float32)
    return prob, dataset.labels.numpy().reshape(-1)[idx].astype(np.int64)


def calibrate_run(run, method: str = "temperature", bins: int = BINS,
                  out_dir: str | Path | None = None,
                  log: Callable[[str], None] = lambda msg: None) -> CalibrationReport:
    """``grprune calibrate``: fit a calibration on the validation split, report it on test.

    Parameters
    ----------
    run : grprune.inference.Run
        A finished binary classification run.
    method : {"temperature", "platt", "isotonic"}
    bins : int
        Equal-width confidence bins of the ECE and the diagram.
    out_dir : path, optional
        Folder of the reliability diagram; default ``RUN_DIR/calibration``.
    log : callable
        Receives progress notes.

    Returns
    -------
    CalibrationReport
        ``calibration.json`` (written into the run directory, atomically) and the diagram.

    Raises
    ------
    GrpruneError
        Not a binary classification run (:func:`check_binary`), an unknown method, bins
        below 1, a validation split of one class, a run another process holds.
    """
    check_binary(run)
    if method not in METHODS:
        raise GrpruneError(f"unknown --method {method!r}. Choices: {', '.join(METHODS)}")
    if bins < 1:
        raise GrpruneError(f"--bins must be at least 1, got {bins}")
    out = Path(out_dir) if out_dir is not None else run.run_dir / "calibration"
    if out.exists() and not out.is_dir():
        raise GrpruneError(f"--out {out} exists and is not a directory")
    parts = {}
    for part in ("valid", "test"):
        log(f"scoring the {part} split of {run.dataset_name} on {run.device}")
        parts[part] = split_scores(run, part)
    cal = fit(method, *parts["valid"])
    report: dict[str, dict] = {}
    for part, (prob, y) in parts.items():
        after = cal.apply(prob)
        report[part] = {"n": int(len(y)), "before": scores(prob, y, bins),
                        "after": scores(after, y, bins)}
    prob, y = parts["test"]
    report["test"]["reliability"] = {"before": reliability(prob, y, bins),
                                     "after": reliability(cal.apply(prob), y, bins)}
    record = CalibrationRecord(method=method, params=cal.params, checkpoint_sha256="",
                               bins=bins, valid=report["valid"], test=report["test"])
    with run.rundir.lock():  # no training process writes the run meanwhile
        run.rundir.write_calibration(record)
    diagram = draw_reliability(report["test"], method, out / DIAGRAM,
                               title=f"{run.dataset_name} {run.run_dir.name}: test")
    return CalibrationReport(record=run.rundir.calibration() or record, diagram=diagram)


def draw_reliability(test: dict, method: str, path: Path, title: str = "") -> Path:
    """The reliability diagram (PNG, matplotlib's Agg backend): each bin's accuracy against
    its mean confidence before and after calibration, the diagonal of perfect calibration,
    and the bins' counts below.

    Parameters
    ----------
    test : dict
        A split of :class:`~grprune.record.calibration.CalibrationRecord` with
        ``reliability``, ``before`` and ``after``.
    method : str
    path : Path
        The PNG written (atomically).

    Returns
    -------
    Path
    """
    import io

    from matplotlib.figure import Figure  # no pyplot: Agg draws it, whatever the backend

    from grprune.record.files import atomic_write_bytes
    fig = Figure(figsize=(5.5, 6.5))
    ax, hist = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="perfect")
    for key, style in (("before", "o-"), ("after", "s-")):
        pts = [(b["confidence"], b["accuracy"]) for b in test["reliability"][key] if b["count"]]
        label = f"{key}{'' if key == 'before' else f' ({method})'}: ECE {test[key]['ece']:.3f}"
        ax.plot([c for c, _ in pts], [a for _, a in pts], style, label=label, markersize=4)
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title, fontsize=9)
    bins = test["reliability"]["before"]
    width = bins[0]["hi"] - bins[0]["lo"]
    for key, shift in (("before", 0.0), ("after", 0.5)):
        rows = test["reliability"][key]
        hist.bar([b["lo"] + width * (0.25 + shift) for b in rows],
                 [b["count"] for b in rows], width=width / 2, label=key)
    used = [b["lo"] for key in ("before", "after") for b in test["reliability"][key]
            if b["count"]]
    ax.set_xlim(min(used, default=0.0), 1)  # binary confidences are at least 0.5
    hist.set_xlabel("confidence (max class probability)")
    hist.set_ylabel("graphs")
    hist.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    atomic_write_bytes(path, buf.getvalue())
    return path

