"""Subgraph selectors: ``gumbel-gin`` (PrunE default), ``gumbel-gcn`` and
``drop-edge`` (random bond dropping, no learned scores)."""

from grprune.selectors.base import EVAL_MODES, SELECTORS, Selection, Selector, concrete_sample
from grprune.selectors.drop_edge import DropEdgeSelector
from grprune.selectors.gumbel import GumbelGCNSelector, GumbelGINSelector, GumbelSelector

__all__ = ["SELECTORS", "Selection", "Selector", "concrete_sample", "GumbelSelector",
           "GumbelGINSelector", "GumbelGCNSelector", "DropEdgeSelector", "EVAL_MODES"]
