"""Subgraph selectors: ``gumbel-gin`` (PrunE default) and ``gumbel-gcn``."""

from grprune.selectors.base import EVAL_MODES, SELECTORS, Selection, Selector, concrete_sample
from grprune.selectors.gumbel import GumbelGCNSelector, GumbelGINSelector, GumbelSelector

__all__ = ["SELECTORS", "Selection", "Selector", "concrete_sample", "GumbelSelector",
           "GumbelGINSelector", "GumbelGCNSelector", "EVAL_MODES"]
