"""Typed hyperparameters: each part's frozen ``Hparams`` view, the ``params`` derived from
it, the older declaration forms, and the registries' base-class check."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from grprune.encoders import ENCODERS, Encoder
from grprune.errors import GrpruneError
from grprune.hparams import Configurable, Hyperparameters, Param, hparam
from grprune.regularizers import REGULARIZERS, Regularizer
from grprune.selectors import SELECTORS, Selector

PARTS = [(registry, name) for registry in (REGULARIZERS, SELECTORS, ENCODERS)
         for name in registry.names(load_plugins=False)]


@pytest.mark.parametrize("registry,name", PARTS, ids=[f"{r.kind}-{n}" for r, n in PARTS])
def test_every_part_declares_each_hyperparameter_once_as_a_field(registry, name):
    cls = registry.get(name)
    view = cls.build_hparams({})
    assert [f.name for f in dataclasses.fields(cls.Hparams)] == list(cls.params)
    assert dataclasses.asdict(view) == cls.resolve_hparams({}) == cls.defaults
    assert issubclass(cls.Hparams, registry.base.Hparams)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(view, next(iter(cls.params)), None)


def test_a_subclass_view_extends_its_base_and_keeps_a_plain_override_s_domain():
    class Part(Regularizer):
        class Hparams(Regularizer.Hparams):
            weight: float = 0.5  # a plain default: Regularizer's help and domain stay
            floor: float = hparam(1e-6, "clamp", low=0.0, high=0.5, search=(1e-6, 1e-3))

        hp: Hparams

    assert list(Part.params) == ["weight", "floor"]
    assert Part.params["weight"] == dataclasses.replace(Regularizer.params["weight"],
                                                        default=0.5)
    assert Part.params["floor"] == Param(1e-6, "clamp", low=0.0, high=0.5,
                                         search=(1e-6, 1e-3))
    part = Part(floor="0.25")
    assert (part.hp.weight, part.hp.floor, part.weight) == (0.5, 0.25, 0.5)
    with pytest.raises(GrpruneError, match=r"bad value '0.75' for reg.Part.floor: expected "
                                           r"a number in \[0, 0.5\]"):
        Part(floor="0.75")


def test_replace_hparams_checks_and_returns_the_previous_view():
    sel = SELECTORS.make("gumbel-gin", hidden=8, eval_mode="sample")
    assert sel.eval_draws == 1
    before = sel.replace_hparams({"eval_samples": "4"})
    assert (sel.hp.eval_samples, sel.eval_draws, before.eval_samples) == (4, 4, 1)
    with pytest.raises(GrpruneError, match="bad value 0 for selector.eval_samples"):
        sel.replace_hparams({"eval_samples": 0})
    with pytest.raises(GrpruneError, match="unknown hyperparameter selector.draws"):
        sel.replace_hparams({"draws": 2})
    assert sel.hp.eval_samples == 4  # a refused change leaves the view as it was
    sel.hp = before
    assert sel.eval_draws == 1


def test_a_params_dict_gives_a_view_and_the_derived_dicts_are_not_declared():
    class ParamsDict(Regularizer):
        params = {"weight": Param(0.1, "w", low=0.0), "floor": Param(1e-6, "clamp")}

    a = ParamsDict(floor=0.5)
    # attributes of the view at run time (untyped for mypy: declared outside Hparams)
    assert dataclasses.asdict(a.hp) == {"weight": 0.1, "floor": 0.5}
    assert ParamsDict.Hparams.__qualname__.endswith("ParamsDict.Hparams")
    assert ParamsDict.defaults == {"weight": 0.1, "floor": 1e-6}  # derived, read-only view
    with pytest.raises(TypeError, match=r"Defaults declares defaults, choices: declare its "
                                        r"hyperparameters as Hparams fields"):
        class Defaults(Regularizer):
            defaults = {"weight": 2.0, "eps": 0.5}
            choices = {"eps": (0.5, 0.25)}


def test_a_derived_view_pickles_with_its_module_level_part():
    view = _Legacy.build_hparams({"n": 3})
    assert pickle.loads(pickle.dumps(view)) == view


class _Legacy(Configurable):
    params = {"n": Param(1, "count", low=1)}


def test_declaring_twice_or_off_the_base_is_an_error():
    with pytest.raises(TypeError, match=r"declares its hyperparameters twice \(Hparams and params\)"):
        class Twice(Regularizer):
            params = {"weight": Param(1.0)}

            class Hparams(Regularizer.Hparams):
                pass
    with pytest.raises(TypeError, match=r"Hparams must subclass .*Regularizer.Hparams"):
        class OffBase(Regularizer):
            class Hparams(Hyperparameters):
                floor: float = hparam(0.1)
    with pytest.raises(TypeError, match="needs a default"):
        class NoDefault(Hyperparameters):
            floor: float


def test_the_registries_check_the_part_base_classes():
    assert (REGULARIZERS.base, SELECTORS.base, ENCODERS.base) == (Regularizer, Selector, Encoder)
    with pytest.raises(GrpruneError, match=r"must be a subclass of .*Encoder"):
        ENCODERS.add("test-not-an-encoder", Regularizer)
    assert "test-not-an-encoder" not in ENCODERS
