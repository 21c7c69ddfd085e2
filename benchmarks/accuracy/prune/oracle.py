"""An oracle selector for GOOD-Motif and SPMotif: the ground-truth motif, as a grprune plugin.

``--selector oracle-motif`` keeps exactly the motif's edges (``edata["edge_gt"] == 1``)
and drops every other edge, in training and in evaluation. With ``--reg none`` it trains
the classifier on perfectly pruned graphs: the best any edge-pruning selector could do
with the same encoder, readout and head. The dropped edges' nodes stay, as they do
under PrunE (a pruned edge carries no message; its nodes still enter the readout).

    grprune --plugin benchmarks/accuracy/prune/oracle.py run --selector oracle-motif \\
        --reg none --data good-motif --split size --preset official

It needs data with motif ground truth and refuses other data in its first batch.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from grprune.batch import GraphBatch
from grprune.errors import GrpruneError
from grprune.selectors import SELECTORS, Selection, Selector

#: logit of a kept / dropped edge (finite, as Selection.validate requires)
LOGIT = 13.8


@SELECTORS.register("oracle-motif")
class OracleMotifSelector(Selector):
    """Keeps the ground-truth motif edges, drops the rest: ``edge_weight = edge_gt``, shape (E,)."""

    learned: ClassVar[bool] = False
    display_name = "oracle motif"
    params: ClassVar[dict] = {}

    def forward(self, batch: GraphBatch) -> Selection:
        if batch.edge_gt is None:
            raise GrpruneError("selector oracle-motif needs data with motif ground truth "
                               "(edata['edge_gt']), e.g. good-motif or spmotif")
        weight = (batch.edge_gt > 0).to(torch.float32)
        logits = (2.0 * weight - 1.0) * LOGIT
        return Selection(edge_logits=logits, edge_prob=torch.sigmoid(logits),
                         edge_weight=weight)
