"""Run directories: atomic writes, per-epoch records and the finished marker.

A run directory holds::

    config.json        the fully resolved configuration (written first)
    results.jsonl      one JSON record per epoch (loss terms, metrics, times)
    state.pt           last epoch's model/optimizer/RNG state, for resuming
    checkpoint.pt      the model at the best validation epoch
    checkpoint-last.pt the model after the last epoch (with train.save_last)
    edge_probs.npz     keep probability of every edge of the test graphs
    summary.json       final metrics; written last, it marks the run finished
"""

from __future__ import annotations

# the file names, atomic writers and readers live in the leaf record layer; they are
# re-exported here, where older code and plugins import them from
from grprune.record.files import (  # noqa: F401  (re-exported)
    CHECKPOINT,
    CONFIG,
    EDGE_PROBS,
    ERROR,
    LAST_CHECKPOINT,
    LOG,
    NON_FINITE,
    RESULTS,
    STATE,
    SUMMARY,
    atomic_save,
    atomic_save_to,
    atomic_write_bytes,
    atomic_write_json,
    read_json,
    read_records,
    to_json,
    write_records,
)
from grprune.results.rundir import (  # noqa: E402, F401  (re-exported)
    MARKERS,
    RUN_FILES,
    RUNNING_ELSEWHERE,
    STATES,
    RunDir,
    Status,
)
