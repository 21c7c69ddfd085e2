"""Every hyperparameter of every registered part declares its domain (one Param each):
values drawn inside it construct, values drawn outside it exit 2 with one line."""

from __future__ import annotations

from typing import Any
import math

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from grprune.cli import main
from grprune.record.settings import DataSettings, TrainSettings
from grprune.data import DATASETS
from grprune.encoders import ENCODERS
from grprune.errors import GrpruneError
from grprune.hparams import Param
from grprune.regularizers import REGULARIZERS
from grprune.selectors import SELECTORS

SETTINGS = settings(max_examples=5, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _cases():
    """(kind, part, key, Param, CLI args that make the part part of a run)."""
    out = []
    for name in SELECTORS.names(load_plugins=False):
        learned = getattr(SELECTORS.get(name), "learned", True)
        run = ["--selector", name, "--reg", "size" if learned else "none"]
        out += [("selector", name, k, p, run) for k, p in SELECTORS.get(name).params.items()]
    for name in ENCODERS.names(load_plugins=False):
        out += [("encoder", name, k, p, ["--encoder", name, "--reg", "none"])
                for k, p in ENCODERS.get(name).params.items()]
    for name in REGULARIZERS.names(load_plugins=False):
        out += [("reg", name, k, p, ["--reg", name]) for k, p in REGULARIZERS.get(name).params.items()]
    for name in DATASETS.names(load_plugins=False):
        out += [("data", name, k, p, ["--data", name, "--reg", "none"])
                for k, p in DATASETS.get(name).params.items() if k != "split"]
    out += [("train", "", k, p, ["--reg", "none"]) for k, p in TrainSettings.params.items()]
    out += [("data", "", k, p, ["--reg", "none"]) for k, p in DataSettings.params.items()]
    return out


CASES = _cases()


def _key(kind: str, part: str, key: str) -> str:
    return f"reg.{part}.{key}" if kind == "reg" else f"{kind}.{key}"


def _inside(p: Param):
    if p.choices:
        return st.sampled_from(p.choices)
    if isinstance(p.default, bool):
        return st.booleans()
    if isinstance(p.default, int):
        lo = -10**6 if p.low is None else int(p.low) + int(p.low_open)
        hi = (lo + 10**4) if p.high is None else int(p.high) - int(p.high_open)
        return st.integers(lo, hi)
    if isinstance(p.default, float):
        return st.floats(-1e6 if p.low is None else p.low, 1e6 if p.high is None else p.high,
                         exclude_min=p.low_open and p.low is not None,
                         exclude_max=p.high_open and p.high is not None,
                         allow_nan=False, allow_infinity=False)
    return None  # free text: no domain to test


def _outside(p: Param):
    """Text values outside the domain, or None when every value is inside."""
    bad: list[st.SearchStrategy[Any]] = []
    if p.choices:
        bad.append(st.sampled_from(["nope", "__other__"]))
    elif isinstance(p.default, bool):
        bad.append(st.sampled_from(["maybe", "2", "yess"]))
    elif isinstance(p.default, (int, float)):
        if p.low is not None:
            below = st.floats(p.low - 1e6, p.low, allow_nan=False, exclude_max=not p.low_open)
            bad.append(below.map(lambda x: int(math.floor(x)) if isinstance(p.default, int)
                                 and not isinstance(p.default, bool) else x))
        if p.high is not None and isinstance(p.default, int):  # exact: 2**63 is no float
            first = int(p.high) + (0 if p.high_open else 1)
            bad.append(st.integers(first, first + 10**6))
        elif p.high is not None:
            above = st.floats(p.high, p.high + 1e6, allow_nan=False, exclude_min=not p.high_open)
            bad.append(above)
        bad.append(st.sampled_from(["nan", "inf", "ten"]))
    return st.one_of(*bad).map(str) if bad else None


def _construct(kind: str, part: str, key: str, value) -> None:
    if kind == "selector":
        SELECTORS.make(part, feature_kind="ogb", **{key: value})
    elif kind == "encoder":
        ENCODERS.make(part, feature_kind="ogb", **{key: value})
    elif kind == "reg":
        REGULARIZERS.make(part, **{key: value})
    elif kind == "data" and part:
        DATASETS.get(part).resolve_params({key: value})
    else:
        (TrainSettings if kind == "train" else DataSettings).resolve_hparams({key: value})


@pytest.mark.parametrize("kind, part, key, param, run", CASES,
                         ids=[f"{c[0]}:{c[1]}:{c[2]}" for c in CASES])
@SETTINGS
@given(data=st.data())
def test_inside_constructs_and_outside_exits_2_with_one_line(kind, part, key, param, run, data,
                                                              tmp_path):
    inside = _inside(param)
    if inside is not None:
        value = data.draw(inside, label="inside")
        assert param.contains(value)
        try:
            _construct(kind, part, key, value)
        except GrpruneError as exc:  # only a rule across keys may refuse it, never its domain
            assert f"for {_key(kind, part, key)}:" not in str(exc), str(exc)
    outside = _outside(param)
    if outside is None:
        return
    text = data.draw(outside, label="outside")
    res = CliRunner().invoke(main, ["run", *run, "-H", f"{_key(kind, part, key)}={text}",
                                    "--epochs", "1", "--out", str(tmp_path / "x")])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2, (text, res.output)
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert _key(kind, part, key) in lines[0], lines[0]
    assert not (tmp_path / "x").exists()  # refused before anything ran


def test_every_part_declares_a_domain_for_every_number():
    """Every numeric hyperparameter has a bound or a choice list: nothing is unchecked."""
    unbounded = [f"{k}:{p}:{key}" for k, p, key, param, _ in CASES
                 if isinstance(param.default, (int, float)) and not isinstance(param.default, bool)
                 and param.low is None and param.high is None and not param.choices]
    assert unbounded == []


@pytest.mark.parametrize("args", [["--device", "gpu"], ["--device", "cuda:x"],
                                  ["-H", "train.device=tpu"]])
def test_a_bad_device_name_exits_2_before_anything_runs(tmp_path, args):
    res = CliRunner().invoke(main, ["run", "--reg", "none", "--epochs", "1",
                                    "--out", str(tmp_path / "x"), *args])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert "train.device" in lines[0] and "cuda:N" in lines[0]
    assert not (tmp_path / "x").exists()
