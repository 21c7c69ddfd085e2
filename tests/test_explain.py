"""``grprune explain``, the explanation metrics and the bond <-> picture mapping."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from grprune.record.files import CHECKPOINT, EDGE_PROBS, SUMMARY
from grprune.record.rundir import RunDir
from grprune.cli import main
from grprune.draw import draw_molecule, parse_molecule, rdkit_bond_ids, svg_highlighted_bonds
from grprune.explain_metrics import marked_bonds
from grprune.explain import (edge_rocauc, explanation_metrics, parse_graph_ids,
                             rank_within_graphs, select_graphs, spurious_at_k, top_k_counts)
from grprune.errors import GrpruneError
from grprune.inference import load_run
from grprune.ops import bonds_by_first_edge

PNG = b"\x89PNG\r\n\x1a\n"


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _train(out, *args):
    res = _cli("run", *args, "--epochs", "2", "-H", "data.limit=48", "--progress", "none",
               "--device", "cpu", "--out", out)
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def bbbp_run(tmp_path_factory, data_root):
    return _train(tmp_path_factory.mktemp("bbbp") / "run", "--data", "ogbg-molbbbp",
                  "--preset", "paper")


@pytest.fixture(scope="module")
def motif_run(tmp_path_factory, data_root):
    return _train(tmp_path_factory.mktemp("motif") / "run", "--data", "good-motif",
                  "--preset", "paper", "-H", "train.warmup_epochs=0")


# -- metrics, by hand -----------------------------------------------------------
def test_rank_breaks_ties_by_lower_bond_id():
    ptr = np.array([0, 4, 4, 7])  # the middle graph has no bonds
    score = np.array([0.5, 0.9, 0.5, 0.5, 0.1, 0.1, 0.1])
    assert rank_within_graphs(ptr, score).tolist() == [1, 0, 2, 3, 0, 1, 2]


def test_spurious_at_k_by_hand():
    # graph 0: 5 bonds, gt 1 1 0 0 0; graph 1: 3 motif bonds only; graph 2: 10 bonds
    ptr = np.array([0, 5, 8, 18])
    score = np.r_[[0.9, 0.8, 0.1, 0.2, 0.85], [0.3, 0.2, 0.1], np.linspace(1, 0.1, 10)]
    gt = np.r_[[1, 1, 0, 0, 0], [1, 1, 1], [1] * 5 + [0] * 5]
    out = spurious_at_k(ptr, score, gt, ks=[10, 20, 50])
    # K=10: floor(0.5)=0, floor(0.3)=0, floor(1.0)=1 -> graph 2's lowest (spurious)
    assert out["10"] == {"recall": 1 / 8, "precision": 1.0, "predicted": 1, "spurious": 8,
                         "hits": 1}
    # K=20: 1 + 0 + 2 predicted: graph 0's lowest is bond 2 (0.1, spurious); graph 2's two
    assert out["20"]["predicted"] == 3 and out["20"]["hits"] == 3
    # K=50: floor(2.5)=2 (bonds 2, 3), floor(1.5)=1 (motif bond, wrong), 5 (all spurious)
    r = out["50"]
    assert (r["predicted"], r["hits"]) == (8, 7)
    assert r["precision"] == pytest.approx(7 / 8) and r["recall"] == pytest.approx(7 / 8)


def test_spurious_at_k_ties_and_empty_denominators():
    # all scores tied: the predicted tail is the highest bond ids
    ptr = np.array([0, 4])
    out = spurious_at_k(ptr, np.zeros(4), np.array([0, 0, 1, 1]), ks=[50])["50"]
    assert out["hits"] == 0 and out["precision"] == 0.0
    out = spurious_at_k(ptr, np.zeros(4), np.array([1, 1, 0, 0]), ks=[50])["50"]
    assert out["hits"] == 2 and out["recall"] == 1.0
    # no spurious bond anywhere: recall undefined; too few bonds: nothing predicted
    only_motif = spurious_at_k(ptr, np.arange(4.0), np.ones(4), ks=[50, 10])
    assert only_motif["50"]["recall"] is None and only_motif["50"]["precision"] == 0.0
    assert only_motif["10"]["predicted"] == 0 and only_motif["10"]["precision"] is None
    with pytest.raises(ValueError):
        spurious_at_k(ptr, np.zeros(4), np.zeros(4), ks=[150])


def test_top_k_counts_by_hand():
    # graph 0: |G_c| = 2 -> k = 3; graph 1: |G_c| = 3 -> ceil(4.5) = 5 capped at 4 bonds;
    # graph 2: no motif -> left out
    ptr = np.array([0, 5, 9, 11])
    score = np.r_[[0.9, 0.8, 0.7, 0.2, 0.85], [0.5, 0.5, 0.5, 0.5], [0.3, 0.2]]
    gt = np.r_[[1, 0, 0, 0, 1], [0, 1, 1, 1], [0, 0]]
    c = top_k_counts(ptr, score, gt, factor=1.5)
    # graph 0 top-3: bonds 0 (gc), 4 (gc), 1 (gs); graph 1 all 4: 3 gc + 1 gs
    assert c["graphs"] == 2 and c["graphs_without_motif"] == 1
    assert c["k"] == 3.5 and c["gc"] == 2.5 and c["gs"] == 1.0
    assert c["gc_oracle"] == 2.5 and c["gs_oracle"] == 1.0
    c5 = top_k_counts(ptr, score, gt, factor=5)
    assert c5["k"] == 4.5 and c5["gc"] == 2.5 and c5["gs"] == 2.0
    # ties at the cut: lower bond id first -> graph 1 with k = 2 takes bonds 5, 6
    c1 = top_k_counts(np.array([0, 4]), np.full(4, 0.5), np.array([0, 1, 1, 0]), factor=1.0)
    assert (c1["gc"], c1["gs"]) == (1.0, 1.0)
    assert top_k_counts(np.array([0, 2]), np.ones(2), np.zeros(2))["gc"] is None


def test_edge_rocauc_and_subsets():
    assert edge_rocauc(np.array([0.9, 0.8, 0.1, 0.8]), np.array([1, 1, 0, 0])) == 0.875
    assert edge_rocauc(np.array([np.inf, np.inf]), np.array([1, 0])) == 0.5
    assert edge_rocauc(np.array([0.3, 0.2]), np.array([1, 1])) is None
    assert edge_rocauc(np.zeros(0), np.zeros(0)) is None
    ptr = np.array([0, 2, 3, 6])
    new_ptr, s = select_graphs(ptr, np.array([True, False, True]), np.arange(6))
    assert new_ptr.tolist() == [0, 2, 5] and s.tolist() == [0, 1, 3, 4, 5]
    m = explanation_metrics(ptr, np.array([.9, .1, .5, .8, .7, .2]), np.array([1, 0, 0, 1, 0, 0]))
    assert m["graphs"] == 3 and m["bonds"] == 6 and m["motif_bonds"] == 2
    assert m["rocauc"] == 1.0 and set(m["at_k"]) == {"10", "20", "30", "40", "50"}
    assert set(m["top_k"]) == {"1.5", "3", "4", "5"}


def test_parse_graph_ids():
    assert parse_graph_ids("3,17,40-43, 3") == [3, 17, 40, 41, 42, 43]
    assert parse_graph_ids("x,row:4-5,id:12-3") == ["id:x", "row:4", "row:5", "id:12-3"]
    for bad in ("5-2", "-1", "3-", ",", "row:x", "row:"):
        with pytest.raises(GrpruneError):
            parse_graph_ids(bad)


# -- bonds: graph order, RDKit order, picture ---------------------------------------
@pytest.mark.parametrize("smiles", ["CCO", "c1ccccc1O", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C", "C",
                                    "[Na+].[Cl-]", "C1CC2CCC1C2"])
def test_smiles_graph_edges_follow_rdkit_bonds(smiles):
    from grprune.data.molecules import smiles_to_graph
    g = smiles_to_graph(smiles)
    mol = parse_molecule(smiles)
    src, dst = (t.numpy() for t in g.edges())
    assert len(src) == 2 * mol.GetNumBonds()
    for b in mol.GetBonds():
        k = b.GetIdx()
        assert (src[2 * k], dst[2 * k]) == (b.GetBeginAtomIdx(), b.GetEndAtomIdx())
        assert (src[2 * k + 1], dst[2 * k + 1]) == (b.GetEndAtomIdx(), b.GetBeginAtomIdx())
    bond_of_edge, first = bonds_by_first_edge(src, dst)
    assert bond_of_edge.tolist() == [k // 2 for k in range(len(src))]
    ids = rdkit_bond_ids(mol, src[first], dst[first], g.num_nodes())
    assert ids.tolist() == list(range(mol.GetNumBonds()))


def test_drawn_highlights_are_the_marked_bonds():
    mol = parse_molecule("CC(=O)Oc1ccccc1C(=O)O")
    # graph bonds listed in reverse RDKit order, reversed direction: the mapping must follow
    u = np.array([b.GetEndAtomIdx() for b in mol.GetBonds()][::-1])
    v = np.array([b.GetBeginAtomIdx() for b in mol.GetBonds()][::-1])
    ids = rdkit_bond_ids(mol, u, v)
    assert ids.tolist() == list(range(mol.GetNumBonds()))[::-1]
    prob = np.linspace(0.1, 0.9, len(u))
    marked = marked_bonds(np.log(prob / (1 - prob)), np.zeros(len(u)), top_k=3)  # graph bonds 10, 11, 12
    assert np.flatnonzero(marked).tolist() == [10, 11, 12]
    svg = draw_molecule(mol, ids, prob, marked, fmt="svg")  # type: ignore[arg-type]  # ndarray of ints
    assert svg_highlighted_bonds(svg) == {int(ids[k]) for k in (10, 11, 12)} == {0, 1, 2}
    ET.fromstring(svg)
    assert draw_molecule(mol, ids, prob, marked,  # type: ignore[arg-type]  # as above
                         fmt="png").startswith(PNG)
    with pytest.raises(ValueError):
        rdkit_bond_ids(mol, np.array([0] * len(u)), np.array([5] * len(u)))


# -- grprune explain on molecules ------------------------------------------------
def _picture(out, gi: int, ext: str = "png"):
    """The picture of graph ``gi``: ``graph-<gi>.<ext>``, or ``graph-<gi>_row-<r>.<ext>``
    where the molecule's source row differs from its index (rows skipped before it)."""
    found = list(out.glob(f"graph-{gi}.{ext}")) + list(out.glob(f"graph-{gi}_row-*.{ext}"))
    assert len(found) == 1, sorted(p.name for p in out.iterdir())
    return found[0]


def test_explain_molecules(bbbp_run, tmp_path):
    out = tmp_path / "ex"
    res = _cli("explain", bbbp_run, "--out", out, "--device", "cpu")
    assert res.exit_code == 0, res.output
    assert "metrics skipped" in res.output and not (out / "metrics.json").exists()
    df = pd.read_csv(out / "edges.csv")
    npz = np.load(bbbp_run / EDGE_PROBS)
    ids = list(dict.fromkeys(df["graph_index"].tolist()))
    assert len(ids) == 8 and ids == npz["graph_index"][:8].tolist()
    for gi in ids:
        assert _picture(out, gi).read_bytes().startswith(PNG)
        rows = df[df["graph_index"] == gi]
        assert (rows["source_row"] >= gi).all()  # rows skipped before it shift the index
        mol = parse_molecule(rows["smiles"].iloc[0])
        assert len(rows) == mol.GetNumBonds()  # one row per bond
        assert rows["bond"].tolist() == list(range(mol.GetNumBonds()))
        j = npz["graph_index"].tolist().index(gi)
        sl = slice(npz["edge_ptr"][j], npz["edge_ptr"][j + 1])
        p, w = npz["edge_prob"][sl], npz["edge_weight"][sl]
        src, dst = npz["src"][sl], npz["dst"][sl]
        assert np.array_equal(rows["src"], src[0::2]) and np.array_equal(rows["dst"], dst[0::2])
        np.testing.assert_allclose(rows["edge_prob"], p[0::2], atol=1e-5)
        np.testing.assert_allclose(rows["edge_prob"], p[1::2], atol=1e-5)
        np.testing.assert_allclose(rows["edge_weight"], w[0::2], atol=1e-6)
        for b in mol.GetBonds():
            r = rows.iloc[b.GetIdx()]
            assert {r["src"], r["dst"]} == {b.GetBeginAtomIdx(), b.GetEndAtomIdx()}

    # SVG, top-3 marking: the drawn highlights are the 3 bonds edges.csv ranks first
    svg_out = tmp_path / "svg"
    res = _cli("explain", bbbp_run, "--out", svg_out, "--format", "svg", "--top-k", "3",
               "--graphs", ",".join(map(str, ids[:3])))
    assert res.exit_code == 0, res.output
    df = pd.read_csv(svg_out / "edges.csv")
    for gi in ids[:3]:
        svg = _picture(svg_out, gi, "svg").read_text()
        ET.fromstring(svg.encode())
        rows = df[df["graph_index"] == gi]
        assert svg_highlighted_bonds(svg) == set(rows.loc[rows["rank"] <= 3, "bond"])
        assert "top-3 bonds by keep probability" in svg


def test_explain_rerun_overwrites_and_bad_input(bbbp_run, tmp_path):
    out = tmp_path / "ex"
    assert _cli("explain", bbbp_run, "--out", out).exit_code == 0
    assert len(list(out.glob("graph-*.png"))) == 8
    test_ids = np.load(bbbp_run / EDGE_PROBS)["graph_index"]
    res = _cli("explain", bbbp_run, "--out", out, "--graphs", str(test_ids[-1]))
    assert res.exit_code == 0, res.output
    assert [p.name for p in out.glob("graph-*.png")] == [_picture(out, test_ids[-1]).name]
    assert set(pd.read_csv(out / "edges.csv")["graph_index"]) == {test_ids[-1]}

    train_id = int(load_run(bbbp_run).load_dataset().splits["train"][0])
    cases = [(["--graphs", "999999"], "does not exist"),
             (["--graphs", str(train_id)], "is not in part 'test' (it is in train"),
             (["--part", "nope"], "no part 'nope'"),
             (["--graphs", "a-b"], "names ID 'a-b', but ogbg-molbbbp has no IDs"),
             (["--graphs", "5-2"], "bad graph range"),
             (["--graphs", "row:59"], "source row 59 is not in ogbg-molbbbp (it was skipped")]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda"], "CUDA is not available"))
    for args, msg in cases:
        res = CliRunner().invoke(main, ["explain", str(bbbp_run), *args])
        assert res.exit_code == 2, (args, res.output)
        assert msg in res.output, (args, res.output)

    unfinished = tmp_path / "unfinished"
    shutil.copytree(bbbp_run, unfinished)
    (unfinished / SUMMARY).unlink()
    res = CliRunner().invoke(main, ["explain", str(unfinished)])
    assert res.exit_code == 2 and "unfinished run" in res.output
    res = CliRunner().invoke(main, ["explain", str(tmp_path)])
    assert res.exit_code == 2 and "not a grprune run directory" in res.output


def test_load_run_reads_the_features_from_config_json_alone(bbbp_run, tmp_path):
    """summary.json's "model" record is not what a run is rebuilt from: config.json's
    features record is."""
    old = tmp_path / "old"
    shutil.copytree(bbbp_run, old)
    summary = json.loads((old / SUMMARY).read_text())
    model_record = summary.pop("model")
    (old / SUMMARY).write_text(json.dumps(summary))
    run = load_run(old)
    assert run.features.summary_record() == model_record and run.use_selector and not run.model.training
    new = load_run(bbbp_run)
    for a, b in zip(run.model.state_dict().values(), new.model.state_dict().values()):
        assert torch.equal(a, b)


# -- grprune explain on GOOD-Motif -----------------------------------------------
def test_explain_motif_metrics(motif_run, tmp_path):
    out = tmp_path / "ex"
    res = _cli("explain", motif_run, "--out", out, "--graphs", "27000-27002", "--top-k", "6")
    assert res.exit_code == 0, res.output
    assert "Recall@10%" in res.output and "edge ROC-AUC" in res.output
    for gi in (27000, 27001, 27002):
        assert (out / f"graph-{gi}.png").read_bytes().startswith(PNG)
    df = pd.read_csv(out / "edges.csv")
    assert "edge_gt" in df.columns and set(df["graph_index"]) == {27000, 27001, 27002}
    m = json.loads((out / "metrics.json").read_text())
    summary = json.loads((motif_run / SUMMARY).read_text())
    assert m["graphs_in_part"] == 48 and m["all"]["graphs"] == 48
    # pooled over bonds it is the trainer's directed-edge ROC-AUC (each bond counted twice)
    assert m["all"]["rocauc"] == pytest.approx(summary["motif_edge_rocauc"], abs=1e-3)
    assert 0 <= m["correct"]["graphs"] <= 48
    # the trainer's per-epoch twin of the paper's Figure 4b: correctly predicted graphs only
    if m["correct"]["rocauc"] is None:
        assert summary["motif_edge_rocauc_correct"] is None
    else:
        assert m["correct"]["rocauc"] == pytest.approx(summary["motif_edge_rocauc_correct"],
                                                       abs=1e-3)
    assert m["accuracy"] == pytest.approx(summary["test"])
    for k in ("10", "20", "30", "40", "50"):
        r = m["all"]["at_k"][k]
        assert 0 <= r["recall"] <= 1 and 0 <= r["precision"] <= 1
    for f in ("1.5", "3", "4", "5"):
        t = m["all"]["top_k"][f]
        assert t["graphs"] == 48 and t["gc"] + t["gs"] == pytest.approx(t["k"])

    # the metrics are the pure functions of the run's own edge_probs.npz
    npz = np.load(motif_run / EDGE_PROBS)
    first = np.asarray(npz["edge_ptr"][:-1])
    ptr = np.concatenate([[0], np.cumsum(np.diff(npz["edge_ptr"]) // 2)])
    bond_first = np.concatenate([np.arange(a, b)[bonds_by_first_edge(npz["src"][a:b],
                                                                  npz["dst"][a:b])[1]]
                                 for a, b in zip(first, npz["edge_ptr"][1:])])
    ref = spurious_at_k(ptr, npz["edge_prob"][bond_first].astype(np.float64),
                        npz["edge_gt"][bond_first])
    for k in ref:
        assert m["all"]["at_k"][k]["predicted"] == ref[k]["predicted"]
        assert m["all"]["at_k"][k]["spurious"] == ref[k]["spurious"]


def test_explain_motif_svg(motif_run, tmp_path):
    res = _cli("explain", motif_run, "--out", tmp_path, "--format", "svg", "--graphs", "27005")
    assert res.exit_code == 0, res.output
    ET.fromstring((tmp_path / "graph-27005.svg").read_bytes())


def test_ranking_score_ties_float_noise():
    from grprune.explain import ranking_score
    ptr = np.array([0, 4])
    gt = np.array([0, 0, 1, 1])
    cpu = np.array([0.3, 0.3, 0.3, 0.3], dtype=np.float32)
    cuda = cpu + np.array([0, 3e-8, -3e-8, 6e-8], dtype=np.float32)  # summed in another order
    a = spurious_at_k(ptr, ranking_score(cpu), gt, ks=[50])
    b = spurious_at_k(ptr, ranking_score(cuda), gt, ks=[50])
    assert a == b and a["50"]["hits"] == 0  # tie: the higher ids (motif) are the tail


def test_plain_pictures_when_rdkit_cannot_draw(bbbp_run, tmp_path, monkeypatch):
    import grprune.draw
    monkeypatch.setattr(grprune.draw, "rdkit_drawing_error", lambda: "OSError: no libXrender")
    res = _cli("explain", bbbp_run, "--out", tmp_path, "--graphs",
               str(np.load(bbbp_run / EDGE_PROBS)["graph_index"][0]))
    assert res.exit_code == 0, res.output
    assert "RDKit cannot draw molecules here" in res.output
    assert next(tmp_path.glob("graph-*.png")).read_bytes().startswith(PNG)


# -- explain reads the trainer's edge_probs.npz ------------------------------------
def test_explain_reads_edge_probs_not_the_model(motif_run, tmp_path, monkeypatch):
    """With every asked graph in edge_probs.npz, explain runs no model forward, and its
    output is what re-scoring with the model gives (the fallback for other graphs)."""
    from grprune.evaluation import SCORE_ARRAYS, edge_scores_from_arrays
    from grprune.inference import Run
    from grprune.model import GraphClassifier

    # the reference: re-scored with the model, as for a run without the saved scores
    with monkeypatch.context() as m:
        m.setattr(Run, "stored_scores", lambda self, indices, num_graphs=None: None)
        # (--no-fidelity: fidelity runs the model on each explanation by definition)
        assert _cli("explain", motif_run, "--out", tmp_path / "ref", "--top-k", "4",
                    "--no-fidelity").exit_code == 0

    # the model weights made unusable, and any forward an error
    run_dir = tmp_path / "run"
    shutil.copytree(motif_run, run_dir, ignore=shutil.ignore_patterns("explain"))
    state = torch.load(run_dir / CHECKPOINT, weights_only=True)
    torch.save({k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
                for k, v in state.items()}, run_dir / CHECKPOINT)

    def no_forward(*args, **kwargs):
        raise AssertionError("explain ran the model although edge_probs.npz holds the graphs")

    monkeypatch.setattr(GraphClassifier, "forward", no_forward)
    monkeypatch.setattr(GraphClassifier, "predict", no_forward)
    res = _cli("explain", run_dir, "--out", tmp_path / "ex", "--top-k", "4", "--no-fidelity")
    assert res.exit_code == 0, res.output
    ref, got = pd.read_csv(tmp_path / "ref" / "edges.csv"), pd.read_csv(tmp_path / "ex" / "edges.csv")
    assert list(ref.columns) == list(got.columns) and len(ref) == len(got) > 0
    for col in ref.columns:
        if ref[col].dtype.kind == "f":
            np.testing.assert_allclose(got[col], ref[col], atol=1e-5)
        else:
            assert got[col].tolist() == ref[col].tolist(), col
    m_ref = json.loads((tmp_path / "ref" / "metrics.json").read_text())
    m_got = json.loads((tmp_path / "ex" / "metrics.json").read_text())
    for key in ("all", "correct", "accuracy"):
        _assert_close(m_got[key], m_ref[key])
    # the scores are the file's, to the bit
    edges = edge_scores_from_arrays(RunDir(run_dir).edge_arrays())
    assert edges is not None
    gi = int(got["graph_index"].iloc[0])
    k = edges.graph_index.tolist().index(gi)
    rows = got[got["graph_index"] == gi]
    sl = slice(edges.edge_ptr[k], edges.edge_ptr[k + 1])
    first = np.arange(sl.start, sl.stop)[bonds_by_first_edge(edges.src[sl], edges.dst[sl])[1]]
    assert rows["edge_prob"].tolist() == pytest.approx(edges.edge_prob[first].tolist(), abs=1e-6)
    assert rows["prob_1"].iloc[0] == pytest.approx(float(edges.prob[k, 1]), abs=1e-6)

    # a part the file does not hold needs the model: re-scored (here: the forward refuses)
    res = CliRunner().invoke(main, ["explain", str(run_dir), "--part", "valid",
                                    "--out", str(tmp_path / "valid")])
    assert res.exit_code != 0 and "explain ran the model" in repr(res.exception)

    # a file that lacks arrays (logits, class probabilities): incomplete, re-scored too
    with np.load(run_dir / EDGE_PROBS) as npz:
        old = {k: npz[k] for k in npz.files if k not in ("edge_logits", "prob", "num_nodes")}
    np.savez_compressed(run_dir / EDGE_PROBS, **old)
    assert edge_scores_from_arrays(RunDir(run_dir).edge_arrays()) is None
    assert "edge_logits" in SCORE_ARRAYS
    res = CliRunner().invoke(main, ["explain", str(run_dir), "--out", str(tmp_path / "old")])
    assert res.exit_code != 0 and "explain ran the model" in repr(res.exception)


def _assert_close(a, b):
    """Nested dicts equal, floats to 1e-6."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_close(a[k], b[k])
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, abs=1e-6)
    else:
        assert a == b


def test_edges_of_a_model_without_selector_are_collected_on_the_host():
    """The collector keeps only host tensors, also the ones it makes for a model without a
    selector (ERM, IRM, ...). It used to make those like the batch's ``src``, so on a GPU
    every such run failed at its final test evaluation (seen on an H100: "can't convert cuda:0
    device type tensor to numpy"). Here ``src`` lives on the meta device, which no host copy
    can read, as a stand-in for a device CI does not have."""
    from types import SimpleNamespace

    from grprune.evaluation import _EdgeCollector

    local_src, local_dst = torch.tensor([0, 1, 0]), torch.tensor([1, 0, 1])
    batch = SimpleNamespace(index=torch.tensor([4, 7]), num_nodes=torch.tensor([2, 2]),
                            num_edges=torch.tensor([2, 1]),
                            src=torch.empty(3, dtype=torch.int64, device="meta"),
                            edge_gt=None, local_edges=lambda: (local_src, local_dst))
    collector = _EdgeCollector()
    collector.add(batch, torch.tensor([[0.3, 0.7], [0.9, 0.1]]),  # type: ignore[arg-type]
                  None)  # a stand-in batch: only the fields the collector reads
    edges = collector.result(num_classes=2)
    assert edges.edge_prob.tolist() == [1.0, 1.0, 1.0]
    assert edges.edge_weight.tolist() == [1.0, 1.0, 1.0]
    assert np.isinf(edges.edge_logits).all() and edges.edge_ptr.tolist() == [0, 2, 3]
