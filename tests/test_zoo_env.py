"""Environment-based regularizers (irm, vrex, groupdro) and the drop-edge selector."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

import grprune.regularizers.env  # noqa: F401  (registers irm, vrex, groupdro)
import grprune.selectors.drop_edge  # noqa: F401  (registers drop-edge)
from grprune.record.files import RESULTS, SUMMARY, read_records
from grprune.batch import collate
from grprune.cli import main
from grprune.resolve import resolve_config
from grprune.encoders import ENCODERS
from grprune.errors import GrpruneError
from grprune.model import GraphClassifier, ModelOutput
from grprune.regularizers import REGULARIZERS, StepContext
from grprune.selectors import SELECTORS
from grprune.build import build_model
from tests.conftest import make_graph

# 5 graphs, 2 classes; environment 0 holds graphs 0-1, environment 1 graphs 2-4
LOGITS = [[1.0, -1.0], [0.5, 0.2], [-0.3, 0.8], [2.0, 0.0], [0.1, 0.4]]
LABELS = [0, 1, 1, 0, 1]
ENVS = [0, 0, 1, 1, 1]


def _ctx(logits=LOGITS, labels=LABELS, envs=ENVS, epoch=0):
    """A step over one single-atom graph per row of ``logits`` (the environment losses
    read labels, environments and logits; no model)."""
    logits = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    batch = collate([(make_graph(1, []), y, e, i)
                     for i, (y, e) in enumerate(zip(labels, envs))])
    empty = torch.zeros(len(labels), 0, dtype=torch.float64)
    out = ModelOutput(logits=logits, graph_repr=empty, node_repr=empty)
    return StepContext(batch=batch, output=out, model=None, epoch=epoch)  # type: ignore[arg-type]


def _ce(z, y):
    """Cross-entropy of one graph, by hand."""
    return math.log(sum(math.exp(v) for v in z)) - z[y]


def _risk(idx, w=1.0):
    return sum(_ce([w * v for v in LOGITS[i]], LABELS[i]) for i in idx) / len(idx)


def _grad(idx, h=1e-6):
    """d R(w * logits) / dw at w = 1 by central finite differences."""
    return (_risk(idx, 1 + h) - _risk(idx, 1 - h)) / (2 * h)


ENV0, ENV1 = [0, 1], [2, 3, 4]


def test_irm_full_matches_finite_differences():
    reg = REGULARIZERS.make("irm")
    expected = (_grad(ENV0) ** 2 + _grad(ENV1) ** 2) / 2
    assert reg.loss(_ctx()).item() == pytest.approx(expected, rel=1e-6)
    # closed form (softmax(z) - onehot(y))^T z, averaged over the environment
    z = torch.tensor(LOGITS, dtype=torch.float64)
    g = ((torch.softmax(z, -1) - F.one_hot(torch.tensor(LABELS), 2)) * z).sum(-1)
    assert g[:2].mean().item() == pytest.approx(_grad(ENV0), rel=1e-6)
    assert reg.hp.weight == 100.0  # DomainBed irm_lambda


def test_irm_halves_is_domainbeds_product_of_two_halves():
    reg = REGULARIZERS.make("irm", estimator="halves")
    # env 0: {0} x {1}; env 1 (batch order 2, 3, 4): even {2, 4} x odd {3}
    expected = (_grad([0]) * _grad([1]) + _grad([2, 4]) * _grad([3])) / 2
    assert reg.loss(_ctx()).item() == pytest.approx(expected, rel=1e-6)
    # interleaved environments: halves follow the order inside each environment
    perm = [2, 0, 3, 1, 4]
    ctx = _ctx([LOGITS[i] for i in perm], [LABELS[i] for i in perm], [ENVS[i] for i in perm])
    assert reg.loss(ctx).item() == pytest.approx(expected, rel=1e-6)
    # single-graph environments have no estimate: left out, and 0 if all are single
    ctx = _ctx(LOGITS[:3], LABELS[:3], [0, 0, 5])
    assert reg.loss(ctx).item() == pytest.approx(_grad([0]) * _grad([1]), rel=1e-6)
    zero = reg.loss(_ctx(LOGITS[:2], LABELS[:2], [3, 4]))
    assert zero.item() == 0.0
    zero.backward()  # still a graph


def test_vrex_is_the_biased_variance_of_environment_risks():
    reg = REGULARIZERS.make("vrex")
    r0, r1 = _risk(ENV0), _risk(ENV1)
    mean = (r0 + r1) / 2
    expected = ((r0 - mean) ** 2 + (r1 - mean) ** 2) / 2
    assert reg.loss(_ctx()).item() == pytest.approx(expected, rel=1e-9)
    assert reg.hp.weight == 10.0  # DomainBed vrex_lambda


def test_groupdro_q_update_and_loss_over_two_steps():
    eta = 1.0
    reg = REGULARIZERS.make("groupdro", step_size=eta)
    # step 1: environments 0 and 1
    r0, r1 = _risk(ENV0), _risk(ENV1)
    q0, q1 = math.exp(eta * r0), math.exp(eta * r1)
    loss1 = reg.loss(_ctx())
    assert loss1.item() == pytest.approx((q0 * r0 + q1 * r1) / (q0 + q1), rel=1e-9)
    q = reg.q
    assert q[0].item() == pytest.approx(q0 / (q0 + q1)) and q.sum().item() == pytest.approx(1)
    # step 2: graphs 2-4 again (env 1) and graphs 0-1 now as a new env 3
    envs2 = [3, 3, 1, 1, 1]
    s3, s1 = _risk(ENV0), _risk(ENV1)
    w1, w3 = math.exp(eta * (r1 + s1)), math.exp(eta * s3)  # a new id starts at weight 1
    loss2 = reg.loss(_ctx(envs=envs2))
    assert loss2.item() == pytest.approx((w1 * s1 + w3 * s3) / (w1 + w3), rel=1e-9)
    total = q0 + w1 + w3
    expected_q = [q0 / total, w1 / total, 0.0, w3 / total]  # id 2 never seen
    assert reg.q.tolist() == pytest.approx(expected_q, rel=1e-9)
    # evaluation mode does not move q; the state survives a save and load
    before = reg.q.clone()
    reg.eval()
    reg.loss(_ctx())
    assert torch.equal(reg.q, before)
    fresh = REGULARIZERS.make("groupdro", step_size=eta)
    fresh.load_state_dict(reg.state_dict())
    assert torch.equal(fresh.q, before)


def test_groupdro_with_step_size_0_is_the_mean_of_environment_risks():
    reg = REGULARIZERS.make("groupdro", step_size=0.0)
    assert reg.loss(_ctx()).item() == pytest.approx((_risk(ENV0) + _risk(ENV1)) / 2)
    assert REGULARIZERS.get("groupdro").defaults["step_size"] == 0.01  # DomainBed groupdro_eta


@pytest.mark.parametrize("name", ["irm", "vrex", "groupdro"])
def test_single_environment_and_single_graph_batches_are_finite(name):
    reg = REGULARIZERS.make(name)
    one_env = reg.loss(_ctx(envs=[2] * 5))
    singles = reg.loss(_ctx(envs=[0, 1, 2, 3, 4]))
    outside = reg.loss(_ctx(envs=[-1] * 5))  # ids < 0 (outside training envs) are ignored
    for value in (one_env, singles, outside):
        assert value.dim() == 0 and torch.isfinite(value)
    assert outside.item() == 0.0
    if name == "vrex":
        assert one_env.item() == 0.0
    if name == "irm":  # IRMv1 is defined per environment: one env gives its own penalty
        assert one_env.item() == pytest.approx(_grad(list(range(5))) ** 2, rel=1e-6)
    mixed = reg.loss(_ctx(envs=[-1, -1, 1, 1, 1]))  # only env 1 counts
    assert torch.isfinite(mixed)


def test_anneal_weights_the_first_steps_like_domainbed():
    reg = REGULARIZERS.make("irm", anneal_steps=2, anneal_weight=0.5)
    ctx = _ctx()
    value = reg.loss(ctx)
    weights = []
    for step in range(3):  # the weight depends on ctx.step, not on how often it was called
        ctx.step = step
        weights.append(reg.weight_at(ctx))
        assert reg.terms(ctx)["penalty"].item() == pytest.approx(weights[-1] * value.item())
    assert weights == [0.5, 0.5, 100.0]
    ctx.step = 0
    assert reg.weight_at(ctx) == 0.5 and reg.weight == 100.0
    fresh = REGULARIZERS.make("irm", anneal_steps=2, anneal_weight=0.5)
    fresh.load_state_dict(reg.state_dict())
    # a checkpoint from before ctx.step (its step count in the extra state) still loads
    fresh.load_state_dict({**reg.state_dict(), "_extra_state": {"steps": 3}})
    defaults = REGULARIZERS.get("vrex").defaults  # DomainBed: 500 steps at weight 1
    assert (defaults["anneal_steps"], defaults["anneal_weight"]) == (500, 1.0)
    off = REGULARIZERS.make("vrex", anneal_steps=0)
    assert off.weight_at(_ctx()) == 10.0
    with pytest.raises(GrpruneError, match="anneal_steps"):
        REGULARIZERS.make("vrex", anneal_steps=-1)


def _model(selector=None):
    enc = ENCODERS.make("gin", feature_kind="ogb", layers=2, hidden=16)
    sel = SELECTORS.make(selector, feature_kind="ogb", hidden=16) if selector else None
    return GraphClassifier(enc, 2, sel)


@pytest.mark.parametrize("name", ["irm", "vrex", "groupdro"])
@pytest.mark.parametrize("selector", [None, "gumbel-gin"])
def test_gradient_reaches_encoder_and_selector(name, selector, toy_batch):
    torch.manual_seed(0)
    model = _model(selector).train()
    out = model(toy_batch)
    reg = REGULARIZERS.make(name, step_size=1.0) if name == "groupdro" else REGULARIZERS.make(name)
    value = reg.loss(StepContext(batch=toy_batch, output=out, model=model))
    assert value.dim() == 0 and torch.isfinite(value)
    value.backward()
    parts = [model.encoder, model.head] + ([model.selector] if selector else [])
    for part in parts:
        grads = [p.grad for p in part.parameters() if p.grad is not None]
        assert grads and sum(g.abs().sum() for g in grads) > 0, type(part).__name__


def test_env_regularizers_refuse_a_single_environment_dataset(toy_dataset):
    cfg = resolve_config(reg="irm", encoder="gin", overrides=["encoder.hidden=16"])
    single = SimpleNamespace(**{**vars(toy_dataset), "name": "toy-one-env",
                                "envs": torch.zeros(4, dtype=torch.long)})
    with pytest.raises(GrpruneError, match=r"'irm'.*toy-one-env.*single environment"):
        build_model(cfg, single)
    build_model(cfg, toy_dataset)  # two environments: fine


def _bond_batch(num_bonds):
    """Two path graphs, ``num_bonds`` bonds in all."""
    half = num_bonds // 2
    g1 = make_graph(half + 1, [(i, i + 1) for i in range(half)])
    rest = num_bonds - half
    g2 = make_graph(rest + 1, [(i, i + 1) for i in range(rest)])
    return collate([(g1, 0, 0, 0), (g2, 1, 1, 1)])


def test_drop_edge_drops_bonds_with_both_directions():
    sel = SELECTORS.make("drop-edge", rate=0.3).train()
    assert not SELECTORS.get("drop-edge").learned and not list(sel.parameters())
    batch = _bond_batch(4000)
    torch.manual_seed(0)
    s = sel(batch).validate(batch.src.numel())
    w = s.edge_weight
    assert set(w.unique().tolist()) == {0.0, 1.0}
    # both directions of a bond share the draw
    per_bond = torch.zeros(batch.num_bonds).index_add_(0, batch.bond, w)
    assert set(per_bond.unique().tolist()) <= {0.0, 2.0}
    assert w.mean().item() == pytest.approx(0.7, abs=0.03)  # 4000 bonds: sd 0.007
    assert torch.allclose(s.edge_prob, torch.full_like(w, 0.7))
    assert torch.allclose(torch.sigmoid(s.edge_logits), s.edge_prob)
    # the global torch RNG decides: same seed, same mask; another draw differs
    torch.manual_seed(0)
    assert torch.equal(sel(batch).edge_weight, w)
    assert not torch.equal(sel(batch).edge_weight, w)
    # evaluation keeps every edge; eval_mode=sample drops as in training
    assert torch.equal(sel.eval()(batch).edge_weight, torch.ones_like(w))
    sample = SELECTORS.make("drop-edge", rate=0.3, eval_mode="sample").eval()
    assert sample(batch).edge_weight.mean().item() < 0.8


def test_drop_edge_rate_bounds_and_empty_batches():
    zero = SELECTORS.make("drop-edge", rate=0.0).train()
    batch = _bond_batch(10)
    s = zero(batch).validate(batch.src.numel())
    assert torch.equal(s.edge_weight, torch.ones_like(s.edge_weight))
    with pytest.raises(GrpruneError, match="rate"):
        SELECTORS.make("drop-edge", rate=1.0)
    no_edges = collate([(make_graph(1, []), 0, 0, 0)])
    assert SELECTORS.make("drop-edge").train()(no_edges).edge_weight.numel() == 0


def test_drop_edge_with_a_selector_regularizer_is_refused():
    with pytest.raises(GrpruneError, match=r"'size' cannot run with selector 'drop-edge': it needs a learned"):
        resolve_config(reg="size", selector="drop-edge")
    cfg = resolve_config(reg="none", selector="drop-edge")
    assert cfg["selector"] == {"name": "drop-edge", "rate": 0.2, "eval_mode": "full",
                               "eval_samples": 1}


@pytest.mark.parametrize("data", ["ogbg-molbbbp", "good-motif"])
def test_a_preset_leaves_drop_edges_full_graph_evaluation_alone(data):
    """The official preset's sampled evaluation is PrunE's selector's, not DropEdge's: a
    DropEdge run under it keeps every edge at evaluation, unless -H asks otherwise."""
    cfg = resolve_config(data=data, reg="none", selector="drop-edge", preset="official")
    assert cfg["preset"]["name"] == "official"
    assert (cfg["selector"]["eval_mode"], cfg["selector"]["eval_samples"]) == ("full", 1)
    assert not any(k.startswith("selector.eval") for k in cfg["preset"]["values"])
    asked = resolve_config(data=data, reg="none", selector="drop-edge", preset="official",
                           overrides=["selector.eval_mode=sample"])
    assert asked["selector"]["eval_mode"] == "sample"
    prune = resolve_config(data=data, preset="official")
    assert prune["selector"]["eval_mode"] == "sample"   # PrunE's selector takes it


# the paper preset: its selector trains from the first epoch (official warms up for 10)
SMALL = ["--data", "ogbg-molbbbp", "--preset", "paper", "--epochs", "2", "-H", "data.limit=96",
         "-H", "train.batch_size=32", "--progress", "none", "--device", "cpu"]


@pytest.mark.parametrize("args, term", [
    (["--reg", "irm"], "irm"),
    (["--reg", "vrex"], "vrex"),
    (["--reg", "groupdro"], "groupdro"),
    (["--selector", "drop-edge", "--reg", "none"], None),
])
def test_cli_runs_on_molbbbp(args, term, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", *args, *SMALL, "--out", str(out)],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    records = read_records(out / RESULTS)
    assert len(records) == 2
    for rec in records:
        assert math.isfinite(rec["loss"]["total"])
        if term is not None:
            assert math.isfinite(rec["loss"][term])
    summary = json.loads((out / SUMMARY).read_text())
    if term is None:  # DropEdge: about 80 % of the edges kept in training, all in evaluation
        assert summary["selector"] == "drop-edge"
        assert 0.7 < records[0]["loss"]["kept_edge_fraction"] < 0.9
        assert records[0]["valid"]["kept_edge_fraction"] == 1.0
    else:
        assert summary["reg"] == [term]
