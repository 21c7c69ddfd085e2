"""What ``state.pt`` holds, so that an interrupted run resumes exactly where it stopped.

:func:`state_of` gathers, after each epoch, everything the next epoch depends on: the
model's, the regularizers' and the optimizer's state, the selected epoch so far
(:class:`Best`), every random stream (Python, NumPy, torch on the CPU and CUDA, the
shuffle's generators) and how many epochs ``results.jsonl`` holds, as a
:class:`TrainState`. On disk it is :meth:`TrainState.to_dict`: tensors and plain Python
values only, so :func:`torch.load` reads it with ``weights_only=True`` (no pickled code).
:func:`restore_state` puts it back into a :class:`grprune.trainer.Trainer`;
:meth:`grprune.record.rundir.RunDir.read_state` reads the file (checked by
:func:`state_problem`, typed by :meth:`TrainState.from_dict`) and
:meth:`~grprune.record.rundir.RunDir.resumed_records` the epochs it counts.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch

#: the keys of a state.pt (:func:`state_of`) and their types
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


def state_of(trainer: Any, epoch: int, best: Best, n_records: int,
             stopped: bool) -> TrainState:
    """The state of ``trainer`` (a :class:`grprune.trainer.Trainer`) after ``epoch``, with
    ``n_records`` epochs in ``results.jsonl``; ``stopped``: early stopping ended the run.
    ``best`` is copied."""
    numpy_state: Any = np.random.get_state()  # the legacy 5-tuple
    kind, keys, pos, has_gauss, gauss = numpy_state
    version, py_state, py_gauss = random.getstate()
    rng: dict[str, Any] = {"torch": torch.get_rng_state(),
                           "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos),
                                     int(has_gauss), float(gauss)],
                           "python": [version, list(py_state), py_gauss],
                           "loader": trainer.loader_gen.get_state()}
    if trainer.device.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(trainer.device)
    if trainer.device_gen is not None:
        rng["loader_device"] = trainer.device_gen.get_state()
    return TrainState(epoch=epoch, model=trainer.model.state_dict(),
                      regs={n: r.state_dict() for n, r in trainer.regs.items()},
                      optimizer=trainer.optimizer.state_dict(),
                      best=dataclasses.replace(best), rng=rng, n_records=n_records,
                      stopped=stopped)


def restore_state(trainer: Any, state: TrainState) -> None:
    """Put a :func:`state_of` back into ``trainer``: weights, optimizer, random streams."""
    trainer.model.load_state_dict(state.model)
    for n, r in trainer.regs.items():
        r.load_state_dict(state.regs[n])
    trainer.optimizer.load_state_dict(state.optimizer)
    rng = state.rng
    torch.set_rng_state(rng["torch"])
    kind, keys, pos, has_gauss, gauss = rng["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, py_state, py_gauss = rng["python"]
    random.setstate((version, tuple(py_state), py_gauss))
    trainer.loader_gen.set_state(rng["loader"])
    if "cuda" in rng and trainer.device.type == "cuda":
        torch.cuda.set_rng_state(rng["cuda"], trainer.device)
    if "loader_device" in rng and trainer.device_gen is not None:
        trainer.device_gen.set_state(rng["loader_device"])


def _kind(value: Any) -> str:
    return "a bool" if isinstance(value, bool) else f"a {type(value).__name__}"


def state_problem(state: Any, epochs: int | None = None) -> str | None:
    """What is wrong with a ``state.pt``'s contents as a whole, in words; None when sound.

    Checked before anything of it is loaded: every key of :func:`state_of` with its type,
    ``epoch`` in ``[0, epochs - 1]`` (an epoch of this run), ``n_records`` equal to
    ``epoch + 1`` (one ``results.jsonl`` line per epoch from 0), the selected epoch
    ``best.epoch`` in ``[-1, epoch]`` with numeric scores, and random streams of the form
    :func:`restore_state` sets. The model's shapes need the model:
    :func:`model_problem`.

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
        return f"it holds {_kind(state)}, not a training state"
    missing = [k for k in STATE_KEYS if k not in state]
    if missing:
        return f"it lacks {', '.join(missing)}"
    for key, kind in STATE_KEYS.items():
        value = state[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            want = kind.__name__ if isinstance(kind, type) else "the right type"
            return f"its {key} is {_kind(value)}, not {'an' if want == 'int' else 'a'} {want}"
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
            return f"its best.{name} is {_kind(value)}, not a number"
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


def _shape_problem(what: str, saved: Any, live: Mapping[str, Any]) -> str | None:
    """How the tensors ``saved`` differ from the ``state_dict`` ``live``; None if they don't."""
    if not isinstance(saved, Mapping):
        return f"its {what} is {_kind(saved)}, not a state_dict"
    extra, lacking = sorted(set(saved) - set(live)), sorted(set(live) - set(saved))
    if extra or lacking:
        name = (extra or lacking)[0]
        return (f"its {what} {'has' if extra else 'lacks'} {name!r} "
                f"({len(extra)} unknown, {len(lacking)} missing): another model's state")
    for key, value in live.items():
        if isinstance(value, torch.Tensor):
            other = saved[key]
            if not isinstance(other, torch.Tensor) or other.shape != value.shape:
                shape = tuple(other.shape) if isinstance(other, torch.Tensor) else _kind(other)
                return (f"its {what} {key!r} has shape {shape}, this run's model "
                        f"{tuple(value.shape)}: another configuration's state")
    return None


def model_problem(trainer: Any, state: TrainState) -> str | None:
    """Whether a sound state fits ``trainer``'s model, regularizers and optimizer (names
    and shapes); in words, None when it does."""
    problem = _shape_problem("model", state.model, trainer.model.state_dict())
    if problem:
        return problem
    regs = state.regs
    if set(regs) != set(trainer.regs):
        return (f"its regularizers are {sorted(regs) or 'none'}, this run's "
                f"{sorted(trainer.regs) or 'none'}")
    for name, reg in trainer.regs.items():
        problem = _shape_problem(f"regularizer {name}", regs[name], reg.state_dict())
        if problem:
            return problem
    opt, live = state.optimizer, trainer.optimizer.state_dict()
    groups = opt.get("param_groups")
    if (not isinstance(groups, list) or not isinstance(opt.get("state"), Mapping)
            or len(groups) != len(live["param_groups"])
            or any(not isinstance(g, Mapping) or len(g.get("params", ())) != len(h["params"])
                   for g, h in zip(groups, live["param_groups"]))):
        return "its optimizer state does not match this run's parameters"
    params = [p for group in trainer.optimizer.param_groups for p in group["params"]]
    ids = [i for group in live["param_groups"] for i in group["params"]]
    shapes = dict(zip(ids, (p.shape for p in params)))
    for pid, entry in opt["state"].items():
        if pid not in shapes or not isinstance(entry, Mapping):
            return f"its optimizer state names parameter {pid!r}, which this run lacks"
        for key, value in entry.items():
            if (isinstance(value, torch.Tensor) and value.dim() > 0
                    and value.shape != shapes[pid]):
                return (f"its optimizer's {key} of parameter {pid} has shape "
                        f"{tuple(value.shape)}, the parameter {tuple(shapes[pid])}")
    return None
