"""Where :mod:`grprune.record.runconfig` used to live: its names, re-exported.

The typed views of a run's files (:class:`RunConfig`, :class:`FeatureSpec`,
:class:`RunSummary`, :class:`EpochRecord`) belong to the leaf record layer
(:mod:`grprune.record`); import them from there.
"""

from grprune.record.epoch import EpochRecord  # noqa: F401  (re-exported)
from grprune.record.runconfig import (  # noqa: F401  (re-exported)
    MOVED_KEYS,
    VERSION,
    FeatureSpec,
    RunConfig,
    move_keys,
    upgrade,
)
from grprune.record.summary import RunSummary  # noqa: F401  (re-exported)
