"""Evaluation of a model on batches of graphs: the one path of the trainer and of inference.

:func:`evaluate_batches` runs the model in eval mode over batches and returns an
:class:`Evaluation`: the split metric, the class probabilities, the fraction of
edges the evaluation mask keeps, the selector diagnostics and, on request, every
edge's selector output as an :class:`EdgeScores` (CSR arrays over the graphs).
The trainer (:meth:`grprune.trainer.Trainer.evaluate`) calls it every epoch and
on the selected checkpoint, whose test edges it saves as ``edge_probs.npz``
(:func:`edge_probs_arrays`, written by :meth:`grprune.record.rundir.RunDir.write_edge_arrays`);
:mod:`grprune.inference` calls it to score new graphs (``grprune predict``), and
``grprune explain`` reads the saved arrays back (:func:`edge_scores_from_arrays`).

The evaluation rule: the model is in eval mode, the selector is used unless
``use_selector=False`` (ERM warm-up), and the selector's ``eval_mode`` decides
the mask (``threshold``: :math:`p > 0.5`; ``soft``: :math:`p`; ``sample``: a
hard sample from noise keyed by the graph's identity, class probabilities averaged
over ``selector.eval_samples`` draws; ``budget``: each graph's top bonds). Without a selector (or with it off) every edge has logit ``+inf`` and
probability and weight 1.

Shapes: ``G`` graphs, ``E`` directed edges, ``U`` undirected bonds, ``C`` classes.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import numpy as np
import torch

from grprune.batch import GraphBatch
from grprune.diagnostics import SelectorStats
from grprune.errors import GrpruneError
from grprune.metrics import evaluate
from grprune.ops import bond_max_np, bonds_by_first_edge
from grprune.capture import (CudaGraphs, EagerGraphs, mark_eager, watch_capture_hazards,
                             watch_replaced_tensors)

if TYPE_CHECKING:
    from grprune.model import GraphClassifier

#: arrays of ``edge_probs.npz`` that :func:`edge_scores_from_arrays` needs to rebuild every
#: :class:`GraphScore` (a file that lacks one is incomplete: the graphs are scored again)
SCORE_ARRAYS = ("graph_index", "edge_ptr", "src", "dst", "edge_prob", "edge_weight",
                "edge_logits", "prob", "num_nodes")


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
        Undirected bond of each edge (:func:`grprune.ops.bonds_by_first_edge`:
        bonds numbered by their first directed edge).
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
        self.bond_of_edge, self.bond_edge = bonds_by_first_edge(self.src, self.dst)

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
        return bond_max_np(self.edge_gt, self.bond_of_edge, self.num_bonds)


@dataclass
class EdgeScores:
    """Every edge's selector output over ``G`` graphs, as CSR arrays (one evaluation).

    Attributes
    ----------
    graph_index : np.ndarray of int64, shape (G,)
        Index of each graph in its dataset (the position in the scored input for
        graphs that are not a dataset's).
    prob : np.ndarray of float32, shape (G, C)
        Class probabilities.
    num_nodes : np.ndarray of int64, shape (G,)
    edge_ptr : np.ndarray of int64, shape (G + 1,)
        Graph ``g`` owns edges ``edge_ptr[g] : edge_ptr[g + 1]``.
    src, dst : np.ndarray of int64, shape (E,)
        Local node ids.
    edge_logits, edge_prob, edge_weight : np.ndarray of float32, shape (E,)
        As in :class:`GraphScore`.
    edge_gt : np.ndarray of int64, shape (E,), or None
    """

    graph_index: np.ndarray
    prob: np.ndarray
    num_nodes: np.ndarray
    edge_ptr: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    edge_logits: np.ndarray
    edge_prob: np.ndarray
    edge_weight: np.ndarray
    edge_gt: np.ndarray | None = None

    def __len__(self) -> int:
        return int(len(self.graph_index))

    def graph(self, k: int) -> GraphScore:
        """The :class:`GraphScore` of the ``k``-th graph (a position, not a dataset index)."""
        sl = slice(int(self.edge_ptr[k]), int(self.edge_ptr[k + 1]))
        return GraphScore(
            prob=self.prob[k], src=self.src[sl], dst=self.dst[sl],
            edge_logits=self.edge_logits[sl], edge_prob=self.edge_prob[sl],
            edge_weight=self.edge_weight[sl],
            edge_gt=None if self.edge_gt is None else self.edge_gt[sl],
            num_nodes=int(self.num_nodes[k]))

    def graph_scores(self) -> list[GraphScore]:
        """One :class:`GraphScore` per graph, in order."""
        return [self.graph(k) for k in range(len(self))]

    def by_index(self, indices: Iterable[int]) -> dict[int, GraphScore] | None:
        """Dataset index -> :class:`GraphScore` for the given indices; None if one is missing."""
        where = {int(i): k for k, i in enumerate(self.graph_index.tolist())}
        indices = list(dict.fromkeys(int(i) for i in indices))
        if any(i not in where for i in indices):
            return None
        return {i: self.graph(where[i]) for i in indices}


class _EdgeCollector:
    """Copies each evaluated batch's edges to the host; :meth:`result` concatenates them."""

    KEYS = ("index", "prob", "num_nodes", "num_edges", "src", "dst", "logits", "eprob",
            "weight", "gt")

    def __init__(self) -> None:
        self.parts: dict[str, list[torch.Tensor]] = {k: [] for k in self.KEYS}

    def add(self, batch: GraphBatch, prob: torch.Tensor, s) -> None:
        local_src, local_dst = batch.local_edges()
        # without a selector every edge is kept: host tensors, like everything collected
        ones = torch.ones(local_src.shape[0], dtype=torch.float32)
        p = self.parts
        p["index"].append(batch.index.cpu())
        p["prob"].append(prob.float().cpu())
        p["num_nodes"].append(batch.num_nodes.cpu())
        p["num_edges"].append(batch.num_edges.cpu())
        p["src"].append(local_src.cpu())
        p["dst"].append(local_dst.cpu())
        p["logits"].append(s.edge_logits.float().cpu() if s is not None
                           else torch.full_like(ones, math.inf))
        p["eprob"].append((s.edge_prob if s is not None else ones).float().cpu())
        p["weight"].append((s.edge_weight if s is not None else ones).float().cpu())
        if batch.edge_gt is not None:
            p["gt"].append(batch.edge_gt.cpu())

    def result(self, num_classes: int) -> EdgeScores:
        cat = {k: (torch.cat(v).numpy() if v else np.zeros(0)) for k, v in self.parts.items()}
        ptr = np.concatenate([[0], np.cumsum(cat["num_edges"].astype(np.int64))])
        src = cat["src"].astype(np.int64)
        gt = cat["gt"] if len(cat["gt"]) == len(src) and len(src) else None
        prob = cat["prob"] if self.parts["prob"] else np.zeros((0, num_classes))
        return EdgeScores(
            graph_index=cat["index"].astype(np.int64), prob=prob.astype(np.float32),
            num_nodes=cat["num_nodes"].astype(np.int64), edge_ptr=ptr.astype(np.int64),
            src=src, dst=cat["dst"].astype(np.int64),
            edge_logits=cat["logits"].astype(np.float32),
            edge_prob=cat["eprob"].astype(np.float32),
            edge_weight=cat["weight"].astype(np.float32),
            edge_gt=None if gt is None else gt.astype(np.int64))


@dataclass
class Evaluation:
    """A model's predictions on one set of graphs (:func:`evaluate_batches`).

    Attributes
    ----------
    metric : float
        The split metric (:func:`grprune.metrics.evaluate`); NaN when no metric
        was asked for.
    prob : np.ndarray of shape (G, C)
        Class probabilities, in batch order.
    kept : float
        Fraction of directed edges kept by the evaluation mask (1.0 without selector).
    selector : dict or None
        :meth:`grprune.diagnostics.SelectorStats.result`, for a learned selector in use.
    edges : EdgeScores or None
        Every edge's selector output, with ``collect_edges=True``.
    """

    metric: float
    prob: np.ndarray
    kept: float
    selector: dict | None = None
    edges: EdgeScores | None = None


@contextmanager
def _graph_keyed_noise(selector, seed: int):
    """Give a selector its evaluation seed (:attr:`~grprune.selectors.base.Selector.eval_seed`)
    for one evaluation, and forget its draw counter after it."""
    if selector is None:
        yield
        return
    before = selector.eval_seed
    selector.eval_seed = int(seed)
    selector.reset_eval_draws()
    try:
        yield
    finally:
        selector.eval_seed = before
        selector.reset_eval_draws()


#: graphs one :class:`GraphedForward` keeps at most; a key beyond them runs eagerly
MAX_EVAL_GRAPHS = 64

Predicted = tuple[torch.Tensor, Any]  # (prob (B, C), ModelOutput): ``model.predict``'s


class GraphedForward:
    """``model.predict`` on evaluation batches that are the same tensors every epoch (the
    trainer's, :meth:`grprune.trainer.Trainer.evaluate`), captured as one graph per
    (batch, ``use_selector``, seed) and replayed (``train.compile=cuda-graph``): evaluation
    gets the same treatment as the step, where it pays.

    It pays: on one H100 at ``8ffd624`` one molbbbp validation pass (204 graphs, one batch)
    took 22 ms for 1.9 ms of kernels, 608 launches; train, valid and test each epoch are
    ~6.6 s of a 100-epoch run whose target is 15 s. A replay is one launch.

    The first call of a key runs eagerly (on a side stream on CUDA), watched as
    :class:`grprune.step.GraphedStep`'s probe is (:func:`~grprune.capture.watch_capture_hazards`:
    ``.item()``, ops sized by values, copies to the host, CUDA syncs; and a new tensor put
    in the model): a key whose pass does any of these stays eager, with one warning. The
    second call captures the pass over the batch itself (no copy: the batch is the graph's
    static input, and its host integers and caches are fixed), later calls replay it.
    Parameters and BatchNorm statistics are read in place, so a replay sees the trained
    model. The graph-keyed evaluation noise (``selector.eval_mode=sample``) depends on the
    seed, the batch and the draw, all fixed per key. The graphs share one memory pool (their
    outputs stay referenced, so a replay rewrites only intermediates). A call returns the
    graph's static outputs: read them before the key's next call. On the CPU the backend
    is :class:`~grprune.capture.EagerGraphs` (a replay runs the pass again): bit for bit the
    eager evaluation (``tests/test_cuda_graph.py``).

    Raises
    ------
    GrpruneError
        On a call, when CUDA refuses to capture the pass (the message says how to go on).
    """

    def __init__(self, device: torch.device,
                 backend: EagerGraphs | CudaGraphs | None = None) -> None:
        if backend is None:
            backend = (CudaGraphs(device, share_pool=True) if device.type == "cuda"
                       else EagerGraphs())
        self.backend, self.device = backend, device
        self.graphs: dict[tuple, Callable[[], Predicted]] = {}
        self.seen: dict[tuple, GraphBatch] = {}  # (holds the batch: its id stays its own)
        self.eager: dict[tuple, str] = {}  # key -> why its passes are not captured
        self.replays = 0

    def __call__(self, model, batch: GraphBatch, use_selector: bool, seed: int) -> Predicted:
        """``model.predict(batch, use_selector=use_selector)`` under evaluation seed ``seed``
        (:func:`evaluate_batches` sets it; the key keeps the graphs of two seeds apart)."""
        key = (id(batch), bool(use_selector), int(seed))
        replay = self.graphs.get(key)
        if replay is not None:
            self.replays += 1
            return replay()

        def fn() -> Predicted:
            return model.predict(batch, use_selector=use_selector)
        if key in self.eager or (key in self.seen and len(self.graphs) >= MAX_EVAL_GRAPHS):
            return fn()
        if key not in self.seen:
            self.seen[key] = batch
            return self._probe(model, key, fn)
        try:
            replay = self.graphs[key] = self.backend.capture(fn)
        except RuntimeError as err:
            raise GrpruneError(f"train.compile=cuda-graph: the evaluation of a batch of "
                               f"{batch.num_graphs} graphs could not be captured "
                               f"({str(err).splitlines()[0]}); run with "
                               f"-H train.compile=none") from err
        self.replays += 1
        return replay()

    def _probe(self, model, key: tuple, fn: Callable[[], Predicted]) -> Predicted:
        reads: set[str] = set()
        with self.backend.warmup(), watch_replaced_tensors({"model": model}, reads), \
                watch_capture_hazards(reads, self.device):
            out = fn()
        mark_eager(self.eager, key, sorted(reads), "the evaluation pass", "it runs")
        return out


@torch.no_grad()
def evaluate_batches(model: GraphClassifier, batches: Iterable[GraphBatch], *, num_classes: int = 0,
                     use_selector: bool = True, metric: str | None = None,
                     diagnostics: bool = True, collect_edges: bool = False,
                     seed: int = 0, forward: GraphedForward | None = None) -> Evaluation:
    """Evaluate a model on batches, as the trainer does.

    What evaluation draws at random comes from ``seed``, and the caller's RNG (a training
    run's) is left as it was. A Gumbel selector's ``eval_mode=sample`` mask draws its noise
    from :func:`grprune.selectors.base.graph_noise`, a hash of (``seed``, the graph's
    ``batch.index``, the edge's local node pair, draw): each graph's mask and score depend
    on that graph alone, not on the batch size, the order or the other graphs. Any other
    random draw (e.g. a ``drop-edge`` selector's ``eval_mode=sample``) comes from a torch
    stream seeded with ``seed`` inside :func:`torch.random.fork_rng`.

    Parameters
    ----------
    model : grprune.model.GraphClassifier
        Put in eval mode here; batches not on its device are moved there.
    batches : iterable of GraphBatch
    num_classes : int
        ``C``, used only to shape the result of an empty input.
    use_selector : bool
        False evaluates the full graphs (ERM warm-up; all edges kept).
    metric : str, optional
        ``rocauc`` or ``accuracy`` against ``batch.y``; None skips it (NaN).
    diagnostics : bool
        Summarise a learned selector's logits (:class:`~grprune.diagnostics.SelectorStats`).
    collect_edges : bool
        Also return every edge's output (:attr:`Evaluation.edges`).
    seed : int
        Seed of evaluation's random stream (the trainer's is
        :func:`grprune.determinism.eval_seed` of the run's seed and the split).
    forward : GraphedForward, optional
        Runs the ``model.predict`` of each batch already on the model's device (captured
        and replayed); default, and for a batch moved here: eagerly.

    Returns
    -------
    Evaluation
    """
    model.eval()
    device = next(model.parameters()).device
    selector = model.selector
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), \
            _graph_keyed_noise(selector, seed):
        torch.manual_seed(seed)
        probs, labels, edges = [], [], 0
        kept = torch.zeros((), device=device)
        stats = (SelectorStats() if diagnostics and use_selector
                 and selector is not None and selector.learned else None)
        collector = _EdgeCollector() if collect_edges else None
        for batch in batches:
            moved = batch.device != device  # (a moved batch is new each call: not graphed)
            if moved:
                batch = batch.to(device)
            p, out = (model.predict(batch, use_selector=use_selector) if forward is None
                      or moved else forward(model, batch, use_selector, seed))
            probs.append(p.cpu())
            labels.append(batch.y.cpu())
            edges += batch.src.numel()
            s = out.selection
            kept += s.edge_weight.sum() if s is not None else batch.src.numel()
            if stats is not None and s is not None:  # (stats: a selector that selected)
                correct = p.argmax(-1) == batch.y.view(-1) if batch.edge_gt is not None else None
                stats.add(batch, s.edge_logits, correct)
            if collector is not None:
                collector.add(batch, p, s)
        prob = torch.cat(probs).numpy() if probs else np.zeros((0, num_classes))
        y = torch.cat(labels).numpy() if labels else np.zeros(0, dtype=int)
        return Evaluation(metric=evaluate(metric, y, prob) if metric is not None else math.nan,
                          prob=prob, kept=float(kept) / edges if edges else 1.0,
                          selector=stats.result() if stats is not None else None,
                          edges=collector.result(num_classes) if collector is not None else None)


def edge_probs_arrays(edges: EdgeScores, smiles=None, source_rows=None,
                      ids=None) -> dict[str, np.ndarray]:
    """The arrays of ``edge_probs.npz``.

    ``graph_index``, ``edge_ptr`` (CSR offsets), ``src``, ``dst`` (local node ids),
    ``edge_prob`` (:math:`\\sigma(w)`), ``edge_weight`` (the evaluation mask),
    ``edge_logits`` (:math:`w`, ``+inf`` without a selector), ``prob`` (class
    probabilities, shape (G, C)), ``num_nodes``; ``smiles`` for molecules (taken
    from ``smiles[graph_index]``), ``row`` (the graph's 0-based source row, from
    ``source_rows[graph_index]``), ``id`` (its compound ID, ``ids[graph_index]``, where the
    data has IDs) and ``edge_gt`` (int8) on synthetic data.
    """
    arrays = {"graph_index": edges.graph_index, "edge_ptr": edges.edge_ptr,
              "src": edges.src, "dst": edges.dst, "edge_prob": edges.edge_prob,
              "edge_weight": edges.edge_weight}
    if smiles is not None:
        arrays["smiles"] = np.asarray([smiles[i] for i in arrays["graph_index"]])
    if source_rows is not None:
        arrays["row"] = np.asarray(source_rows, dtype=np.int64)[edges.graph_index]
    if ids is not None:
        arrays["id"] = np.asarray([str(ids[i]) for i in arrays["graph_index"]], dtype=str)
    if edges.edge_gt is not None:
        arrays["edge_gt"] = edges.edge_gt.astype(np.int8)
    arrays.update(edge_logits=edges.edge_logits, prob=edges.prob, num_nodes=edges.num_nodes)
    return arrays


def edge_arrays_problem(a: Mapping[str, np.ndarray]) -> str | None:
    """What is wrong with ``edge_probs.npz``'s arrays as a whole, or None.

    Checks that the CSR arrays agree: ``edge_ptr`` has G + 1 entries, starts at 0, never
    decreases and ends at E; every per-edge array has E entries and every per-graph array
    G (``prob`` G rows); local node ids lie in ``[0, num_nodes)`` of their graph; graph
    indices are non-negative. A file that passes can be indexed without error.
    """
    try:
        g = len(a["graph_index"])
        ptr = np.asarray(a["edge_ptr"])
        e = len(a["src"])
        if ptr.ndim != 1 or len(ptr) != g + 1:
            return f"edge_ptr has {len(ptr)} entries for {g} graphs"
        if len(ptr) and (ptr[0] != 0 or ptr[-1] != e or (np.diff(ptr) < 0).any()):
            return "edge_ptr is not a monotone pointer array from 0 to the edge count"
        for k in ("dst", "edge_prob", "edge_weight", "edge_logits", "edge_gt"):
            if k in a and len(a[k]) != e:
                return f"{k} has {len(a[k])} entries, src {e}"
        for k in ("prob", "num_nodes", "smiles", "row", "id"):
            if k in a and len(a[k]) != g:
                return f"{k} has {len(a[k])} entries for {g} graphs"
        if g and (np.asarray(a["graph_index"]) < 0).any():
            return "graph_index holds negative indices"
        if e:
            nodes = np.repeat(np.asarray(a["num_nodes"], dtype=np.int64), np.diff(ptr))
            for k in ("src", "dst"):
                v = np.asarray(a[k], dtype=np.int64)
                if (v < 0).any() or (v >= nodes).any():
                    return f"{k} holds node ids outside their graph"
    except (KeyError, TypeError, ValueError) as exc:
        return f"unreadable arrays ({type(exc).__name__}: {exc})"
    return None


def edge_scores_from_arrays(a: Mapping[str, np.ndarray] | None) -> EdgeScores | None:
    """The :class:`EdgeScores` of ``edge_probs.npz``'s arrays
    (:meth:`grprune.record.rundir.RunDir.edge_arrays`); None without arrays, when they lack
    one of :data:`SCORE_ARRAYS`, or when they do not agree
    as a whole (:func:`edge_arrays_problem`): the caller recomputes the scores from the
    checkpoint, as for a damaged file."""
    if a is None or any(k not in a for k in SCORE_ARRAYS) or edge_arrays_problem(a):
        return None
    return EdgeScores(
        graph_index=a["graph_index"].astype(np.int64), prob=a["prob"],
        num_nodes=a["num_nodes"].astype(np.int64), edge_ptr=a["edge_ptr"].astype(np.int64),
        src=a["src"].astype(np.int64), dst=a["dst"].astype(np.int64),
        edge_logits=a["edge_logits"], edge_prob=a["edge_prob"], edge_weight=a["edge_weight"],
        edge_gt=a["edge_gt"].astype(np.int64) if "edge_gt" in a else None)
