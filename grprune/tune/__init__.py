"""``grprune tune``: hyperparameter search on Optuna, pruned, resumable, shared across
workers and machines.

* :mod:`grprune.tune.space`: the search space (the parts' declared one, or a YAML);
* :mod:`grprune.tune.study`: the study and its trials, run as ordinary run directories
  with ``grprune sweep``'s machinery; kill-safe and resumable;
* :mod:`grprune.tune.trial`: the child's epoch callback that reports and prunes;
* :mod:`grprune.tune.report`: the table of trials, ``best.yaml`` and Optuna's plots.

Optuna is an optional extra: ``pip install 'grprune[tune]'``. The docs page is
``docs/tuning.md``.
"""
