"""Synthetic OOD benchmarks with ground-truth motif edges: GOOD-Motif and SPMotif.

Importing this package registers ``good-motif`` and ``spmotif`` in
:data:`grprune.data.DATASETS`. Graphs are generated on first use and cached
under the data root (``<root>/good_motif/grprune_v1/...``,
``<root>/spmotif/grprune_v1/...``).

>>> from grprune.data import load_dataset
>>> ds = load_dataset("good-motif", split="basis", shift="covariate")  # doctest: +SKIP
>>> ds = load_dataset("spmotif", bias=0.7)                               # doctest: +SKIP
"""

from grprune.data.synthetic.good_motif import GoodMotif, generate_good_motif, load_good_motif
from grprune.data.synthetic.shapes import (
    BASES,
    MOTIFS,
    SyntheticGraphs,
    base_graph,
    identify_motif,
    motif_components,
)
from grprune.data.synthetic.spmotif import SPMotif, generate_spmotif, load_spmotif

__all__ = [
    "BASES",
    "MOTIFS",
    "GoodMotif",
    "SPMotif",
    "SyntheticGraphs",
    "base_graph",
    "generate_good_motif",
    "generate_spmotif",
    "identify_motif",
    "load_good_motif",
    "load_spmotif",
    "motif_components",
]
