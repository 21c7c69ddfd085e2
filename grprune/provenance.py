"""Where a number came from: the code's commit and the hardware, recorded in ``summary.json``
so that a table built from run directories can give both beside each result.

Example
-------
>>> env = environment("cpu")
>>> sorted(env)
['commit', 'cpu', 'cpu_count', 'dgl', 'gpu', 'grprune', 'python', 'torch']
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

import grprune


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the grprune source in use, with ``-dirty`` when its tracked files differ
    from it; None outside a git checkout (an installed wheel) or without git."""
    root = Path(grprune.__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=7", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no", "--", "grprune"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("-dirty" if dirty else "") if head else None


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, :func:`platform.processor` elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: str | torch.device) -> dict[str, Any]:
    """The code and hardware of a run.

    Parameters
    ----------
    device : str or torch.device
        The device the run trained on.

    Returns
    -------
    dict
        ``grprune`` (version), ``commit`` (:func:`git_commit`, None when unknown),
        ``python``, ``torch``, ``dgl``, ``cpu`` (model name), ``cpu_count`` (cores this
        process may use) and ``gpu`` (the CUDA device's name, None on the CPU).
    """
    from grprune.compat import dgl

    device = torch.device(device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return {"grprune": grprune.__version__, "commit": git_commit(),
            "python": platform.python_version(), "torch": torch.__version__,
            "dgl": dgl.__version__, "cpu": cpu_model(), "cpu_count": cores, "gpu": gpu}
