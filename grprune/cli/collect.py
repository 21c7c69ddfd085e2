"""``grprune collect``: placeholder, being written."""

from __future__ import annotations

import click


@click.command("collect")
def collect() -> None:
    """(not yet implemented)"""
    raise click.UsageError("grprune collect is not implemented yet")
