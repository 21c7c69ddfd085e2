"""GOOD-HIV: GOOD's domains and splits, the published sizes, the scaffold cache.

One full load (``size`` domain, covariate shift) featurizes the bundled HIV CSV
once per session (about 30 s, shared with ogbg-molhiv); the scaffolds of all
41,127 molecules are computed once (about 15 s). The other split checks run
the split functions on those domain values directly, and the loader's scaffold
path runs on a 300-molecule stand-in for the featurized file.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from grprune.data import DATASETS, load_dataset
from grprune.data import good_hiv
from grprune.data.good_hiv import (
    GoodHiv,
    cached_scaffolds,
    compute_scaffolds,
    domain_ids,
    good_split,
    murcko_scaffold,
)
from grprune.data.moleculenet_csv import MoleculeGraphs
from grprune.errors import DataError, GrpruneError

PARTS = ("train", "id-valid", "id-test", "valid", "test")
# train, ID-valid, ID-test, OOD-valid, OOD-test: GOOD's dataset table (the
# covariate rows are also in the PrunE paper's table); all sum to 41,127
PUBLISHED = {
    ("scaffold", "covariate"): (24682, 4112, 4112, 4113, 4108),
    ("scaffold", "concept"): (15209, 3258, 3258, 9365, 10037),
    ("size", "covariate"): (26169, 4112, 4112, 2773, 3961),
    ("size", "concept"): (14454, 3096, 3096, 9956, 10525),
}
LENIENT_ROWS = [137, 987, 12882, 18293, 30784, 30785, 35728]


def sizes(parts):
    return tuple(len(parts[k]) for k in PARTS)


@pytest.fixture(scope="module")
def hiv(data_root):
    """The one full load, through the public API."""
    return load_dataset("good-hiv", split="size", shift="covariate")


@pytest.fixture(scope="module")
def domains(hiv):
    """Domain values of every molecule: {"scaffold": [...], "size": [...]}."""
    return {"scaffold": compute_scaffolds(hiv.smiles),
            "size": [g.num_nodes() for g in hiv.graphs]}


def check_disjoint(parts, n):
    seen = np.concatenate([parts[k] for k in PARTS])
    assert len(np.unique(seen)) == len(seen)
    assert seen.min() >= 0 and seen.max() < n


# -- the full load --------------------------------------------------------------
def test_full_load_size_covariate(hiv):
    assert len(hiv) == 41127
    assert sizes(hiv.splits) == PUBLISHED[("size", "covariate")]
    check_disjoint(hiv.splits, len(hiv))
    info = hiv.info
    assert info["dataset"] == "good-hiv" and info["split"] == "size"
    assert info["shift"] == "covariate" and info["seed"] == 123
    assert info["split_source"] == "computed (GOOD recipe)"
    assert info["n_graphs"] == info["n_source_rows"] == 41127
    assert info["n_skipped"] == 0 and info["lenient_rows"] == LENIENT_ROWS
    assert info["n_lenient"] == 7 and info["n_domains"] == 151
    assert info["split_sizes"] == dict(zip(PARTS, PUBLISHED[("size", "covariate")]))
    assert info["cache"] in ("hit", "built") and info["domain_cache"].startswith("not needed")
    json.dumps(info)  # JSON-serialisable
    assert hiv.metric == "rocauc" and hiv.num_classes == 2 and hiv.atom_encoder == "ogb"
    g = hiv.graphs[0]
    assert g.ndata["feat"].shape[1] == 9 and g.edata["feat"].shape[1] == 3
    # largest molecules in training; OOD parts hold sizes training never sees
    n = np.array([g.num_nodes() for g in hiv.graphs])
    pool = np.concatenate([hiv.splits[k] for k in ("train", "id-valid", "id-test")])
    assert n[pool].min() > n[hiv.splits["valid"]].max()
    assert n[hiv.splits["valid"]].min() > n[hiv.splits["test"]].max()
    # environments 0..9 on training, -1 on every other part
    envs = hiv.envs.numpy()
    assert sorted(set(envs[hiv.splits["train"]].tolist())) == list(range(10))
    for part in ("id-valid", "id-test", "valid", "test"):
        assert (envs[hiv.splits[part]] == -1).all()


def test_registered_and_recommended():
    cls = DATASETS.get("goodhiv")
    assert cls is GoodHiv and DATASETS.get("good-hiv") is GoodHiv
    assert cls.splits == ("scaffold", "size")
    assert cls.parts == ("train", "valid", "test", "id-valid", "id-test")
    assert cls.defaults == {"split": "scaffold", "shift": "covariate", "seed": 123}
    assert cls.metric == "rocauc" and cls.num_classes == 2
    assert cls.recommended["encoder.virtual_node"] is False
    assert cls.recommended["train.warmup_epochs"] == 10


@pytest.mark.parametrize("params, choices", [
    ({"split": "atoms"}, "scaffold, size"),
    ({"shift": "covarate"}, "covariate"),
])
def test_bad_split_or_shift_lists_choices(params, choices):
    with pytest.raises(GrpruneError, match=choices):
        load_dataset("good-hiv", **params)


def test_split_function_checks_names():
    with pytest.raises(GrpruneError, match="covariate, concept"):
        good_split([1, 2], [0, 1], domain="size", shift="no_shift", seed=0)
    with pytest.raises(GrpruneError, match="scaffold, size"):
        good_split([1, 2], [0, 1], domain="atoms", shift="covariate", seed=0)


# -- GOOD's splits on the real domain values -------------------------------------
@pytest.mark.parametrize("domain, shift", sorted(PUBLISHED))
def test_published_sizes(hiv, domains, domain, shift):
    labels = hiv.labels.numpy()
    parts, envs, n_domains = good_split(domains[domain], labels, domain=domain, shift=shift,
                                        seed=123)
    assert sizes(parts) == PUBLISHED[(domain, shift)]
    assert n_domains == {"scaffold": 19089, "size": 151}[domain]
    check_disjoint(parts, len(labels))
    # GOOD's parts cover all molecules for HIV
    assert sum(sizes(parts)) == len(labels)
    train_envs = sorted(set(envs[parts["train"]].tolist()))
    assert train_envs == list(range(10 if shift == "covariate" else 3))
    assert (envs[parts["valid"]] == -1).all() and (envs[parts["test"]] == -1).all()


def test_scaffold_covariate_domains(domains, hiv):
    scaffolds = np.array(domains["scaffold"], dtype=object)
    parts, _, _ = good_split(scaffolds.tolist(), hiv.labels.numpy(), domain="scaffold",
                             shift="covariate", seed=123)
    pool = np.concatenate([parts[k] for k in ("train", "id-valid", "id-test")])
    seen = {k: set(scaffolds[v].tolist()) for k, v in
            (("pool", pool), ("valid", parts["valid"]), ("test", parts["test"]))}
    assert not seen["pool"] & seen["valid"] and not seen["pool"] & seen["test"]
    assert not seen["valid"] & seen["test"]
    # domains in lexicographic order: training pool < OOD-valid < OOD-test
    assert max(seen["pool"]) < min(seen["valid"]) and max(seen["valid"]) < min(seen["test"])
    assert "" in seen["pool"]  # acyclic molecules sort first
    # the ID parts are a random draw from the pool: same domains as training, not OOD
    assert len(set(scaffolds[parts["id-test"]].tolist()) & set(
        scaffolds[parts["train"]].tolist())) > 1000


def test_concept_shift_flips_label_domain_correlation(domains, hiv):
    labels = hiv.labels.numpy()
    values = domains["size"]
    parts, envs, _ = good_split(values, labels, domain="size", shift="concept", seed=123)
    _, dom = domain_ids(values)
    # GOOD's domain sign: +1 where fewer than n/2 molecules precede the domain
    before = np.concatenate([[0], np.cumsum(np.bincount(dom))[:-1]])
    plus = (before < len(labels) / 2)[dom]

    def rates(part):  # positive rate in +1 domains, in -1 domains
        idx = parts[part]
        return labels[idx][plus[idx]].mean(), labels[idx][~plus[idx]].mean()

    train, test, valid = rates("train"), rates("test"), rates("valid")
    assert train[0] > 0.1 and train[0] > 5 * train[1]  # actives in small molecules
    assert test[1] > 0.3 and test[1] > 5 * test[0]  # flipped in OOD-test
    assert valid[1] > valid[0]  # the leftover set leans the OOD way too
    # ID parts come from the training environments and keep their ids
    assert set(envs[parts["id-test"]].tolist()) == {0, 1, 2}
    assert rates("id-test")[0] > 5 * rates("id-test")[1]


def test_split_is_deterministic_and_seeded(domains, hiv):
    labels = hiv.labels.numpy()
    for shift in ("covariate", "concept"):
        a = good_split(domains["size"], labels, domain="size", shift=shift, seed=123)
        b = good_split(domains["size"], labels, domain="size", shift=shift, seed=123)
        assert all(np.array_equal(a[0][k], b[0][k]) for k in PARTS)
        assert np.array_equal(a[1], b[1])
    # the same split as the full load computed
    a = good_split(domains["size"], labels, domain="size", shift="covariate", seed=123)
    assert all(np.array_equal(a[0][k], hiv.splits[k]) for k in PARTS)
    assert np.array_equal(a[1], hiv.envs.numpy())
    # another seed: same OOD parts and sizes, another ID carve-out
    c = good_split(domains["size"], labels, domain="size", shift="covariate", seed=0)
    assert sizes(c[0]) == sizes(a[0])
    assert np.array_equal(c[0]["valid"], a[0]["valid"])
    assert not np.array_equal(c[0]["id-test"], a[0]["id-test"])


# -- scaffolds ----------------------------------------------------------------------
def test_scaffolds_match_rdkit_murcko_without_metals(hiv):
    from rdkit.Chem.Scaffolds import MurckoScaffold

    smiles = [s for s in hiv.smiles[:400] if "[" not in s]  # no metals, no charges
    assert len(smiles) > 100
    for s in smiles:
        expected = MurckoScaffold.MurckoScaffoldSmiles(smiles=s, includeChirality=False)
        assert murcko_scaffold(s) == (expected, False)


def test_scaffold_spelling_of_metal_complexes(domains, hiv):
    # RDKit >= 2025.03 would write "C1C[O][SbH][O]1"; GOOD's RDKit wrote this
    assert murcko_scaffold("OCC(O)C1O[Sb](O)(O)(O)OC1C(O)CO") == ("C1CO[SbH]O1", False)
    scaffolds = domains["scaffold"]
    # one of the 9 overridden scaffolds (Tl; current RDKit drops its 2 Hs)
    assert scaffolds[20514] == "C1=[O+][TlH2-][O+]=C[CH-]1"
    # the 7 lenient molecules: scaffolds as RDKit 2022.09 gives them, singletons
    row = {int(r): i for i, r in enumerate(hiv.source_rows)}
    assert scaffolds[row[137]] == "O=C1O[Al]23(OC1=O)(OC(=O)C(=O)O2)OC(=O)C(=O)O3"
    assert scaffolds[row[987]] == "c1ccc([B-2]2(c3ccccc3)=NCCO2)cc1"
    for r in LENIENT_ROWS:
        scaffold, lenient = murcko_scaffold(hiv.smiles[row[r]])
        assert lenient and scaffold == scaffolds[row[r]]
        assert scaffolds.count(scaffold) == 1
        assert int(hiv.labels[row[r]]) == 0


def test_unparsable_smiles_names_file_and_row():
    with pytest.raises(DataError, match="not-a-molecule"):
        murcko_scaffold("not-a-molecule")
    with pytest.raises(DataError, match=r"data file x\.csv, row 9"):
        compute_scaffolds(["CCO", "C1CC"], where="data file x.csv", rows=[5, 9])


def test_scaffold_cache_hit_stale_and_corrupt(tmp_path):
    smiles = ["c1ccccc1CC", "CCO", "C1CCNCC1C(=O)O"]
    expected = ["c1ccccc1", "", "C1CCNCC1"]
    key = {"recipe_version": 1, "rdkit_version": "x"}
    path = tmp_path / "scaffolds.json"
    assert cached_scaffolds(smiles, key, path) == (expected, "built")
    assert cached_scaffolds(smiles, key, path) == (expected, "hit")
    got, status = cached_scaffolds(smiles, {**key, "rdkit_version": "y"}, path)
    assert got == expected and status == "rebuilt (rdkit_version changed)"
    data = json.loads(path.read_text())
    data["scaffolds"][0] = "C1CC1"  # tampered entry: checksum mismatch
    path.write_text(json.dumps(data))
    got, status = cached_scaffolds(smiles, {**key, "rdkit_version": "y"}, path)
    assert got == expected and "corrupt" in status
    path.write_text(path.read_text()[:40])  # truncated
    got, status = cached_scaffolds(smiles, {**key, "rdkit_version": "y"}, path)
    assert got == expected and status.startswith("rebuilt (unreadable")


# -- the loader's scaffold path on a small stand-in ----------------------------------
def test_scaffold_load_caches_and_rebuilds(hiv, tmp_path, monkeypatch):
    n = 300
    small = MoleculeGraphs(graphs=hiv.graphs[:n], labels=hiv.labels.numpy()[:n],
                           smiles=hiv.smiles[:n], source_rows=np.arange(n), skipped_rows=[],
                           n_source_rows=n, lenient_rows=[])
    monkeypatch.setattr(good_hiv.dataset.ogbg, "hiv_molecules", lambda root: (small, "hit"))
    first = GoodHiv().load(root=tmp_path, split="scaffold", shift="covariate", seed=123)
    assert first.info["domain_cache"] == "built"
    check_disjoint(first.splits, n)
    assert sum(first.info["split_sizes"].values()) == n
    second = GoodHiv().load(root=tmp_path, split="scaffold", shift="covariate", seed=123)
    assert second.info["domain_cache"] == "hit"
    assert all(np.array_equal(first.splits[k], second.splits[k]) for k in PARTS)
    cache = tmp_path / "good_hiv" / "grprune_v1" / "scaffolds.json"
    cache.write_text("{not json")
    third = GoodHiv().load(root=tmp_path, split="scaffold", shift="concept", seed=123)
    assert third.info["domain_cache"].startswith("rebuilt")
    assert third.info["shift"] == "concept"
    assert json.loads(cache.read_text())["n_molecules"] == n
