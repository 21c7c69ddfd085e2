"""Datasets: loading, featurization, splits and the dataset registry.

>>> from grprune.data import load_dataset
>>> ds = load_dataset("ogbg-molbbbp", split="scaffold")   # doctest: +SKIP
>>> g, label, env, i = ds[0]                             # doctest: +SKIP
>>> train = ds.subset("train")                           # doctest: +SKIP
>>> own = from_graphs(graphs, labels, env=envs)          # doctest: +SKIP
"""

from grprune import compat as _compat  # noqa: F401  (DGL workaround before DGL is imported)
from grprune.data.dataset import GraphDataset
from grprune.data.molecules import load_molecule_csv, smiles_to_graph
from grprune.data.registry import DATASETS, DatasetSource, default_root, load_dataset
from grprune.data.splits import load_split_files, random_split, scaffold_split, size_split
# importing these registers the built-in datasets
from grprune.data import ogbg as _ogbg  # noqa: F401,E402  (ogbg-molbbbp, -molbace, -molhiv)
from grprune.data import synthetic as _synthetic  # noqa: F401,E402  (good-motif, spmotif)
from grprune.data import good_hiv as _good_hiv  # noqa: F401,E402  (good-hiv)
from grprune.data import drugood as _drugood  # noqa: F401,E402  (drugood-ec50)
from grprune.data import molecule_csv as _molecule_csv  # noqa: F401,E402  (molecule-csv)
from grprune.data.dgl_graphs import from_graphs, save_dataset  # noqa: E402  (dgl-graphs)

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
