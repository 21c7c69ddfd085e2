"""A finished run's model, rebuilt from its directory and evaluated as the trainer does.

:func:`load_run` reads ``config.json``, ``summary.json`` and ``checkpoint.pt``
and rebuilds the model with :func:`grprune.train.build_model_from_dims` (the
feature and class sizes are in ``summary["model"]``; runs finished before that
field existed load their dataset to recover them). :func:`score_graphs` scores
DGL graphs with it and returns, per graph, the class probabilities and every
edge's keep probability :math:`p_{ij} = \\sigma(w_{ij})` and evaluation mask.

The evaluation rule is the trainer's (:meth:`grprune.train.Trainer.evaluate`
on the selected checkpoint, see ``Trainer._finish``): the model is in eval mode,
the selector is used unless the run reported its last epoch and that epoch was
ERM warm-up, and the selector's ``eval_mode`` decides the mask (``threshold``:
:math:`p > 0.5`; ``soft``: :math:`p`; ``sample``: a fresh hard sample, class
probabilities averaged over ``selector.eval_samples`` draws). Without a selector
(or with it off) every edge has probability and weight 1.

>>> run = load_run("runs/ogbg-molbbbp/size+eps-align-seed0-abc")   # doctest: +SKIP
>>> scores = run.score([smiles_to_graph("CCO")])                   # doctest: +SKIP
>>> scores[0].prob, scores[0].bond_prob                            # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from grprune import results as R
from grprune.batch import GraphBatch, collate
from grprune.compat import dgl  # noqa: F401  (DGL import order)
from grprune.errors import GrpruneError
from grprune.run import load_config_dataset
from grprune.model import GraphClassifier

#: graphs per batch when scoring
BATCH_SIZE = 256


def undirected_bonds(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group the directed edges of one graph into undirected bonds.

    Bonds are numbered in order of their first directed edge, so for a molecule
    featurized by :func:`grprune.data.molecules.smiles_to_graph` (edges
    ``2k, 2k+1`` are RDKit bond ``k`` in both directions) bond ``k`` is RDKit
    bond ``k``. This is the grouping :func:`grprune.batch.bond_ids` gives the
    selector (same unordered node pair, same bond), numbered differently.

    Parameters
    ----------
    src, dst : np.ndarray of int, shape (E,)
        Directed edges (local node ids).

    Returns
    -------
    bond_of_edge : np.ndarray of int64, shape (E,)
        Bond of each directed edge, in ``[0, U)``.
    bond_edge : np.ndarray of int64, shape (U,)
        First directed edge of each bond (its ``src``/``dst`` orient the bond).

    Examples
    --------
    >>> b, first = undirected_bonds(np.array([0, 1, 2, 1]), np.array([1, 0, 1, 2]))
    >>> b.tolist(), first.tolist()
    ([0, 0, 1, 1], [0, 2])
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    n = int(max(src.max(), dst.max())) + 1
    key = np.minimum(src, dst) * n + np.maximum(src, dst)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # unique-key order -> first-occurrence order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)].astype(np.int64), first[order].astype(np.int64)


@dataclass
class GraphScore:
    """The model's output for one graph with ``E`` directed edges and ``U`` bonds.

    Attributes
    ----------
    prob : np.ndarray of float32, shape (C,)
        Class probabilities (softmax of the logits; averaged over draws with
        ``selector.eval_mode=sample``).
    src, dst : np.ndarray of int64, shape (E,)
        Directed edges, local node ids, in the graph's edge order.
    edge_logits : np.ndarray of float32, shape (E,)
        Selector logit :math:`w_{ij}` (``+inf`` without a selector).
    edge_prob : np.ndarray of float32, shape (E,), values in [0, 1]
        Keep probability :math:`\\sigma(w_{ij})`; 1 without a selector.
    edge_weight : np.ndarray of float32, shape (E,), values in [0, 1]
        The evaluation mask the encoder used (1 = kept).
    edge_gt : np.ndarray of int64, shape (E,), or None
        Ground-truth motif edge (1) or not (0); synthetic data only.
    num_nodes : int
    bond_of_edge : np.ndarray of int64, shape (E,)
        Undirected bond of each edge (:func:`undirected_bonds`).
    bond_edge : np.ndarray of int64, shape (U,)
        First directed edge of each bond.
    """

    prob: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    edge_logits: np.ndarray
    edge_prob: np.ndarray
    edge_weight: np.ndarray
    edge_gt: np.ndarray | None
    num_nodes: int
    bond_of_edge: np.ndarray = field(init=False)
    bond_edge: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.bond_of_edge, self.bond_edge = undirected_bonds(self.src, self.dst)

    @property
    def num_bonds(self) -> int:
        """``U``, the number of undirected bonds."""
        return int(len(self.bond_edge))

    @property
    def pred(self) -> int:
        """The predicted class (argmax of :attr:`prob`)."""
        return int(np.argmax(self.prob))

    # one value per bond, taken from its first directed edge; both directions of
    # a bond share one logit and one sample (Selector.forward), so either will do
    @property
    def bond_src(self) -> np.ndarray:
        """Shape (U,): first node of each bond."""
        return self.src[self.bond_edge]

    @property
    def bond_dst(self) -> np.ndarray:
        """Shape (U,): second node of each bond."""
        return self.dst[self.bond_edge]

    @property
    def bond_logits(self) -> np.ndarray:
        """Shape (U,): selector logit of each bond."""
        return self.edge_logits[self.bond_edge]

    @property
    def bond_prob(self) -> np.ndarray:
        """Shape (U,): keep probability of each bond."""
        return self.edge_prob[self.bond_edge]

    @property
    def bond_weight(self) -> np.ndarray:
        """Shape (U,): evaluation mask of each bond."""
        return self.edge_weight[self.bond_edge]

    @property
    def bond_gt(self) -> np.ndarray | None:
        """Shape (U,): 1 if either direction is a ground-truth motif edge; None without."""
        if self.edge_gt is None:
            return None
        gt = np.zeros(self.num_bonds, dtype=np.int64)
        np.maximum.at(gt, self.bond_of_edge, self.edge_gt.astype(np.int64))
        return gt


@torch.no_grad()
def score_batch(model: GraphClassifier, batch: GraphBatch, *, use_selector: bool = True
                ) -> list[GraphScore]:
    """Score one batch exactly as :meth:`grprune.train.Trainer.evaluate` does.

    Parameters
    ----------
    model : GraphClassifier
        Put in eval mode here; scoring happens on the model's device.
    batch : GraphBatch
        ``B`` graphs (moved to the model's device here).
    use_selector : bool
        False evaluates the full graphs (ERM warm-up; all edges kept).

    Returns
    -------
    list of GraphScore, length B
    """
    model.eval()
    device = next(model.parameters()).device
    batch = batch.to(device)
    prob, out = model.predict(batch, use_selector=use_selector)
    s = out.selection
    e = batch.src.numel()
    if s is not None:
        logits, eprob, weight = s.edge_logits, s.edge_prob, s.edge_weight
    else:
        logits = torch.full((e,), float("inf"), device=device)
        eprob = weight = torch.ones(e, device=device)
    local_src, local_dst = (t.cpu().numpy() for t in batch.local_edges())
    logits = logits.float().cpu().numpy()
    eprob, weight = eprob.float().cpu().numpy(), weight.float().cpu().numpy()
    gt = batch.edge_gt.cpu().numpy().astype(np.int64) if batch.edge_gt is not None else None
    prob = prob.float().cpu().numpy()
    ptr = np.concatenate([[0], np.cumsum(batch.num_edges.cpu().numpy())])
    nodes = batch.num_nodes.cpu().numpy()
    out_scores = []
    for k in range(batch.num_graphs):
        sl = slice(int(ptr[k]), int(ptr[k + 1]))
        out_scores.append(GraphScore(
            prob=prob[k], src=local_src[sl].astype(np.int64), dst=local_dst[sl].astype(np.int64),
            edge_logits=logits[sl], edge_prob=eprob[sl], edge_weight=weight[sl],
            edge_gt=None if gt is None else gt[sl], num_nodes=int(nodes[k])))
    return out_scores


def score_graphs(model: GraphClassifier, graphs: Sequence | GraphBatch, *,
                 use_selector: bool = True, batch_size: int = BATCH_SIZE) -> list[GraphScore]:
    """Score graphs with a model, as the trainer evaluates it.

    Parameters
    ----------
    model : GraphClassifier
        Scoring runs on the model's device (CPU or CUDA); graphs are batched on
        the CPU with :func:`grprune.batch.collate` and their tensors moved.
    graphs : sequence of dgl.DGLGraph, or GraphBatch
        Graphs with the features the model was trained on (``ndata['feat']``,
        ``edata['feat']``; ``edata['edge_gt']`` is passed through).
    use_selector : bool
        False evaluates the full graphs (ERM warm-up).
    batch_size : int
        Graphs per batch. In eval mode the result does not depend on it (batch
        norm uses its running statistics) up to float rounding.

    Returns
    -------
    list of GraphScore
        One per graph, in input order.
    """
    if isinstance(graphs, GraphBatch):
        return score_batch(model, graphs, use_selector=use_selector)
    graphs = list(graphs)
    out: list[GraphScore] = []
    for start in range(0, len(graphs), batch_size):
        chunk = graphs[start:start + batch_size]
        batch = collate([(g, 0, 0, start + i) for i, g in enumerate(chunk)])
        out.extend(score_batch(model, batch, use_selector=use_selector))
    return out


def evaluation_uses_selector(summary: dict, records: list[dict]) -> bool:
    """Whether the trainer evaluated the reported model with its selector.

    ``Trainer._finish``: a run whose checkpoint is the last epoch
    (``summary["selected"] == "last-epoch"``, no post-warm-up epoch improved)
    is evaluated as it was trained, so without the selector if that epoch was
    ERM warm-up. Every other run uses the selector.

    Parameters
    ----------
    summary : dict
        ``summary.json``.
    records : list of dict
        ``results.jsonl`` (each record has ``phase``: ``warmup`` or ``train``).
    """
    if summary.get("selected") != "last-epoch":
        return True
    last = records[-1] if records else {}
    return last.get("phase") != "warmup"


@dataclass
class Run:
    """A finished run: its configuration, summary and model, ready to score graphs.

    Attributes
    ----------
    run_dir : Path
    cfg : dict
        The resolved configuration (``config.json``).
    summary : dict
        ``summary.json``.
    dims : dict
        :func:`grprune.train.model_dims` of the training data (``feature_kind``,
        ``node_dim``, ``edge_dim``, ``num_classes``).
    model : GraphClassifier
        Loaded from ``checkpoint.pt``, in eval mode, on :attr:`device`.
    device : torch.device
    use_selector : bool
        The trainer's evaluation rule (:func:`evaluation_uses_selector`).
    """

    run_dir: Path
    cfg: dict
    summary: dict
    dims: dict
    model: GraphClassifier
    device: torch.device
    use_selector: bool
    _dataset: Any = field(default=None, repr=False)

    @property
    def dataset_name(self) -> str:
        """The training dataset's name (``cfg["data"]["name"]``)."""
        return self.cfg["data"]["name"]

    @property
    def num_classes(self) -> int:
        return int(self.dims["num_classes"])

    @property
    def learned_selector(self) -> bool:
        """Whether edge probabilities come from a learned selector used at evaluation.

        False for ERM (no selector), for selectors without learned scores
        (``drop-edge``) and for a run reported at a warm-up epoch: their
        probabilities are all 1 and explain nothing.
        """
        sel = self.model.selector
        return sel is not None and self.use_selector and bool(getattr(sel, "learned", False))

    def load_dataset(self):
        """The run's dataset, loaded with its data configuration (cached per run).

        Raises
        ------
        GrpruneError, DataError
            As :func:`grprune.data.load_dataset`.
        """
        if self._dataset is None:
            self._dataset = load_config_dataset(self.cfg)
        return self._dataset

    def part_indices(self, dataset, part: str) -> np.ndarray:
        """Dataset indices of a split part as the run used it (``data.limit`` applied).

        Raises
        ------
        GrpruneError
            If the dataset has no such part (the message lists the parts).
        """
        if part not in dataset.splits:
            raise GrpruneError(f"dataset {dataset.name} has no part {part!r}. "
                               f"Choices: {', '.join(dataset.splits)}")
        idx = np.asarray(dataset.splits[part], dtype=np.int64)
        limit = int(self.cfg["data"].get("limit", 0) or 0)
        return idx[:limit] if limit else idx

    def score(self, graphs: Sequence | GraphBatch, batch_size: int = BATCH_SIZE
              ) -> list[GraphScore]:
        """:func:`score_graphs` with this run's model and evaluation rule."""
        return score_graphs(self.model, graphs, use_selector=self.use_selector,
                            batch_size=batch_size)


def load_run(run_dir: str | Path, device: str = "cpu") -> Run:
    """Rebuild a finished run's model from its directory.

    Parameters
    ----------
    run_dir : str or Path
        A directory written by ``grprune run``.
    device : str
        ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (:func:`grprune.train.select_device`).

    Returns
    -------
    Run

    Raises
    ------
    GrpruneError
        If ``run_dir`` is not a run directory, the run has not finished (no
        ``summary.json``), the checkpoint is missing or does not fit the
        configuration, or CUDA is asked for and absent.
    """
    from grprune.train import build_model_from_dims, model_dims, select_device

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise GrpruneError(f"run directory {run_dir} does not exist")
    status = R.RunDir(run_dir).status()
    if status.state in ("interrupted", "running", "failed"):
        raise GrpruneError(
            f"{run_dir} holds an unfinished run ({status}); finish it first with "
            f"`grprune run --config {run_dir / R.CONFIG} --out {run_dir}`")
    if status.state != "finished":
        what = {"corrupt": "holds a corrupt run", "empty": "is empty"}.get(
            status.state, "is not a grprune run directory")
        raise GrpruneError(f"{run_dir} {what} ({status.reason or status.state})")
    cfg, summary = status.config, status.summary
    ckpt = run_dir / R.CHECKPOINT
    if not ckpt.is_file():
        raise GrpruneError(f"{run_dir} has no {R.CHECKPOINT}; re-run it with "
                           f"`grprune run --config {run_dir / R.CONFIG} --out {run_dir} --force`")
    dev = select_device(device)
    dataset = None
    dims = summary.get("model")
    if not isinstance(dims, dict):  # runs finished before summary["model"] existed
        dataset = load_config_dataset(cfg)
        dims = model_dims(dataset)
    model, _ = build_model_from_dims(cfg, dims)
    try:
        state = torch.load(ckpt, map_location=dev, weights_only=True)
        model.load_state_dict(state)
    except Exception as exc:  # torn file, or a checkpoint of another model
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GrpruneError(f"cannot load {ckpt}: {first}") from None
    model.to(dev)
    model.eval()
    use_selector = evaluation_uses_selector(summary, R.read_records(run_dir / R.RESULTS))
    return Run(run_dir=run_dir, cfg=cfg, summary=summary, dims=dict(dims), model=model,
               device=dev, use_selector=use_selector, _dataset=dataset)
