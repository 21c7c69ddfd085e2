"""Subgraph selectors: ``gumbel-gin`` (PrunE default), ``gumbel-gcn`` and
``drop-edge`` (random bond dropping, no learned scores).

:class:`Selector` is the interface (``forward(batch) -> Selection``);
:class:`GumbelSelector` adds PrunE's Gumbel sampling to a subclass's ``edge_logits``.
"""

from grprune.selectors.base import (EVAL_MODES, SELECTORS, Selection, Selector, check_selection,
                                    concrete_sample)
from grprune.selectors.drop_edge import DropEdgeSelector
from grprune.selectors.gumbel import (GNNGumbelSelector, GumbelGCNSelector, GumbelGINSelector,
                                      GumbelSelector)

__all__ = ["SELECTORS", "Selection", "Selector", "check_selection", "concrete_sample",
           "GumbelSelector", "GNNGumbelSelector",
           "GumbelGINSelector", "GumbelGCNSelector", "DropEdgeSelector", "EVAL_MODES"]
