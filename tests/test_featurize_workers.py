"""Training-side featurization when a worker process dies (issue 65): the pools of
:func:`grprune.data.featurize.featurize_ogb` and
:func:`~grprune.data.featurize.parallel_scaffolds` notice it (``BrokenProcessPool``) and
never wait: the molecule that kills its worker is skipped with a reason (features) or
named in one line (scaffolds); the other molecules come out as a serial run gives them."""

from __future__ import annotations

import os

import numpy as np
import pytest

from grprune.data.featurize import (_scaffold_chunk, featurize_chunk, featurize_ogb,
                                    parallel_scaffolds)
from grprune.data.workers import WORKER_DIED, WorkerDied, ordered_map
from grprune.errors import DataError


def _dying_task(item):
    """A task that dies as RDKit crashing would when ``DIE`` is among its items."""
    if "DIE" in item:
        os._exit(11)
    return item


_REAL_CHUNK, _REAL_SCAFFOLDS = featurize_chunk, _scaffold_chunk


def _dying_chunk(smiles, **kwargs):
    if "DIE" in smiles:
        os._exit(11)
    return _REAL_CHUNK(smiles, **kwargs)


def _dying_scaffolds(task):
    if "DIE" in task[0]:
        os._exit(11)
    return _REAL_SCAFFOLDS(task)


@pytest.fixture(scope="module")
def smiles():
    from grprune.data.moleculenet_csv import read_molecule_csv
    from grprune.data.ogbg import FILES
    rows, _ = read_molecule_csv(FILES / "ogbg_molbbbp/bbbp.csv.gz", "smiles", "p_np")
    return list(rows[:400])


def test_ordered_map_names_the_task_that_kills_its_worker_alone():
    items = [["a"], ["b"], ["c", "DIE"], ["d"], ["e"]]
    got = []
    with pytest.raises(WorkerDied) as err:
        for out in ordered_map(_dying_task, items, 2):
            got.append(out)
    assert err.value.index == 2 and got == [["a"], ["b"]]
    rescued = list(ordered_map(_dying_task, items, 2, rescue=lambda item, k: ["rescued", k]))
    assert rescued == [["a"], ["b"], ["rescued", 2], ["d"], ["e"]]


def test_a_molecule_that_kills_its_worker_is_skipped_with_a_reason(smiles, monkeypatch):
    rows = list(smiles)
    rows[137] = "DIE"
    want, kept_want, failed_want = featurize_ogb(rows[:137] + rows[138:], workers=0,
                                                   progress="none")
    monkeypatch.setattr("grprune.data.featurize.featurize_chunk", _dying_chunk)
    got, kept, failed = featurize_ogb(rows, workers=2, chunk_size=25, progress="none")
    assert failed[137] == WORKER_DIED
    assert {(p if p < 137 else p - 1): w for p, w in failed.items() if p != 137} == failed_want
    assert np.array_equal(np.where(kept > 137, kept - 1, kept), kept_want)
    for name in ("node_feat", "edge_index", "edge_feat", "num_nodes", "num_edges"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name


def test_a_molecule_that_kills_its_scaffold_worker_is_one_line(smiles, monkeypatch):
    rows = list(smiles)
    rows[260] = "DIE"
    monkeypatch.setattr("grprune.data.featurize._scaffold_chunk", _dying_scaffolds)
    with pytest.raises(DataError) as err:
        parallel_scaffolds(rows, workers=2, chunk_size=25, progress="none")
    text = str(err.value)
    assert text == ("computing scaffolds: the worker process died on the SMILES 'DIE' (RDKit "
                    "crashed on it, or the memory ran out); remove it from the data file")
    monkeypatch.setattr("grprune.data.featurize._scaffold_chunk", _REAL_SCAFFOLDS)
    assert parallel_scaffolds(smiles, workers=2, chunk_size=25, progress="none") == \
        parallel_scaffolds(smiles, workers=0, progress="none")
