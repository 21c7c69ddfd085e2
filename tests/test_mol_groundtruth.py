"""``mol-substructure``: real molecules labelled by an RDKit substructure rule, the matched
bonds as ground truth (grprune/data/substructure.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from grprune.cli import main
from grprune.record.files import SUMMARY
from grprune.data import load_dataset
from grprune.data.substructure import RULES, edge_gt_array, matched_bonds, rule_matches


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def benzene(data_root):
    return load_dataset("mol-substructure", rule="benzene", source="bbbp")


# -- the rule, by hand ------------------------------------------------------------------
@pytest.mark.parametrize("smiles, rule, bonds", [
    ("Cc1ccccc1", "benzene", [1, 2, 3, 4, 5, 6]),          # toluene: the ring, not the methyl
    ("c1ccc2ccccc2c1", "benzene", list(range(11))),      # naphthalene: both rings, shared bond
    ("C1CCCCC1", "benzene", []),                         # cyclohexane: not aromatic
    ("c1ccncc1", "benzene", []),                         # pyridine: a nitrogen in the ring
    ("OC(=O)C(F)(F)F", "fluoride-carbonyl", [1, 3, 4, 5]),  # C=O and the three C-F bonds
    ("FCCCO", "fluoride-carbonyl", []),                  # fluorine without a carbonyl
    ("CC(=O)C", "fluoride-carbonyl", []),                # a carbonyl without fluorine
    ("O=C(c1ccccc1)F", "fluoride-carbonyl", [0, 7]),  # C=O, C-F (ring closures come last)
])
def test_matched_bonds_are_the_substructure(smiles, rule, bonds):
    from rdkit import Chem
    mol = Chem.MolFromSmiles(smiles)
    patterns = [Chem.MolFromSmarts(s) for s in RULES[rule]]
    assert matched_bonds(mol, patterns) == bonds
    assert rule_matches([smiles], rule) == [",".join(map(str, bonds))]
    for k in bonds:  # the bonds named are the pattern's kind of bond
        b = mol.GetBondWithIdx(k)
        kinds = {b.GetBeginAtom().GetSymbol(), b.GetEndAtom().GetSymbol()}
        assert (b.GetIsAromatic() if rule == "benzene"
                else kinds in ({"C", "F"}, {"C", "O"}))


def test_edge_gt_marks_both_directions_of_each_bond():
    gt = edge_gt_array(["", "0,2", "1"], np.array([2, 6, 4])).tolist()
    assert gt == [0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1]
    from grprune.errors import DataError
    with pytest.raises(DataError, match="not one of its 1 bonds"):
        edge_gt_array(["1"], np.array([2]))


# -- the dataset ---------------------------------------------------------------------
def test_counts_balance_and_split(benzene):
    ds = benzene
    assert len(ds) == 2039 and ds.num_classes == 2 and ds.has_edge_gt
    assert {k: len(v) for k, v in ds.splits.items()} == {"train": 1631, "valid": 204,
                                                         "test": 204}
    assert int(ds.labels.sum()) == 1412  # 69.2 % contain a benzene ring
    assert ds.info["label_1_by_part"] == {"train": 1137, "valid": 122, "test": 153}
    fc = load_dataset("mol-substructure", rule="fluoride-carbonyl", source="bbbp")
    assert int(fc.labels.sum()) == 212
    assert fc.info["label_1_by_part"] == {"train": 185, "valid": 14, "test": 13}
    # OGB's scaffold split of the same molecules (the official ogbg-molbbbp files)
    bbbp = load_dataset("ogbg-molbbbp")
    for part in ("train", "valid", "test"):
        assert np.array_equal(ds.splits[part], bbbp.splits[part])
    assert ds.smiles == bbbp.smiles


def test_ground_truth_edges_are_the_matched_bonds(benzene):
    from rdkit import Chem
    ds = benzene
    pattern = Chem.MolFromSmarts("c1ccccc1")
    for i in [0, 1, 2, 3, 500, 1000, 2038]:
        g, label, _, _ = ds[i]
        mol = Chem.MolFromSmiles(ds.smiles[i])
        gt = g.edata["edge_gt"].numpy()
        src, dst = (e.numpy() for e in g.edges())
        ring_atoms = {a for m in mol.GetSubstructMatches(pattern) for a in m}
        assert label == int(bool(ring_atoms))
        want = set(matched_bonds(mol, [pattern]))
        got = {k for k in range(mol.GetNumBonds()) if gt[2 * k]}
        assert got == want and np.array_equal(gt[0::2], gt[1::2])
        for e in np.flatnonzero(gt):  # every ground-truth edge joins two ring atoms
            assert {int(src[e]), int(dst[e])} <= ring_atoms
        if label == 0:
            assert gt.sum() == 0


def test_registered_and_listed(data_root):
    res = _cli("ls", "datasets")
    assert res.exit_code == 0 and "mol-substructure" in res.output
    res = _cli("data", "info", "mol-substructure", "-H", "data.rule=fluoride-carbonyl",
               "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["has_edge_gt"] is True


def test_one_epoch_run_and_explain(tmp_path, data_root):
    """A one-epoch run on 48 graphs per part, then explain: the ground-truth metrics and
    fidelity are computed on real molecules."""
    out = tmp_path / "run"
    res = _cli("run", "--data", "mol-substructure", "--epochs", "1", "-H", "data.limit=48",
               "-H", "train.warmup_epochs=0", "--progress", "none", "--device", "cpu",
               "--out", out)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / SUMMARY).read_text())
    assert summary["motif_edge_rocauc"] is not None  # the trainer's diagnostic applies
    res = _cli("explain", out, "--out", tmp_path / "ex", "--device", "cpu")
    assert res.exit_code == 0, res.output
    assert "edge ROC-AUC" in res.output and "fidelity+ (accuracy)" in res.output
    m = json.loads((tmp_path / "ex" / "metrics.json").read_text())
    assert m["all"]["graphs"] == 48 and 0 <= m["all"]["rocauc"] <= 1
    assert m["all"]["motif_bonds"] > 0
    fid = json.loads((tmp_path / "ex" / "fidelity.json").read_text())
    assert fid["graphs"] == 48 and 0 <= fid["model"]["sparsity"] <= 1
