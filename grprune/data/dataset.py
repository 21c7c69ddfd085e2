"""The in-memory graph classification dataset every loader returns."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from grprune.compat import dgl
from grprune.data.packed import PackedGraphs
from grprune.data.splits import check_split
from grprune.errors import GrpruneError


class GraphDataset(Dataset):
    """Graphs with class labels, environment ids and a train/valid/test split.

    Parameters
    ----------
    name : str
        Canonical dataset name (``"ogbg-molbbbp"``).
    graphs : list of dgl.DGLGraph or PackedGraphs, length G
        Each with ``ndata['feat']`` int64 (N, 9) and ``edata['feat']`` int64
        (E, 3) for ``atom_encoder == "ogb"``; both directions of every bond.
    labels : array-like of int, shape (G,); or of float, shape (G, T)
        Class of each graph, in ``0 .. num_classes-1``; for ``task`` ``multilabel`` or
        ``regression``: ``T`` labels (0/1) or targets per graph, NaN where missing.
    splits : dict of str to array-like of int
        ``train``, ``valid``, ``test`` and optionally ``id-valid``, ``id-test``
        (OOD benchmarks: ``valid``/``test`` are then the OOD parts): pairwise
        disjoint indices into ``graphs``; stored sorted as int64. Graphs in no
        part are allowed (e.g. GOOD's concept split leaves some out).
    num_classes : int
    metric : str
        Evaluation metric (``"rocauc"``, ``"accuracy"``).
    atom_encoder : str
        How node features are encoded: ``"ogb"`` (9 categorical OGB atom
        features in ``ndata['feat']``, 3 bond features in ``edata['feat']``) or
        ``"linear"`` (float ``ndata['feat']`` (N, F); ``edata['feat']`` float
        (E, F_e) or absent). Synthetic graphs also carry ``edata['edge_gt']``
        int64 (E,), 1 for an edge of the invariant motif.
    envs : array-like of int, shape (G,), optional
        Environment (domain) id per graph; zeros by default.
    smiles : list of str, length G, optional
    source_rows : array-like of int, shape (G,), optional
        Row of each graph in the source file; ``arange(G)`` by default.
    ids : sequence of str, length G, optional
        The user's own identifier of each graph (``data.id_column`` of
        ``molecule-csv``, the ``id`` tensor of ``dgl-graphs``); None when the
        source declares none.
    info : dict, optional
        JSON-serialisable facts about loading (see :func:`grprune.data.load_dataset`).
    task : {"classification", "multilabel", "regression"}
        ``classification`` (one label column of classes, softmax and cross-entropy);
        ``multilabel`` (``T`` binary label columns) and ``regression`` (``T`` real targets)
        have float labels (G, T) and ``num_classes`` ``T`` (the head's width).
    target_scale : (mean, std), each a sequence of T floats, optional
        Regression: the training split's mean and standard deviation of each target (the
        model learns the standardized target, :class:`grprune.model.GraphClassifier`).

    Attributes
    ----------
    labels : torch.LongTensor of shape (G,), or torch.FloatTensor of shape (G, T)
    envs : torch.LongTensor, shape (G,)
    source_rows : np.ndarray of int64, shape (G,)
    ids : list of str (length G) or None
    splits : dict of str to np.ndarray of int64

    Raises
    ------
    GrpruneError
        If lengths disagree, a label is out of range, or a split index is out of range.
    """

    # every field, declared so that callers read them directly (set by __init__); the
    # optional ones are None where the source has none
    name: str
    graphs: Sequence[dgl.DGLGraph]
    labels: torch.Tensor
    envs: torch.Tensor
    splits: dict[str, np.ndarray]
    num_classes: int
    metric: str
    atom_encoder: str
    task: str
    source_rows: np.ndarray
    info: dict[str, Any]
    smiles: list[str] | None = None
    ids: list[str] | None = None
    target_scale: tuple[Sequence[float], Sequence[float]] | None = None

    def __init__(
        self,
        name: str,
        graphs: Sequence[dgl.DGLGraph],
        labels: Sequence[int] | np.ndarray | torch.Tensor,
        splits: dict[str, Any],
        *,
        num_classes: int,
        metric: str,
        atom_encoder: str = "ogb",
        envs: Sequence[int] | np.ndarray | torch.Tensor | None = None,
        smiles: list[str] | None = None,
        source_rows: Sequence[int] | np.ndarray | None = None,
        info: dict | None = None,
        ids: Sequence[str] | None = None,
        task: str = "classification",
        target_scale: tuple[Sequence[float], Sequence[float]] | None = None,
    ) -> None:
        n = len(graphs)
        self.name = name
        self.graphs = graphs if isinstance(graphs, PackedGraphs) else list(graphs)
        self.task, self.target_scale = task, target_scale
        if task == "classification":
            self.labels = torch.as_tensor(np.asarray(labels), dtype=torch.long).reshape(-1)
        else:
            self.labels = torch.as_tensor(np.asarray(labels, dtype=np.float32)).reshape(n, -1)
        self.envs = (
            torch.zeros(n, dtype=torch.long)
            if envs is None
            else torch.as_tensor(np.asarray(envs), dtype=torch.long).reshape(-1)
        )
        self.smiles = None if smiles is None else list(smiles)
        self.source_rows = (
            np.arange(n, dtype=np.int64)
            if source_rows is None
            else np.asarray(source_rows, dtype=np.int64).reshape(-1)
        )
        self.ids = None if ids is None else [str(x) for x in ids]
        self.num_classes = int(num_classes)
        self.metric = metric
        self.atom_encoder = atom_encoder
        self.info = dict(info or {})
        for what, length in (
            ("labels", len(self.labels)),
            ("envs", len(self.envs)),
            ("source_rows", len(self.source_rows)),
            ("smiles", n if self.smiles is None else len(self.smiles)),
            ("ids", n if self.ids is None else len(self.ids)),
        ):
            if length != n:
                raise GrpruneError(f"dataset {name}: {length} {what} for {n} graphs")
        if n and task == "classification" and (self.labels.min() < 0
                                               or self.labels.max() >= self.num_classes):
            raise GrpruneError(f"dataset {name}: labels outside 0..{self.num_classes - 1}")
        self.splits = check_split(splits, n, f"dataset {name}", cover=False)

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, i: int) -> tuple[dgl.DGLGraph, Any, int, int]:
        """Graph ``i`` as ``(graph, label, env, i)``; the label an int, or a float Tensor
        of shape (T,) for ``multilabel`` and ``regression``."""
        i = int(i)
        label = int(self.labels[i]) if self.task == "classification" else self.labels[i]
        return self.graphs[i], label, int(self.envs[i]), i

    def subset(self, split_name: str) -> Subset:
        """The graphs of one split part (``"train"``, ``"valid"``, ``"test"``, ...).

        Raises
        ------
        GrpruneError
            If the part is unknown; the message lists the choices.
        """
        if split_name not in self.splits:
            raise GrpruneError(
                f"dataset {self.name} has no split part {split_name!r}. "
                f"Choices: {', '.join(self.splits)}"
            )
        return Subset(self, self.splits[split_name].tolist())

    @property
    def has_edge_gt(self) -> bool:
        """Whether graphs carry ground-truth motif edges (``edata['edge_gt']``)."""
        return len(self.graphs) > 0 and "edge_gt" in self.graphs[0].edata

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.splits.items())
        return (
            f"GraphDataset({self.name!r}, graphs={len(self)}, classes={self.num_classes}, "
            f"split={self.info.get('split')!r}, {sizes})"
        )
