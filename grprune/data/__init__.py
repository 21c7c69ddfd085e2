"""Datasets: loading, featurization, splits and the dataset registry.

>>> from grprune.data import load_dataset
>>> ds = load_dataset("ogbg-molbbbp", split="scaffold")   # doctest: +SKIP
>>> g, label, env, i = ds[0]                             # doctest: +SKIP
>>> train = ds.subset("train")                           # doctest: +SKIP
>>> own = from_graphs(graphs, labels, env=envs)          # doctest: +SKIP
"""

from grprune import compat as _compat  # noqa: F401  (DGL workaround before DGL is imported)
from grprune.data.dataset import GraphDataset
from grprune.data.moleculenet_csv import load_molecule_csv
from grprune.data.molecules import smiles_to_graph
from grprune.data.registry import DATASETS, DatasetSource, default_root, load_dataset
from grprune.data.splits import load_split_files, random_split, scaffold_split, size_split
from grprune.data.dgl_graphs import from_graphs, save_dataset  # noqa: E402  (dgl-graphs)

#: built-in datasets: name, aliases and the module that registers them, imported
#: only when the dataset is used, so resolving a name imports no RDKit or OGB
#: (``tests/test_imports.py`` checks that these match what the modules register)
BUILTIN_DATASETS = (
    ("ogbg-molbbbp", ("molbbbp", "bbbp"), "grprune.data.ogbg"),
    ("ogbg-molbace", ("molbace", "bace"), "grprune.data.ogbg"),
    ("ogbg-molhiv", ("molhiv",), "grprune.data.ogbg"),
    ("good-motif", ("goodmotif", "motif"), "grprune.data.synthetic"),
    ("spmotif", ("spurious-motif", "sp-motif"), "grprune.data.synthetic"),
    ("good-hiv", ("goodhiv",), "grprune.data.good_hiv"),
    ("drugood-ec50", ("ec50", "lbap-core-ec50"), "grprune.data.drugood"),
    ("molecule-csv", ("mol-csv",), "grprune.data.molecule_csv"),
    ("mol-substructure", ("substructure", "mol-gt"), "grprune.data.substructure"),
)
for _name, _aliases, _module in BUILTIN_DATASETS:  # this runs before any submodule registers
    DATASETS.lazy(_name, _module, _aliases)

__all__ = [
    "DATASETS",
    "DatasetSource",
    "GraphDataset",
    "default_root",
    "from_graphs",
    "load_dataset",
    "load_molecule_csv",
    "load_split_files",
    "random_split",
    "save_dataset",
    "scaffold_split",
    "size_split",
    "smiles_to_graph",
]
