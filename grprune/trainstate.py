"""What ``state.pt`` holds, so that an interrupted run resumes exactly where it stopped.

:func:`state_of` gathers, after each epoch, everything the next epoch depends on: the
model's, the regularizers' and the optimizer's state, the selected epoch so far
(:class:`Best`), every random stream (Python, NumPy, torch on the CPU and CUDA, the
shuffle's generators) and how many epochs ``results.jsonl`` holds. It is tensors and
plain Python values only, so :func:`torch.load` reads it with ``weights_only=True`` (no
pickled code). :func:`restore_state` puts it back into a :class:`grprune.trainer.Trainer`;
:meth:`grprune.results.RunDir.read_state` reads the file and
:meth:`~grprune.results.RunDir.resumed_records` the epochs it counts.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch



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

    def update(self, epoch: int, evals: Mapping[str, Any], warm: bool) -> bool:
        """Take ``epoch`` when its validation score is better (NaN never is); ``evals``:
        split -> its :class:`~grprune.evaluation.Evaluation`. Returns whether it was taken;
        ``since`` counts the post-warm-up epochs that were not."""
        valid, test = evals["valid"], evals["test"]
        if valid.metric > self.valid:
            self.epoch, self.valid, self.test, self.kept_test, self.since, self.warm = (
                epoch, valid.metric, test.metric, test.kept, 0, warm)
            self.train = evals["train"].metric if "train" in evals else math.nan
            return True
        if not warm:
            self.since += 1
        return False


def state_of(trainer: Any, epoch: int, best: Best, n_records: int,
             stopped: bool) -> dict[str, Any]:
    """The state of ``trainer`` (a :class:`grprune.trainer.Trainer`) after ``epoch``, with
    ``n_records`` epochs in ``results.jsonl``; ``stopped``: early stopping ended the run."""
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
    return {"epoch": epoch, "model": trainer.model.state_dict(),
            "regs": {n: r.state_dict() for n, r in trainer.regs.items()},
            "optimizer": trainer.optimizer.state_dict(), "best": dataclasses.asdict(best),
            "rng": rng, "n_records": n_records, "stopped": stopped}


def restore_state(trainer: Any, state: dict[str, Any]) -> None:
    """Put a :func:`state_of` back into ``trainer``: weights, optimizer, random streams."""
    trainer.model.load_state_dict(state["model"])
    for n, r in trainer.regs.items():
        r.load_state_dict(state["regs"][n])
    trainer.optimizer.load_state_dict(state["optimizer"])
    rng = state["rng"]
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
