"""Fuzz: the files an interrupted screen leaves (``OUT.partial``, its bond table's
``.partial`` and the state file ``OUT.partial.json``), damaged as ``tests/test_fuzz.py``
damages ``state.pt`` (bytes emptied, truncated, flipped, zeroed, garbage appended, a digit
changed) and mutated in structure (keys dropped, numbers moved by one, types changed, the
digests, counts and stamp changed). Each rerun of the same ``predict`` exits 0 with the
bytes an uninterrupted screen writes (it resumed, or started clean and said why), or
exits 2 with one line: never a traceback, never other output (issue 65).

One screen of 60 rows in chunks of 10 with ``--bonds`` is stopped (Ctrl-C) while scoring
its fourth chunk; every case restores its three files in the same place (the resume
stamp names the input's path), damages one, and runs the command again.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import interrupt_screen_at_chunk, tiny_molbbbp_run
from test_fuzz import mutations

from grprune.cli import main


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, data_root):
    """(args of the screen, the folder, the sound files of the stopped screen by name, the
    uninterrupted screen's output bytes by name)."""
    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES
    root = tmp_path_factory.mktemp("state-fuzz")
    run = tiny_molbbbp_run(root / "run", limit=48)
    smiles, _ = read_molecule_csv(FILES / "ogbg_molbbbp/bbbp.csv.gz", "smiles", "p_np")
    lib = root / "lib.csv"
    pd.DataFrame({"ID": [f"M{i}" for i in range(60)], "smiles": list(smiles[:60])}).to_csv(
        lib, index=False)
    work = root / "work"
    work.mkdir()
    out = work / "preds.csv"

    def args(target):
        return ("predict", run, "--csv", lib, "--out", target, "--bonds", "--chunk-rows", 10,
                "--progress", "none", "--device", "cpu")

    ref = root / "ref" / "preds.csv"
    assert _cli(*args(ref)).exit_code == 0
    want = {p.name: p.read_bytes() for p in ref.parent.iterdir() if not p.name.endswith(".lock")}
    mp = pytest.MonkeyPatch()
    interrupt_screen_at_chunk(mp)
    try:
        assert _cli(*args(out)).exit_code == 130
    finally:
        mp.undo()
    sound = {p.name: p.read_bytes() for p in work.iterdir() if ".partial" in p.name}
    assert set(sound) == {"preds.csv.partial", "preds.bonds.csv.partial",
                          "preds.csv.partial.json"}
    assert json.loads(sound["preds.csv.partial.json"])["rows"] == 30
    return args(out), work, sound, want


def _rerun(stopped, name: str, damaged: bytes | None) -> str:
    """Restore the stopped screen's files, put ``damaged`` in place of ``name``, run the
    screen again: why the result is not clean (``""`` when it is)."""
    args, work, sound, want = stopped
    shutil.rmtree(work)
    work.mkdir()
    for n, data in sound.items():
        (work / n).write_bytes(damaged if n == name and damaged is not None else data)
    res = _cli(*args)
    lines = [x for x in res.output.splitlines() if x.strip()]
    if "Traceback" in res.output or res.exception and not isinstance(res.exception, SystemExit):
        return f"a traceback or {res.exception!r}:\n{res.output[-2000:]}"
    if res.exit_code == 2:
        errors = [x for x in lines if x.startswith("grprune: error: ")]
        return "" if len(errors) == 1 and lines[-1] == errors[0] else \
            f"exit 2 without one error line:\n{res.output[-2000:]}"
    if res.exit_code != 0:
        return f"exit {res.exit_code}:\n{res.output[-2000:]}"
    got = {p.name: p.read_bytes() for p in work.iterdir() if not p.name.endswith(".lock")}
    if got != want:
        return f"exit 0 with other files than an uninterrupted screen's: {sorted(got)}"
    return ""


@pytest.mark.parametrize("name, seed", [("preds.csv.partial.json", 1),
                                        ("preds.csv.partial", 2),
                                        ("preds.bonds.csv.partial", 3)])
def test_damaged_bytes_resume_exactly_or_start_clean(stopped, name, seed):
    data = stopped[2][name]
    problems = [f"{kind}: {why}" for kind, damaged in mutations(data, seed,
                                                                text=name.endswith(".json"))
                if (why := _rerun(stopped, name, damaged))]
    assert not problems, "\n".join(problems)


def structured(state: dict) -> list[tuple[str, object]]:
    """Mutations of a screen's state that keep it JSON: ``(name, state or raw text)``."""
    out: list[tuple[str, object]] = [(f"no-{k}", {x: v for x, v in state.items() if x != k})
                                     for k in state]
    for key in ("rows", "bytes", "bond_bytes", "scored"):
        out += [(f"{key}{d:+d}", {**state, key: state[key] + d}) for d in (-1, 1)]
        out += [(f"{key}-text", {**state, key: str(state[key])}),
                (f"{key}-float", {**state, key: float(state[key])}),
                (f"{key}-null", {**state, key: None})]
    for key in ("sha256", "bond_sha256"):
        out += [(f"{key}-other", {**state, key: "0" * 64}), (f"{key}-number", {**state, key: 7})]
    stamp = state["stamp"]
    out += [("skipped-extra", {**state, "skipped": {**state["skipped"], "too large": 1}}),
            ("skipped-list", {**state, "skipped": list(state["skipped"])}),
            ("stamp-size", {**state, "stamp": {**stamp, "size": stamp["size"] + 1}}),
            ("stamp-run", {**state, "stamp": {**stamp, "run": "another"}}),
            ("stamp-options", {**state, "stamp": {**stamp, "options": {}}}),
            ("stamp-deep", json.dumps({**state, "stamp": "DEEP"}).replace(
                '"DEEP"', "[" * 100_000 + "]" * 100_000)),
            ("rows-digits", json.dumps(state).replace(f'"rows": {state["rows"]}',
                                                      '"rows": ' + "9" * 5000)),
            ("a-list", [state]), ("extra-key", {**state, "extra": 1})]
    return out


@pytest.mark.parametrize("part", range(3))
def test_structured_mutations_of_the_state_resume_exactly_or_start_clean(stopped, part):
    name = "preds.csv.partial.json"
    state = json.loads(stopped[2][name])
    problems = []
    for kind, changed in structured(state)[part::3]:
        text = changed if isinstance(changed, str) else json.dumps(changed)
        why = _rerun(stopped, name, text.encode())
        if why:
            problems.append(f"{kind}: {why}")
    assert not problems, "\n".join(problems)
