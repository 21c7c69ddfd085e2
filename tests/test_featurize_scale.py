"""The bulk molecule featurizer (grprune/data/featurize.py) behind ``molecule-csv``: the
same graphs and skip reasons as :func:`smiles_to_graph` one molecule at a time, in
parallel as in series, repeated SMILES reused, uint8 storage widened to int64 where
graphs and batches are formed, and a progress display that stays quiet for small inputs."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from grprune.batch import collate
from grprune.data import load_dataset
from grprune.data.featurize import (FlatGraphs, Progress, featurize_chunk, featurize_ogb,
                                    parallel_scaffolds)
from grprune.data.molecule_rows import cached_rows, read_rows
from grprune.data.moleculenet_csv import read_molecule_csv
from grprune.data.molecules import smiles_to_graph
from grprune.data.ogbg import FILES
from grprune.data.packed import PackedGraphs
from grprune.data.splits import murcko_scaffolds
from grprune.data.store import GraphStore
from grprune.errors import DataError

#: SMILES the fast path must hand to the reference: no syntax, bad valence, no atoms,
#: a bond-less salt, a dummy atom
ODD = ["C1CC(C", "CC(C)(C)(C)(C)C", "[Na+].[Cl-]", "C", "*CC", "[H][H]"]


def _bundled() -> list[str]:
    bace, _ = read_molecule_csv(FILES / "moleculenet" / "bace.csv.gz", "mol", "Class")
    bbbp, _ = read_molecule_csv(FILES / "ogbg_molbbbp" / "bbbp.csv.gz",
                                "smiles", "p_np")
    return bace + bbbp


def _same_graph(g, ref) -> None:
    assert g.idtype == ref.idtype == torch.int64
    assert g.num_nodes() == ref.num_nodes() and g.num_edges() == ref.num_edges()
    for a, b in zip(g.edges(), ref.edges()):
        assert torch.equal(a, b)
    for key in ("feat",):
        assert g.ndata[key].dtype == ref.ndata[key].dtype == torch.int64
        assert torch.equal(g.ndata[key], ref.ndata[key])
        assert g.edata[key].dtype == ref.edata[key].dtype == torch.int64
        assert torch.equal(g.edata[key], ref.edata[key])


@pytest.fixture(scope="module")
def bundled_csv(tmp_path_factory):
    """Every bundled BACE and BBBP SMILES as one CSV, with bad rows: an unparsable SMILES,
    a missing label, a missing SMILES, repeats; and the reference graphs per row."""
    smiles = _bundled() + ODD + ["", "CCO", "CCO", "C1CC(C"]
    labels = ["1" if i % 3 else "0" for i in range(len(smiles))]
    labels[5] = ""  # a missing label
    path = tmp_path_factory.mktemp("csv") / "bundled.csv"
    path.write_text("smiles,label\n" + "".join(f"\"{s}\",{y}\n" for s, y in zip(smiles, labels)))
    ref: dict[int, object] = {}
    for row, s in enumerate(smiles):
        try:
            ref[row] = smiles_to_graph(s)
        except DataError as exc:
            ref[row] = str(exc)
    return path, ref


def test_csv_rows_equal_smiles_to_graph_on_bundled_molecules(bundled_csv, tmp_path):
    """Graph for graph, the new path (and its cache reload) equals smiles_to_graph; the
    rows it skips are the rows smiles_to_graph rejects or read_rows marks, same reasons."""
    path, ref = bundled_csv
    _, _, label_bad, _ = read_rows(path, "smiles", "label")
    want_bad = {**{r: why for r, why in ref.items() if isinstance(why, str)}, **label_bad}
    want_rows = [r for r in range(len(ref)) if r not in want_bad]
    for status in ("built", "hit"):
        data = cached_rows(path, "smiles", "label", "ogb", tmp_path)
        assert data["cache"] == status
        assert isinstance(data["graphs"], PackedGraphs)
        assert data["source_rows"].tolist() == want_rows
        assert {b["row"]: b["reason"] for b in data["bad_rows"]} == want_bad
        assert [b["row"] for b in data["bad_rows"]] == sorted(want_bad)
        # stored narrow, handed out wide
        assert data["graphs"].ndata["feat"].dtype == torch.uint8
        for g, row in zip(data["graphs"], data["source_rows"]):
            _same_graph(g, ref[int(row)])
    assert "missing label" in want_bad[5] and "not valid SMILES syntax" in want_bad[len(ref) - 1]


def test_parallel_chunks_equal_serial():
    smiles = _bundled()[:400] + ODD
    serial = featurize_ogb(smiles, workers=0, chunk_size=37, progress="none")
    parallel = featurize_ogb(smiles, workers=2, chunk_size=37, progress="none")
    for a, b in zip(serial[0].__dict__.values(), parallel[0].__dict__.values()):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert np.array_equal(serial[1], parallel[1]) and serial[2] == parallel[2]


def test_parallel_scaffolds_equal_serial():
    smiles = _bundled()[:300] + ["CCO", "c1ccccc1"]
    serial = murcko_scaffolds(smiles, include_chirality=True)
    assert parallel_scaffolds(smiles, workers=2, chunk_size=41) == serial
    assert parallel_scaffolds(smiles, False, workers=2, chunk_size=41) == murcko_scaffolds(
        smiles, include_chirality=False)


def test_repeated_smiles_are_computed_once(monkeypatch):
    import grprune.data.featurize as featurize

    seen: list[str] = []

    def counting(chunk):
        seen.extend(chunk)
        return featurize_chunk(chunk)

    monkeypatch.setattr(featurize, "featurize_chunk", counting)
    smiles = ["CCO", "c1ccccc1", "CCO", "C1CC(C", "C", "c1ccccc1", "C1CC(C", "CCO"]
    flat, kept, failed = featurize_ogb(smiles, workers=0, chunk_size=2)
    assert sorted(seen) == sorted(set(smiles))
    assert kept.tolist() == [0, 1, 2, 4, 5, 7] and sorted(failed) == [3, 6]
    assert failed[3] == failed[6]
    for g, p in zip(flat.to_packed(), kept):
        _same_graph(g, smiles_to_graph(smiles[p]))


def test_take_and_concat_keep_graphs():
    smiles = ["CCO", "C", "c1ccccc1O"]
    flat = FlatGraphs.concat([featurize_chunk(smiles[:1])[0], featurize_chunk(smiles[1:])[0]])
    picked = flat.take(np.array([2, 1, 2, 0]))
    for g, p in zip(picked.to_packed(), [2, 1, 2, 0]):
        _same_graph(g, smiles_to_graph(smiles[p]))
    assert len(FlatGraphs.concat([])) == 0


def test_store_batches_uint8_features_as_int64(tmp_path):
    """GraphStore keeps the uint8 features and widens what it gathers: equal to collate."""
    from grprune.data.molecule_csv import MoleculeCsv

    params = MoleculeCsv.example_params(tmp_path)
    ds = load_dataset("molecule-csv", root=tmp_path, **params)
    store = GraphStore.from_dataset(ds)
    assert store.node_feat.dtype == torch.uint8 and store.edge_feat.dtype == torch.uint8
    index = [5, 0, 17, 3]
    got = store.batch(index)
    want = collate([ds[i] for i in index])
    assert got.node_feat.dtype == torch.int64 and got.edge_feat.dtype == torch.int64
    for name in ("src", "dst", "node_feat", "edge_feat", "bond", "num_nodes", "num_edges"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name


def test_progress_plain_lines_every_tenth_and_quiet_when_small():
    out = io.StringIO()
    bar = Progress(20_000, "mols.csv", "plain", stream=out)
    for _ in range(20):
        bar.advance(1000)
    bar.close()
    start, *lines = out.getvalue().splitlines()  # a start line, then one per tenth
    assert start == "featurizing mols.csv: 20,000 molecules"
    assert len(lines) == 10 and lines[-1].startswith("featurizing mols.csv: 20,000/20,000 "
                                                     "molecules (100%)")
    assert "molecules/s" in lines[0] and "ETA" in lines[0]
    quiet = io.StringIO()
    small = Progress(100, "mols.csv", "auto", stream=quiet)
    small.advance(100)
    small.close()
    assert small.mode == "none" and quiet.getvalue() == ""
    assert Progress(20_000, "x", "auto", stream=io.StringIO()).mode == "plain"  # not a TTY


def test_progress_rich_on_a_terminal():
    from rich.console import Console  # noqa: F401  (rich is a dependency)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    bar = Progress(10_000, "mols.csv", "auto", stream=out)
    assert bar.mode == "rich"
    bar.advance(10_000)
    bar.close()
    assert "featurizing mols.csv" in out.getvalue() and "molecules/s" in out.getvalue()


# -- the cache: memory-mapped, and never written through ------------------------------
def _small_cache(tmp_path):
    from grprune.data.cache import read_graph_cache, write_graph_cache
    flat = featurize_ogb(["CCO", "c1ccccc1O", "CC(=O)N"])[0]
    labels = torch.tensor([0, 1, 1])
    write_graph_cache(tmp_path, {"k": 1}, flat.to_packed(), {"labels": labels})
    return flat, labels, read_graph_cache


def test_a_cache_hit_is_memory_mapped_and_never_written_back(tmp_path):
    """The graphs come back equal, with their uint8 features, over a copy-on-write map of
    graphs.bin: a change in memory leaves the file and the next load as they were."""
    flat, labels, read = _small_cache(tmp_path)
    before = (tmp_path / "graphs.bin").read_bytes()
    (graphs, tensors, meta), reason = read(tmp_path, {"k": 1})
    assert reason == "" and meta["layout"] == "packed-v2" and len(graphs) == 3
    assert graphs.ndata["feat"].dtype == torch.uint8 and torch.equal(tensors["labels"], labels)
    for g, ref in zip(graphs, flat.to_packed()):
        assert torch.equal(torch.stack(g.edges()), torch.stack(ref.edges()))
        assert torch.equal(g.ndata["feat"], ref.ndata["feat"])
    graphs.ndata["feat"][0] += 1  # copy-on-write: this process only
    tensors["labels"][:] = 7
    assert (tmp_path / "graphs.bin").read_bytes() == before
    (again, tensors, _), reason = read(tmp_path, {"k": 1})
    assert reason == "" and torch.equal(tensors["labels"], labels)
    assert torch.equal(again.ndata["feat"], torch.from_numpy(flat.node_feat))


@pytest.mark.parametrize("damage", ["offset", "dtype", "name", "shape", "no-table"])
def test_a_cache_with_a_bad_array_table_is_rebuilt_not_read(tmp_path, damage):
    import json
    _, _, read = _small_cache(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    entry = meta["arrays"][3]  # ndata/feat
    if damage == "offset":
        entry["offset"] = 2**40
    elif damage == "dtype":
        entry["dtype"] = "object"
    elif damage == "name":
        entry["name"] = "../../etc"
    elif damage == "shape":
        entry["shape"] = [10**9, 9]
    else:
        del meta["arrays"]
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    cached, reason = read(tmp_path, {"k": 1})
    assert cached is None and reason.startswith("cannot read graphs.bin")


def test_a_packed_view_packs_by_gathering_arrays():
    """pack() of a view (a split, data.limit) gathers the arrays in the view's order and
    builds no graph; the result equals the graphs it shows."""
    flat = featurize_ogb(["CCO", "c1ccccc1O", "CC(=O)N", "C"])[0]
    packed = flat.to_packed()
    view = packed.take([3, 1, 1, 0])
    again = view.pack()
    assert again.is_identity() and not again._memo and len(again) == 4
    for g, ref in zip(again, [packed[3], packed[1], packed[1], packed[0]]):
        assert torch.equal(torch.stack(g.edges()), torch.stack(ref.edges()))
        assert torch.equal(g.ndata["feat"], ref.ndata["feat"])
        assert torch.equal(g.edata["feat"], ref.edata["feat"])


def test_scaffold_envs_are_np_unique_ids_without_a_string_array():
    """The environment ids of a scaffold split: the sorted rank of each scaffold, as
    np.unique gave them (runs keep their environments), without a fixed-width array."""
    from grprune.data.splits import scaffold_envs
    smiles, _ = read_molecule_csv(FILES / "ogbg_molbbbp" / "bbbp.csv.gz", "smiles", "p_np")
    scaffolds = murcko_scaffolds(smiles[:400]) + ["", "c1ccccc1", "C1CC1"]
    ref = np.unique(np.asarray(scaffolds, dtype=object).astype(str), return_inverse=True)[1]
    assert np.array_equal(scaffold_envs(scaffolds), ref) and scaffold_envs([]).tolist() == []
