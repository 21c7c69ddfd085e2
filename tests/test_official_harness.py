"""The harness that runs the official PrunE code (``benchmarks/accuracy/official/``): its
pure-Python parts, without the official code or its venv (what needs OGB's PyG loader is
skipped where torch_geometric/ogb are not installed; the GOOD-Motif export's official side
runs in the official venv where there is one, ``$OFFICIAL_VENV``). The tests that need the
official venv, checkout or export take their paths from ``$OFFICIAL_VENV``, ``$OFFICIAL_SRC``
and ``$OFFICIAL_DATA`` only (no machine's default), and skip naming the variable unset."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest
from test_benchmarks import ROOT, load_script

HERE = "benchmarks/accuracy/official"


def _workspace(var: str, what: str):
    """The path in the environment variable ``var`` (``what`` it holds); the test is skipped,
    naming ``var``, when it is unset: the tests take no machine's own paths as defaults."""
    import os
    from pathlib import Path
    if not os.environ.get(var):
        pytest.skip(f"set ${var} to {what} to run this test")
    return Path(os.environ[var])


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


def test_graph_arrays_round_trip_and_refuse_a_short_env_list(common, tmp_path):
    """GOOD-Motif's numpy layout: every graph, env id and part comes back as written."""
    graphs = [(np.ones((3, 1), dtype=np.float32), np.array([[0, 1, 1, 2], [1, 0, 2, 1]]),
               np.array([1, 1, 0, 0]), 2),
              (np.ones((1, 1), dtype=np.float32), np.zeros((2, 0), dtype=np.int64),
               np.zeros(0, dtype=np.int64), 0)]
    parts = {"train": [1], "valid": [0], "test": [0], "id-valid": [1], "id-test": []}
    out = common.write_graph_arrays(tmp_path / "good_motif_basis", graphs, [3, 0], parts)
    assert sorted(p.name for p in out.iterdir()) == ["graphs.npz", "split.npz"]
    back, env_id, back_parts = common.read_graph_arrays(out)
    assert env_id.tolist() == [3, 0] and back_parts["id-test"].tolist() == []
    for (x, ei, gt, y), (x2, ei2, gt2, y2) in zip(graphs, back):
        assert np.array_equal(x, x2) and np.array_equal(ei, ei2) and y == y2
        assert gt2.dtype == bool and np.array_equal(gt.astype(bool), gt2)
    side = common.good_side("good-motif", "basis", graphs, [3, 0], parts)
    assert side == common.good_side("good-motif", "basis", back, env_id, back_parts)
    assert side["parts"] == {"train": 1, "valid": 1, "test": 1}
    assert side != common.good_side("good-motif", "basis", back, [0, 3], back_parts)
    # floating features are hashed as floats, not truncated to ints
    halves = [(x / 2, ei, gt, y) for x, ei, gt, y in graphs]
    assert common.graphs_hash(halves) != common.graphs_hash(graphs)
    with pytest.raises(ValueError, match="1 env ids for 2 graphs"):
        common.write_graph_arrays(tmp_path / "bad", graphs, [0], parts)


def test_good_motif_export_round_trip(tmp_path, monkeypatch):
    """export.py's GOOD-Motif export of a small grprune dataset: grprune.json is what the
    arrays give back; where the official venv is at hand, check.py (the loader run.py
    uses) finds the same counts and hashes."""
    import os
    import subprocess

    from grprune.data.synthetic.good_motif import load_good_motif
    export = load_script(f"{HERE}/export.py")
    common = load_script(f"{HERE}/common.py")
    report = export.export_good(tmp_path / "data", "good-motif", ("basis", "size"),
                                load=lambda s: load_good_motif(tmp_path / "root", split=s,
                                                               n_graphs=60))
    assert set(report) == {"good-motif basis", "good-motif size"}
    for split in ("basis", "size"):
        folder = tmp_path / "data" / f"good_motif_{split}"
        side = json.loads((folder / "grprune.json").read_text())
        graphs, env_id, parts = common.read_graph_arrays(folder)
        assert side == common.good_side("good-motif", split, graphs, env_id, parts)
        assert side["n_graphs"] == 60 and side["parts"] == {"train": 36, "valid": 6, "test": 6}
        assert set(parts) == {"train", "valid", "test", "id-valid", "id-test"}
        assert all(x.shape[1] == 1 and (x == 1).all() for x, *_ in graphs)
    venv = _workspace("OFFICIAL_VENV", "the official code's venv (setup.sh)")
    python = venv / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"$OFFICIAL_VENV={venv} has no bin/python: the official loader's side "
                    "is not checked")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(python), "-m", "benchmarks.accuracy.official.check",
                           str(tmp_path / "data"), "--dataset", "good-motif"], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: graphs, counts and split indices" in done.stdout
    assert done.stdout.count("official  good-motif") == 2


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
    assert "OFFICIAL_EXPORT" in first["run.py"] and "load_good" in first["run.py"]
    assert "_ckpt.resume(self)" in first["modelNew/prune.py"]
    assert "_ckpt.save(self, e)" in first["modelNew/prune.py"]
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
    src = _workspace("OFFICIAL_SRC", "a patched checkout of the official code")
    patch = load_script(f"{HERE}/patch.py")
    if not (src / "run.py").is_file() or patch.TAG not in (src / "run.py").read_text():
        pytest.skip(f"$OFFICIAL_SRC={src} is no patched checkout of the official code")
    for name in sorted({p.file for p in patch.PATCHES}):
        compile((src / name).read_text(), name, "exec")


def test_runs_parses_seeds_and_refuses_a_missing_checkout(tmp_path, monkeypatch, capsys):
    runs = load_script(f"{HERE}/runs.py")
    assert runs.parse_seeds("0-3") == [0, 1, 2, 3] and runs.parse_seeds("0,2") == [0, 2]
    with pytest.raises(ValueError):
        runs.parse_seeds("3-1")
    assert "--edge_dim" in runs.RECIPES["ogbg-molbbbp"]
    motif = runs.RECIPES["good-motif"]
    assert motif[motif.index("--edge_prob_thres") + 1] == "90" and "--mol_encoder" not in motif
    monkeypatch.setenv("OFFICIAL_SRC", str(tmp_path))
    assert runs.main(["--seeds", "0"]) == 2
    assert "has no run.py" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        runs.main(["--seeds", "x"])
    assert stop.value.code == 2
    (tmp_path / "run.py").write_text("")
    monkeypatch.setenv("OFFICIAL_DATA", str(tmp_path / "data"))
    with pytest.raises(SystemExit) as stop:
        runs.main(["--dataset", "good-motif", "--split", "scaffold"])
    assert stop.value.code == 2 and "has no split 'scaffold'" in capsys.readouterr().err
    assert runs.main(["--dataset", "good-motif", "--split", "basis"]) == 2
    assert "no export of good-motif basis" in capsys.readouterr().err
    assert runs.export_dir(tmp_path, "good-motif", "size") == tmp_path / "good_motif_size"
    monkeypatch.setenv("OFFICIAL_HARDWARE", "1 NVIDIA H100 (CUDA)")
    assert runs.hardware() == "1 NVIDIA H100 (CUDA)"


def test_device_script_official_motif_refuses_a_missing_stage(tmp_path):
    """``benchmarks/device.sh official-motif`` without ``stage.sh``'s folder: one line,
    exit 2, nothing started; its header documents the mode."""
    import os
    import subprocess
    env = dict(os.environ, OUT=str(tmp_path), OFFICIAL_STAGE=str(tmp_path / "none"))
    done = subprocess.run(["bash", "benchmarks/device.sh", "official-motif", "5"], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "run benchmarks/accuracy/official/stage.sh and carry it" in done.stdout
    assert not list(tmp_path.glob("official-motif.jsonl"))
    header = (ROOT / "benchmarks/device.sh").read_text().split("\nset -u", 1)[0]
    assert "device.sh official-motif [S]" in header and "official-motif-wait" in header
    assert "official-checkpoints" in header and "build/official/checkpoints" in header


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
    # grprune's side: the committed per-run rows at the official code's seeds (0-3)
    assert "| ogbg-molbbbp size (ROC-AUC) | 63.00 ± 2.58 (n=4) (warm-up 1/4) | 73.65 ± 3.86" \
        in text
    assert "| ogbg-molbbbp scaffold (ROC-AUC) | not run |" in text
    # GOOD-Motif: no official-code run here; grprune's committed runs (table1's cells)
    assert "| GOOD-Motif basis (accuracy) | not run | 79.61 ± 8.72 (n=4) | 79.61 ± 8.72 " \
        "(n=4) (`official`) | 39.75 ± 3.83 (n=4) | 91.48 ± 0.40 | – |" in text
    assert "| GOOD-Motif size (accuracy) | grprune | fa14b9b (PrunE); a2bbff1 (ERM) |" in text
    assert "t = -4.59, ν = 5.2, p = 0.005" in text
    assert "7b41dae (official code), harness at grprune abc1234" in text
    table1 = load_script("benchmarks/accuracy/table1.py")
    cells = table1.read_source(results, "official")
    assert [(c["method"], c["n"], c["warmup_selected"]) for c in cells] == \
        [("official code", 4, 1)]
    row = table1.readme_table([{**cells[0], "paper_mean": 81.59, "paper_std": 5.35}])
    assert "| ogbg-molbbbp size (ROC-AUC) | `–` | – | not run | not run | 63.00 ± 2.58 " \
           "(warm-up 1/4) |" in row
    verdict = table1.official_verdicts([cells[0]], results)
    assert verdict[-1] == ("- ogbg-molbbbp size: official code 63.00 ± 2.58 (warm-up 1/4), "
                           "grprune `official` 73.65 ± 3.86; t = -4.59, p = 0.005: a gap "
                           "beyond seed noise.")
    three = [r for r in common.read_results(results) if r["seed"] < 3]
    results.write_text("".join(json.dumps(r) + "\n" for r in three))
    cells = table1.read_source(results, "official")
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
    for dataset, split in {(r["dataset"], r["split"]) for r in rows}:
        ds = load_dataset(dataset, split=split)
        want = common.split_hash({p: ds.splits[p] for p in common.PARTS})
        assert {r["split_hash"] for r in rows if (r["dataset"], r["split"]) ==
                (dataset, split)} == {want}
        if dataset == "ogbg-molbbbp":
            graphs = export.dataset_graphs(ds)
    molbbbp = [r for r in rows if r["dataset"] == "ogbg-molbbbp"]
    if molbbbp:
        assert {r["data_hash"] for r in molbbbp} == {common.graphs_hash(graphs)}
    assert json.loads(json.dumps(rows[0]))["official_commit"].startswith("7b41dae")
    assert (ROOT / HERE / "README.md").is_file()


def test_official_readme_table_is_table_py():
    """official/README.md's comparison table is the one ``table.py`` writes from the
    committed results."""
    table = load_script(f"{HERE}/table.py")
    readme = (ROOT / HERE / "README.md").read_text(encoding="utf-8")
    block = readme.split(table.BEGIN, 1)[1].split(table.END, 1)[0]
    assert block == "\n" + table.markdown(table.rows())


def test_checkpoint_restores_what_the_next_epoch_depends_on(tmp_path, monkeypatch):
    """checkpoint.py (the patched ``Model.fit``'s per-epoch save/resume) on a small stand-in
    of the official model: the weights, both optimizers, the LR scheduler, the plain
    attributes and the RNG streams come back, so the next epoch draws and computes what it
    would have; another command's checkpoint is refused."""
    import random
    import sys

    import torch
    ckpt = load_script(f"{HERE}/checkpoint.py")

    class Stand(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gnn = torch.nn.Linear(3, 2)
            self.edge = torch.nn.Linear(2, 2)
            self.optimizer = torch.optim.Adam(self.parameters(), lr=0.01)
            self.edge_gnn_optimizer = torch.optim.Adam(self.edge.parameters(), lr=0.1)
            self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                self.optimizer, mode="max", factor=0.5, patience=0)
            self.featsMask = torch.nn.Parameter(torch.zeros(3)).view(1, -1)  # as prune.py
            self.useAutoAug, self.penalty, self.best_valid_metric = False, 0.0, -1.0
            self.valid_metric_list: list[tuple[float, float]] = []
            self.best_states: dict[str, torch.Tensor] = {}
            self.stop_training = False
            self.device = "cpu"  # the machine's, not saved

    def epoch(m, e):
        m.optimizer.zero_grad()
        loss = m.edge(m.gnn(torch.randn(4, 3))).pow(2).sum() * (1 + random.random())
        loss.backward()
        m.optimizer.step()
        m.scheduler.step(-float(e))  # never better: the LR halves
        m.valid_metric_list.append((loss.item(), float(np.random.rand())))
        m.useAutoAug, m.penalty = e >= 1, 0.1 * e
        m.best_states = {k: v.clone() for k, v in m.state_dict().items()}

    monkeypatch.setattr(sys, "argv", ["run.py", "--seed", "0", "--root", "/a"])
    path = str(tmp_path / "run.pt")
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    whole = Stand()
    for e in range(4):
        epoch(whole, e)
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    first = Stand()
    assert ckpt.resume(first, path) == 0  # no file yet: start at epoch 0
    for e in range(2):
        epoch(first, e)
        ckpt.save(first, e, path)
    assert not (tmp_path / "run.pt.tmp").exists()
    torch.manual_seed(123)  # a new process: other RNG states, a fresh model
    random.seed(123)
    np.random.seed(123)
    monkeypatch.setattr(sys, "argv", ["run.py", "--seed", "0", "--root", "/elsewhere"])
    second = Stand()
    assert ckpt.resume(second, path) == 2
    for e in range(2, 4):
        epoch(second, e)
    assert second.valid_metric_list == whole.valid_metric_list
    assert second.optimizer.param_groups[0]["lr"] == whole.optimizer.param_groups[0]["lr"]
    assert second.optimizer.param_groups[0]["lr"] < 0.01
    assert (second.useAutoAug, second.penalty) == (whole.useAutoAug, whole.penalty)
    for k, v in whole.state_dict().items():
        assert torch.equal(second.state_dict()[k], v)
        assert torch.equal(second.best_states[k], whole.best_states[k])
    kept = torch.load(path, weights_only=False)
    assert set(kept["optimizers"]) == {"optimizer", "edge_gnn_optimizer"}
    assert set(kept["schedulers"]) == {"scheduler"}
    assert "featsMask" not in kept["attrs"] and "device" not in kept["attrs"]
    assert kept["argv"] == ["--seed", "0", "--root"] and kept["epoch"] == 1  # not its path
    monkeypatch.setattr(sys, "argv", ["run.py", "--seed", "1", "--root", "/a"])
    with pytest.raises(RuntimeError, match="remove it to start over"):
        ckpt.resume(Stand(), path)
    monkeypatch.delenv("OFFICIAL_CHECKPOINT", raising=False)
    assert ckpt.resume(Stand()) == 0  # no path: the patched loop runs as unpatched
    ckpt.save(Stand(), 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pt"]


def test_official_run_killed_and_resumed_gives_the_uninterrupted_curve(tmp_path):
    """The real proof, where the official venv, a patched checkout and the molbbbp export
    are at hand (not in CI): ``runs.py`` on ogbg-molbbbp scaffold for 5 epochs, 2 of them
    ERM pre-training, once through, and once SIGKILLed while saving epochs 1, 2 and 4 (so
    resumed from the checkpoints of epochs 0, 1 and 3: inside pre-training, at the epoch it
    ends and after it) gives the same per-epoch (valid, test) curve and the same selection,
    running only the epochs each kill lost again."""
    import os
    import subprocess

    venv = _workspace("OFFICIAL_VENV", "the official code's venv (setup.sh)")
    src = _workspace("OFFICIAL_SRC", "a patched checkout of the official code")
    data = _workspace("OFFICIAL_DATA", "export.py's root")
    patch = load_script(f"{HERE}/patch.py")
    if not (venv / "bin" / "python").is_file() or not (src / "modelNew/prune.py").is_file():
        pytest.skip(f"$OFFICIAL_VENV={venv} has no bin/python or $OFFICIAL_SRC={src} no "
                    "checkout of the official code")
    if "_ckpt.save(self, e)" not in (src / "modelNew/prune.py").read_text():
        pytest.skip(f"{src} lacks patch.py's checkpoint patch")
    if not (data / "ogbg_molbbbp" / "grprune.json").is_file():
        pytest.skip(f"$OFFICIAL_DATA={data} holds no ogbg-molbbbp export (export.py)")
    extra = "--epochs 5 --pretraining_epochs 2"

    def run(work, kill=""):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(OFFICIAL_WORK=str(work), OFFICIAL_SRC=str(src), OFFICIAL_DATA=str(data),
                   OFFICIAL_CHECKPOINT_KILL_AT=kill, OMP_NUM_THREADS="1")
        return subprocess.run([str(venv / "bin" / "python"), "-m",
                               "benchmarks.accuracy.official.runs",
                               "--split", "scaffold", "--seeds", "0", "--extra", extra,
                               "--results", str(work / "results.jsonl")],
                              cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)

    whole = run(tmp_path / "whole")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    outs = []
    for kill in ("1", "2", "4"):
        done = run(tmp_path / "cut", kill)
        assert done.returncode == 1 and "failed (exit -9)" in done.stderr, done.stderr
        outs.append(done.stdout)
    last = run(tmp_path / "cut")
    assert last.returncode == 0, last.stdout + last.stderr
    assert "resume " not in outs[0] and all("resume " in o for o in [*outs[1:], last.stdout])
    result = "ogbg-molbbbp-scaffold-seed0.json"
    a = json.loads((tmp_path / "whole" / result).read_text())
    b = json.loads((tmp_path / "cut" / result).read_text())
    assert len(a["curve"]) == 5 and b["curve"] == a["curve"]
    assert (b["valid"], b["test"]) == (a["valid"], a["test"])
    assert whole.stdout.split(": ", 1)[1].split(",")[0] == last.stdout.split(
        "seed 0: ", 1)[1].split(",")[0]  # "test .. at epoch .. (valid ..)"
    log = (tmp_path / "cut" / "logs" / "ogbg-molbbbp-scaffold-seed0.log").read_text()
    assert log.count("Current Epoch") == 5 + 3  # epochs 1, 2 and 4 ran twice
    assert [line.rsplit(" ", 1)[1] for line in log.splitlines()
            if line.startswith("checkpoint: resumed")] == ["0", "1", "3"]
    # the run is over: no checkpoint is left, nor a result recorded for a smoke run
    assert not list((tmp_path / "cut" / "checkpoints").iterdir())
    assert not (tmp_path / "cut" / "results.jsonl").exists()
    assert patch.TAG in (src / "modelNew/prune.py").read_text()
