"""Your own molecules: a CSV of SMILES and binary labels as the ``molecule-csv`` dataset.

::

    grprune run --data molecule-csv -H data.path=mols.csv \\
        -H data.smiles_column=smiles -H data.label_column=y --split scaffold

Rows whose SMILES is missing or that RDKit cannot parse, and rows whose label is
missing or not 0/1, are left out, counted and listed (``info["bad_rows"]``:
0-based data row and reason; ``grprune data info`` shows them), never an error. A
missing file or columns is one message (exit code 2) naming every missing column
and the columns present. Column names match exactly, else up to case
(:func:`grprune.data.molecules.match_columns`), as in ``grprune predict --csv``.

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

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from grprune.compat import dgl
from grprune.data.cache import CACHE_DIRNAME, cached_strings, load_or_build
from grprune.data.dataset import GraphDataset
from grprune.data.labels import dataset_task, label_columns, read_targets, target_scale
from grprune.data.molecules import (MAX_ATOMS, lenient_mol, match_columns, read_text_csv,
                                    smiles_to_graph, too_large_reason, unparsable_reason)
from grprune.record.files import file_sha256
from grprune.data.packed import graph_sizes
from grprune.data.registry import DATASETS, FileDatasetSource
from grprune.data.featurize import parallel_scaffolds
from grprune.data.splits import random_split, scaffold_envs, scaffold_split, size_split
from grprune.errors import DataError, GrpruneError
from grprune.hparams import Param, short_repr
from grprune.record.metricinfo import check_task_metric
from grprune.record.runconfig import FeatureSpec, RunConfig
from grprune.record.userfiles import expand_user

#: width of dgllife's canonical atom and bond features
DGLLIFE_ATOM_DIM, DGLLIFE_BOND_DIM = 74, 12
_DGLLIFE: dict[str, Any] = {}


def dgllife_graph(smiles: str, lenient: bool = False, max_atoms: int = MAX_ATOMS
                  ) -> dgl.DGLGraph:
    """Featurize one SMILES with dgllife's canonical atom and bond featurizers.

    Atoms keep RDKit's order (dgllife's ``smiles_to_bigraph`` would renumber them
    canonically), and RDKit bond ``k`` is directed edges ``2k`` (begin -> end) and
    ``2k + 1``, as :func:`grprune.data.molecules.smiles_to_graph` orders them.

    Parameters
    ----------
    smiles : str
    lenient : bool
        If RDKit rejects the molecule, retry without the valence check.
    max_atoms : int
        Refuse a molecule over this many atoms before RDKit parses it (0: no limit).

    Returns
    -------
    dgl.DGLGraph
        int64 ids; ``ndata['feat']`` float32 (N, 74), ``edata['feat']`` float32 (E, 12).

    Raises
    ------
    DataError
        If the SMILES is empty, too large, or RDKit cannot parse it.
    """
    from rdkit import Chem, rdBase

    if not isinstance(smiles, str) or not smiles.strip():
        raise DataError(f"empty or missing SMILES {smiles!r}")
    large = too_large_reason(smiles, max_atoms)
    if large:
        raise DataError(large)
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
        if mol is None and lenient:
            mol = lenient_mol(smiles)
    if mol is None or mol.GetNumAtoms() == 0:
        raise DataError(f"RDKit cannot parse SMILES {short_repr(smiles)}: "
                        f"{unparsable_reason(smiles)}")
    if not _DGLLIFE:
        from dgllife.utils import CanonicalAtomFeaturizer, CanonicalBondFeaturizer
        _DGLLIFE.update(atom=CanonicalAtomFeaturizer("feat"),
                        bond=CanonicalBondFeaturizer("feat", self_loop=False))
    try:
        node_feat = _DGLLIFE["atom"](mol)["feat"]
        if mol.GetNumBonds():
            edge_feat = _DGLLIFE["bond"](mol)["feat"]
        else:
            edge_feat = torch.zeros(0, DGLLIFE_BOND_DIM)
    except Exception:  # an element or property dgllife's one-hot lists cannot hold
        raise DataError(f"dgllife's canonical featurizer has no slot for an atom or bond of "
                        f"SMILES {short_repr(smiles)}") from None
    src, dst = [], []
    for bond in mol.GetBonds():
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        src += [i, j]
        dst += [j, i]
    g = dgl.graph((torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)),
                  num_nodes=mol.GetNumAtoms())
    g.ndata["feat"] = node_feat.float()
    g.edata["feat"] = edge_feat.float()
    return g


#: featurizer name -> (feature kind of the model, ``to_graph(smiles, lenient=False)``)
FEATURIZERS: dict[str, tuple[str, Callable[..., dgl.DGLGraph]]] = {
    "ogb": ("ogb", smiles_to_graph),
    "dgllife-canonical": ("linear", dgllife_graph),
}


def run_featurizer(cfg: RunConfig, features: FeatureSpec) -> Callable[..., dgl.DGLGraph] | None:
    """The featurizer a molecule run was trained with, to featurize new SMILES.

    Parameters
    ----------
    cfg : RunConfig
        The run's resolved configuration (``data.featurizer`` where the dataset has that
        key).
    features : FeatureSpec
        The run's feature sizes (``kind``, ``node_dim``).

    Returns
    -------
    callable or None
        ``to_graph(smiles, lenient=False) -> DGLGraph``; None for a run on
        non-molecular data (its features come from no SMILES featurizer).
    """
    name = cfg.setting("data.featurizer")
    if name is None:
        name = "ogb" if features.kind == "ogb" else None
    if name is None or name not in FEATURIZERS:
        return None
    kind, to_graph = FEATURIZERS[name]
    if kind != features.kind:
        return None
    if kind == "linear" and features.node_dim != DGLLIFE_ATOM_DIM:
        return None
    return to_graph


def _label_problem(text: str) -> str | None:
    """Why a label cell is not a binary class label (None when it is 0 or 1)."""
    text = text.strip()
    if not text:
        return "missing label"
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value not in (0.0, 1.0):
        return f"label {text!r} is not 0 or 1"
    return None


def read_rows(path: Path, smiles_column: str, label_column: str, id_column: str = "",
              task: str = "classification"
              ) -> tuple[list[str], np.ndarray, dict[int, str], list[str] | None]:
    """The SMILES, labels and IDs of a molecule CSV, with the rows whose label is unusable.

    ``label_column`` may name several columns (a comma list); with several, or with
    ``task="regression"``, labels are read by :func:`grprune.data.labels.read_targets`.

    Columns are matched by :func:`grprune.data.molecules.match_columns` (exact,
    else the one column equal up to case); every missing one is named in one message.

    Parameters
    ----------
    path : Path
        CSV file, plain or compressed (inferred from the suffix).
    smiles_column, label_column : str
    id_column : str
        Column of compound IDs; ``""`` for none.
    task : {"classification", "regression"}
        ``data.task``.

    Returns
    -------
    smiles : list of str, length S
        One per data row (``""`` where missing).
    labels : np.ndarray of int64, shape (S,); or of float32, shape (S, T)
        0 or 1, -1 where the label is unusable; for several columns or regression, the
        values with NaN where missing (:func:`~grprune.data.labels.read_targets`).
    bad : dict of int to str
        0-based data row -> reason, for missing SMILES and unusable labels.
    ids : list of str (length S) or None
        The ID column's cells; None without ``id_column``.

    Raises
    ------
    DataError
        If the file is missing or unreadable, or columns are missing (one line
        that names all of them and the columns present).
    """
    df = read_text_csv(path, "data file (data.path)")
    names = label_columns(label_column)
    wanted = {"data.smiles_column": smiles_column}
    wanted.update({"data.label_column": names[0]} if len(names) == 1 else
                  {f"data.label_column ({name})": name for name in names})
    if str(id_column).strip():
        wanted["data.id_column"] = str(id_column).strip()
    cols = match_columns(df.columns, wanted, str(path))
    if len(df) == 0:
        raise DataError(f"{path} has a header but no data rows")
    smiles = [s.strip() for s in df[cols["data.smiles_column"]].tolist()]
    ids = ([str(x).strip() for x in df[cols["data.id_column"]].tolist()]
           if "data.id_column" in cols else None)
    kind = dataset_task(task, len(names))
    if kind != "classification":
        cells = {name: df[cols[k]].tolist() for k, name in zip(
            [k for k in cols if k.startswith("data.label_column")], names)}
        return smiles, *read_targets(cells, smiles, kind), ids
    labels = np.full(len(df), -1, dtype=np.int64)
    bad: dict[int, str] = {}
    for row, (s, text) in enumerate(zip(smiles, df[cols["data.label_column"]].tolist())):
        problems = [p for p in (None if s else "missing SMILES", _label_problem(text)) if p]
        if problems:
            bad[row] = "; ".join(problems)
        else:
            labels[row] = int(float(text))
    return smiles, labels, bad, ids


def featurize_rows(smiles: list[str], labels: np.ndarray, bad: dict[int, str],
                   featurizer: str, what: str = "molecules", max_atoms: int = MAX_ATOMS
                   ) -> tuple[Sequence[dgl.DGLGraph], np.ndarray, dict[int, str]]:
    """Featurize the rows :func:`read_rows` found usable.

    ``ogb`` goes through :func:`grprune.data.featurize.featurize_ogb`: chunks of
    SMILES parsed by worker processes into flat arrays, each distinct SMILES once,
    with a progress display, and no per-molecule ``DGLGraph``. ``dgllife-canonical``
    featurizes molecule by molecule (:func:`dgllife_graph`), serially, as before.

    Parameters
    ----------
    smiles : list of str, length S
    labels : np.ndarray of int64, shape (S,)
        Unused here (kept for the call's shape); rows in ``bad`` are skipped.
    bad : dict of int to str
        Rows already known to be unusable -> reason.
    featurizer : str
        A key of :data:`FEATURIZERS`.
    what : str
        How the progress display names the input.
    max_atoms : int
        Rows whose molecule has more atoms are skipped with the reason ``too large``
        before RDKit parses them (:data:`grprune.data.molecules.MAX_ATOMS`; 0: no limit).

    Returns
    -------
    graphs : sequence of dgl.DGLGraph, length G
        :class:`~grprune.data.packed.PackedGraphs` (uint8 OGB features, widened to
        int64 per graph) for ``ogb``, a list for ``dgllife-canonical``.
    kept : np.ndarray of int64, shape (G,)
        Data row of each graph (increasing).
    bad : dict of int to str
        ``bad`` plus the rows whose SMILES the featurizer rejects (the message of
        :func:`~grprune.data.molecules.smiles_to_graph` or :func:`dgllife_graph`),
        sorted by row.
    """
    bad = dict(bad)
    rows = np.asarray([r for r in range(len(smiles)) if r not in bad], dtype=np.int64)
    if featurizer == "ogb":
        from grprune.data.featurize import featurize_ogb

        flat, kept, failed = featurize_ogb([smiles[r] for r in rows], what=what,
                                           max_atoms=max_atoms)
        bad.update({int(rows[p]): why for p, why in failed.items()})
        graphs = flat.to_packed() if len(flat) else []
        return graphs, rows[kept], dict(sorted(bad.items()))
    to_graph = FEATURIZERS[featurizer][1]
    graph_list, kept_rows = [], []
    for row in rows.tolist():
        try:
            large = too_large_reason(smiles[row], max_atoms)
            if large:
                raise DataError(large)
            graph_list.append(to_graph(smiles[row]))
        except DataError as exc:
            bad[row] = str(exc)
            continue
        kept_rows.append(row)
    return graph_list, np.asarray(kept_rows, dtype=np.int64), dict(sorted(bad.items()))


def _cache_key(path: Path, smiles_column: str, label_column: str, featurizer: str,
               max_atoms: int = MAX_ATOMS, task: str = "classification") -> dict:
    import ogb
    import rdkit

    key = {"format_version": 4, "source_sha256": file_sha256(path),
           "smiles_column": smiles_column, "label_column": label_column,
           "featurizer": featurizer, "rdkit_version": rdkit.__version__,
           "ogb_version": ogb.__version__, "max_atoms": int(max_atoms)}
    if task != "classification":  # (a key without it: every classification cache as before)
        key["task"] = task
    if featurizer.startswith("dgllife"):
        from importlib.metadata import version
        key["dgllife_version"] = version("dgllife")
    return key


def cached_rows(path: Path, smiles_column: str, label_column: str, featurizer: str,
                root: Path, id_column: str = "", max_atoms: int = MAX_ATOMS,
                task: str = "classification") -> dict[str, Any]:
    """Read, check and featurize a molecule CSV through the graph cache; molecules over
    ``max_atoms`` atoms are skipped (:func:`featurize_rows`).

    Returns
    -------
    dict
        ``graphs`` (G), ``labels`` (G,) int64 or (G, T) float32 (:func:`read_rows`),
        ``source_rows`` (G,), ``smiles`` (G),
        ``ids`` (G, or None without ``id_column``),
        ``bad_rows`` (list of ``{"row", "reason"}``), ``n_source_rows``,
        ``source_sha256``, ``cache`` (status) and ``cache_dir``.

    Raises
    ------
    DataError
        See :func:`read_rows`; also when no row is usable.
    """
    from grprune.data.featurize import announce
    size = path.stat().st_size if path.is_file() else 0
    announce(f"reading {path.name} ({size / 2**20:,.1f} MiB)", size)
    smiles, labels, bad, ids = read_rows(path, smiles_column, label_column, id_column, task)
    what = "a 0/1 label" if labels.ndim == 1 else "a label"
    announce(f"read {path.name}: {len(smiles):,} rows, {len(smiles) - len(bad):,} with a "
             f"SMILES and {what}", size)
    key = _cache_key(path, smiles_column, label_column, featurizer, max_atoms, task)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    cache_dir = root / "molecule_csv" / CACHE_DIRNAME / digest

    def build():
        graphs, kept, all_bad = featurize_rows(smiles, labels, bad, featurizer, what=path.name,
                                               max_atoms=max_atoms)
        announce(f"{path.name}: {len(graphs):,} graphs, {len(all_bad):,} rows skipped; "
                 f"writing the graph cache", size)
        if not graphs:
            raise DataError(f"{path}: none of its {len(smiles)} rows is usable (e.g. row "
                            f"{next(iter(all_bad))}: {next(iter(all_bad.values()))})")
        tensors = {"labels": torch.from_numpy(labels[kept]), "source_rows": torch.from_numpy(kept)}
        rows = [{"row": int(r), "reason": why} for r, why in all_bad.items()]
        return graphs, tensors, {"n_source_rows": len(smiles), "bad_rows": rows}

    graphs, tensors, meta, status = load_or_build(
        cache_dir, key, build, ("n_source_rows", "bad_rows"), ("labels", "source_rows"))
    announce(f"{path.name}: graphs ready (cache {status})", size)
    rows = tensors["source_rows"].numpy().astype(np.int64)
    labels_out = tensors["labels"]
    return {"graphs": graphs, "source_rows": rows,
            "labels": labels_out.long() if labels_out.dim() == 1 else labels_out.float(),
            "smiles": [smiles[i] for i in rows],
            "ids": None if ids is None else [ids[i] for i in rows], "bad_rows": list(meta["bad_rows"]),
            "n_source_rows": int(meta["n_source_rows"]), "source_sha256": key["source_sha256"],
            "source": str(path),
            "cache": status, "cache_dir": str(cache_dir)}


def split_and_envs(split: str, split_seed: int, data: dict[str, Any]
                   ) -> tuple[dict[str, np.ndarray], np.ndarray, str]:
    """The split of :func:`cached_rows`' molecules and their environment ids.

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
        from grprune.data.molecules import read_molecule_csv
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

