"""GOOD-Motif and SPMotif: generators, splits, ground truth, determinism and caching."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from grprune.data import DATASETS, load_dataset
from grprune.data.synthetic import good_motif as gm
from grprune.data.synthetic import shapes
from grprune.data.synthetic import spmotif as sp
from grprune.errors import GrpruneError

GOOD_COVARIATE_SIZES = {"train": 18000, "valid": 3000, "test": 3000,
                        "id-valid": 3000, "id-test": 3000}
GOOD_CONCEPT_SIZES = {"train": 12600, "valid": 6000, "test": 6000,
                      "id-valid": 2700, "id-test": 2700}


# -- helpers ---------------------------------------------------------------------
def motifs_of_graph(g) -> list:
    src, dst = (t.numpy() for t in g.edges())
    return shapes.motif_components(src, dst, g.edata["edge_gt"].numpy())


def check_graphs(ds, motif_names, feat_dim=1, sample_every=25):
    """Check every graph (vectorised); return the motif id its ``edge_gt`` edges form.

    Edges must be symmetric and interleaved, ``edge_gt`` int64 and equal on both
    directions, features float32 (N, feat_dim), no edge features, and the
    ground-truth edges exactly one motif: 5 nodes, and either 5 edges with all
    degrees 2 (cycle) or 6 edges with degrees (2, 2, 2, 3, 3), the two
    degree-3 nodes joined (house) or not (crane). Every ``sample_every``-th
    graph is also identified with :func:`shapes.motif_components`.
    """
    graphs = ds.graphs
    assert all("feat" not in g.edata for g in graphs)
    n_nodes = np.array([g.num_nodes() for g in graphs])
    pairs = [g.edges() for g in graphs]
    src = torch.cat([p[0] for p in pairs]).numpy()
    dst = torch.cat([p[1] for p in pairs]).numpy()
    gt_t = torch.cat([g.edata["edge_gt"] for g in graphs])
    feat = torch.cat([g.ndata["feat"] for g in graphs])
    assert gt_t.dtype == torch.int64 and feat.dtype == torch.float32
    assert tuple(feat.shape) == (int(n_nodes.sum()), feat_dim)
    n_edges = np.array([len(p[0]) for p in pairs])
    assert (n_edges % 2 == 0).all()
    assert (src[0::2] == dst[1::2]).all() and (dst[0::2] == src[1::2]).all()
    gt = gt_t.numpy()
    assert set(np.unique(gt).tolist()) <= {0, 1} and (gt[0::2] == gt[1::2]).all()
    offset = np.repeat(np.cumsum(n_nodes) - n_nodes, n_edges)
    graph_of_edge = np.repeat(np.arange(len(graphs)), n_edges)
    keep = np.flatnonzero(gt[0::2] == 1) * 2  # one direction of each ground-truth edge
    u, v, owner = src[keep] + offset[keep], dst[keep] + offset[keep], graph_of_edge[keep]
    G = len(graphs)
    n_gt_edges = np.bincount(owner, minlength=G)
    degree = np.bincount(np.concatenate([u, v]), minlength=int(n_nodes.sum()))
    graph_of_node = np.repeat(np.arange(G), n_nodes)
    in_gt = degree > 0
    n_gt_nodes = np.bincount(graph_of_node[in_gt], minlength=G)
    n_deg2 = np.bincount(graph_of_node[degree == 2], minlength=G)
    n_deg3 = np.bincount(graph_of_node[degree == 3], minlength=G)
    hubs_joined = np.bincount(owner[(degree[u] == 3) & (degree[v] == 3)], minlength=G)
    assert (n_gt_nodes == 5).all()
    cycle = (n_gt_edges == 5) & (n_deg2 == 5)
    six = (n_gt_edges == 6) & (n_deg2 == 3) & (n_deg3 == 2)
    house, crane = six & (hubs_joined == 1), six & (hubs_joined == 0)
    assert (cycle ^ house ^ crane).all() and ((cycle.astype(int) + house + crane) == 1).all()
    index = {name: i for i, name in enumerate(motif_names)}
    found = np.select([house, cycle, crane], [index["house"], index["cycle"], index["crane"]])
    for i in range(0, G, sample_every):
        assert motifs_of_graph(graphs[i]) == [motif_names[found[i]]], i
    return found


def check_parts(ds, expected):
    assert {k: len(v) for k, v in ds.splits.items()} == expected
    seen = np.concatenate(list(ds.splits.values()))
    assert len(np.unique(seen)) == len(seen)  # pairwise disjoint


def same_data(a: shapes.SyntheticGraphs, b: shapes.SyntheticGraphs) -> bool:
    arrays = ("num_nodes", "labels", "motifs", "bases", "sizes", "envs", "part")
    if any(not np.array_equal(getattr(a, k), getattr(b, k)) for k in arrays):
        return False
    if any(not np.array_equal(x, y) for x, y in zip(a.edges, b.edges)):
        return False
    if any(not np.array_equal(x, y) for x, y in zip(a.edge_gt, b.edge_gt)):
        return False
    if (a.feat is None) != (b.feat is None):
        return False
    return a.feat is None or (b.feat is not None and all(
        x.tobytes() == y.tobytes() for x, y in zip(a.feat, b.feat)))


def same_graphs(ga, gb) -> bool:
    for a, b in zip(ga, gb):
        if a.num_nodes() != b.num_nodes():
            return False
        for x, y in zip(a.edges(), b.edges()):
            if not torch.equal(x, y):
                return False
        if not torch.equal(a.ndata["feat"], b.ndata["feat"]):
            return False
        if not torch.equal(a.edata["edge_gt"], b.edata["edge_gt"]):
            return False
    return len(ga) == len(gb)


# -- full-size datasets, built once per session ----------------------------------
@pytest.fixture(scope="session")
def good_basis(data_root):
    return load_dataset("good-motif", split="basis")


@pytest.fixture(scope="session")
def spmotif_ds(data_root):
    return load_dataset("spurious-motif", split="correlation")  # an alias and the split flag


# -- registry --------------------------------------------------------------------
def test_registered_with_aliases():
    for name in ("good-motif", "goodmotif", "GOOD_Motif", "motif"):
        assert DATASETS.get(name) is gm.GoodMotif
    for name in ("spmotif", "SPMotif", "spurious-motif", "sp-motif"):
        assert DATASETS.get(name) is sp.SPMotif
    good = gm.GoodMotif.resolve_params({})
    assert good == {"split": "basis", "shift": "covariate", "seed": 0, "label_noise": 0.1}
    assert gm.GoodMotif.choices["shift"] == ("covariate", "concept")
    assert gm.GoodMotif.parts == ("train", "valid", "test", "id-valid", "id-test")
    assert sp.SPMotif.resolve_params({"split": "Correlation", "bias": "0.5"})["bias"] == 0.5
    for cls in (gm.GoodMotif, sp.SPMotif):
        assert cls.num_classes == 3 and cls.metric == "accuracy" and cls.description
        assert set(cls.help) == set(cls.defaults)
    assert gm.GoodMotif.recommended["encoder.layers"] == 4
    assert sp.SPMotif.recommended == {"encoder.layers": 5, "encoder.virtual_node": False}


@pytest.mark.parametrize("name, params", [
    ("spmotif", {"bias": 1.0}), ("spmotif", {"bias": 0.0}), ("spmotif", {"bias": -0.2}),
    ("spmotif", {"bias": "high"}), ("spmotif", {"motifs": 3}), ("spmotif", {"seed": -1}),
    ("spmotif", {"shift": "covariate"}), ("spmotif", {"split": "basis"}),
    ("good-motif", {"shift": "no-shift"}), ("good-motif", {"split": "scaffold"}),
    ("good-motif", {"label_noise": 1.5}), ("good-motif", {"seed": -3}),
    ("good-motif", {"bias": 0.5}),
])
def test_bad_parameters_raise(name, params, tmp_path):
    with pytest.raises(GrpruneError):
        load_dataset(name, root=tmp_path, **params)
    assert not any(tmp_path.iterdir())  # nothing generated


# -- shapes ----------------------------------------------------------------------
def test_base_graphs_match_networkx():
    nx = pytest.importorskip("networkx")

    def same(shape, graph):
        ours = {tuple(sorted(map(int, e))) for e in shape.edges}
        return (shape.num_nodes == graph.number_of_nodes() and len(ours) == len(shape.edges)
                and ours == {tuple(sorted(e)) for e in graph.edges})

    for w in range(1, 40):
        assert same(shapes.base_graph("wheel", w), nx.wheel_graph(w)), w
        assert same(shapes.base_graph("ladder", w), nx.ladder_graph(w)), w
        assert same(shapes.base_graph("star", w), nx.star_graph(w)), w
        assert same(shapes.base_graph("path", w), nx.path_graph(w)), w
    for h in range(6):
        for r in (2, 3):
            assert same(shapes.base_graph("tree", h, r), nx.balanced_tree(r, h)), (h, r)
    star, path = shapes.base_graph("star", 4), shapes.base_graph("path", 4)
    assert star.open_nodes.tolist() == [True, False, False, False, False]
    assert path.open_nodes.tolist() == [False, True, True, False]


def test_motif_templates():
    nx = pytest.importorskip("networkx")
    for name, edges in shapes.MOTIF_EDGES.items():
        assert shapes.identify_motif(np.asarray(edges) + 7) == name
    assert nx.is_isomorphic(nx.Graph(shapes.MOTIF_EDGES["house"]), nx.house_graph())
    assert nx.is_isomorphic(nx.Graph(shapes.MOTIF_EDGES["cycle"]), nx.cycle_graph(5))
    assert nx.is_isomorphic(nx.Graph(shapes.MOTIF_EDGES["crane"]),
                            nx.complete_bipartite_graph(2, 3))
    assert shapes.identify_motif(np.array([(0, 1), (1, 2), (2, 0)])) is None
    assert shapes.identify_motif(np.array(shapes.MOTIF_EDGES["house"][:-1])) == "cycle"
    assert shapes.identify_motif(np.array(shapes.MOTIF_EDGES["house"][1:])) is None


def test_good_tree_height():
    assert [gm.tree_height(w) for w in (1, 3, 4, 7, 8, 15, 16, 70)] == [1, 1, 1, 1, 2, 2, 3, 5]


# -- GOOD-Motif --------------------------------------------------------------------
def test_good_basis_covariate_full(good_basis):
    ds = good_basis
    assert ds.name == "good-motif" and ds.num_classes == 3 and ds.metric == "accuracy"
    assert ds.atom_encoder == "linear" and ds.has_edge_gt and len(ds) == 30000
    check_parts(ds, GOOD_COVARIATE_SIZES)
    envs = ds.envs.numpy()
    assert set(envs[ds.splits["train"]].tolist()) == {0, 1, 2}  # wheel, tree, ladder
    assert set(envs[ds.splits["id-valid"]].tolist()) == {0, 1, 2}
    assert set(envs[ds.splits["id-test"]].tolist()) == {0, 1, 2}
    assert set(envs[ds.splits["valid"]].tolist()) == {3}  # star
    assert set(envs[ds.splits["test"]].tolist()) == {4}  # path
    info = ds.info
    assert info["split_sizes"] == GOOD_COVARIATE_SIZES and info["n_graphs"] == 30000
    assert info["shift"] == "covariate" and info["split"] == "basis"
    # "hit" when another test module (explain, device) generated it first this session
    assert info["generator_version"] == gm.GENERATOR_VERSION and info["cache"] in ("built", "hit")
    assert set(info["base_counts"]["valid"]) == {"star"}
    assert set(info["base_counts"]["test"]) == {"path"}
    json.dumps(info)
    motif = check_graphs(ds, shapes.MOTIFS, feat_dim=1)
    assert all((g.ndata["feat"] == 1).all() for g in ds.graphs[:200])
    labels = ds.labels.numpy()
    # GOOD's label noise: 10% redrawn uniformly -> about 6.7% differ from the motif
    assert abs((labels != motif).mean() - 0.1 * 2 / 3) < 0.01
    assert info["noisy_labels"] == int((labels != motif).sum())
    for part in ("train", "valid", "test"):
        share = np.bincount(motif[ds.splits[part]], minlength=3) / len(ds.splits[part])
        assert np.abs(share - 1 / 3).max() < 0.04, (part, share)


def test_good_cache_hit_via_alias(good_basis):
    again = load_dataset("motif", split="basis", shift="covariate")
    assert again.info["cache"] == "hit" and again.info["cache_dir"] == good_basis.info["cache_dir"]
    assert torch.equal(again.labels, good_basis.labels)
    assert torch.equal(again.envs, good_basis.envs)
    assert all(np.array_equal(again.splits[k], good_basis.splits[k]) for k in good_basis.splits)
    assert same_graphs(again.graphs[::97], good_basis.graphs[::97])
    assert {k: v for k, v in again.info.items() if k not in ("cache", "load_seconds")} == \
        {k: v for k, v in good_basis.info.items() if k not in ("cache", "load_seconds")}


@pytest.mark.parametrize("split", ["basis", "size"])
@pytest.mark.parametrize("shift", ["covariate", "concept"])
def test_good_plan_full_size(split, shift):
    """Split sizes and domain rules at GOOD's size (30,000 graphs), without building graphs."""
    plan = gm.plan_good_motif(split, shift, 30000, np.random.default_rng(0))
    part = plan["part"]
    sizes = {name: int((part == code).sum()) for name, code in shapes.PART_CODES.items()}
    assert sizes == (GOOD_COVARIATE_SIZES if shift == "covariate" else GOOD_CONCEPT_SIZES)
    assert (part >= 0).all()
    code = shapes.PART_CODES
    train_like = np.isin(part, [code["train"], code["id-valid"], code["id-test"]])
    bases, widths, motifs, envs = plan["bases"], plan["widths"], plan["motifs"], plan["envs"]
    if split == "basis":
        assert widths.min() == 5 and widths.max() == 15
    if shift == "covariate":
        if split == "basis":
            assert set(bases[train_like].tolist()) == {0, 1, 2}
            assert set(bases[part == code["valid"]].tolist()) == {3}
            assert set(bases[part == code["test"]].tolist()) == {4}
            assert np.array_equal(envs, bases)
        else:
            assert set(bases.tolist()) == {0, 1, 2, 3, 4}
            assert widths[train_like].min() == 1 and widths[train_like].max() == 20
            assert set(envs[train_like].tolist()) == {0, 1, 2}
            assert widths[part == code["valid"]].min() == 25
            assert widths[part == code["valid"]].max() == 35
            assert widths[part == code["test"]].min() == 65
            assert widths[part == code["test"]].max() == 75
    else:
        if split == "basis":
            domain = bases
            assert set(bases.tolist()) == {0, 1, 2}
        else:
            domain = np.digitize(widths, [25, 55])  # centres 10 / 40 / 70, ±5
        # P(domain == motif) = r + (1 - r) / 3
        for env, ratio in enumerate(gm.TRAIN_SPURIOUS):
            hit = (domain == motifs)[train_like & (envs == env)].mean()
            assert abs(hit - (ratio + (1 - ratio) / 3)) < 0.01, (env, hit)
        for name, env, ratio in (("valid", 3, 0.3), ("test", 4, 0.0)):
            assert set(envs[part == code[name]].tolist()) == {env}
            hit = (domain == motifs)[part == code[name]].mean()
            assert abs(hit - (ratio + (1 - ratio) / 3)) < 0.03, (name, hit)


@pytest.mark.parametrize("split, shift", [("basis", "covariate"), ("size", "covariate"),
                                          ("basis", "concept"), ("size", "concept")])
def test_good_generator_structure(split, shift):
    data = gm.generate_good_motif(split, shift, seed=3, label_noise=0.0, n_graphs=600)
    assert np.array_equal(data.labels, data.motifs)  # no noise
    for i in range(len(data)):
        kind = shapes.BASES[data.bases[i]]
        width = int(data.sizes[i])
        base = shapes.base_graph(kind, gm.tree_height(width) if kind == "tree" else width)
        assert data.num_nodes[i] == base.num_nodes + 5
        edges, gt = data.edges[i], data.edge_gt[i]
        n_built = len(base.edges) + len(shapes.MOTIF_EDGES[shapes.MOTIFS[data.motifs[i]]]) + 1
        assert np.array_equal(edges[: len(base.edges)], base.edges)
        extra = edges[n_built:]
        assert len(extra) <= int(0.05 * n_built)
        is_open = np.zeros(base.num_nodes + 5, dtype=bool)
        is_open[: base.num_nodes] = base.open_nodes
        assert all(is_open[u] or is_open[v] for u, v in extra.tolist())
        assert len({tuple(sorted(e)) for e in edges.tolist()}) == len(edges)  # simple graph
        assert (edges[:, 0] != edges[:, 1]).all()
        comps = shapes.motif_components(edges[:, 0], edges[:, 1], gt)
        assert comps == [shapes.MOTIFS[data.motifs[i]]]


def test_good_determinism():
    for split, shift in (("basis", "covariate"), ("size", "concept")):
        a = gm.generate_good_motif(split, shift, seed=7, n_graphs=900)
        b = gm.generate_good_motif(split, shift, seed=7, n_graphs=900)
        assert same_data(a, b)
        assert same_graphs(a.to_dgl()[:100], b.to_dgl()[:100])
        c = gm.generate_good_motif(split, shift, seed=8, n_graphs=900)
        assert not same_data(a, c)


def test_good_cache_rebuilds_corrupt_and_stale(tmp_path):
    first = gm.load_good_motif(tmp_path, split="size", shift="concept", n_graphs=300)
    assert first.info["cache"] == "built"
    assert first.info["split_sizes"] == {"train": 126, "valid": 60, "test": 60,
                                         "id-valid": 27, "id-test": 27}
    hit = gm.load_good_motif(tmp_path, split="size", shift="concept", n_graphs=300)
    assert hit.info["cache"] == "hit"
    directory = gm.cache_dir(tmp_path, "size", "concept", 0, 0.1, 300)
    assert first.info["cache_dir"] == str(directory)
    blob = bytearray((directory / "graphs.bin").read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (directory / "graphs.bin").write_bytes(bytes(blob))
    rebuilt = gm.load_good_motif(tmp_path, split="size", shift="concept", n_graphs=300)
    assert rebuilt.info["cache"].startswith("rebuilt") and "corrupt" in rebuilt.info["cache"]
    assert same_graphs(rebuilt.graphs, first.graphs)
    assert torch.equal(rebuilt.labels, first.labels) and torch.equal(rebuilt.envs, first.envs)
    meta = json.loads((directory / "meta.json").read_text())
    meta["generator_version"] = -1
    (directory / "meta.json").write_text(json.dumps(meta))
    stale = gm.load_good_motif(tmp_path, split="size", shift="concept", n_graphs=300)
    assert "generator_version changed" in stale.info["cache"]
    # another parameter value never reuses this cache
    other = gm.load_good_motif(tmp_path, split="size", shift="concept", n_graphs=300,
                               label_noise=0.0)
    assert other.info["cache"] == "built" and other.info["cache_dir"] != str(directory)
    assert gm.cache_key("size", "concept", 0, 0.1, 300) != gm.cache_key("size", "concept", 1,
                                                                          0.1, 300)


# -- SPMotif -----------------------------------------------------------------------
def test_spmotif_full(spmotif_ds):
    ds = spmotif_ds
    assert len(ds) == 15000 and ds.has_edge_gt and ds.atom_encoder == "linear"
    check_parts(ds, {"train": 9000, "valid": 3000, "test": 3000})
    assert ds.info["split"] == "correlation" and ds.info["bias"] == 0.9
    assert ds.info["motifs"] == 1 and ds.info["cache"] in ("built", "hit")  # test_contract may build it first
    json.dumps(ds.info)
    labels, envs = ds.labels.numpy(), ds.envs.numpy()
    for part, per_class in (("train", 3000), ("valid", 1000), ("test", 1000)):
        assert np.bincount(labels[ds.splits[part]], minlength=3).tolist() == [per_class] * 3
    found = check_graphs(ds, sp.SP_MOTIFS, feat_dim=4)
    assert np.array_equal(found, labels)  # the label is the motif, no noise
    for part, target in (("train", None), ("valid", 1 / 3), ("test", 1 / 3)):
        idx = ds.splits[part]
        table = np.zeros((3, 3))
        np.add.at(table, (labels[idx], envs[idx]), 1)
        table /= table.sum(axis=1, keepdims=True)
        expected = (np.full((3, 3), 0.05) + np.eye(3) * 0.85) if target is None else target
        # 4 standard deviations of a proportion over 3,000 (train) or 1,000 graphs
        assert np.abs(table - expected).max() < (0.025 if target is None else 0.06), (part, table)
    nodes = np.array([g.num_nodes() for g in ds.graphs])
    assert nodes[ds.splits["test"]].mean() > 2 * nodes[ds.splits["valid"]].mean()
    feats = torch.cat([g.ndata["feat"] for g in ds.graphs[:500]])
    assert feats.min() >= 0 and feats.max() < 1 and feats.std() > 0.2


def test_spmotif_loaded_by_name(spmotif_ds):
    assert spmotif_ds.name == "spmotif" and spmotif_ds.info["dataset"] == "spmotif"
    assert spmotif_ds.info["cache_dir"].endswith("spmotif/grprune_v1/bias0.9-motifs1-seed0")


@pytest.mark.parametrize("bias", [0.33, 0.5, 0.7, 0.9])
def test_spmotif_bias(bias):
    plan = sp.plan_spmotif(bias, sp.SIZES, np.random.default_rng(1))
    train = plan["part"] == shapes.PART_CODES["train"]
    labels, bases = plan["labels"][train], plan["bases"][train]
    for c in range(3):
        share = np.bincount(bases[labels == c], minlength=3) / (labels == c).sum()
        expected = np.full(3, (1 - bias) / 2)
        expected[c] = bias
        assert np.abs(share - expected).max() < 0.03, (bias, c, share)


def test_spmotif_sizes_by_part():
    plan = sp.plan_spmotif(0.7, sp.SIZES, np.random.default_rng(2))
    for part, ranges in (("train", sp.TRAIN_SIZES), ("valid", sp.TRAIN_SIZES),
                         ("test", sp.TEST_SIZES)):
        sel = plan["part"] == shapes.PART_CODES[part]
        for b, (low, high) in enumerate(ranges):
            sizes = plan["sizes"][sel & (plan["bases"] == b)]
            assert sizes.min() == low and sizes.max() == high, (part, b)
    assert set(plan["branching"].tolist()) == {2, 3}


def test_spmotif_two_motifs():
    data = sp.generate_spmotif(bias=0.5, motifs=2, seed=4, sizes=(150, 30, 30))
    for i in range(len(data)):
        name = sp.SP_MOTIFS[data.labels[i]]
        e = data.edges[i]
        assert shapes.motif_components(e[:, 0], e[:, 1], data.edge_gt[i]) == [name, name]
        kind = sp.SP_BASES[data.bases[i]]
        assert data.num_nodes[i] >= 10 + shapes.base_graph(kind, int(data.sizes[i]), 2).num_nodes
    graphs = data.to_dgl()
    assert all(len(motifs_of_graph(g)) == 2 for g in graphs)


def test_spmotif_determinism(tmp_path):
    for motifs in (1, 2):
        a = sp.generate_spmotif(0.7, motifs, seed=5, sizes=(300, 90, 90))
        b = sp.generate_spmotif(0.7, motifs, seed=5, sizes=(300, 90, 90))
        assert same_data(a, b)
        assert not same_data(a, sp.generate_spmotif(0.7, motifs, seed=6, sizes=(300, 90, 90)))
    # two fresh roots: identical datasets
    one = sp.load_spmotif(tmp_path / "a", bias=0.33, motifs=2, sizes=(90, 30, 30))
    two = sp.load_spmotif(tmp_path / "b", bias=0.33, motifs=2, sizes=(90, 30, 30))
    assert one.info["cache"] == two.info["cache"] == "built"
    assert same_graphs(one.graphs, two.graphs) and torch.equal(one.labels, two.labels)
    assert all(np.array_equal(one.splits[k], two.splits[k]) for k in one.splits)
    hit = sp.load_spmotif(tmp_path / "a", bias=0.33, motifs=2, sizes=(90, 30, 30))
    assert hit.info["cache"] == "hit" and same_graphs(hit.graphs, one.graphs)
    assert torch.equal(hit.envs, one.envs)
    other = sp.load_spmotif(tmp_path / "a", bias=0.5, motifs=2, sizes=(90, 30, 30))
    assert other.info["cache"] == "built"
