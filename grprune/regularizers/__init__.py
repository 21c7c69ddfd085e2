"""Regularizers: PrunE's ``size`` (L_e) and ``eps-align`` (L_s), the zoo of
competitors (``gsat``, ``ciga``, ``irm``, ``vrex``, ``groupdro``), and user-written ones.

Write your own by subclassing :class:`Regularizer` (``loss(ctx)``, or ``terms(ctx)``
for several weighted terms; ``supports(selector, dataset)`` or ``requires`` for what it
needs) and decorating it with ``@REGULARIZERS.register("my-name")``, or expose it from
your own package under the entry-point group ``grprune.regularizers``.
"""

from grprune.regularizers.base import (REGULARIZERS, Regularizer, StepContext, Unsupported,
                                       check_supports)
from grprune.regularizers.ciga import CIGA
from grprune.regularizers.env import GroupDRO, IRMPenalty, VRExPenalty
from grprune.regularizers.eps_align import EpsilonAlignment
from grprune.regularizers.gsat import GSAT
from grprune.regularizers.size import SizeConstraint

__all__ = ["REGULARIZERS", "Regularizer", "StepContext", "Unsupported", "check_supports",
           "SizeConstraint", "EpsilonAlignment", "GSAT", "CIGA", "IRMPenalty", "VRExPenalty",
           "GroupDRO"]
