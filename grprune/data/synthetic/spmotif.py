"""SPMotif, the Spurious-Motif benchmark of DIR (Wu et al., "Discovering Invariant
Rationales for Graph Neural Networks", ICLR 2022).

Each graph is an invariant motif (the label) attached to a spurious base
graph. In training the base is correlated with the label by the bias ``b``;
validation and test bases are independent of the label, and test bases are
larger. Graphs are built as described in :mod:`grprune.data.synthetic.shapes`;
this module follows DIR's generation notebook (``spmotif_gen/spmotif.ipynb``
with its ``synthetic_structsim.py`` and ``BA3_loc.py``).

Recipe
------
Classes and the base each is paired with (DIR's order): cycle (class 0) with
tree, house (1) with ladder, crane (2) with wheel. ``env`` = base id
(0 tree, 1 ladder, 2 wheel).

* ``train`` (9,000 = 3,000 per class): base = the class's paired base with
  probability ``b``, each of the two others with probability ``(1 - b) / 2``.
  Base sizes: tree height 0..2, ladder width 8..11, wheel width 15..19
  (uniform integers, as DIR's ``graph_stats``).
* ``valid`` (3,000 = 1,000 per class): base uniform over the three (no bias;
  DIR's notebook draws validation bases uniformly), same sizes as training.
* ``test`` (3,000 = 1,000 per class): base uniform, larger bases as DIR's
  ``graph_stats_large``: tree height 3..5, ladder width 30..49, wheel width
  60..79. DIR itself makes 6,000 test graphs (2,000 per class); grprune makes
  3,000 (the split sizes used by the grprune benchmarks).
* Trees are balanced with branching factor 2 or 3 drawn uniformly per graph
  (DIR's ``tree`` draws it with ``random.randint(2, 3)``; height 0 is one node).
* The motif's node 0 is joined to a uniform base node; then ``int(0.05 E)``
  random extra-edge attempts touching a base node (DIR's ``perturb(G, 0.05)``;
  every node of these bases is open, motif nodes never are).
* Node features: 4 floats uniform in [0, 1) per node, as DIR's loader
  (``x = torch.rand(N, 4)``), drawn from the seeded generator so they are
  reproducible. No edge features (DIR's are constant ones).
* No label noise.
* ``bias`` defaults to 0.9, the strongest bias of DIR's table (balanced 1/3,
  0.5, 0.7, 0.9) and the one every follow-up reports; any value in (0, 1) is
  accepted (1/3 is the unbiased setting).

``motifs=2`` (PrunE's "SPMotif with 2 invariant subgraphs")
    Every graph (train, valid and test) carries two copies of its class's
    motif, joined to two distinct base nodes drawn uniformly (both to the same
    node only when the base has a single node, i.e. a tree of height 0). The
    label is the motif type; the base follows the same bias rule. ``edge_gt``
    marks the edges of both motifs. The DIR/GNNExplainer ``build_graph`` that
    the paper's generator builds on attaches a list of shapes exactly this way.

Choices where DIR is ambiguous or not reproducible
    * DIR's notebook changed over time: the version behind the paper's results
      attaches ``crane`` and perturbs with 0.05; a later edit attaches
      ``varcycle`` (a house with two extra chords) with no perturbation.
      grprune follows the former.
    * DIR stores each undirected edge once (``G.edges``); grprune stores both
      directions, like every other grprune dataset.
    * DIR draws from Python's and NumPy's global generators and generates the
      classes one after another; grprune draws everything from one
      ``numpy.random.Generator`` seeded with ``seed``, and shuffles the graph
      order inside each part (so ``data.limit`` keeps all classes).
    * Graph order: train ``0..8999``, valid ``9000..11999``, test ``12000..14999``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from grprune.data.cache import CACHE_DIRNAME, load_or_build
from grprune.data.dataset import GraphDataset
from grprune.hparams import Param
from grprune.data.registry import DATASETS, DatasetSource
from grprune.data.synthetic.shapes import (
    PART_CODES,
    SyntheticGraphs,
    add_random_edges,
    attach_motifs,
    base_graph,
    split_indices,
)
from grprune.errors import GrpruneError

#: bump when the generated graphs change for the same parameters (invalidates caches)
GENERATOR_VERSION = 1
SP_MOTIFS = ("cycle", "house", "crane")  # class order of DIR
SP_BASES = ("tree", "ladder", "wheel")  # base paired with the class of the same index
TRAIN_SIZES = ((0, 2), (8, 11), (15, 19))  # inclusive ranges per base (tree: height)
TEST_SIZES = ((3, 5), (30, 49), (60, 79))
TREE_BRANCHING = (2, 3)
EXTRA_EDGE_RATIO = 0.05
N_FEATURES = 4
SIZES = (9000, 3000, 3000)
PARTS = ("train", "valid", "test")
SPLITS = ("correlation",)
BIAS = 0.9


def _check(bias: float, motifs: int, seed: int, sizes: tuple[int, int, int]) -> None:
    if not 0.0 < float(bias) < 1.0:
        raise GrpruneError(f"data.bias must be strictly between 0 and 1, got {bias}")
    if int(motifs) not in (1, 2):
        raise GrpruneError(f"data.motifs must be 1 or 2, got {motifs}")
    if int(seed) < 0:
        raise GrpruneError(f"data.seed must be a non-negative integer, got {seed}")
    if len(sizes) != 3 or any(int(s) < 3 or int(s) % 3 for s in sizes):
        raise GrpruneError(f"SPMotif part sizes must be positive multiples of 3, got {sizes}")


def plan_spmotif(bias: float, sizes: tuple[int, int, int], rng: np.random.Generator
                 ) -> dict[str, np.ndarray]:
    """Draw each graph's class, base, base size, tree branching and part.

    Parameters
    ----------
    bias : float in (0, 1)
    sizes : (int, int, int)
        Graphs in train, valid and test; each a multiple of 3 (balanced classes).
    rng : np.random.Generator

    Returns
    -------
    dict of str to np.ndarray of int64, each shape (G,)
        ``labels``, ``bases``, ``sizes`` (width, or tree height), ``branching``
        and ``part``.
    """
    out: dict[str, list[np.ndarray]] = {k: [] for k in
                                        ("labels", "bases", "sizes", "branching", "part")}
    for part, count in zip(PARTS, sizes):
        labels = rng.permutation(np.repeat(np.arange(3), int(count) // 3))
        if part == "train":
            other = rng.random(count) >= bias
            shift = rng.integers(1, 3, size=count)  # one of the two other bases
            bases = np.where(other, (labels + shift) % 3, labels)
        else:
            bases = rng.integers(0, 3, size=count)
        ranges = np.asarray(TEST_SIZES if part == "test" else TRAIN_SIZES)
        low, high = ranges[bases, 0], ranges[bases, 1]
        out["labels"].append(labels)
        out["bases"].append(bases)
        out["sizes"].append(rng.integers(low, high + 1))
        out["branching"].append(rng.integers(TREE_BRANCHING[0], TREE_BRANCHING[1] + 1,
                                             size=count))
        out["part"].append(np.full(count, PART_CODES[part]))
    return {k: np.concatenate(v).astype(np.int64) for k, v in out.items()}


def generate_spmotif(bias: float = BIAS, motifs: int = 1, seed: int = 0,
                     sizes: tuple[int, int, int] = SIZES) -> SyntheticGraphs:
    """Generate SPMotif graphs (see the module docstring for the recipe).

    Parameters
    ----------
    bias : float in (0, 1)
        Training probability of the class's paired base (DIR: 1/3 = balanced,
        0.5, 0.7, 0.9; later papers also use 0.33 and 0.6).
    motifs : {1, 2}
        Motif copies per graph.
    seed : int
        Seed of the ``numpy.random.Generator`` that draws everything.
    sizes : (int, int, int)
        Graphs in train, valid, test (multiples of 3); default 9,000 / 3,000 / 3,000.

    Returns
    -------
    SyntheticGraphs
        With ``feat`` float32 (N_i, 4); ``motifs`` equals ``labels``; ``envs``
        equals ``bases``; ``sizes`` is the base width (tree: height).

    Raises
    ------
    GrpruneError
        On a bias outside (0, 1), ``motifs`` not 1 or 2, a negative seed or bad sizes.

    Examples
    --------
    >>> data = generate_spmotif(bias=0.9, seed=0, sizes=(30, 6, 6))
    >>> {k: len(v) for k, v in data.split_indices(("train", "valid", "test")).items()}
    {'train': 30, 'valid': 6, 'test': 6}
    """
    _check(bias, motifs, seed, sizes)
    rng = np.random.default_rng(int(seed))
    sizes3 = cast("tuple[int, int, int]", tuple(int(s) for s in sizes))  # _check: 3 sizes
    plan = plan_spmotif(float(bias), sizes3, rng)
    num_nodes, edges, gts, feats = [], [], [], []
    for label, base, size, branching in zip(plan["labels"].tolist(), plan["bases"].tolist(),
                                            plan["sizes"].tolist(), plan["branching"].tolist()):
        shape = base_graph(SP_BASES[base], size, branching)
        n, e, gt, open_nodes = attach_motifs(shape, (SP_MOTIFS[label],) * int(motifs), rng)
        extra = add_random_edges(n, e, open_nodes, EXTRA_EDGE_RATIO, rng)
        if len(extra):
            e = np.concatenate([e, extra])
            gt = np.concatenate([gt, np.zeros(len(extra), dtype=bool)])
        num_nodes.append(n)
        edges.append(e)
        gts.append(gt)
        feats.append(rng.random((n, N_FEATURES), dtype=np.float32))
    return SyntheticGraphs(
        num_nodes=np.asarray(num_nodes, dtype=np.int64), edges=edges, edge_gt=gts,
        labels=plan["labels"], motifs=plan["labels"].copy(), bases=plan["bases"],
        sizes=plan["sizes"], envs=plan["bases"].copy(), part=plan["part"], feat=feats)


def cache_key(bias: float, motifs: int, seed: int, sizes: tuple[int, int, int]) -> dict:
    """Everything that decides the generated graphs, for the on-disk cache."""
    from grprune.compat import dgl

    return {"format": "grprune-spmotif", "generator_version": GENERATOR_VERSION,
            "bias": float(bias), "motifs": int(motifs), "seed": int(seed),
            "sizes": [int(s) for s in sizes],
            "numpy_version": np.__version__, "dgl_version": dgl.__version__}


def cache_dir(root: Path, bias: float, motifs: int, seed: int,
              sizes: tuple[int, int, int] = SIZES) -> Path:
    """``<root>/spmotif/grprune_v1/bias<b>-motifs<m>-seed<s>[-n<train>-<valid>-<test>]``."""
    name = f"bias{float(bias)!r}-motifs{int(motifs)}-seed{int(seed)}"
    if tuple(int(s) for s in sizes) != SIZES:
        name += "-n" + "-".join(str(int(s)) for s in sizes)
    return Path(root) / "spmotif" / CACHE_DIRNAME / name


def load_spmotif(root: Path, *, bias: float = BIAS, motifs: int = 1, seed: int = 0,
                 sizes: tuple[int, int, int] = SIZES, split: str = "correlation",
                 name: str = "spmotif") -> GraphDataset:
    """Generate (or read from the cache) SPMotif as a :class:`GraphDataset`.

    Parameters
    ----------
    root : Path
        Data root; the cache lives in :func:`cache_dir`.
    bias, motifs, seed, sizes
        See :func:`generate_spmotif`.
    split : str
        Recorded in ``info`` (SPMotif has one split).
    name : str
        Dataset name recorded in the result.

    Returns
    -------
    GraphDataset
        Parts ``train``, ``valid``, ``test``; ``envs`` = base id; graphs with
        ``ndata['feat']`` float32 (N, 4) and ``edata['edge_gt']``.

    Raises
    ------
    GrpruneError
        On bad parameters (see :func:`generate_spmotif`).
    """
    sizes = cast("tuple[int, int, int]", tuple(int(s) for s in sizes))  # else _check raises
    _check(bias, motifs, seed, sizes)
    directory = cache_dir(root, bias, motifs, seed, sizes)
    key = cache_key(bias, motifs, seed, sizes)
    names = ("labels", "envs", "part", "bases", "sizes")

    def build():
        t0 = time.perf_counter()
        data = generate_spmotif(bias, motifs, seed, sizes)
        graphs = data.to_dgl()
        tensors = {k: torch.from_numpy(getattr(data, k)) for k in names}
        return graphs, tensors, {"generate_seconds": round(time.perf_counter() - t0, 3)}

    t0 = time.perf_counter()
    graphs, tensors, meta, status = load_or_build(directory, key, build,
                                                  ("generator_version",), names)
    load_s = time.perf_counter() - t0
    parts = split_indices(tensors["part"].numpy(), PARTS)
    info = _info(tensors, parts)
    info.update(
        dataset=name, split=split, bias=float(bias), motifs=int(motifs), seed=int(seed),
        generator="Spurious-Motif (DIR, Wu et al. 2022), regenerated by grprune",
        generator_version=GENERATOR_VERSION, n_graphs=len(graphs),
        split_sizes={k: int(len(v)) for k, v in parts.items()},
        env_meaning="base graph: " + ", ".join(f"{i} {b}" for i, b in enumerate(SP_BASES)),
        classes=list(SP_MOTIFS),
        recipe={"paired_base": dict(zip(SP_MOTIFS, SP_BASES)),
                "train_valid_sizes": dict(zip(SP_BASES, map(list, TRAIN_SIZES))),
                "test_sizes": dict(zip(SP_BASES, map(list, TEST_SIZES))),
                "size_meaning": "tree: height (branching 2 or 3); ladder, wheel: width",
                "extra_edge_ratio": EXTRA_EDGE_RATIO,
                "node_features": f"uniform [0, 1), (N, {N_FEATURES})",
                "valid_test_bases": "uniform (no bias)"},
        cache=status, cache_dir=str(directory),
        load_seconds=round(load_s, 3), generate_seconds=meta.get("generate_seconds"))
    return GraphDataset(name, graphs, tensors["labels"].long(), parts, num_classes=3,
                        metric="accuracy", atom_encoder="linear",
                        envs=tensors["envs"].long(), info=info)


def _info(tensors: dict[str, torch.Tensor], parts: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per-part label counts and the empirical P(base | class) matrix."""
    labels, bases = tensors["labels"].numpy(), tensors["bases"].numpy()
    label_counts, base_given_class = {}, {}
    for part, idx in parts.items():
        label_counts[part] = {SP_MOTIFS[c]: int((labels[idx] == c).sum()) for c in range(3)}
        table = np.zeros((3, 3))
        np.add.at(table, (labels[idx], bases[idx]), 1)
        table /= np.maximum(table.sum(axis=1, keepdims=True), 1)
        base_given_class[part] = {SP_MOTIFS[c]: {SP_BASES[b]: round(float(table[c, b]), 4)
                                                 for b in range(3)} for c in range(3)}
    return {"label_counts": label_counts, "base_given_class": base_given_class}


@DATASETS.register("spmotif", aliases=("spurious-motif", "sp-motif"))
class SPMotif(DatasetSource):
    """SPMotif: an invariant motif on a spurious, label-correlated base graph.

    See :mod:`grprune.data.synthetic.spmotif` for the recipe.
    """

    splits = SPLITS
    parts = PARTS
    params = {
        "split": Param("correlation", "correlation (the only split: biased train, unbiased "
                                      "valid, unbiased larger-base test)"),
        "bias": Param(BIAS, "training P(paired base | class), strictly between 0 and 1 "
                            "(DIR: 1/3 = balanced, 0.5, 0.7, 0.9)", low=0.0, high=1.0,
                      low_open=True, high_open=True),
        "motifs": Param(1, "invariant motifs per graph: 1 (DIR) or 2 (two copies of the "
                           "class's motif)", choices=(1, 2)),
        "seed": Param(0, "seed of the graph generator (same seed: identical graphs and "
                         "splits)", low=0),
    }
    metric = "accuracy"
    num_classes = 3
    description = ("SPMotif (DIR, Wu et al. 2022): cycle/house/crane motif on a tree/ladder/"
                   "wheel base correlated with the label by bias b; 9,000/3,000/3,000 graphs")
    recommended = {"encoder.layers": 5, "encoder.virtual_node": False}

    def load(self, *, root: Path, download: bool = False, split: str = "correlation",
             bias: float = BIAS, motifs: int = 1, seed: int = 0) -> GraphDataset:
        """Generate or read the cached dataset; ``download`` is ignored (nothing to fetch).

        Raises
        ------
        GrpruneError
            On a bias outside (0, 1), ``motifs`` not 1 or 2 or a negative seed.
        """
        return load_spmotif(Path(root), bias=bias, motifs=motifs, seed=seed,
                            split=self.resolve_split(split),
                            name=self.registered_name or "spmotif")
