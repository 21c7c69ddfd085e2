"""``python -m grprune`` runs the CLI."""

from grprune.cli import main

main()
