"""Fuzz: damaged bytes in every file a run's readers read; each reader exits 0, or exits 2
with its error on one ``grprune: error:`` line and no traceback (issue 41, item 3).

One tiny run is trained per module, and the same configuration is stopped after its
first epoch (for ``state.pt``, which a finished run no longer holds). Each case copies
one of them, damages one file with a seeded mutation (:func:`mutations`: emptied,
truncated, bytes flipped, a span zeroed, garbage appended, a digit changed so that JSON
stays JSON) and runs the commands that read that file: ``collect``, ``curves``,
``explain``, ``predict`` and ``run`` on the same ``--out`` (skip or resume). A molecule
CSV and a ``dgl.save_graphs`` file are damaged the same way and read by ``data info``
and, when that accepts them, a one-epoch ``run``.

The cases run in a child process (:data:`_DRIVER`: each command through click's
``CliRunner``, with what native code writes to the process's stderr captured too), so
that a reader that aborts the process fails these tests, naming the case, instead of
ending pytest; and the interpreter and its imports start once, not once per case.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from grprune.record.files import (CHECKPOINT, CONFIG, EDGE_PROBS, RESULTS, STATE, SUMMARY,
                                  read_records)
from grprune.cli import main

#: the tiny molecule run every run-directory case starts from
RUN_ARGS = ["--data", "ogbg-molbbbp", "--preset", "paper", "--epochs", "2", "-H",
            "data.limit=32", "-H", "train.batch_size=32", "--progress", "none",
            "--device", "cpu"]
#: one epoch on a data file, after ``--data NAME -H data.path=FILE``
DATA_RUN_ARGS = ["--preset", "paper", "--epochs", "1", "-H", "train.batch_size=32",
                 "--progress", "none", "--device", "cpu"]
#: ``grprune predict RUN ...``: an atom alone, and a molecule with bonds to keep or prune
PREDICT_ARGS = ["--smiles", "C", "--smiles", "CCO", "--device", "cpu", "--bonds"]
#: (run, file) kinds damaged in a run directory, each with its own seed
RUN_FILES = [("finished", CONFIG), ("finished", SUMMARY), ("finished", RESULTS),
             ("finished", CHECKPOINT), ("finished", EDGE_PROBS),
             ("interrupted", STATE), ("interrupted", RESULTS), ("interrupted", CONFIG)]


# ------------------------------------------------------------------ mutations

def _flip(data: bytes, rng: random.Random, n: int) -> bytes:
    out = bytearray(data)
    for i in rng.sample(range(len(out)), min(n, len(out))):
        out[i] ^= rng.randrange(1, 256)
    return bytes(out)


def _zero_span(data: bytes, rng: random.Random) -> bytes:
    width = max(1, min(len(data) // 8, 256))
    start = rng.randrange(0, max(1, len(data) - width))
    return data[:start] + bytes(width) + data[start + width:]


def _change_digit(data: bytes, rng: random.Random) -> bytes:
    """One ASCII digit replaced by another: JSON stays JSON, a number changes."""
    digits = [i for i, b in enumerate(data) if 48 <= b <= 57]
    if not digits:
        return data + b"0"
    i = rng.choice(digits)
    return data[:i] + bytes([48 + (data[i] - 48 + rng.randrange(1, 10)) % 10]) + data[i + 1:]


def mutations(data: bytes, seed: int, text: bool = False) -> list[tuple[str, bytes]]:
    """Damaged copies of ``data``, the same for the same ``seed``: ``(name, bytes)``.

    Examples
    --------
    >>> [name for name, _ in mutations(b"0123456789", 0, text=True)]  # doctest: +NORMALIZE_WHITESPACE
    ['empty', 'truncate-5', 'truncate-9', 'flip-1', 'flip-16', 'zero-span',
     'append-garbage', 'digit-0', 'digit-1']
    >>> mutations(b"abc", 1) == mutations(b"abc", 1)
    True
    """
    rng = random.Random(seed)
    n = len(data)
    out = [("empty", b"")]
    out += [(f"truncate-{cut}", data[:cut]) for cut in (n // 2, n - 1 - n // 50)]
    out += [(f"flip-{k}", _flip(data, rng, k)) for k in (1, 16)]
    out.append(("zero-span", _zero_span(data, rng)))
    out.append(("append-garbage", data + rng.randbytes(rng.randrange(1, 64))))
    if text:
        out += [(f"digit-{j}", _change_digit(data, rng)) for j in range(2)]
    return out


# ------------------------------------------------------------------ the child process

#: runs the cases (JSON on stdin) with CliRunner; one JSON line per case on stdout
_DRIVER = r"""
import json, os, sys, tempfile, traceback
from click.testing import CliRunner
from grprune.cli import main

for case in json.load(sys.stdin):
    print(json.dumps({"start": case["name"]}), flush=True)
    runs = []
    for args in case["commands"]:
        with tempfile.TemporaryFile() as native:  # what C/C++ code writes to fd 2
            sys.stderr.flush()
            saved = os.dup(2)
            os.dup2(native.fileno(), 2)
            try:
                res = CliRunner().invoke(main, args)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            native.seek(0)
            stderr = res.stderr + native.read().decode(errors="replace")
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            stderr += "".join(traceback.format_exception(*res.exc_info))
        runs.append({"args": args, "code": res.exit_code, "stderr": stderr})
        if res.exit_code != 0 and case["stop_on_refusal"]:
            break
    print(json.dumps({"done": case["name"], "runs": runs}), flush=True)
"""


@dataclass
class Case:
    """One damaged file (``kind``: which file of what) and the commands that read it."""

    kind: str
    name: str
    commands: list[list[str]]
    #: a refused data file: stop there (the later readers would refuse it the same way)
    stop_on_refusal: bool = False
    #: a resumed run directory: after a ``run`` that exits 0 it holds epochs 0..N-1
    resumed: Path | None = None
    #: the sound run's ``predict --out``: a ``predict`` that exits 0 must write the same
    predicted: Path | None = None


def _run_cases(cases: list[Case]) -> dict[str, list[str]]:
    """Run ``cases`` in one child process; the problems found per kind, one string each."""
    payload = json.dumps([{"name": c.name, "commands": c.commands,
                           "stop_on_refusal": c.stop_on_refusal} for c in cases])
    proc = subprocess.run([sys.executable, "-c", _DRIVER], input=payload, text=True,
                          capture_output=True, timeout=3600)  # only a guard against a hang
    started, done = None, {}
    for line in proc.stdout.splitlines():
        if line.startswith('{"start": '):
            started = json.loads(line)["start"]
        elif line.startswith('{"done": '):
            msg = json.loads(line)
            done[msg["done"]] = msg["runs"]
    problems: dict[str, list[str]] = {c.kind: [] for c in cases}
    for case in cases:
        if proc.returncode != 0 and case.name == started:
            problems[case.kind].append(f"{case.name}: the process died (exit "
                                       f"{proc.returncode}):\n{proc.stderr[-3000:]}")
        elif case.name not in done:
            problems[case.kind].append(f"{case.name}: not run")
        for run in done.get(case.name, []):
            why = _not_clean(run["code"], run["stderr"])
            if not why and run["args"][0] == "run" and run["code"] == 0 and case.resumed:
                why = _gap(case.resumed)
            if not why and run["args"][0] == "predict" and run["code"] == 0 and case.predicted:
                why = _changed(Path(run["args"][run["args"].index("--out") + 1]),
                               case.predicted)
            if why:
                problems[case.kind].append(f"{case.name}: grprune {run['args'][0]}: {why}")
    return problems


def _not_clean(code: int, stderr: str) -> str:
    """Why an exit is not "0, or 2 with one error line last and no traceback" (notes,
    one ``grprune:`` line each, may come first); ``""`` when it is."""
    lines = [x for x in stderr.splitlines() if x.strip()]
    shown = stderr if len(stderr) < 3000 else f"{stderr[:1000]}\n[...]\n{stderr[-2000:]}"
    if "Traceback" in stderr:
        return f"exit {code} with a traceback:\n{shown}"
    if code == 0:
        return ""
    if code != 2:
        return f"exit {code}:\n{shown}"
    errors = [x for x in lines if x.startswith("grprune: error: ")]
    if (len(errors) != 1 or lines[-1] != errors[0]
            or not all(x.startswith("grprune: ") for x in lines)):
        return f"exit 2 without its error on one line, last:\n{shown}"
    return ""


def _gap(run_dir: Path) -> str:
    """Why a resumed run that exited 0 is not whole (``""`` when it is)."""
    epochs = [r.get("epoch") for r in read_records(run_dir / RESULTS)]
    if not (run_dir / SUMMARY).is_file() or epochs != [0, 1]:
        return (f"exit 0, but the run holds epochs {epochs} (summary.json: "
                f"{(run_dir / SUMMARY).is_file()})")
    return ""


def _changed(out: Path, sound: Path) -> str:
    """Why the tables ``predict --out out`` wrote differ from the sound run's (``""``
    when they are the same): a damaged model read without a word."""
    for a, b in ((out, sound), (out.with_suffix(".bonds.csv"), sound.with_suffix(".bonds.csv"))):
        x, y = pd.read_csv(a), pd.read_csv(b)
        numbers = x.select_dtypes("number").columns
        if (list(x.columns) != list(y.columns) or len(x) != len(y)
                or not np.allclose(x[numbers], y[numbers], rtol=1e-5, atol=1e-6,
                                   equal_nan=True)):  # NaN: an empty cell (reason of a scored row)
            return f"exit 0, but {a.name} differs from the sound run's:\n{x}\n{y}"
    return ""


# ------------------------------------------------------------------ the runs fuzzed

@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, data_root):
    """A finished two-epoch molecule run (no ``state.pt``: removed when it finished), and
    its predictions (:data:`PREDICT_ARGS`) beside it in ``predicted.csv``."""
    out = tmp_path_factory.mktemp("fuzz-finished") / "run"
    res = CliRunner().invoke(main, ["run", *RUN_ARGS, "--out", str(out)])
    assert res.exit_code == 0, res.output
    for name in (CONFIG, SUMMARY, RESULTS, CHECKPOINT, EDGE_PROBS):
        assert (out / name).is_file(), name
    res = CliRunner().invoke(main, ["predict", str(out), *PREDICT_ARGS, "--out",
                                    str(out.parent / "predicted.csv")])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory, finished_run):
    """The same configuration stopped after its first epoch (``config.json``,
    ``results.jsonl``, ``state.pt``), resumed by ``grprune run`` with the same arguments."""
    from grprune.run import execute
    from grprune.record.runconfig import RunConfig
    out = tmp_path_factory.mktemp("fuzz-interrupted") / "run"
    cfg = RunConfig.from_dict(json.loads((finished_run / CONFIG).read_text()))

    def stop(record):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(cfg, out, on_epoch=stop, log=lambda m: None)
    assert (out / STATE).is_file() and not (out / SUMMARY).exists()
    return out


def _readers(run: Path, sound: Path, graph: int, name: str) -> list[list[str]]:
    """The commands that read file ``name`` of the finished run ``run``. ``collect`` and
    ``curves`` read a sound run beside it (``sound``), as in a sweep: with nothing to
    tabulate they exit 1 by design, saying why. ``explain`` draws one test ``graph``."""
    out = run.parent / "out"
    collect = ["collect", str(run), str(sound), "--out", str(out / "table")]
    curves = ["curves", str(run), str(sound), "--out", str(out / "curves.png")]
    explain = ["explain", str(run), "--graphs", str(graph), "--out", str(out / "explain"),
               "--device", "cpu"]
    predict = ["predict", str(run), *PREDICT_ARGS, "--out", str(out / "p.csv")]
    rerun = ["run", *RUN_ARGS, "--out", str(run)]
    return {CONFIG: [collect, explain, predict, rerun],
            SUMMARY: [collect, explain, predict, rerun],
            RESULTS: [collect, curves, explain, rerun],
            CHECKPOINT: [explain, predict],
            EDGE_PROBS: [explain]}[name]


def _run_dir_cases(which: str, name: str, source: Path, sound: Path, graph: int,
                   tmp: Path, seed: int) -> list[Case]:
    """A damaged copy of ``source`` per mutation of its file ``name``, and its readers
    (``sound``: the finished run, with its predictions in ``sound/../predicted.csv``)."""
    kind = f"{which} {name}"
    cases = []
    for how, damaged in mutations((source / name).read_bytes(), seed,
                                  text=name.endswith((".json", ".jsonl"))):
        copy = tmp / kind.replace(" ", "-") / how / "run"
        shutil.copytree(source, copy)
        (copy / name).write_bytes(damaged)
        if which == "finished":
            cases.append(Case(kind, f"{kind} {how}", _readers(copy, sound, graph, name),
                              predicted=sound.parent / "predicted.csv"))
        else:  # an interrupted run: listed by collect, resumed by run
            cases.append(Case(kind, f"{kind} {how}", [
                ["collect", str(copy), str(sound), "--out", str(copy.parent / "table")],
                ["run", *RUN_ARGS, "--out", str(copy)]], resumed=copy))
    return cases


def _data_cases(kind: str, path: Path, dataset: str, params: list[str], seed: int
                ) -> list[Case]:
    """A damaged copy of the data file ``path`` per mutation, read by ``data info`` and,
    when that accepts it, trained on for one epoch."""
    cases = []
    for how, damaged in mutations(path.read_bytes(), seed, text=path.suffix == ".csv"):
        copy = path.parent / how / path.name
        copy.parent.mkdir()
        copy.write_bytes(damaged)
        hp = [x for p in [f"data.path={copy}", *params] for x in ("-H", p)]
        cases.append(Case(kind, f"{kind} {how}", [
            ["data", "info", dataset, *hp],
            ["run", "--data", dataset, *hp, *DATA_RUN_ARGS, "--out", str(copy.parent / "run")]],
            stop_on_refusal=True))
    return cases


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory, finished_run, interrupted_run) -> dict[str, list[str]]:
    """Every run-directory case and every molecule-CSV case, run in one child process:
    the problems found per file kind."""
    tmp = tmp_path_factory.mktemp("fuzz-cases")
    graph = int(np.load(finished_run / EDGE_PROBS)["graph_index"][0])  # a test graph
    cases = []
    for seed, (which, name) in enumerate(RUN_FILES):
        source = finished_run if which == "finished" else interrupted_run
        cases += _run_dir_cases(which, name, source, finished_run, graph, tmp, seed)
    csv = tmp / "csv" / "mols.csv"
    csv.parent.mkdir()
    smiles = ["C" * n + end for n in range(1, 13) for end in ("O", "N", "Cl")]  # 36 molecules
    pd.DataFrame({"smiles": smiles, "y": [0, 1] * 18}).to_csv(csv, index=False)
    cases += _data_cases("molecule csv", csv, "molecule-csv",
                         ["data.label_column=y", "data.split=random"], seed=len(RUN_FILES))
    return _run_cases(cases)


@pytest.mark.parametrize("which, name", RUN_FILES)
def test_a_damaged_run_file_is_read_or_refused_in_one_line(fuzzed, which, name):
    assert not fuzzed[f"{which} {name}"], "\n\n".join(fuzzed[f"{which} {name}"])


def test_a_damaged_molecule_csv_is_read_or_refused_in_one_line(fuzzed):
    assert not fuzzed["molecule csv"], "\n\n".join(fuzzed["molecule csv"])


@pytest.mark.slow  # each damaged file is first read by DGL in a child process of its own
def test_a_damaged_dgl_graphs_file_is_read_or_refused_in_one_line(tmp_path):
    from grprune.compat import dgl
    from grprune.data.dgl_graphs import example_graphs
    graphs, labels, envs = example_graphs(24)
    path = tmp_path / "graphs.bin"
    dgl.save_graphs(str(path), graphs, {"label": labels, "env": envs})
    problems = _run_cases(_data_cases("graphs.bin", path, "dgl-graphs", [], seed=20))
    assert not problems["graphs.bin"], "\n\n".join(problems["graphs.bin"])


def test_a_state_file_with_damaged_tensor_bytes_is_not_resumed_silently(
        finished_run, interrupted_run, tmp_path):
    import struct
    import zipfile
    run = tmp_path / "run"
    shutil.copytree(interrupted_run, run)
    with zipfile.ZipFile(run / STATE) as archive:  # the largest tensor, zeroed
        info = max(archive.infolist(), key=lambda i: i.file_size)
    data = bytearray((run / STATE).read_bytes())
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + name_len + extra_len
    data[start:start + info.file_size] = bytes(info.file_size)
    (run / STATE).write_bytes(bytes(data))
    res = CliRunner().invoke(main, ["run", *RUN_ARGS, "--out", str(run)])
    if res.exit_code == 2:  # refused: one line, and the file kept aside
        assert not _not_clean(res.exit_code, res.stderr), res.stderr
        return
    assert res.exit_code == 0, res.output
    sound = json.loads((finished_run / SUMMARY).read_text())
    resumed = json.loads((run / SUMMARY).read_text())
    assert resumed["test"] == pytest.approx(sound["test"], rel=1e-4, abs=1e-5)
    losses = [[r["loss"]["total"] for r in read_records(d / RESULTS)]
              for d in (run, finished_run)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-4, abs=1e-5)


# ------------------------------------------------------------------ structured mutations

def state_mutations(state: dict) -> list[tuple[str, object]]:
    """Valid containers with wrong contents: a ``state.pt`` of the right form whose keys,
    types, ranges or shapes are not this run's (issue 52, rows 8-10)."""
    import copy

    import torch

    def changed(path: str, value) -> dict:
        out = copy.copy(state)
        *heads, last = path.split(".")
        node = out
        for head in heads:
            node[head] = copy.copy(node[head])
            node = node[head]
        if value is KeyError:
            del node[last]
        else:
            node[last] = value
        return out

    first = next(iter(state["model"]))
    weight = state["model"][first]
    pid, moments = next(iter(state["optimizer"]["state"].items()))
    return [
        ("a list", [1, 2]),
        ("epoch only", {"epoch": state["epoch"]}),
        ("no rng", changed("rng", KeyError)),
        ("epoch -5", changed("epoch", -5)),
        ("epoch past the last", changed("epoch", 2)),
        ("epoch a float", changed("epoch", 0.0)),
        ("epoch a bool", changed("epoch", True)),
        ("n_records 5", changed("n_records", 5)),
        ("best.epoch 7", changed("best.epoch", 7)),
        ("best.valid a string", changed("best.valid", "0.9")),
        ("best without since", changed("best.since", KeyError)),
        ("stopped a string", changed("stopped", "no")),
        ("a weight of another shape", changed("model", {**state["model"],
                                                        first: torch.zeros(3, 3)})),
        ("a weight of one more row", changed("model", {**state["model"], first: torch.cat(
            [weight, weight[:1]])})),
        ("a weight missing", changed("model", {k: v for k, v in state["model"].items()
                                              if k != first})),
        ("an unknown weight", changed("model", {**state["model"], "extra.weight":
                                                torch.zeros(1)})),
        ("a regularizer of another run", changed("regs", {**state["regs"], "ciga": {}})),
        ("an optimizer moment of another shape", changed("optimizer", {
            **state["optimizer"], "state": {**state["optimizer"]["state"], pid: {
                **moments, "exp_avg": torch.zeros(2, 2)}}})),
        ("optimizer without groups", changed("optimizer", {"state": {}})),
        ("numpy's stream cut short", changed("rng.numpy", state["rng"]["numpy"][:3])),
        ("torch's stream a float tensor", changed("rng.torch", torch.zeros(5))),
    ]


def test_a_state_of_the_right_form_but_wrong_contents_is_refused_then_starts_over(
        interrupted_run, tmp_path):
    """Each structured mutation: ``run`` refuses it in one line and moves it aside (nothing
    of it used); the same command then trains the run from epoch 0 to the end (checked for
    every fifth case, to keep the test short)."""
    import torch
    state = torch.load(interrupted_run / STATE, weights_only=True)
    assert state["epoch"] == 0 and state["n_records"] == 1
    problems = []
    for k, (name, mutated) in enumerate(state_mutations(state)):
        run = tmp_path / str(k) / "run"
        shutil.copytree(interrupted_run, run)
        torch.save(mutated, run / STATE)
        res = CliRunner().invoke(main, ["run", *RUN_ARGS, "--out", str(run)])
        why = _not_clean(res.exit_code, res.stderr)
        if res.exit_code != 2 or why or "state.pt was not loaded" not in res.stderr:
            problems.append(f"{name}: exit {res.exit_code}, not refused in one line: "
                            f"{why or res.stderr[-2000:]}")
            continue
        if not (run / "state.rejected.pt").is_file():
            problems.append(f"{name}: the refused state.pt was not kept aside")
        if k % 5:  # the run again, for every fifth case (each trains two epochs)
            continue
        res = CliRunner().invoke(main, ["run", *RUN_ARGS, "--out", str(run)])
        why = _not_clean(res.exit_code, res.stderr) or (
            _gap(run) if res.exit_code == 0 else f"exit {res.exit_code}")
        if why:
            problems.append(f"{name}: the run again: {why}")
    assert not problems, "\n\n".join(problems)
