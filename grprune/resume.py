"""Resuming a run: a trainer's state gathered into a ``state.pt`` record, checked against
the trainer's model, and put back.

:func:`state_of` gathers, after each epoch, everything the next epoch depends on into a
:class:`~grprune.record.trainstate.TrainState` (the record layer's type of ``state.pt``, with
its own checks, :func:`~grprune.record.trainstate.state_problem`); :func:`model_problem`
says whether a sound state fits the trainer's model, regularizers and optimizer; and
:func:`restore_state` puts it back: weights, optimizer and every random stream. They read
a trainer through :class:`Resumable`, the attributes :class:`grprune.trainer.Trainer`
declares for them.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Mapping, Protocol

import numpy as np
import torch

from grprune.record.trainstate import Best, TrainState, type_words


class Resumable(Protocol):
    """What resuming reads of a trainer (:class:`grprune.trainer.Trainer`): its model,
    regularizers by name, optimizer, training device, and the shuffle's generators
    (``device_gen``: on the training device with ``train.fast_path`` on CUDA, else None)."""

    @property
    def model(self) -> torch.nn.Module: ...
    @property
    def regs(self) -> Mapping[str, torch.nn.Module]: ...
    @property
    def optimizer(self) -> torch.optim.Optimizer: ...
    @property
    def device(self) -> torch.device: ...
    @property
    def loader_gen(self) -> torch.Generator: ...
    @property
    def device_gen(self) -> torch.Generator | None: ...


def state_of(trainer: Resumable, epoch: int, best: Best, n_records: int,
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


def restore_state(trainer: Resumable, state: TrainState) -> None:
    """Put a :func:`state_of` back into ``trainer``: weights, optimizer, random streams."""
    trainer.model.load_state_dict(state.model)
    for n, r in trainer.regs.items():
        r.load_state_dict(state.regs[n])
    trainer.optimizer.load_state_dict(dict(state.optimizer))
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


def _shape_problem(what: str, saved: Any, live: Mapping[str, Any]) -> str | None:
    """How the tensors ``saved`` differ from the ``state_dict`` ``live``; None if they don't."""
    if not isinstance(saved, Mapping):
        return f"its {what} is {type_words(saved)}, not a state_dict"
    extra, lacking = sorted(set(saved) - set(live)), sorted(set(live) - set(saved))
    if extra or lacking:
        name = (extra or lacking)[0]
        return (f"its {what} {'has' if extra else 'lacks'} {name!r} "
                f"({len(extra)} unknown, {len(lacking)} missing): another model's state")
    for key, value in live.items():
        if isinstance(value, torch.Tensor):
            other = saved[key]
            if not isinstance(other, torch.Tensor) or other.shape != value.shape:
                shape = tuple(other.shape) if isinstance(other, torch.Tensor) else type_words(other)
                return (f"its {what} {key!r} has shape {shape}, this run's model "
                        f"{tuple(value.shape)}: another configuration's state")
    return None


def model_problem(trainer: Resumable, state: TrainState) -> str | None:
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
