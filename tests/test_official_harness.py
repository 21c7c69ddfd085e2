"""The harness that runs the official PrunE code (``benchmarks/accuracy/official/``): its
pure-Python parts, without the official code or its venv (what needs OGB's PyG loader is
skipped where torch_geometric/ogb are not installed)."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest
from test_benchmarks import ROOT, load_script

HERE = "benchmarks/accuracy/official"


@pytest.fixture(scope="module")
def common():
    return load_script(f"{HERE}/common.py")


def two_graphs():
    """A 3-node path (bonds 0-1, 1-2) and a single node: (x, edge_index, edge_attr, y)."""
    path = (np.arange(27).reshape(3, 9), np.array([[0, 1, 1, 2], [1, 0, 2, 1]]),
            np.array([[1, 0, 0], [1, 0, 0], [2, 0, 1], [2, 0, 1]]), 1)
    single = (np.zeros((1, 9), dtype=np.int64), np.zeros((2, 0), dtype=np.int64),
              np.zeros((0, 3), dtype=np.int64), 0)
    return [path, single]


def read_gz(path):
    with gzip.open(path, "rt") as f:
        return [[int(v) for v in line.split(",")] for line in f.read().splitlines()]


def test_split_hash_names_the_sets_not_their_order(common):
    a = {"train": [3, 1, 2], "valid": [4], "test": [0]}
    b = {"train": np.array([1, 2, 3]), "valid": [4], "test": [0]}
    assert common.split_hash(a) == common.split_hash(b)
    assert len(common.split_hash(a)) == 16
    moved = {"train": [1, 2], "valid": [3, 4], "test": [0]}
    assert common.split_hash(moved) != common.split_hash(a)
    with pytest.raises(KeyError):
        common.split_hash({"train": [0], "valid": [1]})


def test_graphs_hash_sees_every_array_and_the_order(common):
    graphs = two_graphs()
    h = common.graphs_hash(graphs)
    assert h == common.graphs_hash([tuple(np.array(a) if not isinstance(a, int) else a
                                          for a in g) for g in graphs])
    assert common.graphs_hash(graphs[::-1]) != h
    x, ei, ea, y = graphs[0]
    assert common.graphs_hash([(x, ei, ea, 0), graphs[1]]) != h
    assert common.graphs_hash([(x, ei[:, [2, 3, 0, 1]], ea, y), graphs[1]]) != h


def test_ogb_raw_export_is_what_ogbs_reader_rebuilds(common, tmp_path):
    """Each bond once, features once; OGB's reader (add_inverse_edge) interleaves the
    reverse edge after it, which gives back the exported arrays."""
    graphs = two_graphs()
    splits = {"size": {"train": [1], "valid": [0], "test": [0]}}
    out = common.write_ogb_raw(tmp_path, "ogbg-molbbbp", graphs, splits)
    assert out == tmp_path / "ogbg_molbbbp" and (out / "RELEASE_v1.txt").is_file()
    raw = out / "raw"
    assert read_gz(raw / "edge.csv.gz") == [[0, 1], [1, 2]]
    assert read_gz(raw / "edge-feat.csv.gz") == [[1, 0, 0], [2, 0, 1]]
    assert read_gz(raw / "num-node-list.csv.gz") == [[3], [1]]
    assert read_gz(raw / "num-edge-list.csv.gz") == [[2], [0]]
    assert read_gz(raw / "graph-label.csv.gz") == [[1], [0]]
    assert len(read_gz(raw / "node-feat.csv.gz")) == 4
    assert read_gz(out / "split" / "size" / "valid.csv.gz") == [[0]]
    # OGB's rule (ogb.io.read_graph_raw): repeat each edge, swap the copy
    edge = np.array(read_gz(raw / "edge.csv.gz")).T
    dup = np.repeat(edge, 2, axis=1)
    dup[0, 1::2], dup[1, 1::2] = dup[1, 0::2], dup[0, 0::2]
    assert np.array_equal(dup, graphs[0][1])
    # edges that are not reverse pairs cannot be rebuilt: refused
    x, ei, ea, y = graphs[0]
    with pytest.raises(ValueError, match="graph 0"):
        common.write_ogb_raw(tmp_path / "bad", "ogbg-molbbbp",
                             [(x, ei[:, [0, 2, 1, 3]], ea, y)], splits)


def test_export_round_trips_through_ogbs_pyg_loader(common, tmp_path, monkeypatch):
    """Where OGB and PyG are installed: the official code's loader sees the same graphs
    and split as the export (check.py's comparison)."""
    pytest.importorskip("torch_geometric")
    pytest.importorskip("ogb")
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    check = load_script(f"{HERE}/check.py")
    graphs = two_graphs()
    splits = {s: {"train": [0], "valid": [1], "test": [1]} for s in ("scaffold", "size")}
    common.write_ogb_raw(tmp_path, "ogbg-molbbbp", graphs, splits)
    side = check.official_side(tmp_path)
    assert side["graphs_hash"] == common.graphs_hash(graphs)
    assert side["splits"]["size"]["hash"] == common.split_hash(splits["size"])


def test_results_file_appends_atomically_and_summarizes_per_seed(common, tmp_path):
    path = tmp_path / "results.jsonl"
    assert common.read_results(path) == []
    for seed, test in ((0, 60.0), (1, 70.0), (1, 64.0), (2, 62.0)):
        common.append_result({"dataset": "d", "split": "s", "seed": seed, "test": test,
                              "valid": 90.0, "best_epoch": 12, "not a field": 1}, path)
    rows = common.read_results(path)
    assert len(rows) == 4 and "not a field" not in rows[0]
    mean, std, n = common.summarize(rows, "d", "s")
    assert (n, mean) == (3, 62.0) and math.isclose(std, 2.0)  # seed 1's last run counts
    assert common.summarize(rows, "d", "other")[2] == 0
    assert not list(tmp_path.glob("*.tmp"))
    path.write_text(path.read_text() + "[1, 2]\n")
    with pytest.raises(ValueError, match=":5: not a JSON object"):
        common.read_results(path)


def test_patch_applies_once_and_refuses_another_commit(tmp_path, capsys):
    patch = load_script(f"{HERE}/patch.py")
    originals: dict[str, str] = {}
    for p in patch.PATCHES:
        originals[p.file] = originals.get(p.file, "# top\n") + p.old + "x = 1\n"
    for name, text in originals.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "modelNew").mkdir(exist_ok=True)
    assert patch.main([str(tmp_path)]) == 0
    first = {n: (tmp_path / n).read_text() for n in originals}
    assert all(patch.TAG in t for t in first.values())
    assert "self.calc_edge_stats = False" in first["modelNew/prune.py"]
    assert patch.main([str(tmp_path)]) == 0  # idempotent
    assert capsys.readouterr().out.count("already") == len(patch.PATCHES)
    assert {n: (tmp_path / n).read_text() for n in originals} == first
    (tmp_path / "run.py").write_text("# another commit\n")
    assert patch.main([str(tmp_path)]) == 2
    assert "is this commit 7b41dae" in capsys.readouterr().err
    assert patch.main([str(tmp_path / "missing")]) == 2


def test_patched_checkout_compiles():
    """Where a patched checkout of the official code is at hand ($OFFICIAL_SRC), every
    file the patches touch still compiles."""
    import os
    from pathlib import Path
    src = Path(os.environ.get("OFFICIAL_SRC", "/work/official-src"))
    patch = load_script(f"{HERE}/patch.py")
    if not (src / "run.py").is_file() or patch.TAG not in (src / "run.py").read_text():
        pytest.skip("no patched checkout of the official code")
    for name in sorted({p.file for p in patch.PATCHES}):
        compile((src / name).read_text(), name, "exec")


def test_runs_parses_seeds_and_refuses_a_missing_checkout(tmp_path, monkeypatch, capsys):
    runs = load_script(f"{HERE}/runs.py")
    assert runs.parse_seeds("0-3") == [0, 1, 2, 3] and runs.parse_seeds("0,2") == [0, 2]
    with pytest.raises(ValueError):
        runs.parse_seeds("3-1")
    assert "--edge_dim" in runs.RECIPES["ogbg-molbbbp"]
    monkeypatch.setenv("OFFICIAL_SRC", str(tmp_path))
    assert runs.main(["--seeds", "0"]) == 2
    assert "has no run.py" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        runs.main(["--seeds", "x"])
    assert stop.value.code == 2


def test_welch_t_by_hand():
    table = load_script(f"{HERE}/table.py")
    t, df, p = table.welch(64.0, 4.0, 4, 68.0, 2.0, 4)
    # t = -4 / sqrt(16/4 + 4/4) = -4 / sqrt(5); df = 25 / (16/3 + 1/3)
    assert math.isclose(t, -4 / math.sqrt(5)) and math.isclose(df, 25 / (17 / 3))
    assert 0.1 < p < 0.2
    assert all(math.isnan(v) for v in table.welch(1.0, 1.0, 1, 0.0, 1.0, 4))


def test_comparison_table_and_table1_column_from_results(tmp_path):
    """The official code's runs reach official/README.md's table (Welch's t against
    grprune's ``official`` preset) and table1's ``official code`` column."""
    table = load_script(f"{HERE}/table.py")
    common = load_script(f"{HERE}/common.py")
    results = tmp_path / "results.jsonl"
    for seed, test, epoch in ((0, 60.0, 3), (1, 62.0, 40), (2, 64.0, 50), (3, 66.0, 60)):
        common.append_result({"dataset": "ogbg-molbbbp", "split": "size", "seed": seed,
                              "valid": 90.0, "test": test, "best_epoch": epoch,
                              "official_commit": common.COMMIT, "grprune_commit": "abc1234",
                              "hardware": "1 core of an AMD EPYC (CPU)"}, results)
    text = table.markdown(table.rows(results))
    assert "| ogbg-molbbbp size (ROC-AUC) | 63.00 ± 2.58 (n=4) (warm-up 1/4) | 77.95 ± 3.29" \
        in text
    assert "| ogbg-molbbbp scaffold (ROC-AUC) | not run |" in text
    assert "t = -7.15, ν = 5.7, p = 0.000" in text
    assert "7b41dae (official code), harness at grprune abc1234" in text
    table1 = load_script("benchmarks/accuracy/table1.py")
    cells = table1.read_source(results, "official", "official schedule", None, None)
    assert [(c["method"], c["n"], c["warmup_selected"]) for c in cells] == \
        [("official code", 4, 1)]
    row = table1.readme_table([{**cells[0], "paper_mean": 81.59, "paper_std": 5.35}])
    assert "| ogbg-molbbbp size (ROC-AUC) | `–` | – | not run | not run | 63.00 ± 2.58 " \
           "(warm-up 1/4) |" in row
    verdict = table1.official_verdicts([cells[0]], results)
    assert verdict[-1] == ("- ogbg-molbbbp size: official code 63.00 ± 2.58 (warm-up 1/4), "
                           "grprune `official` 77.95 ± 3.29; t = -7.15, p = 0.000: a gap "
                           "beyond seed noise.")
    three = [r for r in common.read_results(results) if r["seed"] < 3]
    results.write_text("".join(json.dumps(r) + "\n" for r in three))
    cells = table1.read_source(results, "official", "official schedule", None, None)
    assert "unfinished (3 of 4 seeds), no verdict yet" in \
        table1.official_verdicts(cells, results)[-1]


def test_committed_results_are_on_the_exported_data():
    """Every committed official-code run names the data and split grprune exports now."""
    common = load_script(f"{HERE}/common.py")
    rows = common.read_results()
    if not rows:
        pytest.skip("no official-code runs committed")
    export = load_script(f"{HERE}/export.py")
    from grprune.data import load_dataset
    for split in {r["split"] for r in rows}:
        ds = load_dataset("ogbg-molbbbp", split=split)
        want = common.split_hash({p: ds.splits[p] for p in common.PARTS})
        assert {r["split_hash"] for r in rows if r["split"] == split} == {want}
        graphs = export.dataset_graphs(ds)
    assert {r["data_hash"] for r in rows} == {common.graphs_hash(graphs)}
    assert json.loads(json.dumps(rows[0]))["official_commit"].startswith("7b41dae")
    assert (ROOT / HERE / "README.md").is_file()


def test_official_readme_table_is_table_py():
    """official/README.md's comparison table is the one ``table.py`` writes from the
    committed results."""
    table = load_script(f"{HERE}/table.py")
    readme = (ROOT / HERE / "README.md").read_text(encoding="utf-8")
    block = readme.split(table.BEGIN, 1)[1].split(table.END, 1)[0]
    assert block == "\n" + table.markdown(table.rows())
