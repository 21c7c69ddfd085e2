"""The plugin contract, checked over the registries.

* every registered dataset returns a :class:`GraphDataset` of DGLGraphs with the
  declared feature kind, labels, metric and split parts, and one batch of it runs
  through a selector + encoder (only the first ``LIMIT`` graphs of each part are
  inspected, as ``data.limit`` would train on);
* ``Regularizer.supports`` (and the older ``requires``) stops a run before training with
  one message naming both parts;
* ``Regularizer.terms``: named, weighted terms, each logged in ``results.jsonl``;
* a selector plugin that returns a broken :class:`Selection` fails with its name.

Datasets load from the bundled files (no network) into the session's data root, with the
parameters the dataset's own tests use, so one CI run featurizes each dataset once. The
large ones are marked ``slow`` (minutes on a cold cache; `pytest -m "not slow"` skips them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from grprune.batch import collate
from grprune.compat import dgl
from grprune.resolve import resolve_config
from grprune.data import DATASETS, GraphDataset, load_dataset
from grprune.encoders import ENCODERS
from grprune.errors import GrpruneError
from grprune.model import GraphClassifier
from grprune.regularizers import REGULARIZERS, Regularizer, StepContext
from grprune.regularizers.base import Unsupported, check_supports, needs_selector
from grprune.selectors import SELECTORS, Selection, Selector, check_selection
from grprune.record.runconfig import FeatureSpec
from grprune.trainer import Trainer

LIMIT = 64
#: the parameters the dataset's own tests load with (tests/test_good_hiv.py): one
#: featurization per session; others load with their defaults
LOAD_PARAMS = {"good-hiv": {"split": "size", "shift": "covariate"}}
#: tens of thousands of molecules to featurize on a cold cache
SLOW = {"good-hiv", "ogbg-molhiv", "drugood-ec50"}


def _params():
    return [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
            for n in DATASETS.names()]


def _check_graph(g, kind: str) -> None:
    assert isinstance(g, dgl.DGLGraph)
    feat = g.ndata["feat"]
    assert feat.shape[0] == g.num_nodes()
    if kind == "ogb":
        assert feat.dtype == torch.int64 and feat.shape[1:] == (9,)
        assert g.edata["feat"].dtype == torch.int64 and g.edata["feat"].shape == (g.num_edges(), 3)
    else:
        assert feat.is_floating_point() and feat.dim() in (1, 2)
        if "feat" in g.edata:
            assert g.edata["feat"].is_floating_point() and len(g.edata["feat"]) == g.num_edges()
    src, dst = (t.tolist() for t in g.edges())
    assert sorted(zip(src, dst)) == sorted(zip(dst, src)), "both directions of every bond"


def _dgl_graphs_file(tmp_path) -> dict:
    """A tiny ``dgl.save_graphs`` file for ``dgl-graphs`` (a dataset of the user's file):
    30 cycles and paths with float node features."""
    graphs = []
    for i in range(30):
        k, ring = 3 + i % 4, i % 2
        src, dst = list(range(k - 1)) + [k - 1] * ring, list(range(1, k)) + [0] * ring
        g = dgl.graph((src + dst, dst + src), num_nodes=k)
        g.ndata["feat"] = torch.rand(k, 2)
        graphs.append(g)
    path = tmp_path / "graphs.bin"
    dgl.save_graphs(str(path), graphs, {"label": torch.arange(30) % 2})
    return {"path": str(path)}


def _molecule_csv_file(tmp_path) -> dict:
    """A tiny CSV for ``molecule-csv``: 60 molecules of the bundled molbbbp file."""
    import pandas as pd
    from grprune.data.ogbg import FILES
    rows = pd.read_csv(FILES / "ogbg_molbbbp" / "bbbp.csv.gz").head(60)
    path = tmp_path / "mols.csv"
    pd.DataFrame({"smiles": rows["smiles"], "label": rows["p_np"]}).to_csv(path, index=False)
    return {"path": str(path)}


#: datasets of the user's own files, given a tiny one
USER_FILES = {"dgl-graphs": _dgl_graphs_file, "molecule-csv": _molecule_csv_file}


@pytest.mark.parametrize("name", _params())
def test_dataset_contract(name, tmp_path):
    params = dict(LOAD_PARAMS.get(name, {}))
    if name in USER_FILES:
        params.update(USER_FILES[name](tmp_path))
    check_dataset_contract(name, **params)


def check_dataset_contract(name: str, **params) -> None:
    """Load ``name`` and check what a dataset promises (see the module docstring)."""
    source = DATASETS.get(name)
    ds = load_dataset(name, **params)
    assert isinstance(ds, GraphDataset) and ds.name == name
    assert ds.metric == source.metric and ds.num_classes == source.num_classes
    assert ds.atom_encoder in ("ogb", "linear")
    n = len(ds)
    assert len(ds.labels) == len(ds.envs) == n and ds.envs.dtype == torch.int64
    assert 0 <= int(ds.labels.min()) and int(ds.labels.max()) < ds.num_classes
    assert set(source.parts) <= set(ds.splits)
    seen = []
    for part in source.parts:
        idx = ds.splits[part]
        assert idx.dtype == np.int64 and len(idx) > 0, part
        assert 0 <= idx.min() and idx.max() < n and (np.diff(idx) > 0).all()
        seen.append(idx)
    assert len(np.unique(np.concatenate(seen))) == sum(len(i) for i in seen), "disjoint parts"
    for idx in seen:
        for i in idx[:LIMIT]:
            g, label, env, j = ds[int(i)]
            assert j == int(i) and 0 <= label < ds.num_classes
            _check_graph(g, ds.atom_encoder)
    # one batch through selector + encoder + head, with the features a run would use
    features = FeatureSpec.of(ds)
    feat = features.model_kwargs()
    torch.manual_seed(0)
    model = GraphClassifier(ENCODERS.make("gin", **feat, layers=2, hidden=16), features.classes,
                            SELECTORS.make("gumbel-gin", **feat, hidden=16)).train()
    batch = collate([ds[int(i)] for i in ds.splits["train"][:8]])
    out = model(batch)
    check_selection(out.selection, batch, "gumbel-gin")
    assert out.logits.shape == (8, ds.num_classes) and torch.isfinite(out.logits).all()


# -- supports() --------------------------------------------------------------------
def test_supports_default_reads_requires(toy_dataset):
    assert needs_selector(REGULARIZERS.get("size")) and not needs_selector(REGULARIZERS.get("irm"))
    gumbel, drop = SELECTORS.get("gumbel-gin"), SELECTORS.get("drop-edge")
    assert REGULARIZERS.get("size").supports(selector=gumbel)
    with pytest.raises(Unsupported, match="learned"):
        REGULARIZERS.get("size").supports(selector=drop)
    with pytest.raises(GrpruneError, match=r"regularizer 'gsat' cannot run with selector "
                                           r"'drop-edge'.*learned"):
        check_supports({"gsat": REGULARIZERS.get("gsat")}, "drop-edge")
    toy_dataset.envs = torch.zeros(4, dtype=torch.long)
    with pytest.raises(GrpruneError, match=r"'vrex'.*selector 'none' on dataset 'toy'.*single"):
        check_supports({"vrex": REGULARIZERS.get("vrex")}, "none", toy_dataset)


def test_a_supports_override_is_asked_and_a_requires_plugin_still_works(toy_dataset):
    class NeedsThreeClasses(Regularizer):
        @classmethod
        def supports(cls, selector=None, dataset=None):
            return dataset is None or dataset.num_classes >= 3

        def loss(self, ctx):
            return ctx.output.logits.sum() * 0.0

    class OldStyle(Regularizer):  # a plugin written before supports()
        requires = frozenset({"selector"})

        def loss(self, ctx):
            return ctx.selection.edge_prob.mean()

    with pytest.raises(GrpruneError, match=r"regularizer 'three' cannot run with selector "
                                           r"'gumbel-gin' on dataset 'toy'$"):
        check_supports({"three": NeedsThreeClasses}, "gumbel-gin", toy_dataset)
    check_supports({"old": OldStyle}, "gumbel-gcn", toy_dataset)
    with pytest.raises(GrpruneError, match=r"'old' cannot run with selector 'none'.*selector"):
        check_supports({"old": OldStyle}, "none", toy_dataset)


# -- terms() -----------------------------------------------------------------------
def test_default_terms_wrap_loss(toy_batch):
    torch.manual_seed(0)
    model = GraphClassifier(ENCODERS.make("gin", layers=2, hidden=16), 2,
                            SELECTORS.make("gumbel-gin", hidden=16)).train()
    ctx = StepContext(batch=toy_batch, output=model(toy_batch), model=model)
    for name in ("size", "eps-align", "gsat"):
        reg = REGULARIZERS.make(name)
        terms = reg.terms(ctx)
        assert list(terms) == ["penalty"]
        assert terms["penalty"].item() == pytest.approx(reg.weight * reg.loss(ctx).item())
        assert ctx.values[name].item() == pytest.approx(reg.loss(ctx).item())


def test_terms_are_logged_in_results(tmp_path):
    cfg = resolve_config(data="good-motif", reg="size,ciga",
                         flags={"train.epochs": 1, "train.device": "cpu", "data.limit": 48,
                                "train.batch_size": 16, "train.warmup_epochs": 0},
                         overrides=["reg.ciga.spurious_weight=0.5"])
    trainer = Trainer(cfg, load_dataset("good-motif"), tmp_path)
    trainer.fit()
    loss = json.loads((tmp_path / "results.jsonl").read_text().splitlines()[0])["loss"]
    for key in ("ce", "size", "size/penalty", "ciga", "ciga/contrast", "ciga/causal_ce",
                "ciga/hinge", "total"):
        assert np.isfinite(loss[key]), key
    assert loss["size/penalty"] == pytest.approx(10.0 * loss["size"], rel=1e-5)
    parts = loss["ciga/contrast"] + loss["ciga/causal_ce"] + loss["ciga/hinge"]
    assert loss["ciga"] == pytest.approx(parts, rel=1e-5)
    assert loss["total"] == pytest.approx(loss["ce"] + loss["size/penalty"] + parts, rel=1e-5)


# -- Selection.validate() on the first batch ---------------------------------------
def test_a_broken_selector_plugin_fails_with_its_name(tmp_path):
    @SELECTORS.register("test-broken")
    class Broken(Selector):
        def forward(self, batch):
            e = batch.src.numel()
            return Selection(edge_logits=torch.zeros(e), edge_prob=torch.full((e,), 0.5),
                             edge_weight=torch.full((e,), 2.0))  # outside [0, 1]

    try:
        cfg = resolve_config(data="good-motif", reg="none", selector="test-broken",
                             flags={"train.epochs": 1, "train.device": "cpu", "data.limit": 16,
                                    "train.warmup_epochs": 0})
        trainer = Trainer(cfg, load_dataset("good-motif"), tmp_path)
        with pytest.raises(GrpruneError, match=r"selector 'test-broken' returned an invalid "
                                               r"Selection: edge_weight outside \[0, 1\]"):
            trainer.fit()
    finally:
        SELECTORS.unregister("test-broken")
    with pytest.raises(GrpruneError, match="not a Selection"):
        check_selection((1, 2), None, "tuple-selector")  # type: ignore[arg-type]  # wrong on purpose


# -- the docs' examples of the four kinds of part (docs/extending.md) --------------
EXTENDING = Path(__file__).parents[1] / "docs" / "extending.md"


def _docs_example(filename: str) -> str:
    page = EXTENDING.read_text()
    match = re.search(rf"```python\n(# {re.escape(filename)}\n.*?)```", page, re.S)
    assert match, f"{filename}: no such example in {EXTENDING.name}"
    code = match.group(1)
    assert len(code.splitlines()) <= 25, f"{filename}: keep the docs' examples to 25 lines"
    return code


def test_docs_selector_encoder_dataset_examples_run(toy_batch, tmp_path):
    for name in ("my_selector.py", "my_encoder.py", "my_dataset.py"):
        exec(compile(_docs_example(name), "docs/extending.md", "exec"), {})
    try:
        torch.manual_seed(0)
        sel = SELECTORS.make("degree-gumbel").train()
        model = GraphClassifier(ENCODERS.make("sum-mlp", hidden=16), 2, sel).train()
        out = model(toy_batch)
        check_selection(out.selection, toy_batch, "degree-gumbel")
        ctx = StepContext(batch=toy_batch, output=out, model=model)
        total = out.logits.sum() + REGULARIZERS.make("size").terms(ctx)["penalty"]
        total.backward()
        assert sel.a.grad is not None and torch.isfinite(sel.a.grad)
        assert all(p.grad is not None for p in model.encoder.parameters())
        check_dataset_contract("rings-vs-paths", n=24)
        cfg = resolve_config(data="rings-vs-paths", selector="degree-gumbel", encoder="sum-mlp",
                             reg="size", overrides=["data.n=24", "selector.init_bias=1.5"],
                             flags={"train.epochs": 2, "train.device": "cpu",
                                    "train.warmup_epochs": 0, "train.batch_size": 8})
        summary = Trainer(cfg, load_dataset("rings-vs-paths", n=24), tmp_path).fit()
        assert summary.test is not None and 0.0 <= summary.test <= 1.0
    finally:
        SELECTORS.unregister("degree-gumbel")
        ENCODERS.unregister("sum-mlp")
        DATASETS.unregister("rings-vs-paths")
