"""The official code's choices as named options: values checked by hand where they are
arithmetic, and each option's effect on what a run does."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from grprune.record.files import (CHECKPOINT, EDGE_PROBS, LAST_CHECKPOINT, RESULTS, SUMMARY,
                                  read_records)
from grprune.batch import collate, rank_in_segment
from grprune.cli import main
from grprune.resolve import resolve_config
from grprune.encoders import ENCODERS
from grprune.errors import GrpruneError
from grprune.encoders.layers import masked_relu
from grprune.model import GraphClassifier
from grprune.run import execute
from grprune.selectors import SELECTORS
from grprune.selectors.base import budget_mask
from grprune.trainer import lr_at
from tests.conftest import make_graph


def _cfg(**kw):
    flags = {"train.epochs": kw.pop("epochs", 2), "train.device": "cpu",
             "train.progress": "none", "data.limit": kw.pop("limit", 64),
             "train.batch_size": 32}
    kw.setdefault("preset", "paper")  # no ERM warm-up: two epochs train the selector
    return resolve_config(flags=flags, **kw)


# -- messages, layers, readout, head, init --------------------------------------------------
def test_edge_mask_before_relu_gives_a_pruned_edge_no_gradient():
    msg = torch.tensor([[-1.0, 2.0], [3.0, -4.0]])
    for mask, pruned_grad in (("after-relu", 2.0), ("before-relu", 0.0)):
        w = torch.tensor([0.0, 1.0], requires_grad=True)
        out = masked_relu(msg, w, mask)
        assert out.tolist() == [[0.0, 0.0], [3.0, 0.0]]  # the same values either way
        out.sum().backward()
        # d/dw0 of relu(x0) * w0 is relu(x0).sum() = 2; of relu(x0 * w0) at w0 = 0 it is 0
        assert w.grad is not None and w.grad.tolist() == [pruned_grad, 3.0]


def test_no_relu_between_layers_is_conv_then_batch_norm(toy_batch):
    torch.manual_seed(0)
    enc = ENCODERS.make("gin", feature_kind="ogb", layers=2, hidden=8, dropout=0.0,
                        layer_relu=False).eval()
    h = enc.node_embedding(toy_batch.node_feat)
    h = enc.norms[0](enc.convs[0](h, toy_batch, None))  # no ReLU here
    h = enc.norms[1](enc.convs[1](h, toy_batch, None))
    assert torch.allclose(enc(toy_batch), h)
    relu = ENCODERS.make("gin", feature_kind="ogb", layers=2, hidden=8, dropout=0.0).eval()
    relu.load_state_dict(enc.state_dict())
    assert not torch.allclose(relu(toy_batch), h)


def test_l2_readout_three_layer_head_and_xavier_init(toy_batch):
    torch.manual_seed(0)
    enc = ENCODERS.make("gin", feature_kind="ogb", layers=2, hidden=8, init="xavier")
    model = GraphClassifier(enc, 2, readout="sum-l2", head_layers=3).eval()
    out = model.encode(toy_batch)
    summed = torch.zeros(toy_batch.num_graphs, 8).index_add_(0, toy_batch.node_graph,
                                                             out.node_repr)
    assert torch.allclose(out.graph_repr, summed / (summed.norm(dim=1, keepdim=True) + 1e-8))
    assert torch.allclose(out.graph_repr.norm(dim=1), torch.ones(toy_batch.num_graphs))
    assert sum(isinstance(m, torch.nn.Linear) for m in model.head) == 3
    for m in enc.modules():
        if isinstance(m, torch.nn.Linear):
            bound = (6.0 / (m.in_features + m.out_features)) ** 0.5
            assert m.bias.abs().max() == 0 and m.weight.abs().max() <= bound


# -- the selector ----------------------------------------------------------------------------
def test_sum_input_logit_is_the_mlp_of_the_summed_orders(toy_batch):
    torch.manual_seed(0)
    sel = SELECTORS.make("gumbel-gin", feature_kind="ogb", hidden=8, symmetrize="sum-input")
    h = sel.gnn(toy_batch)
    s, t = h[toy_batch.src], h[toy_batch.dst]
    naive = sel.edge_mlp(torch.cat([s, t, s + t], 1) + torch.cat([t, s, s + t], 1)).squeeze(-1)
    assert torch.allclose(sel.edge_logits(toy_batch), naive, atol=1e-5)


@pytest.mark.parametrize("unit", ["bond", "edge"])
def test_one_sample_per_bond_or_per_directed_edge(toy_batch, unit):
    torch.manual_seed(0)
    sel = SELECTORS.make("gumbel-gin", feature_kind="ogb", hidden=8, sample_per=unit).train()
    pairs_differ = False
    for _ in range(50):
        w = sel(toy_batch).edge_weight
        # directed edges come in (u, v), (v, u) pairs in the toy graphs
        pairs_differ |= bool((w[0::2] != w[1::2]).any())
    assert pairs_differ == (unit == "edge")


def test_rank_in_segment_by_hand():
    values = torch.tensor([0.9, 0.1, 0.8, 0.3, 0.5, 0.5])
    segment = torch.tensor([0, 0, 0, 0, 1, 1])
    assert rank_in_segment(values, segment, 2).tolist() == [3, 0, 2, 1, 0, 1]
    assert rank_in_segment(values, segment, 2, descending=True).tolist() == [0, 3, 1, 2, 0, 1]


@pytest.mark.parametrize("eta, kept", [(0.5, [True, False, True, False]),
                                       (0.6, [True, False, True, True]),
                                       (1.0, [True, True, True, True])])
def test_budget_keeps_the_ceil_eta_most_probable_bonds_of_each_graph(eta, kept):
    g = make_graph(5, [(0, 1), (1, 2), (2, 3), (3, 4)])
    batch = collate([(g, 0, 0, 0), (make_graph(2, [(0, 1)]), 0, 0, 1)])
    score = torch.tensor([2.0, -2.0, 1.0, -1.0, 0.0])  # bond logits; the last is graph 2's
    mask = budget_mask(score, batch, eta)
    assert mask[:4].tolist() == kept
    assert bool(mask[4])  # ceil(eta * 1) = 1 bond of the one-bond graph


@pytest.mark.parametrize("eta", [0.5, 0.85])
def test_eta_decides_what_budget_evaluation_keeps(tmp_path, eta):
    cfg = _cfg(reg="size,eps-align", overrides=["selector.eval_mode=budget",
                                                 f"reg.size.eta={eta}"])
    assert cfg["selector"]["eval_budget"] == eta  # taken from reg.size.eta
    _, summary = execute(cfg, tmp_path / "run", log=lambda m: None)
    # ceil(eta * U_g) of each graph's U_g bonds: at least eta, and at most one bond more
    assert eta <= summary.kept_edge_fraction <= eta + 0.1
    probs = __import__("numpy").load(tmp_path / "run" / EDGE_PROBS)
    assert probs["edge_weight"].mean() == pytest.approx(summary.kept_edge_fraction)


# -- training --------------------------------------------------------------------------------
def test_lr_milestones_multiply_the_rate_and_are_recorded(tmp_path):
    assert [lr_at(e, 1e-3, "1,2", 0.5) for e in range(4)] == [1e-3, 5e-4, 2.5e-4, 2.5e-4]
    cfg = _cfg(reg="none", epochs=3, overrides=["train.lr_milestones=2,1", "train.lr_gamma=0.5"])
    assert cfg["train"]["lr_milestones"] == "1,2"
    execute(cfg, tmp_path / "run", log=lambda m: None)
    assert [r["lr"] for r in read_records(tmp_path / "run" / RESULTS)] == [1e-3, 5e-4, 2.5e-4]


def test_a_warm_up_epoch_is_selected_only_when_allowed(tmp_path, monkeypatch):
    from conftest import force_valid_scores
    valid = {0: 0.9, 1: 0.5, 2: 0.4}  # OOD-valid per epoch: the warm-up epoch 0 is best
    force_valid_scores(monkeypatch, valid)
    out = {}
    for allowed in (True, False):
        cfg = _cfg(reg="size,eps-align", epochs=3,
                   overrides=["train.warmup_epochs=1", f"train.select_warmup={allowed}",
                              "train.save_last=true"])
        _, out[allowed] = execute(cfg, tmp_path / str(allowed), log=lambda m: None)
    assert out[True].best_epoch == 0 and out[True].selected_phase == "warmup"
    assert out[True].kept_edge_fraction == 1.0  # a warm-up model is evaluated on full graphs
    assert out[True].use_selector is False and out[False].use_selector is True
    from grprune.inference import load_run
    assert load_run(tmp_path / "True", lazy=True).use_selector is False  # predict/explain agree
    assert out[False].best_epoch == 1 and out[False].selected_phase == "train"
    last = torch.load(tmp_path / "True" / LAST_CHECKPOINT, weights_only=True)
    best = torch.load(tmp_path / "True" / CHECKPOINT, weights_only=True)
    assert any(not torch.equal(last[k], best[k]) for k in best)


# -- diagnostics -----------------------------------------------------------------------------
def test_selector_diagnostics_per_split_and_epoch(tmp_path):
    execute(_cfg(data="good-motif", reg="size,eps-align", limit=48, preset="paper",
                 overrides=["train.warmup_epochs=1"]), tmp_path / "prune", log=lambda m: None)
    recs = read_records(tmp_path / "prune" / RESULTS)
    assert "selector" not in recs[0]["valid"]  # warm-up: no selector in use
    for split in ("valid", "test", "id-valid"):
        d = recs[1][split]["selector"]
        q = list(d["p_quantiles"].values())
        assert q == sorted(q) and 0 <= q[0] and q[-1] <= 1
        assert 0 <= d["p_below_0.1"] <= 1 and 0 <= d["p_above_0.9"] <= 1
        assert 0 <= d["motif_rocauc"] <= 1 and 0 <= d["precision@50"] <= 1
        assert d["motif_rocauc_correct"] is None or 0 <= d["motif_rocauc_correct"] <= 1
    summary = json.loads((tmp_path / "prune" / SUMMARY).read_text())
    test = summary["selector_diagnostics"]["test"]
    assert summary["motif_edge_rocauc"] == test["motif_rocauc"]
    assert summary["spurious_precision_at_50"] == test["precision@50"]
    execute(_cfg(reg="none"), tmp_path / "erm", log=lambda m: None)
    erm = read_records(tmp_path / "erm" / RESULTS)[-1]
    assert "selector" not in erm["valid"]  # ERM: nothing to diagnose


# -- presets ---------------------------------------------------------------------------------
def test_preset_values_sit_between_recommended_and_the_flags_and_are_recorded(tmp_path):
    paper = resolve_config(data="good-motif", preset="paper")
    assert paper["encoder"]["hidden"] == 300 and paper["preset"]["values"] == {}
    official = resolve_config(data="good-motif", preset="official")
    assert official["encoder"]["hidden"] == 128  # the preset overrides `recommended`
    assert official["preset"]["name"] == "official"
    assert official["preset"]["values"]["reg.eps-align.k"] == 90.0
    assert official["reg"]["size"]["form"] == "official"
    flagged = resolve_config(data="good-motif", preset="official", flags={"train.epochs": 7},
                             overrides=["encoder.hidden=32"])
    assert flagged["train"]["epochs"] == 7 and flagged["encoder"]["hidden"] == 32
    erm = resolve_config(data="good-motif", reg="none", preset="official")
    assert erm["selector"] == {"name": "none"} and erm["encoder"]["layer_relu"] is False
    assert not any(k.startswith(("selector.", "reg.")) for k in erm["preset"]["values"])
    gsat = resolve_config(reg="gsat", preset="official")
    assert gsat["selector"]["eval_mode"] == "soft" and not gsat["selector"]["hard"]
    # a finished run's config.json names its preset, and re-resolving it is the same run
    (tmp_path / "c.json").write_text(json.dumps(official.to_dict()))
    again = resolve_config(file=tmp_path / "c.json")
    assert again["preset"]["name"] == "official" and again["hash"] == official["hash"]


def test_auto_takes_the_default_of_the_dataset_and_split(tmp_path, monkeypatch):
    from grprune.presets import FALLBACK, default_for
    # the shipped defaults.yaml: the prior is official; paper validated better on EC50
    # assay only, so that split lists it (molbbbp scaffold no longer does)
    assert FALLBACK == "official"
    assert default_for("ogbg-molbbbp", "size") == default_for("ogbg-molbbbp") == "official"
    assert default_for("ogbg-molbbbp", "scaffold") == "official"
    assert default_for("drugood-ec50", "assay") == "paper"
    assert default_for("drugood-ec50", "size") == default_for("drugood-ec50") == "official"
    assert default_for("good-motif", "size") == default_for("my-own-data") == "official"
    size = resolve_config(data="ogbg-molbbbp", flags={"data.split": "size"})
    assert size["preset"] == {**size["preset"], "name": "official", "requested": "auto"}
    assert resolve_config(data="ogbg-molbbbp", overrides=["data.split=size"])["hash"] == size["hash"]
    assert resolve_config(data="ogbg-molbbbp")["preset"]["name"] == "official"  # scaffold
    assert resolve_config(data="drugood-ec50", flags={"data.split": "assay"}
                          )["preset"]["name"] == "paper"
    explicit = resolve_config(data="ogbg-molbbbp", preset="paper", flags={"data.split": "size"})
    assert explicit["preset"]["name"] == "paper"      # an asked-for preset wins over auto
    # a dataset entry serves every split, a dataset/split entry wins over it
    table = tmp_path / "defaults.yaml"
    table.write_text("good-motif: official\ngood-motif/size: paper\n")
    monkeypatch.setattr("grprune.presets.DEFAULTS_FILE", table)
    assert (default_for("good-motif", "basis"), default_for("good-motif", "size"),
            default_for("ogbg-molbbbp", "size")) == ("official", "paper", "official")
    assert resolve_config(data="good-motif")["preset"]["name"] == "official"   # basis
    res = CliRunner().invoke(main, ["ls", "presets"])
    assert res.exit_code == 0 and "default for: good-motif" in res.output
    table.write_text("good-motif: [official]\n")
    with pytest.raises(GrpruneError, match="must map dataset or dataset/split names"):
        default_for("good-motif")


def test_the_good_preset_is_goods_erm_protocol():
    """``--preset good``: GOOD's benchmark configs (divelab/GOOD configs/GOOD_configs)."""
    motif = resolve_config(data="good-motif", reg="none", preset="good",
                           flags={"data.split": "basis"})
    assert {k: motif["encoder"][k] for k in ("layers", "hidden", "dropout", "virtual_node",
                                             "layer_relu")} == {
        "layers": 3, "hidden": 300, "dropout": 0.5, "virtual_node": False, "layer_relu": True}
    assert motif["model"] == {"readout": "mean", "head_layers": 1}
    assert {k: motif["train"][k] for k in ("epochs", "batch_size", "lr", "weight_decay",
                                           "patience", "warmup_epochs", "lr_milestones",
                                           "lr_gamma", "select_warmup")} == {
        "epochs": 200, "batch_size": 32, "lr": 1e-3, "weight_decay": 0.0, "patience": 0,
        "warmup_epochs": 0, "lr_milestones": "150", "lr_gamma": 0.1, "select_warmup": False}
    # GOOD-HIV's ERM uses vGIN, a GIN with a virtual node
    assert resolve_config(data="good-hiv", reg="none", preset="good")["encoder"]["virtual_node"]
    assert motif["preset"]["name"] == "good"


def test_a_run_with_no_epoch_after_warm_up_says_the_selector_never_trains(tmp_path):
    with pytest.warns(UserWarning, match="all 2 epochs are ERM warm-up"):
        execute(_cfg(reg="size,eps-align", epochs=2, overrides=["train.warmup_epochs=2"]),
                tmp_path / "warm", log=lambda m: None)


def test_a_preset_of_your_own_by_directory_or_file(tmp_path, monkeypatch):
    (tmp_path / "mine.yaml").write_text(
        "description: small\nall:\n  encoder.hidden: 16\ndatasets:\n  ogbg-molbbbp:\n"
        "    train.epochs: 3\n")
    monkeypatch.setenv("GRPRUNE_PRESET_PATH", str(tmp_path))
    cfg = resolve_config(preset="mine")
    assert cfg["encoder"]["hidden"] == 16 and cfg["train"]["epochs"] == 3
    assert resolve_config(preset=str(tmp_path / "mine.yaml"))["hash"] == cfg["hash"]
    res = CliRunner().invoke(main, ["ls", "presets"])
    assert res.exit_code == 0 and "mine" in res.output and "official" in res.output


@pytest.mark.parametrize("args, message", [
    (["--preset", "ofical"], "unknown preset 'ofical'. Did you mean 'official'?"),
    (["--preset", "nope.yaml"], "preset file not found"),
    (["-H", "selector.sample_per=node"], "Choices: bond, edge"),
    (["-H", "selector.symmetrize=max"], "Choices: mean-logit, sum-input"),
    (["-H", "encoder.edge_mask=inside"], "Choices: after-relu, before-relu"),
    (["-H", "model.readout=max"], "Choices: sum, mean, sum-l2"),
    (["-H", "selector.eval_budget=1.5"], "for selector.eval_budget: expected a number in [0, 1]"),
    (["-H", "train.lr_milestones=ten"], "bad value 'ten' for train.lr_milestones"),
    (["--reg", "eps-align", "-H", "selector.eval_mode=budget"], "set -H selector.eval_budget"),
])
def test_bad_presets_and_values_exit_2_with_one_line(tmp_path, args, message):
    res = CliRunner().invoke(main, ["run", *args, "--epochs", "1", "-H", "data.limit=8",
                                    "--out", str(tmp_path / "x")])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in res.output


def test_a_preset_with_an_unknown_key_names_the_file_and_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("all:\n  encoder.hiden: 16\n")
    res = CliRunner().invoke(main, ["run", "--preset", str(bad), "--out", str(tmp_path / "x")])
    assert res.exit_code == 2
    assert "bad.yaml" in res.output and "encoder.hiden" in res.output


def test_collect_and_curves_show_presets_and_diagnostics(tmp_path):
    for preset in ("official", "paper"):
        cfg = _cfg(data="good-motif", reg="size,eps-align", limit=48, preset=preset,
                   overrides=["train.warmup_epochs=1", "encoder.hidden=16", "encoder.layers=2"])
        execute(cfg, tmp_path / "runs" / preset, log=lambda m: None)
    res = CliRunner().invoke(main, ["collect", str(tmp_path / "runs"), "--layout", "long",
                                    "--out", str(tmp_path / "table")])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "table.md").read_text()
    assert "PrunE (official)" in md and "| PrunE |" in md.replace("  ", " ")
    assert "Precision@50" in md and "motif ROC-AUC" in md
    res = CliRunner().invoke(main, ["curves", str(tmp_path / "runs"),
                                    "--out", str(tmp_path / "c.png")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert "PrunE (official): 1 run(s)" in res.output
    res = CliRunner().invoke(main, ["curves", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "no such directory" in res.output


def test_motif_rocauc_over_correctly_predicted_graphs_by_hand():
    from conftest import make_graph

    from grprune.batch import collate
    from grprune.diagnostics import SelectorStats

    # graph A: bonds with logits 2 (motif), 1, 3; graph B: 5 (motif), -5
    graphs = [make_graph(4, [(0, 1), (1, 2), (2, 3)], gt=[1, 0, 0]),
              make_graph(3, [(0, 1), (1, 2)], gt=[1, 0])]
    batch = collate([(g, 0, 0, i) for i, g in enumerate(graphs)])
    logits = torch.tensor([2.0, 1.0, 3.0, 5.0, -5.0]).repeat_interleave(2)
    for correct, expected in (([True, False], 0.5), ([False, True], 1.0),
                              ([True, True], 5 / 6)):
        stats = SelectorStats()
        stats.add(batch, logits, torch.tensor(correct))
        out = stats.result()
        assert out["motif_rocauc"] == pytest.approx(5 / 6)  # pooled over both graphs
        assert out["motif_rocauc_correct"] == pytest.approx(expected)
    stats = SelectorStats()
    stats.add(batch, logits)  # without predictions: no correct-only figure
    out = stats.result()
    assert "motif_rocauc_correct" not in out
    # Figure 5a: the motif bonds' mean keep probability and within-graph rank (fraction
    # of the graph's bonds above): A's motif bond is 2nd of 3 (1/3), B's 1st of 2 (0)
    assert out["gc_p_mean"] == pytest.approx((torch.sigmoid(torch.tensor(2.0)).item()
                                              + torch.sigmoid(torch.tensor(5.0)).item()) / 2)
    assert out["gc_rank_mean"] == pytest.approx((1 / 3 + 0) / 2)


def test_sampled_evaluation_leaves_training_as_it_was(tmp_path):
    """eval_mode=sample draws its masks from a stream of its own (Trainer.evaluate): the
    training losses are those of a run that evaluates without drawing, and the summary's
    score of the selected epoch is the one results.jsonl logged for it."""
    runs = {}
    for mode in ("threshold", "sample"):
        cfg = _cfg(reg="size,eps-align", epochs=3,
                   overrides=[f"selector.eval_mode={mode}", "train.warmup_epochs=0",
                              "train.eval_train=true"])
        _, summary = execute(cfg, tmp_path / mode, log=lambda m: None)
        runs[mode] = summary, read_records(tmp_path / mode / RESULTS)
    losses = {mode: [r["loss"]["total"] for r in records] for mode, (_, records) in runs.items()}
    assert losses["sample"] == losses["threshold"]
    summary, records = runs["sample"]
    best = next(r for r in records if r["epoch"] == summary.best_epoch)
    assert summary.test == best["test"][summary.metric]
    assert summary.valid == best["valid"][summary.metric]
    # scoring new graphs with a sampled mask: the same scores on every call, and the
    # caller's RNG left as it was
    from grprune.inference import load_run
    run = load_run(tmp_path / "sample")
    before = torch.get_rng_state()
    smiles = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1"]
    first, again = run.predict(smiles), run.predict(smiles)
    assert list(first["prob_1"]) == list(again["prob_1"])
    assert torch.equal(torch.get_rng_state(), before)


def test_eval_seed_is_fixed_per_seed_and_split():
    from grprune.determinism import eval_seed
    assert eval_seed(0, "test") == __import__("zlib").crc32(b"0/test")
    assert len({eval_seed(s, split) for s in (0, 1) for split in ("valid", "test")}) == 4
