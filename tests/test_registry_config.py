"""Registry lookups, plugins, and config resolution (-H overrides, files, errors)."""

from __future__ import annotations

import json
from typing import Protocol, runtime_checkable

import pytest

from grprune.record.settings import config_hash
from grprune.resolve import resolve_config
from grprune.errors import GrpruneError
from grprune.registry import Registry
from grprune.regularizers import REGULARIZERS, Regularizer


def test_lookup_normalises_and_suggests():
    assert REGULARIZERS.canonical("EPS_align") == "eps-align"
    with pytest.raises(GrpruneError, match=r"unknown regularizer 'eps-algn'.*Did you mean 'eps-align'.*Choices"):
        REGULARIZERS.canonical("eps-algn")


def test_duplicate_registration_is_an_error():
    reg = Registry("thing")
    reg.add("a-b", object)
    with pytest.raises(GrpruneError, match="already registered"):
        reg.add("A_B", object)


def test_make_many_and_none():
    assert REGULARIZERS.split("size, eps-align") == ["size", "eps-align"]
    assert REGULARIZERS.split("none") == []
    with pytest.raises(GrpruneError, match="twice"):
        REGULARIZERS.split("size,size")


def test_decorator_registration_usable_by_name():
    @REGULARIZERS.register("test-entropy")
    class Entropy(Regularizer):
        requires = frozenset({"selector"})

        def loss(self, ctx):
            p = ctx.selection.edge_prob.clamp(1e-6, 1 - 1e-6)
            return -(p * p.log() + (1 - p) * (1 - p).log()).mean()

    try:
        cfg = resolve_config(reg="size,test-entropy", overrides=["reg.test-entropy.weight=0.5"])
        assert cfg["reg"]["test-entropy"] == {"weight": 0.5}
    finally:
        REGULARIZERS.unregister("test-entropy")


def test_broken_entry_point_plugin_is_reported_not_fatal(monkeypatch, capsys):
    class EP:
        name, value = "broken-one", "nowhere:Thing"

        def load(self):
            raise ImportError("no module named nowhere")

    reg = Registry("regularizer", entry_point_group="grprune.test")
    reg.add("fine", object)
    monkeypatch.setattr("grprune.registry.metadata.entry_points", lambda group: [EP()])
    assert reg.names() == ["fine"]
    assert "broken-one" in reg.broken_plugins
    assert "failed to load" in capsys.readouterr().err
    with pytest.raises(GrpruneError, match="failed to load"):
        reg.get("broken-one")


class _Part:
    pass


class _MyPart(_Part):
    pass


@runtime_checkable
class _Loader(Protocol):
    metric: str

    def load(self) -> None: ...


def test_registration_refuses_what_is_not_of_the_base():
    reg = Registry("widget", base=_Part)
    reg.add("mine", _MyPart)  # a subclass: fine
    assert reg.get("mine") is _MyPart
    for wrong in (object, _MyPart()):  # another class; an instance, not a class
        with pytest.raises(GrpruneError, match=r"widget 'wrong' .* cannot be registered: a "
                                               r"widget must be a subclass of .*_Part"):
            reg.add("wrong", wrong)
    assert "wrong" not in reg
    later = Registry("widget")  # a base set after construction (parts define it later)
    later.lazy("lazy-one", "nowhere.at.all")
    later.base = _Part
    with pytest.raises(GrpruneError, match="must be a subclass"):  # when its module registers
        later.add("lazy-one", object)
    later.add("lazy-one", _MyPart)
    assert later.get("lazy-one") is _MyPart


def test_a_runtime_checkable_protocol_base_is_checked_by_what_it_declares():
    class Fits:
        metric = "accuracy"

        def load(self) -> None: ...

    class NoMetric:
        def load(self) -> None: ...

    reg = Registry("loader", base=_Loader)
    reg.add("fits", Fits)
    with pytest.raises(GrpruneError, match=r"loader 'no-metric' \(.*NoMetric\) cannot be "
                                           r"registered: a loader must implement the protocol"):
        reg.add("no-metric", NoMetric)
    assert reg.names() == ["fits"]


def test_a_dataset_that_is_no_dataset_source_fails_at_registration():
    from grprune.data import DATASETS, DatasetSource

    assert DATASETS.base is DatasetSource
    with pytest.raises(GrpruneError, match=r"dataset 'not-a-source' \(.*\.NotASource\) cannot be "
                                           r"registered: a dataset must be a subclass of "
                                           r"grprune\.data\.registry\.DatasetSource"):
        @DATASETS.register("not-a-source")
        class NotASource:
            def load(self, *, root, download=False):
                return None
    assert "not-a-source" not in DATASETS

    @DATASETS.register("a-source")
    class ASource(DatasetSource):
        splits = ("random",)
    try:
        assert DATASETS.get("a-source") is ASource
    finally:
        DATASETS.unregister("a-source")


def test_a_plugin_of_the_wrong_kind_is_reported_not_registered(monkeypatch, capsys):
    class EP:
        name, value = "wrong-kind", "somewhere:Thing"

        def load(self):
            return object

    reg = Registry("regularizer", entry_point_group="grprune.test", base=_Part)
    monkeypatch.setattr("grprune.registry.metadata.entry_points", lambda group: [EP()])
    assert reg.names() == []
    assert "must be a subclass" in reg.broken_plugins["wrong-kind"]
    assert "failed to load" in capsys.readouterr().err


def test_resolution_order_and_types(tmp_path):
    cfg = resolve_config(reg="size,eps-align", preset="paper")
    assert cfg["selector"]["name"] == "gumbel-gin"  # auto
    # dataset recommendation (paper: virtual node on molbbbp) over the encoder default
    assert cfg["encoder"]["virtual_node"] is True and cfg["encoder"]["hidden"] == 64
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"reg": {"size": {"eta": 0.5}}, "train": {"epochs": 7}}))
    cfg = resolve_config(file=f, flags={"train.epochs": 3},
                         overrides=["reg.size.eta=0.75", "selector.tau=0.5"])
    assert cfg["reg"]["size"]["eta"] == 0.75 and cfg["train"]["epochs"] == 3
    assert list(cfg["reg"]) == ["size"] and cfg["selector"]["tau"] == 0.5
    assert isinstance(cfg["train"]["epochs"], int)


def test_erm_has_no_selector():
    cfg = resolve_config(reg="none")
    assert cfg["selector"] == {"name": "none"} and cfg["reg"] == {}


@pytest.mark.parametrize("kwargs, message", [
    ({"reg": "nope"}, "unknown regularizer 'nope'"),
    ({"overrides": ["reg.size.etaa=1"]}, "unknown hyperparameter reg.size.etaa"),
    ({"overrides": ["reg.size.eta=abc"]}, "bad value 'abc' for reg.size.eta"),
    ({"overrides": ["reg.size.form=fancy"]}, "Choices: paper, official"),
    ({"overrides": ["selector.tau=0"]}, "bad value '0' for selector.tau: expected a number > 0"),
    ({"overrides": ["reg.nosuch.weight=1"]}, "unknown regularizer 'nosuch'"),
    ({"reg": "size", "overrides": ["reg.eps-align.k=10"]}, "not in --reg"),
    ({"overrides": ["nosection"]}, "expected section.key=value"),
    ({"selector": "none", "reg": "size"}, "'size' cannot run with selector 'none': it needs a subgraph selector"),
    ({"flags": {"data.split": "random"}}, "Choices: scaffold, size"),
    ({"data": "ogbg-molbbbq"}, "Did you mean 'ogbg-molbbbp'"),
])
def test_bad_input_is_one_clear_error(kwargs, message):
    with pytest.raises(GrpruneError, match=message):
        resolve_config(**kwargs)


def test_hash_ignores_device_and_root():
    a = resolve_config(flags={"train.device": "cpu", "data.root": "/x"})
    b = resolve_config(flags={"train.device": "auto"})
    c = resolve_config(flags={"train.seed": 1})
    assert config_hash(a) == config_hash(b) != config_hash(c)


def test_docs_regularizer_example_runs(toy_batch):
    """docs/extending.md's ~20-line example registers, resolves and trains one step."""
    import re
    from pathlib import Path

    import torch

    from grprune.encoders import ENCODERS
    from grprune.model import GraphClassifier
    from grprune.regularizers import StepContext
    from grprune.selectors import SELECTORS

    page = (Path(__file__).parents[1] / "docs" / "extending.md").read_text()
    match = re.search(r"```python\n(# my_regs.py.*?)```", page, re.S)
    assert match, "docs/extending.md: the my_regs.py example is gone"
    code = match.group(1)
    exec(compile(code, "docs/extending.md", "exec"), {})
    try:
        cfg = resolve_config(reg="size,eps-align,edge-entropy",
                             overrides=["reg.edge-entropy.weight=0.05"])
        assert cfg["reg"]["edge-entropy"]["weight"] == 0.05
        with pytest.raises(GrpruneError, match=r"reg.edge-entropy.weight: expected a number >= 0"):
            resolve_config(reg="size,eps-align,edge-entropy",
                           overrides=["reg.edge-entropy.weight=-1"])
        reg = REGULARIZERS.make("edge-entropy")
        enc = ENCODERS.make("gin", layers=2, hidden=16)
        model = GraphClassifier(enc, 2, SELECTORS.make("gumbel-gin", hidden=16)).train()
        value = reg.loss(StepContext(batch=toy_batch, output=model(toy_batch), model=model))
        assert torch.isfinite(value) and value > 0
        value.backward()
    finally:
        REGULARIZERS.unregister("edge-entropy")
