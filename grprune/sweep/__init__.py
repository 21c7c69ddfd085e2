"""Sweeps: many configurations, one run directory each, run in parallel and resumable.

``grprune sweep`` expands a grid (:mod:`grprune.sweep.grid`) into configurations
(:mod:`grprune.sweep.expansion`), resolved exactly as ``grprune run`` resolves them. Each
configuration runs in its own
child process, ``python -m grprune run --config <run_dir>/config.json --out <run_dir>``,
locally or as a Ray task (:mod:`grprune.sweep.launchers`), with the sweep's plugins
in ``GRPRUNE_PLUGINS`` (``grprune --plugin``, :mod:`grprune.cli.plugins`), into
``<root>/<dataset>/<method>-seed<seed>-<hash>``
(:func:`grprune.run.default_run_dir`). Finished configurations are skipped; interrupted
and failed ones are run again and resume from their ``state.pt``
(:mod:`grprune.sweep.plan`).

Files
-----
The sweep root holds ``sweep.json``, the plan, written atomically before anything
runs::

    {
      "version": 1,
      "created": "2025-01-31T12:00:00Z",          # UTC, first sweep into this root
      "updated": "2025-01-31T12:30:00Z",          # UTC, latest sweep
      "command": "grprune sweep --data ogbg-molbbbp -H reg.size.eta=0.75,0.85 ...",
      "configs": [                                 # every configuration ever planned here
        {"hash": "3f2a9c1b7d4e",                   # config hash (grprune.record.settings.config_hash)
         "run_dir": "ogbg-molbbbp/size+eps-align-seed0-3f2a9c1b7d4e",   # relative to root
         "values": {"reg.size.eta": 0.75, "seed": 0},   # resolved values of the axes
                                                   # that vary in its sweep (null: dropped)
         "dropped": [],                            # -H overrides left out for it
         "added": "2025-01-31T12:00:00Z"}         # when a sweep first planned it
      ],
      "sweeps": [                                  # one entry per sweep into this root
        {"command": "grprune sweep ...", "time": "2025-01-31T12:00:00Z",
         "configs": ["3f2a9c1b7d4e", ...],         # hashes of that sweep, in grid order
         "added": 4}                               # how many were new to the plan
      ]
    }

A later sweep into the same root adds its configurations (the union; existing entries
are kept as they are), so ``grprune collect`` can tell planned-but-missing runs apart.

Each run directory holds, besides ``grprune run``'s files (``config.json``,
``results.jsonl``, ``summary.json``, ...):

``sweep.log``
    The child's stderr, one ``=== grprune sweep <time>: <command>`` header per attempt.
``error.json``
    Written when the child failed; removed when the configuration is run again::

        {"message": "ValueError: Invalid learning rate: -1.0",   # one line
         "returncode": 1,                   # null when the launcher lost the child
         "time": "2025-01-31T12:05:00Z", "command": "python -m grprune run ...",
         "hash": "3f2a9c1b7d4e", "log": "sweep.log",
         "stderr_tail": ["...", "..."]}     # the attempt's last 50 lines of stderr

The status of a configuration (:func:`grprune.sweep.plan.run_status`): ``finished``
(``summary.json`` and a ``config.json`` of the same hash), ``failed`` (``error.json``),
``interrupted`` (``config.json``, no summary: stopped, or running elsewhere),
``pending`` (nothing yet) or ``foreign`` (something else is at that path; it is left
alone and the configuration is not run).
"""

from __future__ import annotations

from grprune.sweep.expansion import Configuration, Expansion, expand, run_command
from grprune.sweep.grid import Grid, grid_from_mapping, grid_from_options, load_spec
from grprune.sweep.parsing import parse_hparams, parse_reg, parse_seeds
from grprune.record.files import PLAN
from grprune.sweep.plan import Job, Outcome, read_plan, run_status, run_sweep, write_plan

__all__ = ["Configuration", "Expansion", "Grid", "Job", "Outcome", "PLAN",
           "expand", "grid_from_mapping", "grid_from_options", "load_spec", "parse_hparams",
           "parse_reg", "parse_seeds", "read_plan", "run_command", "run_status", "run_sweep",
           "write_plan"]
