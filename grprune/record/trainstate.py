"""What ``state.pt`` holds, so that an interrupted run resumes exactly where it stopped: its
type (:class:`TrainState`, with the selected epoch so far, :class:`Best`) and its checks.

A :class:`TrainState` holds, after each epoch, everything the next epoch depends on: the
model's, the regularizers' and the optimizer's state, the selected epoch so far, every random
stream (Python, NumPy, torch on the CPU and CUDA, the shuffle's generators) and how many
epochs ``results.jsonl`` holds. On disk it is :meth:`TrainState.to_dict`: tensors and plain
Python values only, so :func:`torch.load` reads it with ``weights_only=True`` (no pickled
code). :meth:`grprune.record.rundir.RunDir.read_state` reads the file (checked by
:func:`state_problem`, typed by :meth:`TrainState.from_dict`) and
:meth:`~grprune.record.rundir.RunDir.resumed_records` the epochs it counts. Gathering the
state from a trainer, putting it back and checking it against the trainer's model is
:mod:`grprune.resume`'s, beside the trainer: nothing here reads a trainer.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import torch

#: the keys of a state.pt (:func:`grprune.resume.state_of`) and their types
STATE_KEYS: dict[str, type | tuple[type, ...]] = {
    "epoch": int, "model": dict, "regs": dict, "optimizer": dict, "best": dict, "rng": dict,
    "n_records": int, "stopped": bool}


@dataclass
class Best:
    """The selected epoch so far (``epoch`` -1 before any) and its scores; ``since``: epochs
    after warm-up without a better validation score; ``warm``: an ERM warm-up epoch."""

    epoch: int = -1
    valid: float = -math.inf
    test: float = math.nan
    train: float = math.nan
    kept_test: float = math.nan
    since: int = 0
    warm: bool = False

    def update(self, epoch: int, evals: Mapping[str, Any], warm: bool,
               higher: bool = True) -> bool:
        """Take ``epoch`` when its validation score is better (NaN never is); ``evals``:
        split -> its :class:`~grprune.evaluation.Evaluation`; ``higher``: whether a higher
        score is better (:func:`grprune.record.metricinfo.higher_is_better`: False for
        ``rmse``, ``mae``). Returns whether it was taken; ``since`` counts the post-warm-up
        epochs that were not."""
        valid, test = evals["valid"], evals["test"]
        better = (valid.metric > self.valid if higher else
                  valid.metric < self.valid or (self.epoch < 0 and not math.isnan(valid.metric)))
        if better:
            self.epoch, self.valid, self.test, self.kept_test, self.since, self.warm = (
                epoch, valid.metric, test.metric, test.kept, 0, warm)
            self.train = evals["train"].metric if "train" in evals else math.nan
            return True
        if not warm:
            self.since += 1
        return False


@dataclass(frozen=True)
class TrainState:
    """``state.pt``, typed: the training state after epoch ``epoch`` (from 0).

    Attributes
    ----------
    epoch : int
        The last epoch trained, in ``[0, train.epochs - 1]``.
    model, optimizer : mapping
        The model's and the optimizer's ``state_dict``.
    regs : mapping
        Regularizer name -> its ``state_dict``.
    best : Best
        The selected epoch so far.
    rng : mapping
        Every random stream: ``torch`` and ``loader`` (byte tensors), ``numpy`` (NumPy's
        legacy 5 fields, its 624 keys a tensor), ``python`` (3 fields, 625 words), and
        ``cuda``, ``loader_device`` where the run used them.
    n_records : int
        The epochs ``results.jsonl`` holds for it: ``epoch + 1``.
    stopped : bool
        Early stopping ended the run after ``epoch``.
    """

    epoch: int
    model: Mapping[str, Any]
    regs: Mapping[str, Any]
    optimizer: Mapping[str, Any]
    best: Best
    rng: Mapping[str, Any]
    n_records: int
    stopped: bool = False

    def next_epoch(self, epochs: int) -> int:
        """The epoch a resumed run of ``epochs`` epochs trains next: ``epoch + 1``, or
        ``epochs`` (none) when early stopping had ended it."""
        return epochs if self.stopped else self.epoch + 1

    def to_dict(self) -> dict[str, Any]:
        """What ``state.pt`` holds (:data:`STATE_KEYS`, in that order): tensors and plain
        values only, ``best`` as a dict."""
        return {"epoch": self.epoch, "model": self.model, "regs": self.regs,
                "optimizer": self.optimizer, "best": dataclasses.asdict(self.best),
                "rng": self.rng, "n_records": self.n_records, "stopped": self.stopped}

    @classmethod
    def from_dict(cls, state: Any, epochs: int | None = None) -> "TrainState":
        """A loaded ``state.pt`` (:meth:`to_dict`), checked by :func:`state_problem`.

        Raises
        ------
        ValueError
            If :func:`state_problem` finds it unsound (the message says what is wrong).
        """
        if isinstance(state, TrainState):
            return state
        problem = state_problem(state, epochs)
        if problem is not None:
            raise ValueError(f"not a training state: {problem}")
        return cls(epoch=state["epoch"], model=state["model"], regs=state["regs"],
                   optimizer=state["optimizer"], best=Best(**state["best"]),
                   rng=state["rng"], n_records=state["n_records"], stopped=state["stopped"])


def type_words(value: Any) -> str:
    """``"a bool"``, ``"a list"``: what ``value`` is, in a message."""
    return "a bool" if isinstance(value, bool) else f"a {type(value).__name__}"


def state_problem(state: Any, epochs: int | None = None) -> str | None:
    """What is wrong with a ``state.pt``'s contents as a whole, in words; None when sound.

    Checked before anything of it is loaded: every key of :data:`STATE_KEYS` with its type,
    ``epoch`` in ``[0, epochs - 1]`` (an epoch of this run), ``n_records`` equal to
    ``epoch + 1`` (one ``results.jsonl`` line per epoch from 0), the selected epoch
    ``best.epoch`` in ``[-1, epoch]`` with numeric scores, and random streams of the form
    :func:`grprune.resume.restore_state` sets. The model's shapes need the model:
    :func:`grprune.resume.model_problem`.

    Parameters
    ----------
    state : Any
        What :func:`torch.load` returned.
    epochs : int, optional
        The run's ``train.epochs``.

    Examples
    --------
    >>> state_problem({"epoch": 1})
    'it lacks model, regs, optimizer, best, rng, n_records, stopped'
    """
    if not isinstance(state, dict):
        return f"it holds {type_words(state)}, not a training state"
    missing = [k for k in STATE_KEYS if k not in state]
    if missing:
        return f"it lacks {', '.join(missing)}"
    for key, kind in STATE_KEYS.items():
        value = state[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            want = kind.__name__ if isinstance(kind, type) else "the right type"
            article = "an" if want == "int" else "a"
            return f"its {key} is {type_words(value)}, not {article} {want}"
    epoch, n = state["epoch"], state["n_records"]
    if epoch < 0 or (epochs is not None and epoch >= epochs):
        top = f"{epochs - 1}" if epochs is not None else "the last"
        return f"its epoch is {epoch}, outside this run's epochs 0..{top}"
    if n != epoch + 1:
        return f"it counts {n} epoch records after epoch {epoch} (expected {epoch + 1})"
    best = state["best"]
    fields = {f.name for f in dataclasses.fields(Best)}
    if set(best) != fields:
        return f"its best holds {sorted(map(str, best))}, not {sorted(fields)}"
    chosen = Best(**best)
    if (not isinstance(chosen.epoch, int) or isinstance(chosen.epoch, bool)
            or not -1 <= chosen.epoch <= epoch):
        return f"its selected epoch best.epoch is {chosen.epoch!r:.40}, outside -1..{epoch}"
    for name in ("valid", "test", "train", "kept_test"):
        value = getattr(chosen, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"its best.{name} is {type_words(value)}, not a number"
    rng = state["rng"]
    for name in ("torch", "loader"):
        if not (isinstance(rng.get(name), torch.Tensor) and rng[name].dtype == torch.uint8):
            return f"its random stream rng.{name} is not a byte tensor"
    numpy_state, python_state = rng.get("numpy"), rng.get("python")
    if not (isinstance(numpy_state, (list, tuple)) and len(numpy_state) == 5
            and isinstance(numpy_state[1], torch.Tensor) and numpy_state[1].numel() == 624):
        return "its random stream rng.numpy is not NumPy's (5 fields, 624 keys)"
    if not (isinstance(python_state, (list, tuple)) and len(python_state) == 3
            and isinstance(python_state[1], (list, tuple)) and len(python_state[1]) == 625):
        return "its random stream rng.python is not Python's (3 fields, 625 words)"
    return None
