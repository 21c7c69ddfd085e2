"""Collect finished run directories into paper-style result tables.

``grprune collect`` (and this module's functions, usable from Python) read run
directories, never logs: ``config.json`` says what ran, ``summary.json`` (written
last) says that it finished and what it scored. Runs are grouped by **dataset
column** (dataset, split, shift and data parameters) and **method** (the
regularizer set and the selector). Inside a group, a **setting** is a
configuration without its seed; the seeds of a setting are aggregated as
mean ± sample standard deviation (``ddof=1``, as in the paper; the CSV has 0 for one
seed, the printed tables no ``±`` and ``n=1``).

Model selection follows DomainBed: per group, the setting with the highest mean
validation score is chosen (``select="valid"``). ``select="oracle"`` chooses by
mean *test* score instead, which is optimistic, and every output says so.
``select="all"`` keeps every setting. A preset (``--preset official``) is part of
the method unless ``presets="select"``, which lets the rule choose the preset too.

A typical session::

    scan = scan_runs(["runs/sweep1"])                  # runs, problems, sweep.json files
    rows = aggregate(scan.runs, select="valid")        # one row per dataset x method
    print(to_markdown(rows, layout="table"))
    points = sensitivity(scan.runs, "reg.size.eta")    # test metric against eta

Metrics are fractions in [0, 1], as in ``summary.json``; tables show them x100
with two decimals ("70.32 ± 1.73"). The CSV keeps the fractions.

Modules: :mod:`~grprune.collect.reading` (run directories, sweep plans, problems),
:mod:`~grprune.collect.selection` (groups, settings, model selection),
:mod:`~grprune.collect.tables` (Markdown, CSV, rich) and
:mod:`~grprune.collect.sensitivity`; run and method names come from :mod:`grprune.naming`.
"""

from grprune.collect.common import (LAYOUTS, METRIC_NAMES, NOT_HPARAMS, PAPER_SYMBOLS,
                                    SELECT_RULES, hparams_text, pm)
from grprune.collect.reading import (Problem, Run, Scan, flatten_config, notes_for, read_run,
                                     scan_runs, sweep_report)
from grprune.collect.selection import (PRESET_RULES, SELECTION_METHODS, OracleSelection,
                                       SelectionMethod, Setting, ValidationSelection, aggregate,
                                       mean_std, varying_keys)
from grprune.collect.sensitivity import (plot_sensitivity, sensitivity, sensitivity_csv,
                                         sensitivity_table)
from grprune.collect.tables import (CSV_COLUMNS, SELECTION_TEXT, WARMUP_MARK, rich_table, to_csv,
                                    to_markdown, warmup_legend, write_outputs)
from grprune.naming import ablation_label, canonical_reg, method_label

__all__ = ["CSV_COLUMNS", "LAYOUTS", "METRIC_NAMES", "NOT_HPARAMS", "PAPER_SYMBOLS", "PRESET_RULES",
           "SELECTION_METHODS", "OracleSelection", "SelectionMethod", "ValidationSelection",
           "SELECTION_TEXT", "SELECT_RULES", "Problem", "Run", "Scan", "Setting", "aggregate",
           "ablation_label", "canonical_reg", "flatten_config", "hparams_text", "mean_std",
           "method_label", "notes_for", "plot_sensitivity", "pm", "read_run", "rich_table",
           "scan_runs", "sensitivity", "sensitivity_csv", "sensitivity_table", "sweep_report",
           "to_csv", "to_markdown", "varying_keys", "WARMUP_MARK", "warmup_legend",
           "write_outputs"]
