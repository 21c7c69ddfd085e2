"""``grprune explain`` and ``grprune predict``: placeholder, being written."""

from __future__ import annotations

import click


@click.command("explain")
def explain() -> None:
    """(not yet implemented)"""
    raise click.UsageError("grprune explain is not implemented yet")


@click.command("predict")
def predict() -> None:
    """(not yet implemented)"""
    raise click.UsageError("grprune predict is not implemented yet")
