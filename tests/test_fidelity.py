"""Fidelity+, fidelity−, characterization and sparsity of explanations (grprune/fidelity.py,
grprune/explain_fidelity.py): by hand, for every selector through ``grprune explain``, and
against PyG's ``torch_geometric.explain.metric`` on the same model and masks."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from grprune.cli import main
from grprune.compat import dgl
from grprune.explain_fidelity import explanation_bonds, masked_graphs
from grprune.fidelity import (Fidelity, characterization_score, fidelity, fidelity_prob,
                              fidelity_scores, sparsity)

T = torch.tensor


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# -- the equations, by hand ---------------------------------------------------------------
def test_accuracy_forms_by_hand():
    y = T([0, 1, 1, 0, 1])
    pred = T([0, 1, 0, 0, 1])     # right on graphs 0, 1, 3, 4
    on_s = T([0, 1, 0, 1, 1])     # G_S: right on 0, 1, 4; graph 3 flips
    on_c = T([1, 0, 1, 0, 0])     # G_C\S: right on 2, 3
    # phenomenon: |1(ŷ=y) - 1(ŷ_C=y)| = 1,1,1,0,1; |1(ŷ=y) - 1(ŷ_S=y)| = 0,0,0,1,0
    assert fidelity(y, pred, on_s, on_c, "phenomenon") == pytest.approx((0.8, 0.2))
    # model: target ŷ; ŷ_C agrees on graph 3 only, ŷ_S on 0, 1, 2, 4
    assert fidelity(pred, pred, on_s, on_c, "model") == pytest.approx((0.8, 0.2))
    assert fidelity(pred, pred, pred, pred, "model") == (0.0, 0.0)
    assert all(math.isnan(v) for v in fidelity(T([]), T([]), T([]), T([])))
    with pytest.raises(ValueError, match="unknown explanation type"):
        fidelity(y, pred, on_s, on_c, "rationale")


def test_probability_form_by_hand():
    prob = T([[0.1, 0.9], [0.8, 0.2], [0.5, 0.5]], dtype=torch.float64)
    on_s = T([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]], dtype=torch.float64)
    on_c = T([[0.7, 0.3], [0.9, 0.1], [0.4, 0.6]], dtype=torch.float64)
    target = T([1, 0, 1])
    plus, minus = fidelity_prob(target, prob, on_s, on_c)
    # fid+ = mean(f(G)_y - f(G_C\S)_y) = (0.6 - 0.1 - 0.1) / 3; fid- = (0.1 + 0.2 + 0) / 3
    assert plus == pytest.approx(0.4 / 3) and minus == pytest.approx(0.1)
    assert fidelity_prob(target, prob, prob, prob) == (0.0, 0.0)


def test_characterization_and_sparsity_by_hand():
    # (w+ + w-) / (w+/fid+ + w-/(1 - fid-)): 1 / (0.5/0.5 + 0.5/0.5) = 0.5
    assert characterization_score(0.5, 0.5) == pytest.approx(0.5)
    assert characterization_score(1.0, 0.0) == pytest.approx(1.0)
    assert characterization_score(0.6, 0.2, 0.25, 0.75) == pytest.approx(
        1 / (0.25 / 0.6 + 0.75 / 0.8))
    assert characterization_score(0.0, 0.1) == 0.0 and characterization_score(0.5, 1.0) == 0.0
    assert math.isnan(characterization_score(math.nan, 0.1))
    with pytest.raises(ValueError, match="sum to 1"):
        characterization_score(0.5, 0.5, 0.5, 0.6)
    # 1 - |S|/|E| per graph: 0.75, 0.0, (graph without bonds left out), 0.5
    assert sparsity(T([1, 4, 0, 1]), T([4, 4, 0, 2])) == pytest.approx(1.25 / 3)
    assert math.isnan(sparsity(T([0]), T([0])))


def test_fidelity_scores_puts_them_together():
    prob = T([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]])
    on_s = T([[0.8, 0.2], [0.4, 0.6], [0.6, 0.4]])
    on_c = T([[0.3, 0.7], [0.9, 0.1], [0.2, 0.8]])
    label = T([0, 1, 0])  # the model is wrong on graph 2
    f = fidelity_scores(label, prob, on_s, on_c, T([1, 2, 3]), T([4, 4, 3]))
    assert isinstance(f, Fidelity) and f.graphs == 3
    # hits: ŷ 1,1,0; ŷ_S (0,1,0) 1,1,1; ŷ_C (1,0,1) 0,0,0
    assert (f.fid_plus, f.fid_minus) == pytest.approx((2 / 3, 1 / 3))
    assert f.fid_plus_prob == pytest.approx((0.6 + 0.7 + 0.1) / 3)
    assert f.fid_minus_prob == pytest.approx((0.1 + 0.2 - 0.3) / 3, abs=1e-7)
    assert f.characterization == pytest.approx(2 / 3)
    assert f.sparsity == pytest.approx((0.75 + 0.5 + 0) / 3)
    m = fidelity_scores(label, prob, on_s, on_c, T([1, 2, 3]), T([4, 4, 3]), "model")
    # target ŷ = (0, 1, 1): ŷ_S agrees on 0, 1; ŷ_C on 2
    assert (m.fid_plus, m.fid_minus) == pytest.approx((2 / 3, 1 / 3))
    empty = fidelity_scores(T([], dtype=torch.long), torch.zeros(0, 2), torch.zeros(0, 2),
                            torch.zeros(0, 2), T([]), T([]))
    assert empty.to_dict()["fid_plus"] is None and empty.to_dict()["graphs"] == 0


def test_masked_graphs_remove_both_directions_of_a_bond():
    g = dgl.graph((T([0, 1, 1, 2, 2, 0]), T([1, 0, 2, 1, 0, 2])), num_nodes=4)
    g.edata["feat"] = torch.arange(6).reshape(6, 1)
    mask = np.array([True, True, False, False, True, True])  # bonds 0-1 and 2-0
    on_s, on_c = masked_graphs([g], [mask], True)[0], masked_graphs([g], [mask], False)[0]
    assert on_s.num_nodes() == on_c.num_nodes() == 4
    assert on_s.edata["feat"].reshape(-1).tolist() == [0, 1, 4, 5]
    assert on_c.edata["feat"].reshape(-1).tolist() == [2, 3]
    assert masked_graphs([g], [np.ones(6, bool)], True)[0] is g  # nothing removed


# -- every selector, through grprune explain ---------------------------------------------
METHODS = {"prune-gumbel-gin": [], "gumbel-gcn": ["--selector", "gumbel-gcn"],
           "gsat": ["--reg", "gsat"], "ciga": ["--reg", "ciga"],
           "drop-edge": ["--selector", "drop-edge", "--reg", "none"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_root):
    """A one-epoch ogbg-molbbbp run of 24 graphs per part for each selector."""
    out = {}
    for name, args in METHODS.items():
        run_dir = tmp_path_factory.mktemp(name) / "run"
        res = _cli("run", "--data", "ogbg-molbbbp", "--preset", "paper", "--epochs", "1", "-H",
                   "data.limit=24",
                   "--progress", "none", "--device", "cpu", "--out", run_dir, *args)
        assert res.exit_code == 0, res.output
        out[name] = run_dir
    return out


@pytest.mark.parametrize("name", list(METHODS))
def test_explain_reports_fidelity_for_every_selector(runs, name, tmp_path):
    res = _cli("explain", runs[name], "--out", tmp_path, "--top-k", "4", "--device", "cpu")
    assert res.exit_code == 0, res.output
    for row in ("fidelity+ (accuracy)", "fidelity- (probability)", "characterization",
                "sparsity"):
        assert row in res.output
    fid = json.loads((tmp_path / "fidelity.json").read_text())
    assert "fidelity.json" in json.loads((tmp_path / "explain.json").read_text())["files"]
    assert fid["graphs"] == 24 and "top-4" in fid["explanation"]
    for kind in ("phenomenon", "model"):
        f = fid[kind]
        assert 0 <= f["fid_plus"] <= 1 and 0 <= f["fid_minus"] <= 1
        assert -1 <= f["fid_plus_prob"] <= 1 and -1 <= f["fid_minus_prob"] <= 1
        assert 0 <= f["characterization"] <= 1 and 0 < f["sparsity"] < 1
    # the kept bonds: DropEdge keeps every bond at evaluation, so S = G
    assert _cli("explain", runs[name], "--out", tmp_path / "kept").exit_code == 0
    kept = json.loads((tmp_path / "kept" / "fidelity.json").read_text())
    assert "evaluation mask keeps" in kept["explanation"]
    if name == "drop-edge":
        assert kept["model"]["sparsity"] == 0 and kept["model"]["fid_minus"] == 0
        assert kept["model"]["fid_minus_prob"] == pytest.approx(0, abs=1e-6)


def test_no_fidelity_without_a_selector_or_when_off(runs, tmp_path, data_root):
    res = _cli("explain", runs["gsat"], "--out", tmp_path / "off", "--no-fidelity")
    assert res.exit_code == 0 and not (tmp_path / "off" / "fidelity.json").exists()
    erm = tmp_path / "erm"
    assert _cli("run", "--data", "ogbg-molbbbp", "--preset", "paper", "--reg", "none",
                "--epochs", "1", "-H",
                "data.limit=16", "--progress", "none", "--out", erm).exit_code == 0
    res = _cli("explain", erm, "--out", tmp_path / "erm-ex")
    assert res.exit_code == 0 and "fidelity skipped: the model uses no selector" in res.output
    assert not (tmp_path / "erm-ex" / "fidelity.json").exists()


# -- against PyG, on the same model and masks -----------------------------------------------
def test_same_as_pyg_on_the_same_model_and_masks(runs, tmp_path):
    """PyG's ``fidelity`` and ``characterization_score`` on an ``Explanation`` of the run's
    top-4 masks, with the run's model behind PyG's ``Explainer`` (a hard edge mask reaches
    it through a ``MessagePassing`` probe and removes the masked edges), equal grprune's."""
    pytest.importorskip("torch_geometric")
    from torch_geometric.explain import Explainer, Explanation
    from torch_geometric.explain.algorithm import DummyExplainer
    from torch_geometric.explain.metric import characterization_score as pyg_charact
    from torch_geometric.explain.metric import fidelity as pyg_fidelity
    from torch_geometric.nn import MessagePassing

    from grprune.determinism import eval_seed
    from grprune.inference import load_run

    run_dir = runs["prune-gumbel-gin"]
    assert _cli("explain", run_dir, "--out", tmp_path, "--top-k", "4").exit_code == 0
    ours = json.loads((tmp_path / "fidelity.json").read_text())
    run = load_run(run_dir)
    dataset = run.load_dataset()
    idx = [int(i) for i in run.part_indices(dataset, "test")]
    graphs = [dataset.graphs[i] for i in idx]
    seed = eval_seed(int(run.cfg.train.seed or 0), "test")
    # the scores explain used: the run's edge_probs.npz
    stored = run.stored_scores(idx, num_graphs=len(dataset))
    assert stored is not None
    scores = [stored[i] for i in idx]
    masks = [b[s.bond_of_edge] for b, s in zip(explanation_bonds(scores, 4), scores)]
    ptr = np.concatenate([[0], np.cumsum([len(m) for m in masks])])

    class Probe(MessagePassing):  # receives PyG's edge mask (set_masks)
        pass

    class RunModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.probe = Probe()

        def forward(self, x, edge_index):
            mask = self.probe._edge_mask if self.probe.explain else None
            gs = graphs
            if mask is not None:
                gs = [dgl.remove_edges(g, torch.from_numpy(np.flatnonzero(
                    mask[ptr[k]:ptr[k + 1]].numpy() < 0.5)).long())
                      for k, g in enumerate(graphs)]
            return torch.as_tensor(np.stack([s.prob for s in run.score(gs, keys=idx,
                                                                       seed=seed)]))

    node_ptr = np.concatenate([[0], np.cumsum([g.num_nodes() for g in graphs])])
    edge_index = torch.cat([torch.stack(g.edges()) + int(node_ptr[k])
                            for k, g in enumerate(graphs)], dim=1)
    edge_mask = torch.from_numpy(np.concatenate(masks).astype(np.float32))
    model = RunModel()
    prob = model(None, edge_index)
    labels = dataset.labels[torch.as_tensor(idx)]
    for kind, target in (("phenomenon", labels), ("model", prob.argmax(-1))):
        explainer = Explainer(model, DummyExplainer(), explanation_type=kind,
                              edge_mask_type="object",
                              model_config=dict(mode="multiclass_classification",
                                                task_level="graph", return_type="probs"))
        explanation = Explanation(x=torch.zeros(int(node_ptr[-1]), 1), edge_index=edge_index,
                                  edge_mask=edge_mask, target=target)
        explanation._model_args = []
        plus, minus = pyg_fidelity(explainer, explanation)
        assert (ours[kind]["fid_plus"], ours[kind]["fid_minus"]) == pytest.approx((plus, minus))
        assert ours[kind]["characterization"] == pytest.approx(
            float(pyg_charact(torch.tensor(plus), torch.tensor(minus))), abs=1e-6)
        # the probability form from PyG's masked predictions
        on_s = explainer.get_masked_prediction(explanation.x, edge_index, None, edge_mask)
        on_c = explainer.get_masked_prediction(explanation.x, edge_index, None, 1 - edge_mask)
        t = target.view(-1, 1)
        full = prob.gather(1, t)
        assert ours[kind]["fid_plus_prob"] == pytest.approx(
            float((full - on_c.gather(1, t)).double().mean()), abs=1e-5)
        assert ours[kind]["fid_minus_prob"] == pytest.approx(
            float((full - on_s.gather(1, t)).double().mean()), abs=1e-5)
        print(f"{kind}: PyG fid+ {plus:.4f} fid- {minus:.4f}; grprune {ours[kind]}")


def test_same_as_pyg_on_random_masks():
    """The equations against PyG where the predictions move: a fixed 3-class model whose
    output sums edge messages weighted by PyG's edge mask, 60 graphs, random hard masks and
    labels. grprune's scores from the model's three predictions equal PyG's."""
    pytest.importorskip("torch_geometric")
    from torch_geometric.explain import Explainer, Explanation
    from torch_geometric.explain.algorithm import DummyExplainer
    from torch_geometric.explain.metric import characterization_score as pyg_charact
    from torch_geometric.explain.metric import fidelity as pyg_fidelity
    from torch_geometric.nn import MessagePassing

    gen = torch.Generator().manual_seed(0)
    sizes = torch.randint(3, 9, (60,), generator=gen)
    batch = torch.repeat_interleave(torch.arange(60), sizes)
    first = torch.cumsum(sizes, 0) - sizes
    src = torch.cat([first[g] + torch.randint(0, int(n), (2 * int(n),), generator=gen)
                     for g, n in enumerate(sizes)])
    dst = torch.cat([first[g] + torch.randint(0, int(n), (2 * int(n),), generator=gen)
                     for g, n in enumerate(sizes)])
    edge_index = torch.stack([src, dst])
    x = torch.randn(int(sizes.sum()), 4, generator=gen)
    weight = torch.randn(4, 3, generator=gen)

    class Probe(MessagePassing):
        pass

    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.probe = Probe()

        def forward(self, x, edge_index):
            w = self.probe._edge_mask if self.probe.explain else torch.ones(edge_index.shape[1])
            msg = torch.zeros_like(x).index_add_(0, edge_index[1], x[edge_index[0]] * w[:, None])
            pooled = torch.zeros(60, 4).index_add_(0, batch, msg)
            return torch.softmax(pooled @ weight, -1)

    edge_mask = (torch.rand(src.shape[0], generator=gen) < 0.4).float()
    labels = torch.randint(0, 3, (60,), generator=gen)
    edge_graph = batch[src]
    kept = torch.zeros(60, dtype=torch.long).index_add_(0, edge_graph, edge_mask.long())
    total = torch.bincount(edge_graph, minlength=60)
    model = Toy()
    prob = model(x, edge_index)
    seen = set()
    for kind, target in (("phenomenon", labels), ("model", prob.argmax(-1))):
        explainer = Explainer(model, DummyExplainer(), explanation_type=kind,
                              edge_mask_type="object",
                              model_config=dict(mode="multiclass_classification",
                                                task_level="graph", return_type="probs"))
        explanation = Explanation(x=x, edge_index=edge_index, edge_mask=edge_mask, target=target)
        explanation._model_args = []
        plus, minus = pyg_fidelity(explainer, explanation)
        on_s = explainer.get_masked_prediction(x, edge_index, None, edge_mask)
        on_c = explainer.get_masked_prediction(x, edge_index, None, 1 - edge_mask)
        ours = fidelity_scores(labels, prob, on_s, on_c, kept, total, kind)
        assert (ours.fid_plus, ours.fid_minus) == pytest.approx((plus, minus), abs=1e-6)  # PyG: float32
        assert ours.characterization == pytest.approx(
            float(pyg_charact(torch.tensor(plus), torch.tensor(minus))), abs=1e-6)
        assert ours.sparsity == pytest.approx(float((1 - kept / total).mean()), abs=1e-6)
        seen.add((round(plus, 4), round(minus, 4)))
        print(f"{kind}: PyG fid+ {plus:.4f} fid- {minus:.4f} charact "
              f"{float(pyg_charact(torch.tensor(plus), torch.tensor(minus))):.4f}; "
              f"grprune {ours}")
    assert all(0 < p < 1 and 0 < m < 1 for p, m in seen)  # the scores are not trivial
