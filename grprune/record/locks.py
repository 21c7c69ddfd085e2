"""Exclusive locks on files, taken one way: a run directory's ``.lock``
(:meth:`grprune.record.rundir.RunDir.lock`) and a screen's ``OUT.lock``
(:func:`grprune.predict.outputs.lock_output`).

A leaf of :mod:`grprune.record`: it imports nothing of grprune but the errors.
"""

from __future__ import annotations

import os
from pathlib import Path

from grprune.errors import GrpruneError


def hold_lock(path: Path, busy: str):
    """An exclusive lock on the file ``path`` (filelock's ``FileLock``: ``flock`` where
    the platform has it; the file is created if missing and left behind), held until the
    returned context manager exits; never taken through a symbolic link.

    Parameters
    ----------
    path : Path
        The lock file (a run's ``.lock``, a screen's ``OUT.lock``).
    busy : str
        The message when another process holds it.

    Raises
    ------
    GrpruneError
        ``busy`` if another process holds the lock; one line if ``path`` is a symbolic
        link (a link would lock, or create, another file).
    """
    from filelock import FileLock, Timeout
    if path.is_symlink():  # never follow a link to lock (or create) another file
        raise GrpruneError(f"{path} is a symbolic link (to {os.readlink(path)}), not the "
                           f"plain file grprune locks; remove it (rm '{path}') and run the "
                           f"same command again")
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise GrpruneError(busy) from None
    return _Held(lock)

class _Held:
    def __init__(self, lock) -> None:
        self.lock = lock

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()
