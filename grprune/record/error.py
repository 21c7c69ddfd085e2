"""Why a run failed, typed: :class:`ErrorRecord`, the contents of ``error.json``.

Two writers make it: :func:`grprune.run.execute`, when training diverges::

    {"message": "loss became nan at epoch 3; ...", "kind": "diverged", "epoch": 3,
     "hash": "3f2a9c01"}

and a sweep (:mod:`grprune.sweep.plan`), for a child that ended without a summary, keeping
the ``kind`` and ``epoch`` the run wrote itself::

    {"kind": "diverged", "epoch": 3, "message": "...", "returncode": 1,
     "time": "2026-01-02T03:04:05Z", "command": "python -m grprune run ...",
     "hash": "3f2a9c01", "log": "sweep.log", "stderr_tail": ["...", "..."]}

A file is read as it is: keys this version does not know, and known keys whose value has
another type than the field's (``null`` included), are kept in ``extra`` and written back after the known
fields (:meth:`ErrorRecord.to_dict`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

#: the kind of a run whose loss or weights became NaN or infinite
DIVERGED = "diverged"


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


@dataclass(frozen=True, kw_only=True)
class ErrorRecord:
    """A run's failure (``error.json``); every field None where the file lacks it.

    Attributes
    ----------
    message : str, optional
        What went wrong, in one line.
    kind : str, optional
        ``"diverged"`` (:data:`DIVERGED`) for a loss or weights that became NaN: a result
        of the run's settings rather than a fault (``grprune collect`` lists it as such).
    epoch : int, optional
        The epoch (from 0) where it happened.
    returncode : int, optional
        The sweep child's exit code.
    time : str, optional
        When the sweep recorded it (ISO 8601, UTC).
    command : str, optional
        The sweep child's command line.
    hash : str, optional
        The configuration's hash (``config.json``'s).
    log : str, optional
        The name of the child's log in the run directory (``sweep.log``).
    stderr_tail : tuple of str, optional
        The last lines of the child's stderr.
    extra : mapping
        What the file holds beyond these (unknown keys, values of another type).

    Examples
    --------
    >>> rec = ErrorRecord.from_dict({"message": "boom", "kind": "diverged", "epoch": 3})
    >>> rec.diverged, rec.epoch, rec.to_dict()
    (True, 3, {'message': 'boom', 'kind': 'diverged', 'epoch': 3})
    """

    message: str | None = None
    kind: str | None = None
    epoch: int | None = None
    returncode: int | None = None
    time: str | None = None
    command: str | None = None
    hash: str | None = None
    log: str | None = None
    stderr_tail: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def diverged(self) -> bool:
        """Whether training diverged (``kind`` is ``"diverged"``)."""
        return self.kind == DIVERGED

    def to_dict(self) -> dict[str, Any]:
        """What ``error.json`` holds: the fields that are set, in their order, then
        ``extra`` (a new dict)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and value is not None:
                out[f.name] = list(value) if f.name == "stderr_tail" else value
        out.update(copy.deepcopy(dict(self.extra)))
        return out

    @classmethod
    def from_dict(cls, data: "Mapping[str, Any] | ErrorRecord") -> "ErrorRecord":
        """``error.json`` as parsed JSON (an object)."""
        if isinstance(data, ErrorRecord):
            return data
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        kinds = {"epoch": int, "returncode": int}
        for key, value in data.items():
            if key == "stderr_tail" and isinstance(value, list) and all(
                    isinstance(x, str) for x in value):
                known[key] = tuple(value)
            elif key in _FIELDS and key != "stderr_tail" and _is(value, kinds.get(key, str)):
                known[key] = value
            else:
                extra[key] = value
        return cls(**known, extra=extra)


_FIELDS = frozenset(f.name for f in fields(ErrorRecord) if f.name != "extra")
