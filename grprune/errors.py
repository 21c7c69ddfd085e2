"""Errors a user can cause. The CLI turns each into one message and exit code 2."""

from __future__ import annotations


class GrpruneError(Exception):
    """A problem with the user's input (name, value, path or data file).

    The message is complete and meant for the user; the CLI prints it without a
    traceback and exits with code 2.
    """


class DataError(GrpruneError):
    """A missing, corrupt or malformed data file."""
