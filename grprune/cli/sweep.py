"""``grprune sweep``: placeholder, being written."""

from __future__ import annotations

import click


@click.command("sweep")
def sweep() -> None:
    """(not yet implemented)"""
    raise click.UsageError("grprune sweep is not implemented yet")
