"""Errors a user can cause. The CLI turns each into one message and exit code 2."""

from __future__ import annotations


class GrpruneError(Exception):
    """A problem with the user's input (name, value, path or data file).

    The message is complete and meant for the user; the CLI prints it without a
    traceback and exits with code 2.
    """


class DivergedError(GrpruneError):
    """Training diverged: the loss became NaN or infinite (``epoch``: where, 0-based).

    :func:`grprune.run.execute` records it in the run's ``error.json`` with
    ``"kind": "diverged"``, and ``grprune collect`` lists the run as diverged.
    """

    def __init__(self, message: str, epoch: int) -> None:
        super().__init__(message)
        self.epoch = epoch


class RunPruned(Exception):
    """A tune's pruner stopped the run after ``epoch`` (0-based), raised from the trainer's
    epoch callback (:mod:`grprune.tune.trial`) once ``pruned.json`` is written.

    Not a :class:`GrpruneError`: nothing is wrong; ``grprune run`` says so in one line
    and exits 0, and the run directory's state is ``pruned`` (resumable).
    """

    def __init__(self, message: str, epoch: int) -> None:
        super().__init__(message)
        self.epoch = epoch


class DataError(GrpruneError):
    """A missing, corrupt or malformed data file."""


def did_you_mean(name: object, choices, cutoff: float = 0.5) -> str:
    """`` Did you mean 'x'?`` for the choice closest to ``name``, or ``""`` if none is close.

    One hint for every "unknown name" message (registries, splits, presets, sweep spec
    keys, hyperparameter keys); :func:`difflib.get_close_matches` decides.

    Examples
    --------
    >>> did_you_mean("ofical", ["paper", "official"])
    " Did you mean 'official'?"
    >>> did_you_mean("zzz", ["paper"])
    ''
    """
    import difflib
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=cutoff)
    return f" Did you mean {close[0]!r}?" if close else ""
