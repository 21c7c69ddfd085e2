"""The subgraph-information regularizers ``gsat`` and ``ciga`` against hand-computed values."""

from __future__ import annotations

import json
import math

import pytest
import torch
from click.testing import CliRunner

import grprune.regularizers.ciga  # noqa: F401  (registers "ciga")
import grprune.regularizers.gsat  # noqa: F401  (registers "gsat")
from grprune.record.files import CONFIG, RESULTS, read_records
from grprune.batch import collate
from grprune.cli import main
from grprune.resolve import resolve_config
from grprune.encoders import ENCODERS
from grprune.model import GraphClassifier, ModelOutput
from grprune.regularizers import REGULARIZERS, StepContext
from grprune.regularizers.ciga import causal_edge_mask, ciga_hinge, sup_contrast_loss
from grprune.regularizers.gsat import gsat_info_loss, gsat_r
from grprune.selectors import SELECTORS
from grprune.selectors.base import Selection

from conftest import make_graph


def _model(**sel_hp):
    enc = ENCODERS.make("gin", feature_kind="ogb", layers=2, hidden=16, virtual_node=True)
    sel = SELECTORS.make("gumbel-gin", feature_kind="ogb", hidden=16, **sel_hp)
    return GraphClassifier(enc, 2, sel)


def _selection(logits, relaxed=None):
    logits = torch.as_tensor(logits, dtype=torch.float32)
    prob = torch.sigmoid(logits)
    return Selection(edge_logits=logits, edge_prob=prob, edge_weight=prob, relaxed=relaxed)


def _ctx(batch, selection, epoch=0):
    """A step on ``batch`` whose output carries ``selection`` (the subgraph losses read
    the batch, the selection and the epoch; no model, no logits)."""
    empty = torch.zeros(batch.num_graphs, 0)
    out = ModelOutput(logits=empty, graph_repr=empty, node_repr=empty, selection=selection)
    return StepContext(batch=batch, output=out, model=None, epoch=epoch)  # type: ignore[arg-type]


def _kl(a, r, eps=1e-6):
    return a * math.log(a / r + eps) + (1 - a) * math.log((1 - a) / (1 - r + eps) + eps)


# -- gsat ------------------------------------------------------------------
def test_gsat_kl_matches_hand_computation():
    att = [0.2, 0.2, 0.9, 0.9, 0.5, 0.5]  # three bonds, both directions each
    expected = sum(_kl(a, 0.7) for a in att) / len(att)
    assert gsat_info_loss(torch.tensor(att, dtype=torch.float64), 0.7).item() == \
        pytest.approx(expected, rel=1e-12)
    # saturated attention stays finite thanks to GSAT's eps inside the logs
    edge = torch.tensor([0.0, 1.0], requires_grad=True)
    value = gsat_info_loss(edge, 0.7)
    value.backward()
    assert edge.grad is not None
    assert torch.isfinite(value) and torch.isfinite(edge.grad).all()
    assert gsat_info_loss(torch.zeros(0), 0.7).item() == 0.0


def test_gsat_loss_uses_the_sample_or_the_probability():
    relaxed = torch.tensor([0.3, 0.3, 0.8, 0.8])
    sel = _selection([0.0, 0.0, 2.0, 2.0], relaxed=relaxed)
    ctx = _ctx(collate([(make_graph(3, [(0, 1), (1, 2)]), 0, 0, 0)]), sel)  # two bonds
    r = 0.9  # first epoch of the schedule
    sample = REGULARIZERS.make("gsat").loss(ctx).item()
    assert sample == pytest.approx(sum(_kl(a, r) for a in (0.3, 0.3, 0.8, 0.8)) / 4, rel=1e-5)
    prob = REGULARIZERS.make("gsat", att="prob").loss(ctx).item()
    p = 1 / (1 + math.exp(-2.0))
    assert prob == pytest.approx((2 * _kl(0.5, r) + 2 * _kl(p, r)) / 4, rel=1e-5)


def test_gsat_r_schedule():
    # GSAT's GIN-ogbg_mol config: init 0.9, decay 0.1 every 20 epochs, floor 0.7
    assert [gsat_r(t) for t in (0, 19)] == [0.9, 0.9]
    assert [gsat_r(t) for t in (20, 39, 40, 41, 199)] == pytest.approx([0.8, 0.8, 0.7, 0.7, 0.7])
    # GSAT's SPMotif config: every 10 epochs
    assert [gsat_r(t, decay_interval=10) for t in (9, 10, 25, 30)] == \
        pytest.approx([0.9, 0.8, 0.7, 0.7])
    assert gsat_r(50, final_r=0.5, decay_interval=10) == pytest.approx(0.5)  # MUTAG's floor
    assert gsat_r(100, decay_r=0.0) == 0.9  # fixed r


def test_gsat_schedule_counts_from_the_first_active_epoch():
    active = REGULARIZERS.make("gsat")
    absolute = REGULARIZERS.make("gsat", schedule="absolute")
    # warm-up of 5 epochs: the term is first computed at epoch 5
    assert active.r(active.schedule_epoch(5)) == 0.9
    assert active.r(active.schedule_epoch(24)) == 0.9  # 19 epochs on
    assert active.r(active.schedule_epoch(25)) == pytest.approx(0.8)
    assert absolute.r(absolute.schedule_epoch(24)) == pytest.approx(0.8)
    # the start epoch survives a checkpoint (resume)
    again = REGULARIZERS.make("gsat")
    again.load_state_dict(active.state_dict())
    assert again.r(again.schedule_epoch(25)) == pytest.approx(0.8)


def test_gsat_hparams_are_checked():
    from grprune.errors import GrpruneError
    with pytest.raises(GrpruneError, match="final_r"):
        REGULARIZERS.make("gsat", init_r=0.5, final_r=0.7)
    with pytest.raises(GrpruneError, match="decay_interval"):
        REGULARIZERS.make("gsat", decay_interval=0)


# -- ciga ------------------------------------------------------------------
def test_ciga_topk_per_graph_on_bonds(toy_batch):
    b = toy_batch
    # bond ids: path (0,1)=0 (1,2)=1 | single atom: none | (4,5)=2 | triangle (6,7)=3 (6,8)=4 (7,8)=5
    pairs = {(min(s, d), max(s, d)): int(k) for s, d, k in
             zip(b.src.tolist(), b.dst.tolist(), b.bond.tolist())}
    assert pairs == {(0, 1): 0, (1, 2): 1, (4, 5): 2, (6, 7): 3, (6, 8): 4, (7, 8): 5}
    bond_score = torch.tensor([0.1, 0.3, -5.0, 0.7, 0.7, 0.9])
    score = bond_score[b.bond]

    def kept(ratio):
        mask = causal_edge_mask(score, b.bond, b.edge_graph, b.num_graphs, ratio)
        for k in range(6):  # both directions together
            assert mask[b.bond == k].unique().numel() == 1
        return sorted(set(b.bond[mask].tolist()))

    # r=0.5: ceil(1)=1 of the path, ceil(0.5)=1 of the single bond, ceil(1.5)=2 of the
    # triangle: 0.9 then the tie 0.7/0.7 goes to the lower bond id (3)
    assert kept(0.5) == [1, 2, 3, 5]
    assert kept(0.34) == [1, 2, 3, 5]  # ceil(0.68)=1, ceil(0.34)=1, ceil(1.02)=2
    assert kept(0.3) == [1, 2, 5]  # ceil(0.9)=1 of the triangle
    assert kept(1.0) == [0, 1, 2, 3, 4, 5]
    # ceil(r*U) without float noise: 0.07 * 100 = 7.000000000000001 -> 7 bonds
    hundred = torch.arange(100).repeat_interleave(2)
    mask = causal_edge_mask(hundred.float(), hundred, torch.zeros_like(hundred), 1, 0.07)
    assert sorted(set(hundred[mask].tolist())) == list(range(93, 100))
    assert causal_edge_mask(torch.zeros(0), torch.zeros(0, dtype=torch.long),
                            torch.zeros(0, dtype=torch.long), 2, 0.5).numel() == 0


def test_ciga_split_weights(toy_batch):
    b = toy_batch
    logits = torch.tensor([0.1, 0.3, -5.0, 0.7, 0.7, 0.9])[b.bond]
    ctx = _ctx(b, _selection(logits))
    keep, causal_w, spurious_w = REGULARIZERS.make("ciga", ratio=0.5).split(ctx)
    p = torch.sigmoid(logits)
    assert torch.equal(causal_w, torch.where(keep, p, torch.zeros_like(p)))
    assert torch.equal(spurious_w, torch.where(keep, torch.zeros_like(p), 1 - p))


def test_supervised_contrastive_loss_by_hand():
    # z1=(1,0), z2=(0,1) share label 0, z3=(1,1)/sqrt2 has label 1 (no positive: not an anchor)
    rep = torch.tensor([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]], requires_grad=True)
    labels = torch.tensor([0, 0, 1])
    t = 0.5
    # anchors 1 and 2: log-prob of the partner = 0/t - log(exp(0/t) + exp((1/sqrt2)/t))
    expected = math.log(1 + math.exp(1 / math.sqrt(2) / t))
    value = sup_contrast_loss(rep, labels, temperature=t)
    assert value.item() == pytest.approx(expected, rel=1e-6)
    value.backward()
    assert rep.grad is not None and torch.isfinite(rep.grad).all()
    # two positives for one anchor: the mean of their log-probs
    rep4 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [-1.0, 0.0]])
    lab4 = torch.tensor([0, 0, 0, 1])
    sims = {0: [0.0, 1.0, -1.0], 1: [0.0, 0.0, 0.0], 2: [1.0, 0.0, -1.0]}  # to others, in order
    pos = {0: [0, 1], 1: [0, 1], 2: [0, 1]}  # positions of the positives among "others"
    terms = []
    for i in range(3):
        log_denom = math.log(sum(math.exp(s) for s in sims[i]))
        terms.append(sum(sims[i][j] - log_denom for j in pos[i]) / 2)
    assert sup_contrast_loss(rep4, lab4).item() == pytest.approx(-sum(terms) / 3, rel=1e-6)


def test_supervised_contrastive_loss_without_positives_is_zero():
    rep = torch.randn(3, 4, requires_grad=True)
    value = sup_contrast_loss(rep, torch.tensor([0, 1, 2]))
    value.backward()
    assert rep.grad is not None
    assert value.item() == 0.0 and torch.isfinite(rep.grad).all()
    one = torch.randn(1, 4, requires_grad=True)
    assert sup_contrast_loss(one, torch.tensor([1])).item() == 0.0


def test_ciga_hinge_by_hand():
    spu = torch.tensor([1.0, 0.2, 3.0], requires_grad=True)
    causal = torch.tensor([0.5, 0.4, 1.0])
    value = ciga_hinge(spu, causal)
    assert value.item() == pytest.approx((1.0 + 3.0) / (2 + 1e-6))
    value.backward()
    assert spu.grad is not None and spu.grad.tolist() == pytest.approx([1 / (2 + 1e-6), 0.0, 1 / (2 + 1e-6)])
    assert ciga_hinge(torch.tensor([0.1]), torch.tensor([0.5])).item() == 0.0


def test_ciga_composes_alpha_beta_gamma(toy_batch, monkeypatch):
    """terms() = alpha*contrast, gamma*CE(G_c), beta*hinge: CIGA's total, each named."""
    torch.manual_seed(0)
    model = _model().train()
    out = model(toy_batch)
    ctx = StepContext(batch=toy_batch, output=out, model=model)
    parts: dict[str, torch.Tensor] = {}
    monkeypatch.setattr("grprune.regularizers.ciga.sup_contrast_loss",
                        lambda *a: parts.setdefault("con", torch.tensor(0.3)))
    monkeypatch.setattr("grprune.regularizers.ciga.ciga_hinge",
                        lambda *a: parts.setdefault("hinge", torch.tensor(0.7)))
    monkeypatch.setattr("grprune.regularizers.ciga.cross_entropy",
                        lambda *a, **k: parts.setdefault("ce", torch.full((4,), 0.2)))
    reg = REGULARIZERS.make("ciga", weight=4.0, causal_ce=2.0, spurious_weight=0.5)
    terms = {k: v.item() for k, v in reg.terms(ctx).items()}
    assert terms == pytest.approx({"contrast": 4.0 * 0.3, "causal_ce": 2.0 * 0.2,
                                   "hinge": 0.5 * 0.7})
    assert reg.loss(ctx).item() == pytest.approx(4.0 * 0.3 + 2.0 * 0.2 + 0.5 * 0.7)
    # no division by alpha any more: alpha = 0 leaves the other terms as they are
    zero = REGULARIZERS.make("ciga", weight=0.0, causal_ce=2.0)
    assert {k: v.item() for k, v in zero.terms(ctx).items()} == pytest.approx(
        {"contrast": 0.0, "causal_ce": 0.4})


# -- both: gradients, config, end to end -------------------------------------
CASES = [("gsat", {}, {"hard": False, "eval_mode": "soft"}),
         ("ciga", {}, {}),
         ("ciga", {"causal_ce": 0.0}, {}),  # contrast alone reaches the selector
         ("ciga", {"spurious_weight": 1.0}, {})]


@pytest.mark.parametrize("name,hp,sel_hp", CASES)
def test_finite_and_reaches_selector(name, hp, sel_hp, toy_batch):
    torch.manual_seed(0)
    model = _model(**sel_hp).train()
    reg = REGULARIZERS.make(name, **hp).train()
    out = model(toy_batch)
    value = reg.loss(StepContext(batch=toy_batch, output=out, model=model, epoch=3))
    assert value.dim() == 0 and torch.isfinite(value)
    value.backward()
    grads = [p.grad for p in model.selector.parameters() if p.grad is not None]
    assert grads and sum(g.abs().sum() for g in grads) > 0
    if hp.get("spurious_weight"):
        head = list(reg.parameters())
        assert head and all(p.grad is not None and torch.isfinite(p.grad).all() for p in head)


@pytest.mark.parametrize("name", ["gsat", "ciga"])
def test_zero_edge_and_unpaired_batches(name):
    torch.manual_seed(0)
    model = _model().train()
    reg = REGULARIZERS.make(name, **({"spurious_weight": 1.0} if name == "ciga" else {}))
    atoms = collate([(make_graph(1, []), i, 0, i) for i in range(2)])  # no edges, labels 0/1
    pair = collate([(make_graph(2, [(0, 1)]), 0, 0, 0), (make_graph(3, [(0, 1)]), 1, 0, 1)])
    for batch in (atoms, pair):
        out = model(batch)
        value = reg.loss(StepContext(batch=batch, output=out, model=model))
        value.backward()
        assert torch.isfinite(value)
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        model.zero_grad()


def test_resolve_config_applies_gsat_selector_defaults():
    cfg = resolve_config(reg="gsat")
    assert cfg["selector"]["hard"] is False and cfg["selector"]["eval_mode"] == "soft"
    cfg = resolve_config(reg="gsat", overrides=["selector.hard=true"])
    assert cfg["selector"]["hard"] is True and cfg["selector"]["eval_mode"] == "soft"
    cfg = resolve_config(reg="ciga")
    assert cfg["selector"]["hard"] is True and cfg["reg"]["ciga"]["ratio"] == 0.8
    assert resolve_config(reg="gsat,ciga")["selector"]["hard"] is False


@pytest.mark.parametrize("name,extra", [("gsat", []),
                                        ("ciga", ["-H", "reg.ciga.spurious_weight=1"])])
def test_cli_run(name, extra, tmp_path):
    out = tmp_path / "x"
    args = ["run", "--reg", name, "--data", "ogbg-molbbbp", "--preset", "paper", "--epochs", "2",
            "-H", "data.limit=96", "-H", "train.batch_size=32", *extra,
            "--progress", "none", "--device", "cpu", "--out", str(out)]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    records = read_records(out / RESULTS)
    assert len(records) == 2
    assert all(math.isfinite(rec["loss"][name]) for rec in records)
    cfg = json.loads((out / CONFIG).read_text())
    assert name in cfg["reg"]
