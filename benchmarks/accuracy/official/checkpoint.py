"""Per-epoch checkpoint and resume of the official PrunE code's training loop.

The official ``Model.fit`` (``modelNew/prune.py``) keeps no checkpoint, so a run cut off by
the end of a device session is lost. ``patch.py``'s "checkpoint" patch calls :func:`resume`
once before the epoch loop (its value is the first epoch to run) and :func:`save` at the end
of every epoch, both only when ``OFFICIAL_CHECKPOINT`` names a file; this module is imported
from the harness folder on ``PYTHONPATH`` (as ``good_export.py``), and needs torch only.

What one epoch hands the next, all saved (``torch.save``, temp file + ``os.replace``):

- ``epoch``: the last finished epoch;
- ``model``: ``model.state_dict()`` (every parameter and buffer, BatchNorm statistics too);
- ``optimizers``: ``state_dict()`` of every attribute of the model that is a
  ``torch.optim.Optimizer`` (``optimizer``, ``edge_gnn_optimizer``), then ``schedulers``:
  every LR scheduler (``scheduler``, a ``ReduceLROnPlateau``: its best score and bad-epoch
  count);
- ``attrs``: every other plain attribute in ``vars(model)`` (no ``nn.Module``, optimizer,
  scheduler, callable or name starting with ``_``), i.e. what ``fit`` and ``evaluate_model``
  change: ``useAutoAug``, ``epochs_since_improvement``, ``edge_uniform_penalty``,
  ``penalty``, ``edge_penalty``, ``best_valid_metric``, ``stop_training``, ``best_states``,
  ``valid_metric_list``, ``train_metrics``, ``val_metrics``, ``test_metrics``, and the
  constants beside them, restored to the values they already have. Left out:
  ``featsMask``, a tensor computed from a parameter at construction (a ``.view`` of an
  ``nn.Parameter``, so not a leaf and not in ``state_dict``) that nothing updates,
  ``training`` (``fit`` calls ``self.train()`` at the end of every epoch) and ``device``
  (the machine's: a run goes on from a GPU's checkpoint on a CPU and the reverse; tensors
  are loaded to the CPU and copied to where the model is);
- ``rng``: the states of Python's ``random``, numpy's global generator, torch's CPU
  generator and, when CUDA is available, every CUDA generator. The data loader's shuffle
  and its workers' seeds, ``RandomEdgeDrop``'s drops and the Gumbel-softmax samples all draw
  from these, so the resumed epochs draw what the uninterrupted run drew;
- ``argv``: ``run.py``'s arguments but ``--root``'s value, checked on resume (a checkpoint of
  another command is an error, not a silent mix).

The pre-loop block of ``fit`` (with ``pretraining_epochs > 0``) runs again on resume: it
keeps the constructor's values of ``useAutoAug``, ``edge_uniform_penalty``, ``penalty`` and
``edge_penalty`` in the local ``state`` and zeroes them for ERM pre-training; the
constructor gives the same values from the same arguments, so ``state`` is what the
uninterrupted run kept. :func:`resume` runs after that block and overwrites the attributes
with the saved ones: resumed inside pre-training (at an epoch ``e < pe``) they are the zeroed
ones, and the ``e == self.pe`` branch restores ``state`` when it is reached, as uninterrupted;
resumed at ``e == pe`` the same branch runs at once; resumed after it (``e > pe``) they are
the saved PrunE values and the branch is not reached again. An early stop that set
``stop_training`` in the last saved epoch ends the resumed loop at once, as it would have.

``OFFICIAL_CHECKPOINT_KILL_AT=<e>`` (tests only) sends the process SIGKILL while saving epoch
``e``, after the temp file is written and before the rename: the checkpoint on disk stays at
epoch ``e - 1`` and epoch ``e`` is lost, as in a session that ends mid-epoch.
"""

from __future__ import annotations

import os
import random
import signal
import sys
from typing import Any

import numpy as np
import torch

#: the environment variable naming the checkpoint file
ENV = "OFFICIAL_CHECKPOINT"
#: tests only: SIGKILL while saving this epoch, before the rename
KILL_ENV = "OFFICIAL_CHECKPOINT_KILL_AT"
#: format version of the saved dict
VERSION = 1
#: attributes that belong to the process, not the run: ``training`` (``fit`` calls
#: ``self.train()`` every epoch) and ``device`` (``run.py``'s: 0 with CUDA, ``"cpu"``
#: without, so a run checkpointed on a GPU goes on on a CPU and the reverse)
_MACHINE = frozenset({"training", "device"})


def _schedulers() -> tuple[type, ...]:
    lr = torch.optim.lr_scheduler
    return tuple(c for c in (getattr(lr, "LRScheduler", None), getattr(lr, "_LRScheduler", None),
                             getattr(lr, "ReduceLROnPlateau", None)) if c is not None)


def _argv() -> list[str]:
    """``run.py``'s arguments with ``--root``'s value dropped (the data's path differs
    between this machine and a lent GPU; the data does not)."""
    args = sys.argv[1:]
    return [a for i, a in enumerate(args) if not (i > 0 and args[i - 1] == "--root")]


def _plain(model: torch.nn.Module) -> dict[str, Any]:
    """The model's attributes that are not modules, optimizers, schedulers or callables."""
    skip = (torch.nn.Module, torch.optim.Optimizer, *_schedulers())
    out = {}
    for name, value in vars(model).items():
        if name.startswith("_") or name in _MACHINE or isinstance(value, skip) \
                or callable(value):
            continue
        if torch.is_tensor(value) and value.grad_fn is not None:
            continue  # featsMask: derived from a parameter at construction, never updated
        out[name] = value
    return out


def state(model: torch.nn.Module, epoch: int) -> dict[str, Any]:
    """Everything epoch ``epoch + 1`` of ``model.fit`` depends on (the module docstring)."""
    rng = {"python": random.getstate(), "numpy": np.random.get_state(),
           "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return {"version": VERSION, "epoch": epoch, "argv": _argv(),
            "model": model.state_dict(),
            "optimizers": {k: v.state_dict() for k, v in vars(model).items()
                           if isinstance(v, torch.optim.Optimizer)},
            "schedulers": {k: v.state_dict() for k, v in vars(model).items()
                           if isinstance(v, _schedulers())},
            "attrs": _plain(model), "rng": rng}


def save(model: torch.nn.Module, epoch: int, path: str | None = None) -> None:
    """Write :func:`state` to ``path`` (default ``$OFFICIAL_CHECKPOINT``; nothing if unset),
    atomically: a temp file beside it, flushed to disk, then ``os.replace``."""
    path = path or os.environ.get(ENV)
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        torch.save(state(model, epoch), f)
        f.flush()
        os.fsync(f.fileno())
    if os.environ.get(KILL_ENV, "") == str(epoch):
        os.kill(os.getpid(), signal.SIGKILL)
    os.replace(tmp, path)


def resume(model: torch.nn.Module, path: str | None = None) -> int:
    """Restore ``model`` from ``path`` (default ``$OFFICIAL_CHECKPOINT``) if it exists and
    return the first epoch to run: the saved epoch + 1, or 0 with no file (or no path).

    Raises
    ------
    RuntimeError
        If the file was written by a run with other arguments (``run.py``'s, ``--root``
        aside) or by another version of this module.
    """
    path = path or os.environ.get(ENV)
    if not path or not os.path.exists(path):
        return 0
    ck = torch.load(path, map_location="cpu", weights_only=False)
    if ck.get("version") != VERSION:
        raise RuntimeError(f"{path}: checkpoint version {ck.get('version')}, expected {VERSION}")
    if ck["argv"] != _argv():
        raise RuntimeError(f"{path} was written by run.py {' '.join(ck['argv'])}, not by this "
                           f"command ({' '.join(_argv())}); remove it to start over")
    model.load_state_dict(ck["model"])
    for name, sd in ck["optimizers"].items():
        getattr(model, name).load_state_dict(sd)
    for name, sd in ck["schedulers"].items():
        getattr(model, name).load_state_dict(sd)
    for name, value in ck["attrs"].items():
        if name not in _MACHINE:
            setattr(model, name, value)
    rng = ck["rng"]
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        for i, cuda_state in enumerate(rng["cuda"][:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, i)
    print(f"checkpoint: resumed from {path} after epoch {ck['epoch']}", flush=True)
    return int(ck["epoch"]) + 1
