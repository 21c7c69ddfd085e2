"""GOOD-Motif (Gui et al., "GOOD: A Graph Out-of-Distribution Benchmark", NeurIPS 2022).

Each graph is a base graph (wheel, tree, ladder, star or path) with one motif
(house, cycle, crane) attached; the class is the motif. The base graph is the
domain of the ``basis`` split; the base width is the domain of the ``size``
split. Graphs are built as described in :mod:`grprune.data.synthetic.shapes`;
this module draws what each graph is made of and how graphs are split,
following GOOD's ``GOODMotif`` generator (``GOOD/data/good_datasets/good_motif.py``).

Recipe (``N = 30,000`` graphs)
------------------------------
Per graph:

* motif ``m`` uniform over house (class 0), cycle (1), crane (2);
* width ``w``: a centre value plus a uniform integer offset in ``-5 .. 5``;
  the centre is 10 in the ``basis`` split and depends on the domain in the
  ``size`` split;
* the tree base is a balanced binary tree of height
  ``max(1, floor(log2 w) - 1)`` (GOOD's conversion); other bases use ``w``
  directly (a ladder of width ``w`` has ``2w`` nodes, a star ``w + 1``);
* the motif's node 0 is joined to a uniformly drawn base node;
* random extra edges: ``int(0.05 E)`` attempts (``E`` the edges so far), each
  joining a uniform unjoined pair if one end is an open base node (GOOD's
  ``perturb(G, 0.05, id=role_id)``, see :mod:`~grprune.data.synthetic.shapes`);
* node features: all ones, shape (N, 1); no edge features;
* label noise (hyperparameter ``label_noise``, GOOD: 0.1): with that
  probability the label is redrawn uniformly over the 3 classes (so it may
  stay the motif: about 2/3 of the redrawn labels change, 6.7% overall);
  otherwise the label is the motif. ``label_noise=0`` gives clean labels. The
  motif, not the noisy label, drives the concept-shift correlations, as in GOOD.

Covariate shift (sizes as GOOD: 18,000 / 3,000 / 3,000 / 3,000 / 3,000)
    ``int(0.8 N)`` training-domain graphs, ``int(0.1 N)`` OOD-valid and
    ``int(0.1 N)`` OOD-test graphs. The training-domain graphs are shuffled and
    the last ``2 * int(0.1 N)`` become ``id-valid`` and ``id-test``.

    * ``basis``: training bases uniform over wheel/tree/ladder; OOD-valid star;
      OOD-test path; width 10 ± 5. ``env`` = base id (0 wheel, 1 tree,
      2 ladder, 3 star, 4 path).
    * ``size``: width domain ``d`` with centres (6, 10, 15, 30, 70): training
      ``d`` uniform over 0/1/2, OOD-valid ``d = 3``, OOD-test ``d = 4``; base
      uniform over all five. ``env`` = ``d``.

Concept shift (sizes as GOOD: 12,600 / 6,000 / 6,000 / 2,700 / 2,700)
    Three training environments of ``int(0.6 N) // 3`` graphs with spurious
    ratios 0.99, 0.97, 0.95; ``int(0.2 N)`` OOD-valid graphs with ratio 0.3 and
    ``int(0.2 N)`` OOD-test graphs with ratio 0.0. With probability = ratio the
    domain equals the motif id, otherwise it is uniform over the three
    domains (so it still equals the motif a third of the time, also at ratio 0).
    The training graphs are shuffled and the last ``2 * int(0.15 * n_train)``
    become ``id-valid`` and ``id-test``.

    * ``basis``: domain = base among wheel/tree/ladder; width 10 ± 5.
    * ``size``: domain = width centre among (10, 40, 70); base uniform over all five.

    ``env`` = training environment 0/1/2 (kept by ``id-valid``/``id-test``);
    GOOD gives its OOD parts no environment, grprune uses 3 (OOD-valid) and
    4 (OOD-test).

Choices where GOOD is ambiguous or not reproducible
    * GOOD draws from Python's and NumPy's global generators; grprune draws
      everything from one ``numpy.random.Generator`` seeded with ``seed``, so
      the graphs differ from GOOD's release but follow the same distribution,
      and the same parameters give byte-identical graphs and splits.
    * GOOD's ``no_shift`` variant is not offered.
    * Graph order: training-domain (or training-environment) graphs first, then
      OOD-valid, then OOD-test; the ID hold-outs are a random subset of the
      first block. ``data.limit`` therefore takes training graphs in generation
      order (for concept shift, the first environment first).
    * Edges are stored in both directions (GOOD's ``from_networkx`` does the same).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from grprune.data.cache import CACHE_DIRNAME, load_or_build
from grprune.data.dataset import GraphDataset
from grprune.hparams import Param
from grprune.data.registry import DATASETS, DatasetSource
from grprune.data.synthetic.shapes import (
    BASES,
    MOTIFS,
    PART_CODES,
    PART_NAMES,
    SyntheticGraphs,
    add_random_edges,
    attach_motifs,
    base_graph,
    split_indices,
)
from grprune.errors import GrpruneError

#: bump when the generated graphs change for the same parameters (invalidates caches)
GENERATOR_VERSION = 1
N_GRAPHS = 30_000
WIDTH_JITTER = 5
BASIS_WIDTH = 10
COVARIATE_WIDTHS = (6, 10, 15, 30, 70)
CONCEPT_WIDTHS = (10, 40, 70)
TRAIN_SPURIOUS = (0.99, 0.97, 0.95)
VALID_SPURIOUS = 0.3
TEST_SPURIOUS = 0.0
EXTRA_EDGE_RATIO = 0.05
LABEL_NOISE = 0.1
SPLITS = ("basis", "size")
SHIFTS = ("covariate", "concept")


def tree_height(width: int) -> int:
    """GOOD's tree height for a base width: ``max(1, floor(log2 width) - 1)``."""
    return max(1, int(width).bit_length() - 2)


def _check(split: str, shift: str, seed: int, label_noise: float, n_graphs: int) -> None:
    if split not in SPLITS:
        raise GrpruneError(f"unknown GOOD-Motif split {split!r}. Choices: {', '.join(SPLITS)}")
    if shift not in SHIFTS:
        raise GrpruneError(f"unknown GOOD-Motif shift {shift!r}. Choices: {', '.join(SHIFTS)}")
    if int(seed) < 0:
        raise GrpruneError(f"data.seed must be a non-negative integer, got {seed}")
    if not 0.0 <= float(label_noise) <= 1.0:
        raise GrpruneError(f"data.label_noise must be in [0, 1], got {label_noise}")
    if int(n_graphs) < 30:
        raise GrpruneError(f"GOOD-Motif needs at least 30 graphs, got {n_graphs}")


def _spurious(motif: np.ndarray, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Domain ids 0..2: the motif id with probability ``ratio``, else uniform."""
    keep = rng.random(len(motif)) < ratio
    return np.where(keep, motif, rng.integers(0, 3, size=len(motif)))


def plan_good_motif(split: str, shift: str, n_graphs: int, rng: np.random.Generator
                    ) -> dict[str, np.ndarray]:
    """Draw what each graph is made of and which part it belongs to.

    Parameters
    ----------
    split : {"basis", "size"}
    shift : {"covariate", "concept"}
    n_graphs : int
        Total number of graphs (GOOD: 30,000).
    rng : np.random.Generator

    Returns
    -------
    dict of str to np.ndarray of int64, each shape (G,)
        ``motifs``, ``bases`` (index into :data:`~grprune.data.synthetic.shapes.BASES`),
        ``widths``, ``envs`` and ``part`` (index into ``PART_NAMES``).
    """
    n = int(n_graphs)
    jitter: Callable[[int], np.ndarray] = (  # noqa: E731
        lambda k: rng.integers(-WIDTH_JITTER, WIDTH_JITTER + 1, size=k))
    if shift == "covariate":
        n_train, n_ood = int(n * 0.8), int(n * 0.1)
        blocks = []
        for block, size in enumerate((n_train, n_ood, n_ood)):
            motifs = rng.integers(0, 3, size=size)
            if split == "basis":
                bases = rng.integers(0, 3, size=size) if block == 0 else np.full(size, 2 + block)
                widths = BASIS_WIDTH + jitter(size)
                envs = bases
            else:
                domain = rng.integers(0, 3, size=size) if block == 0 else np.full(size, 2 + block)
                bases = rng.integers(0, len(BASES), size=size)
                widths = np.asarray(COVARIATE_WIDTHS)[domain] + jitter(size)
                envs = domain
            blocks.append((motifs, bases, widths, envs,
                           np.full(size, (PART_CODES["train"], PART_CODES["valid"],
                                          PART_CODES["test"])[block])))
        n_id = n_ood
    else:
        per_env, n_ood = int(n * 0.6) // len(TRAIN_SPURIOUS), int(n * 0.2)
        ratios = [(r, per_env, e, "train") for e, r in enumerate(TRAIN_SPURIOUS)]
        ratios += [(VALID_SPURIOUS, n_ood, 3, "valid"), (TEST_SPURIOUS, n_ood, 4, "test")]
        blocks = []
        for ratio, size, env, part_name in ratios:
            motifs = rng.integers(0, 3, size=size)
            domain = _spurious(motifs, ratio, rng)
            if split == "basis":
                bases, widths = domain, BASIS_WIDTH + jitter(size)
            else:
                bases = rng.integers(0, len(BASES), size=size)
                widths = np.asarray(CONCEPT_WIDTHS)[domain] + jitter(size)
            blocks.append((motifs, bases, widths, np.full(size, env),
                           np.full(size, PART_CODES[part_name])))
        n_id = int(per_env * len(TRAIN_SPURIOUS) * 0.15)
    motifs, bases, widths, envs, part = (np.concatenate(x).astype(np.int64) for x in zip(*blocks))
    train = np.flatnonzero(part == PART_CODES["train"])
    held = rng.permutation(train)[len(train) - 2 * n_id:]
    part[held[:n_id]] = PART_CODES["id-valid"]
    part[held[n_id:]] = PART_CODES["id-test"]
    return {"motifs": motifs, "bases": bases, "widths": widths, "envs": envs, "part": part}


def generate_good_motif(split: str = "basis", shift: str = "covariate", seed: int = 0,
                        label_noise: float = LABEL_NOISE, n_graphs: int = N_GRAPHS
                        ) -> SyntheticGraphs:
    """Generate GOOD-Motif graphs (see the module docstring for the recipe).

    Parameters
    ----------
    split : {"basis", "size"}
        Domain: base graph type or base width.
    shift : {"covariate", "concept"}
    seed : int
        Seed of the ``numpy.random.Generator`` that draws everything.
    label_noise : float in [0, 1]
        Probability that a label is redrawn uniformly.
    n_graphs : int
        Number of graphs (GOOD: 30,000; smaller for tests).

    Returns
    -------
    SyntheticGraphs
        ``sizes`` holds the width ``w`` (also for trees, whose height is
        :func:`tree_height` of it).

    Raises
    ------
    GrpruneError
        On an unknown split or shift, a negative seed, ``label_noise`` outside
        [0, 1] or fewer than 30 graphs.

    Examples
    --------
    >>> data = generate_good_motif("basis", "covariate", seed=0, n_graphs=300)
    >>> {k: len(v) for k, v in data.split_indices().items()}
    {'train': 180, 'valid': 30, 'test': 30, 'id-valid': 30, 'id-test': 30}
    """
    _check(split, shift, seed, label_noise, n_graphs)
    rng = np.random.default_rng(int(seed))
    plan = plan_good_motif(split, shift, n_graphs, rng)
    noisy = rng.random(len(plan["motifs"])) < float(label_noise)
    labels = np.where(noisy, rng.integers(0, 3, size=len(noisy)), plan["motifs"])
    num_nodes, edges, gts = [], [], []
    for motif, base, width in zip(plan["motifs"].tolist(), plan["bases"].tolist(),
                                  plan["widths"].tolist()):
        kind = BASES[base]
        shape = base_graph(kind, tree_height(width) if kind == "tree" else width)
        n, e, gt, open_nodes = attach_motifs(shape, (MOTIFS[motif],), rng)
        extra = add_random_edges(n, e, open_nodes, EXTRA_EDGE_RATIO, rng)
        if len(extra):
            e = np.concatenate([e, extra])
            gt = np.concatenate([gt, np.zeros(len(extra), dtype=bool)])
        num_nodes.append(n)
        edges.append(e)
        gts.append(gt)
    return SyntheticGraphs(
        num_nodes=np.asarray(num_nodes, dtype=np.int64), edges=edges, edge_gt=gts,
        labels=labels.astype(np.int64), motifs=plan["motifs"], bases=plan["bases"],
        sizes=plan["widths"], envs=plan["envs"], part=plan["part"])


def cache_key(split: str, shift: str, seed: int, label_noise: float, n_graphs: int) -> dict:
    """Everything that decides the generated graphs, for the on-disk cache."""
    from grprune.compat import dgl

    return {"format": "grprune-good-motif", "generator_version": GENERATOR_VERSION,
            "split": split, "shift": shift, "seed": int(seed),
            "label_noise": float(label_noise), "n_graphs_requested": int(n_graphs),
            "numpy_version": np.__version__, "dgl_version": dgl.__version__}


def cache_dir(root: Path, split: str, shift: str, seed: int, label_noise: float,
              n_graphs: int) -> Path:
    """``<root>/good_motif/grprune_v1/<split>-<shift>-seed<seed>-noise<p>[-n<G>]``."""
    name = f"{split}-{shift}-seed{int(seed)}-noise{float(label_noise)!r}"
    if int(n_graphs) != N_GRAPHS:
        name += f"-n{int(n_graphs)}"
    return Path(root) / "good_motif" / CACHE_DIRNAME / name


def load_good_motif(root: Path, *, split: str = "basis", shift: str = "covariate",
                    seed: int = 0, label_noise: float = LABEL_NOISE,
                    n_graphs: int = N_GRAPHS, name: str = "good-motif") -> GraphDataset:
    """Generate (or read from the cache) GOOD-Motif as a :class:`GraphDataset`.

    Parameters
    ----------
    root : Path
        Data root; the cache lives in :func:`cache_dir`.
    split, shift, seed, label_noise, n_graphs
        See :func:`generate_good_motif`.
    name : str
        Dataset name recorded in the result.

    Returns
    -------
    GraphDataset
        Parts ``train``, ``valid`` (OOD), ``test`` (OOD), ``id-valid``,
        ``id-test``; ``envs`` as in the module docstring; graphs with
        ``ndata['feat']`` float32 (N, 1) of ones and ``edata['edge_gt']``.

    Raises
    ------
    GrpruneError
        On bad parameters (see :func:`generate_good_motif`).
    """
    _check(split, shift, seed, label_noise, n_graphs)
    directory = cache_dir(root, split, shift, seed, label_noise, n_graphs)
    key = cache_key(split, shift, seed, label_noise, n_graphs)
    timing: dict[str, float] = {}

    def build():
        t0 = time.perf_counter()
        data = generate_good_motif(split, shift, seed, label_noise, n_graphs)
        t1 = time.perf_counter()
        graphs = data.to_dgl()
        timing.update(generate_s=t1 - t0, to_dgl_s=time.perf_counter() - t1)
        tensors = {k: torch.from_numpy(getattr(data, k)) for k in
                   ("labels", "envs", "part", "motifs", "bases", "sizes")}
        return graphs, tensors, {"generate_seconds": round(t1 - t0 + timing["to_dgl_s"], 3)}

    t0 = time.perf_counter()
    graphs, tensors, meta, status = load_or_build(
        directory, key, build, ("generator_version",),
        ("labels", "envs", "part", "motifs", "bases", "sizes"))
    load_s = time.perf_counter() - t0
    labels, envs = tensors["labels"].long(), tensors["envs"].long()
    parts = split_indices(tensors["part"].numpy(), PART_NAMES)
    info = _info(tensors, parts)
    info.update(
        dataset=name, split=split, shift=shift, seed=int(seed), label_noise=float(label_noise),
        generator="GOOD-Motif (Gui et al. 2022), regenerated by grprune",
        generator_version=GENERATOR_VERSION, n_graphs=len(graphs),
        split_sizes={k: int(len(v)) for k, v in parts.items()},
        domain="base graph" if split == "basis" else "base width",
        env_meaning=_env_meaning(split, shift),
        recipe={"bases": list(BASES), "classes": list(MOTIFS), "width_jitter": WIDTH_JITTER,
                "widths": (BASIS_WIDTH if split == "basis" else
                           list(COVARIATE_WIDTHS if shift == "covariate" else CONCEPT_WIDTHS)),
                "tree_height": "max(1, floor(log2 width) - 1)",
                "extra_edge_ratio": EXTRA_EDGE_RATIO, "node_features": "ones (N, 1)",
                **({"spurious_ratio": {"train": list(TRAIN_SPURIOUS), "valid": VALID_SPURIOUS,
                                       "test": TEST_SPURIOUS}} if shift == "concept" else {})},
        cache=status, cache_dir=str(directory), load_seconds=round(load_s, 3),
        generate_seconds=meta.get("generate_seconds"))
    return GraphDataset(name, graphs, labels, parts, num_classes=3, metric="accuracy",
                        atom_encoder="linear", envs=envs, info=info)


def _env_meaning(split: str, shift: str) -> str:
    if shift == "concept":
        return "training environment 0/1/2 (spurious ratio 0.99/0.97/0.95); 3 OOD-valid, 4 OOD-test"
    if split == "basis":
        return "base graph: " + ", ".join(f"{i} {b}" for i, b in enumerate(BASES))
    return "width domain: " + ", ".join(f"{i} width {w}±5" for i, w in enumerate(COVARIATE_WIDTHS))


def _info(tensors: dict[str, torch.Tensor], parts: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per-part counts of labels, motifs, bases and envs, and the label-noise rate."""
    out: dict[str, Any] = {"label_counts": {}, "env_counts": {}, "base_counts": {}}
    labels, motifs = tensors["labels"].numpy(), tensors["motifs"].numpy()
    for part, idx in parts.items():
        for key, arr, names in (("label_counts", labels, MOTIFS),
                                ("env_counts", tensors["envs"].numpy(), None),
                                ("base_counts", tensors["bases"].numpy(), BASES)):
            values, counts = np.unique(arr[idx], return_counts=True)
            out[key][part] = {(names[v] if names else str(v)): int(c)
                              for v, c in zip(values.tolist(), counts.tolist())}
    out["noisy_labels"] = int((labels != motifs).sum())
    return out


@DATASETS.register("good-motif", aliases=("goodmotif", "motif"))
class GoodMotif(DatasetSource):
    """GOOD-Motif: synthetic motif graphs with a base-graph or base-size shift.

    See :mod:`grprune.data.synthetic.good_motif` for the recipe.
    """

    splits = SPLITS
    parts = ("train", "valid", "test", "id-valid", "id-test")
    params = {
        "split": Param("basis", "domain: basis (base graph type) or size (base width)"),
        "shift": Param("covariate", "covariate (unseen domains in valid/test) or concept "
                                    "(domain-label correlation 0.99/0.97/0.95 in train, 0.3 "
                                    "valid, 0 test)", choices=SHIFTS),
        "seed": Param(0, "seed of the graph generator (same seed: identical graphs and "
                         "splits)", low=0),
        "label_noise": Param(LABEL_NOISE, "probability that a label is redrawn uniformly "
                                          "(GOOD: 0.1; 0 = clean)", low=0.0, high=1.0),
    }
    metric = "accuracy"
    num_classes = 3
    description = ("GOOD-Motif (Gui et al. 2022): house/cycle/crane motif on a wheel/tree/"
                   "ladder/star/path base, 30,000 generated graphs")
    recommended = {"encoder.layers": 4, "encoder.hidden": 300, "encoder.virtual_node": False,
                   "train.warmup_epochs": 10, "train.patience": 10}

    def load(self, *, root: Path, download: bool = False, split: str = "basis",
             shift: str = "covariate", seed: int = 0, label_noise: float = LABEL_NOISE
             ) -> GraphDataset:
        """Generate or read the cached dataset; ``download`` is ignored (nothing to fetch).

        Raises
        ------
        GrpruneError
            On a bad split, shift, seed or label noise.
        """
        return load_good_motif(Path(root), split=self.resolve_split(split), shift=shift,
                               seed=seed, label_noise=label_noise,
                               name=self.registered_name or "good-motif")
