"""Your own molecules: a CSV of SMILES and binary labels as the ``molecule-csv`` dataset.

::

    grprune run --data molecule-csv -H data.path=mols.csv \\
        -H data.smiles_column=smiles -H data.label_column=y --split scaffold

Rows whose SMILES is missing or that RDKit cannot parse, and rows whose label is
missing or not 0/1, are left out, counted and listed (``info["bad_rows"]``:
0-based data row and reason; ``grprune data info`` shows them), never an error. A
missing file or columns is one message (exit code 2) naming every missing column
and the columns present. Column names match exactly, else up to case
(:func:`grprune.data.csv_tables.match_columns`), as in ``grprune predict --csv``.

**Identity.** Graph ``i`` of the dataset is CSV data row ``source_rows[i]``
(0-based, header not counted: data row ``r`` is line ``r + 2`` of the file), the
numbering of ``grprune data info``, ``predict``'s ``row`` and explain's
``source_row``. With ``-H data.id_column=NAME`` each molecule also keeps its ID
(``dataset.ids``), which explain writes into ``edges.csv`` and picture names and
``--graphs id:NAME`` selects by.

Featurizers (``data.featurizer``):

* ``ogb`` (default): :func:`grprune.data.molecules.smiles_to_graph`, OGB's 9
  categorical atom and 3 bond features, as the OGB datasets; OGB's encoders.
* ``dgllife-canonical``: dgllife's ``CanonicalAtomFeaturizer`` (74 floats per
  atom) and ``CanonicalBondFeaturizer`` (12 per bond), atoms in RDKit's order;
  the model's linear input layers read them.

Both give RDKit bond ``k`` as directed edges ``2k`` and ``2k + 1``, so
``grprune explain`` and ``grprune predict`` map edges to bonds as for OGB sets.

Splits are the OGB sets' rules (:mod:`grprune.data.splits`): ``scaffold``
(:func:`scaffold_split`), ``size`` (:func:`size_split`, seeded by
``data.split_seed``) and ``random`` (:func:`random_split`), 80/10/10.
Environment ids are scaffold domains (the rank of the molecule's Bemis–Murcko
scaffold among the distinct ones) for ``scaffold`` and ``random``, size domains
(the rank of the number of atoms) for ``size``, so IRM-type regularizers run.

**Scale.** With ``ogb``, rows are featurized by :func:`grprune.data.featurize.featurize_ogb`:
chunks of SMILES go to ``min(2, cpu_count)`` worker processes (in order, so the result
does not depend on timing; serial below 5,000 distinct SMILES), straight into flat
arrays (:class:`~grprune.data.packed.PackedGraphs`), with no ``DGLGraph`` per molecule; a
SMILES repeated in the file is featurized once. The cache is memory-mapped when read
again (:mod:`grprune.data.cache`). OGB's categorical features are stored as uint8 and come
out as int64 per graph (``dataset[i]``) and per training batch. From 5,000 molecules on,
a progress bar with rate and ETA is shown on stderr (plain lines when stderr is not a
terminal; ``GRPRUNE_FEATURIZE_PROGRESS=none`` silences it). ``dgllife-canonical``
featurizes one molecule at a time, serially. ``benchmarks/scale/`` has the numbers.

Graphs are cached under ``<root>/molecule_csv/grprune_v1/<key>/`` keyed by the
file's sha256, the columns, the featurizer and library versions: an edited CSV
is featurized again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from grprune.data.cache import cached_strings
from grprune.data.dataset import GraphDataset
from grprune.data.featurize import parallel_scaffolds
from grprune.data.labels import dataset_task, label_columns, target_scale
from grprune.data.molecule_featurizers import FEATURIZERS
from grprune.data.molecule_rows import cached_rows
from grprune.data.molecules import MAX_ATOMS
from grprune.data.packed import graph_sizes
from grprune.data.registry import DATASETS, FileDatasetSource
from grprune.data.splits import random_split, scaffold_envs, scaffold_split, size_split
from grprune.errors import GrpruneError
from grprune.hparams import Param
from grprune.record.metricinfo import check_task_metric
from grprune.record.userfiles import expand_user


def split_and_envs(split: str, split_seed: int, data: dict[str, Any]
                   ) -> tuple[dict[str, np.ndarray], np.ndarray, str]:
    """The split of :func:`~grprune.data.molecule_rows.cached_rows`' molecules and their
    environment ids.

    Returns
    -------
    parts : dict of str to np.ndarray of int64
    envs : np.ndarray of int64, shape (G,)
        Scaffold domains (``scaffold``, ``random``) or size domains (``size``).
    env_source : str
        ``"scaffold"`` or ``"size"``.
    """
    n = len(data["graphs"])
    if split == "size":
        sizes = graph_sizes(data["graphs"])[0]
        return size_split(sizes, seed=split_seed), np.unique(sizes, return_inverse=True)[1], "size"
    import rdkit

    key = {"source_sha256": data["source_sha256"], "rdkit_version": rdkit.__version__,
           "scaffold_version": 2}
    scaffolds = cached_strings(Path(data["cache_dir"]) / "scaffolds.json", key,
                               lambda: parallel_scaffolds(data["smiles"], include_chirality=True,
                                                          what=Path(data["source"]).name),
                               n)[0]
    envs = scaffold_envs(scaffolds)
    if split == "random":
        return random_split(n, seed=split_seed), envs, "scaffold"
    return scaffold_split(data["smiles"], scaffolds=scaffolds), envs, "scaffold"


@DATASETS.register("molecule-csv", aliases=("mol-csv",))
class MoleculeCsv(FileDatasetSource):
    """Your own molecules: a CSV file of SMILES and binary labels, several label columns
    or regression targets (module docstring)."""

    splits = ("scaffold", "size", "random")
    suffixes = (".csv", ".csv.gz")
    params = {
        "path": Param("", "the CSV file (plain or .gz); required"),
        "source_sha256": Param("", "sha256 of the data.path file: set when the configuration "
                                   "is resolved, part of the run's identity"),
        "smiles_column": Param("smiles", "column holding the SMILES"),
        "label_column": Param("label", "column holding the binary label (0 or 1); a comma "
                                       "list for several tasks (empty cells: missing labels, "
                                       "masked out); with data.task=regression, numbers"),
        "task": Param("classification", "classification (0/1 labels) or regression (real "
                                        "targets: MSE loss, RMSE/MAE/R2)",
                      choices=("classification", "regression")),
        "standardize": Param(True, "regression: learn the target standardized by the "
                                   "training split's mean and sd (predictions come back in "
                                   "the target's units)"),
        "id_column": Param("", "column of compound IDs, carried into explain's edges.csv, "
                               "picture names and --graphs (default: none; the CSV row "
                               "identifies each molecule)"),
        "featurizer": Param("ogb", "ogb (OGB's categorical features) or dgllife-canonical "
                                   "(dgllife's canonical float features, linear input layer)",
                            choices=tuple(FEATURIZERS)),
        "split": Param("scaffold", "scaffold (OGB's rule), size (largest molecules in train) "
                                   "or random; 80/10/10"),
        "split_seed": Param(0, "seed of the size split's valid/test shuffle and of the random "
                               "split", low=0),
        "max_atoms": Param(MAX_ATOMS, "molecules with more atoms are skipped (reason "
                                      "'too large') before RDKit parses them (RDKit's "
                                      "scaffold code takes 0.4 s at 500 atoms, 6 s at 1,000)",
                           low=1, high=2000),
        "metric": Param("rocauc", "metric of evaluation and model selection: rocauc, prauc "
                                  "(average precision), or accuracy where a validation split "
                                  "holds one class only; regression: rmse (taken for the "
                                  "default rocauc), mae or r2",
                        choices=("rocauc", "accuracy", "prauc", "rmse", "mae", "r2")),
    }
    metric = "rocauc"
    num_classes = 2
    description = "your own molecules: a CSV of SMILES and 0/1 labels (-H data.path=FILE)"

    @classmethod
    def example_params(cls, directory: str | Path) -> dict[str, Any]:
        """Write a small example CSV (every 10th molecule of the bundled BACE file, 152
        rows) into ``directory`` and return the :func:`~grprune.data.load_dataset`
        parameters that load it."""
        from grprune.data.moleculenet_csv import read_molecule_csv
        from grprune.data.ogbg import FILES

        smiles, labels = read_molecule_csv(FILES / "moleculenet" / "bace.csv.gz", "mol", "Class")
        path = Path(directory) / "example-molecules.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"{s},{y}" for s, y in zip(smiles[::10], labels[::10])]
        path.write_text("smiles,label\n" + "\n".join(lines) + "\n")
        return {"path": str(path)}

    def load(self, *, root: Path, download: bool = False, path: str = "",
             source_sha256: str = "",
             smiles_column: str = "smiles", label_column: str = "label", id_column: str = "",
             featurizer: str = "ogb", split: str = "scaffold", split_seed: int = 0,
             max_atoms: int = MAX_ATOMS, metric: str = "rocauc", task: str = "classification",
             standardize: bool = True) -> GraphDataset:
        """Load the CSV; see :meth:`DatasetSource.load` and the module docstring.

        Raises
        ------
        GrpruneError
            Without ``path`` (``-H data.path=FILE``).
        DataError
            If the file is missing or unreadable, a column is missing, or no row is usable.
        """
        if not str(path).strip():
            raise GrpruneError("dataset molecule-csv needs a CSV file: -H data.path=FILE "
                               "(and data.smiles_column, data.label_column)")
        split = self.resolve_split(split)
        kind = dataset_task(task, len(label_columns(label_column)))
        if kind == "regression" and metric == "rocauc":
            metric = "rmse"  # the default metric is a classifier's
        check_task_metric(kind, metric)
        csv = expand_user(path, "data.path")
        data = cached_rows(csv, smiles_column, label_column, featurizer, Path(root), id_column,
                           max_atoms=max_atoms, task=task)
        parts, envs, env_source = split_and_envs(split, split_seed, data)
        labels = data["labels"]
        scale = (target_scale(labels.numpy(), parts["train"])
                 if kind == "regression" and standardize else None)
        bad = data["bad_rows"]
        info = {"dataset": self.registered_name, "source": str(csv),
                "source_sha256": data["source_sha256"], "featurizer": featurizer,
                "n_source_rows": data["n_source_rows"], "n_skipped": len(bad),
                "skipped_rows": [r["row"] for r in bad], "bad_rows": bad,
                "id_column": id_column or None,
                "split": split, "split_source": "computed", "split_seed": int(split_seed),
                "env_source": env_source, "n_graphs": len(data["graphs"]),
                "split_sizes": {k: int(len(v)) for k, v in parts.items()},
                "n_domains": int(envs.max()) + 1 if len(envs) else 0,
                "cache": data["cache"], "cache_dir": data["cache_dir"]}
        if kind != "classification":
            info.update(task=kind, label_columns=label_columns(label_column),
                        target_scale=None if scale is None else
                        {"mean": scale[0], "std": scale[1]})
        return GraphDataset(self.registered_name, data["graphs"], labels, parts,
                            num_classes=2 if kind == "classification" else labels.shape[1],
                            metric=metric, task=kind, target_scale=scale,
                            atom_encoder=FEATURIZERS[featurizer][0], envs=envs,
                            smiles=data["smiles"], source_rows=data["source_rows"], info=info,
                            ids=data["ids"])
