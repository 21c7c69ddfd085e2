"""Your own graphs: a ``dgl.save_graphs`` file, or DGL graphs in Python, as a dataset.

::

    dgl.save_graphs("graphs.bin", graphs, {"label": labels, "env": envs})  # env optional
    grprune run --data dgl-graphs -H data.path=graphs.bin --split random

The file holds homogeneous graphs and a graph-level ``label`` tensor (G,) of
class ids; optionally ``env`` (G,) environment ids and ``split`` (G,) parts
(0 train, 1 valid, 2 test, 3 id-valid, 4 id-test, -1 none), and ``id`` (G,) integer
IDs of your own, which explain's ``edges.csv``, picture names and ``--graphs id:N``
use. Per graph:

* ``ndata['feat']`` (N,) or (N, F), any width; all ones (N, 1) when absent;
* ``edata['feat']`` (E,) or (E, F_e), optional;
* ``edata['edge_gt']`` (E,), optional: 1 on edges of the ground-truth motif, so
  a run reports its motif metrics (``motif_edge_rocauc`` in ``summary.json``,
  ``grprune explain``'s ``metrics.json``).

Integer features of OGB's shape (9 atom and 3 bond columns within OGB's
vocabularies) go through OGB's encoders (``atom_encoder="ogb"``); all other
features are cast to float32 and read by the model's linear input layers
(``"linear"``). Edges whose reverse is missing get it (with the same features
and ``edge_gt``), since GNN messages and the selector's bonds are undirected.

Splits: ``random`` (seeded by ``data.split_seed``, 80/10/10), ``env`` (whole
environments, in increasing id order, fill train up to 80% of the graphs, then
valid up to 90%, then test; at least 3 environments) and ``file`` (the ``split``
tensor). :func:`from_graphs` builds the same dataset from graphs in memory.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from grprune.compat import dgl
from grprune.data.dataset import GraphDataset
from grprune.record.files import file_sha256
from grprune.data.registry import DATASETS, FileDatasetSource
from grprune.data.splits import PART_NAMES, _check_frac, random_split
from grprune.errors import DataError, GrpruneError
from grprune.hparams import Param
from grprune.record.files import atomic_save_to

#: codes of the ``split`` tensor
SPLIT_CODES = {code: part for code, part in enumerate(PART_NAMES)}
METRICS = ("auto", "rocauc", "accuracy")


def env_split(envs: np.ndarray, frac: Sequence[float] = (0.8, 0.1, 0.1)
              ) -> dict[str, np.ndarray]:
    """Split by environment: whole environments, in increasing id order, go to train
    until it holds ``frac[0]`` of the graphs, then to valid up to ``frac[0] + frac[1]``,
    the rest to test; each part gets at least one environment. Graphs with a negative
    id are in no part.

    Examples
    --------
    >>> parts = env_split(np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 2]))
    >>> {k: v.tolist() for k, v in parts.items()}
    {'train': [0, 1, 2, 3, 4, 5, 6, 7], 'valid': [8], 'test': [9]}

    Raises
    ------
    DataError
        With fewer than 3 environments.
    """
    f_train, f_valid, _ = _check_frac(frac)
    envs = np.asarray(envs, dtype=np.int64)
    ids, counts = np.unique(envs[envs >= 0], return_counts=True)
    k = len(ids)
    if k < 3:
        raise DataError(f"split env needs at least 3 environments; the data has {k}")
    cum = np.cumsum(counts) / counts.sum()
    n_train = int(np.clip(np.searchsorted(cum, f_train + 1e-9, side="right"), 1, k - 2))
    n_tv = int(np.clip(np.searchsorted(cum, f_train + f_valid + 1e-9, side="right"),
                       n_train + 1, k - 1))
    groups = (ids[:n_train], ids[n_train:n_tv], ids[n_tv:])
    return {part: np.flatnonzero(np.isin(envs, g)).astype(np.int64)
            for part, g in zip(("train", "valid", "test"), groups)}


def _as_vector(value: Any, n: int, what: str, integer: bool = True) -> torch.Tensor:
    """A graph-level tensor as int64 (n,), checked."""
    t = torch.as_tensor(np.asarray(value) if not torch.is_tensor(value) else value)
    if t.dim() == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.dim() != 1 or len(t) != n:
        raise DataError(f"{what} has shape {tuple(t.shape)}; expected ({n},), one per graph")
    if integer and t.is_floating_point():
        if not torch.isfinite(t).all() or (t != t.round()).any():
            raise DataError(f"{what} holds values that are not integers")
    return t.long()


def _column_feat(frame, key: str, n: int, where: str) -> torch.Tensor | None:
    if key not in frame:
        return None
    feat = frame[key]
    if feat.dim() == 1:
        feat = feat.reshape(n, 1)
    if feat.dim() != 2:
        raise DataError(f"{where} {key!r} has shape {tuple(feat.shape)}; expected 1 or 2 dims")
    return feat


def _clean_graph(g, i: int, node_key: str, edge_key: str) -> dgl.DGLGraph:
    """One input graph as a fresh int64 graph with ``feat``, optional edge ``feat`` and
    ``edge_gt``, and every edge's reverse."""
    if not isinstance(g, dgl.DGLGraph) or len(g.ntypes) != 1 or len(g.etypes) != 1:
        raise DataError(f"graph {i} is not a homogeneous DGLGraph")
    n = g.num_nodes()
    src, dst = (t.long() for t in g.edges())
    node_feat = _column_feat(g.ndata, node_key, n, f"graph {i}: ndata")
    edata = {}
    edge_feat = _column_feat(g.edata, edge_key, len(src), f"graph {i}: edata")
    if edge_feat is not None:
        edata["feat"] = edge_feat
    if "edge_gt" in g.edata:
        edata["edge_gt"] = (g.edata["edge_gt"].reshape(-1) > 0).long()
    key, rkey = src * max(n, 1) + dst, dst * max(n, 1) + src
    missing = ~torch.isin(rkey, key)
    if missing.any():
        src, dst = torch.cat([src, dst[missing]]), torch.cat([dst, src[missing]])
        edata = {k: torch.cat([v, v[missing]]) for k, v in edata.items()}
    out = dgl.graph((src, dst), num_nodes=n)
    out.ndata["feat"] = node_feat if node_feat is not None else torch.ones(n, 1)
    out.edata.update(edata)
    return out


def _feature_kind(graphs: list) -> str:
    """``"ogb"`` for integer OGB-shaped features within OGB's vocabularies, else ``"linear"``.

    Raises
    ------
    DataError
        If graphs disagree on their feature widths, types or edge keys (naming one).
    """
    g0 = graphs[0]

    def scheme(g):
        return (g.ndata["feat"].shape[1], g.ndata["feat"].is_floating_point(),
                tuple(sorted((k, v.shape[1:], v.is_floating_point())
                             for k, v in g.edata.items())))

    first = scheme(g0)
    for i, g in enumerate(graphs):
        if scheme(g) != first:
            raise DataError(f"graph {i} has other features than graph 0 (node width, type, "
                            f"edge keys): {scheme(g)} vs {first}")
    if first[1] or first[0] != 9 or "feat" not in g0.edata:
        return "linear"
    if g0.edata["feat"].is_floating_point() or g0.edata["feat"].shape[1] != 3:
        return "linear"
    from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims

    for key, dims in (("ndata", get_atom_feature_dims()), ("edata", get_bond_feature_dims())):
        feat = torch.cat([getattr(g, key)["feat"] for g in graphs])
        if len(feat) and ((feat < 0).any() or (feat >= torch.tensor(dims)).any()):
            return "linear"
    return "ogb"


def _finish_features(graphs: list, kind: str) -> None:
    for g in graphs:
        for frame in (g.ndata, g.edata):
            if "feat" in frame:
                frame["feat"] = frame["feat"].long() if kind == "ogb" else frame["feat"].float()


def _metric(metric: str, num_classes: int) -> str:
    if metric == "auto":
        return "rocauc" if num_classes == 2 else "accuracy"
    if metric == "rocauc" and num_classes != 2:
        raise GrpruneError(f"metric rocauc needs 2 classes; the labels have {num_classes}")
    return metric


def _parts(split: str, n: int, envs: torch.Tensor | None, split_codes: torch.Tensor | None,
           split_seed: int, keys: str) -> dict[str, np.ndarray]:
    if split == "random":
        return random_split(n, seed=split_seed)
    if split == "env":
        if envs is None:
            raise DataError(f"split env needs an 'env' tensor; the data has: {keys}")
        return env_split(envs.numpy())
    if split_codes is None:
        raise DataError(f"split file needs a 'split' tensor; the data has: {keys}")
    codes = split_codes.numpy()
    bad = codes[(codes < -1) | (codes >= len(PART_NAMES))]
    if len(bad):
        raise DataError(f"'split' holds {int(bad[0])}; codes are -1 (none), "
                        + ", ".join(f"{c} ({p})" for c, p in SPLIT_CODES.items()))
    return {p: np.flatnonzero(codes == c) for c, p in SPLIT_CODES.items()
            if p in ("train", "valid", "test") or (codes == c).any()}


def from_graphs(graphs, labels=None, env=None, *, split: str = "random", split_seed: int = 0,
                split_codes=None, metric: str = "auto", name: str = "graphs",
                node_feat_key: str = "feat", edge_feat_key: str = "feat",
                info: dict | None = None, ids=None) -> GraphDataset:
    """A graph classification dataset from DGL graphs in memory.

    Parameters
    ----------
    graphs : sequence of dgl.DGLGraph (length G), or a ``dgl.data.DGLDataset``
        With ``labels=None``, items are ``(graph, label)`` pairs (a DGL graph
        classification dataset such as ``dgl.data.GINDataset``).
    labels : array-like of int, shape (G,), optional
        Class ids ``0 .. C-1``.
    env : array-like of int, shape (G,), optional
        Environment ids (zeros when absent; IRM-type regularizers need >= 2).
    split : str
        ``random``, ``env`` or ``file`` (module docstring).
    split_seed : int
    split_codes : array-like of int, shape (G,), optional
        Parts for ``split="file"`` (codes in the module docstring).
    metric : str
        ``auto`` (``rocauc`` for 2 classes, else ``accuracy``), ``rocauc`` or ``accuracy``.
    name : str
    node_feat_key, edge_feat_key : str
        Where the graphs keep their features (``"feat"``; dgllife uses ``"h"``, ``"e"``).
    info : dict, optional
        Extra facts recorded in ``dataset.info``.
    ids : sequence (length G), optional
        Your own ID of each graph (kept as text in ``dataset.ids``).

    Returns
    -------
    GraphDataset

    Raises
    ------
    DataError
        On empty input, mismatched lengths, non-integer labels or inconsistent features.

    Examples
    --------
    >>> g = dgl.graph(([0, 1], [1, 2]), num_nodes=3)
    >>> ds = from_graphs([g] * 10, [0, 1] * 5)
    >>> ds.atom_encoder, ds.num_classes, ds.graphs[0].num_edges()
    ('linear', 2, 4)
    """
    if labels is None:
        pairs = [graphs[i] for i in range(len(graphs))]
        graphs, labels = [p[0] for p in pairs], [int(torch.as_tensor(p[1]).reshape(-1)[0])
                                                 for p in pairs]
    graphs = list(graphs)
    if not graphs:
        raise DataError("no graphs")
    n = len(graphs)
    y = _as_vector(labels, n, "label")
    if (y < 0).any():
        raise DataError("label holds negative class ids")
    envs = None if env is None else _as_vector(env, n, "env")
    codes = None if split_codes is None else _as_vector(split_codes, n, "split")
    if ids is not None:
        ids = [str(x) for x in (ids.tolist() if hasattr(ids, "tolist") else ids)]
        if len(ids) != n:
            raise DataError(f"{len(ids)} ids for {n} graphs")
    clean = [_clean_graph(g, i, node_feat_key, edge_feat_key) for i, g in enumerate(graphs)]
    kind = _feature_kind(clean)
    _finish_features(clean, kind)
    num_classes = max(int(y.max()) + 1, 2)
    present = ", ".join(k for k, v in (("label", y), ("env", envs), ("split", codes))
                        if v is not None)
    parts = _parts(split, n, envs, codes, split_seed, present)
    facts = {"dataset": name, "split": split, "split_seed": int(split_seed), "n_graphs": n,
             "feature_kind": kind, "n_added_reverse_edges": int(
                 sum(c.num_edges() - g.num_edges() for c, g in zip(clean, graphs))),
             "split_sizes": {k: int(len(v)) for k, v in parts.items()}, **(info or {})}
    return GraphDataset(name, clean, y, parts, num_classes=num_classes,
                        metric=_metric(metric, num_classes), atom_encoder=kind, envs=envs,
                        info=facts, ids=ids)


def save_dataset(dataset: GraphDataset, path: str | Path) -> Path:
    """Write a dataset as a ``dgl-graphs`` file (graphs, ``label``, ``env``, ``split``;
    atomically: a reader never sees part of one), so
    a run on it can be replayed, explained and collected: ``--data dgl-graphs -H
    data.path=PATH --split file``."""
    codes = torch.full((len(dataset),), -1, dtype=torch.long)
    for c, part in SPLIT_CODES.items():
        if part in dataset.splits:
            codes[torch.as_tensor(dataset.splits[part])] = c
    path = Path(path)
    tensors = {"label": dataset.labels, "env": dataset.envs, "split": codes}
    if dataset.ids is not None and all(x.lstrip("-").isdigit() for x in dataset.ids):
        tensors["id"] = torch.tensor([int(x) for x in dataset.ids], dtype=torch.long)
    atomic_save_to(path, lambda tmp: dgl.save_graphs(str(tmp), list(dataset.graphs), tensors))
    return path


def example_graphs(n_graphs: int = 40, seed: int = 0
                   ) -> tuple[list[dgl.DGLGraph], torch.Tensor, torch.Tensor]:
    """Small graphs with a ground-truth motif, for examples and tests.

    Each graph is a random tree of 5-8 nodes joined by one edge to a 5-node motif:
    a cycle (label 1) or a path (label 0); ``edata['edge_gt']`` marks the motif.

    Returns
    -------
    graphs : list of dgl.DGLGraph, length G
        Both directions of every edge; ``ndata['feat']`` float32 (N, 3) uniform noise.
    labels : Tensor of shape (G,), int64
        ``i % 2``.
    envs : Tensor of shape (G,), int64
        ``i % 4``.
    """
    rng = np.random.default_rng(seed)
    graphs = []
    for i in range(n_graphs):
        nb = int(rng.integers(5, 9))
        edges = [(int(rng.integers(0, v)), v) for v in range(1, nb)]
        m = list(range(nb, nb + 5))
        motif = list(zip(m, m[1:])) + ([(m[4], m[0])] if i % 2 else [])
        edges += [(int(rng.integers(0, nb)), m[0])] + motif
        gt = [0] * nb + [1] * len(motif)
        src, dst = zip(*edges)
        g = dgl.graph((torch.tensor(src + dst), torch.tensor(dst + src)), num_nodes=nb + 5)
        g.ndata["feat"] = torch.from_numpy(rng.random((nb + 5, 3), dtype=np.float32))
        g.edata["edge_gt"] = torch.tensor(gt + gt)
        graphs.append(g)
    return graphs, torch.arange(n_graphs) % 2, torch.arange(n_graphs) % 4


def _probe_in_child(file: Path, digest: str, root: Path) -> None:
    """Read ``file`` with ``dgl.load_graphs`` in a child process first, once per content.

    DGL's reader trusts the sizes in the file: a damaged file can make it abort the whole
    process (``std::bad_alloc``, exit 134) where no Python ``except`` reaches. A child that
    dies, or fails, becomes one :class:`DataError`. A file that read well is remembered by
    its sha256 under ``<root>/dgl_graphs/verified/``, so it is probed once. One that does
    not begin with DGL's magic number and a format version (1 or 2) is refused at once.

    Raises
    ------
    DataError
        If the child could not read the file.
    """
    import subprocess
    import sys
    marker = Path(root) / "dgl_graphs" / "verified" / digest
    if marker.is_file():
        return
    magic = 0xDD2E4FF046B4A13F  # a dgl.save_graphs file's first 8 bytes, little-endian
    with open(file, "rb") as fh:
        head = fh.read(16)
    if (len(head) < 16 or int.from_bytes(head[:8], "little") != magic
            or int.from_bytes(head[8:], "little") not in (1, 2)):
        what = "it is empty" if not head else "it does not begin as one (damaged, or another file)"
        raise DataError(f"cannot read {file} as a dgl.save_graphs file: {what}")
    code = ("import sys; from grprune.compat import dgl; dgl.load_graphs(sys.argv[1])")
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(file)], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
    except OSError as exc:  # no child could be started: read in this process as before
        warnings.warn(f"grprune: could not check {file} in a child process: {exc}")
        return
    if proc.returncode != 0:
        said = [line.strip() for line in proc.stderr.splitlines()
                if "Error" in line or "Check failed" in line]
        how = (f"the reader aborted (signal {-proc.returncode})" if proc.returncode < 0
               else "the reader aborted" if proc.returncode == 134
               else said[-1][:200] if said else "the reader failed")
        raise DataError(f"cannot read {file} as a dgl.save_graphs file: it is damaged or "
                        f"not such a file ({how})")
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass  # a read-only data root: probe again next time


@DATASETS.register("dgl-graphs", aliases=("dgl-file",))
class DglGraphs(FileDatasetSource):
    """Your own graphs: a ``dgl.save_graphs`` file with a ``label`` tensor (module docstring)."""

    splits = ("random", "env", "file")
    suffixes = (".bin",)
    params = {
        "path": Param("", "the dgl.save_graphs file; required"),
        "source_sha256": Param("", "sha256 of the data.path file: set when the configuration "
                                   "is resolved, part of the run's identity"),
        "split": Param("random", "random (seeded), env (whole environments of the 'env' "
                                 "tensor) or file (the 'split' tensor)"),
        "split_seed": Param(0, "seed of the random split", low=0),
        "metric": Param("auto", "auto: rocauc for 2 classes, else accuracy", choices=METRICS),
        "node_feat_key": Param("feat", "ndata key of the node features"),
        "edge_feat_key": Param("feat", "edata key of the edge features"),
    }
    metric = "rocauc"  # of a binary file (metric auto); accuracy for more classes
    num_classes = 2
    description = "your own graphs: a dgl.save_graphs file with a label tensor (-H data.path=FILE)"

    @classmethod
    def example_params(cls, directory: str | Path) -> dict[str, Any]:
        """Write a small example file (:func:`example_graphs`) into ``directory`` and
        return the :func:`~grprune.data.load_dataset` parameters that load it."""
        graphs, labels, envs = example_graphs()
        path = Path(directory) / "example-graphs.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        dgl.save_graphs(str(path), graphs, {"label": labels, "env": envs})
        return {"path": str(path)}

    def load(self, *, root: Path, download: bool = False, path: str = "",
             source_sha256: str = "",
             split: str = "random", split_seed: int = 0, metric: str = "auto",
             node_feat_key: str = "feat", edge_feat_key: str = "feat") -> GraphDataset:
        """Load the file; see :meth:`DatasetSource.load` and the module docstring.

        Raises
        ------
        GrpruneError
            Without ``path`` (``-H data.path=FILE``).
        DataError
            If the file is missing or unreadable, has no ``label`` tensor, or its
            graphs or tensors are malformed.
        """
        if not str(path).strip():
            raise GrpruneError("dataset dgl-graphs needs a file written by dgl.save_graphs: "
                               "-H data.path=FILE")
        from grprune.record.userfiles import expand_user
        file = expand_user(path, "data.path")
        if not file.is_file():
            raise DataError(f"data file (data.path) not found: {file}")
        digest = file_sha256(file)
        _probe_in_child(file, digest, root)
        try:
            graphs, tensors = dgl.load_graphs(str(file))
        except Exception as exc:  # DGLError, truncated or foreign file
            raise DataError(f"cannot read {file} as a dgl.save_graphs file "
                            f"({type(exc).__name__})") from None
        if "label" not in tensors:
            raise DataError(f"{file} has no 'label' tensor; it has: "
                            f"{', '.join(tensors) or 'none'}")
        for i, g in enumerate(graphs):  # DGL reads the edge ids as stored, unchecked
            ends = torch.cat(g.edges())
            outside = ends[(ends < 0) | (ends >= g.num_nodes())]
            if len(outside):
                raise DataError(f"{file} is damaged: graph {i} has an edge to node "
                                f"{int(outside[0])} but {g.num_nodes()} nodes")
        info = {"source": str(file), "source_sha256": digest}
        try:
            return from_graphs(graphs, tensors["label"], tensors.get("env"),
                               split=self.resolve_split(split), split_seed=split_seed,
                               split_codes=tensors.get("split"), metric=metric,
                               name=self.registered_name, node_feat_key=node_feat_key,
                               edge_feat_key=edge_feat_key, info=info,
                               ids=None if tensors.get("id") is None
                               else _as_vector(tensors["id"], len(graphs), "id"))
        except dgl.DGLError as exc:  # what else DGL refuses in graphs it read unchecked
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise DataError(f"{file} is damaged or malformed: {first}") from None
