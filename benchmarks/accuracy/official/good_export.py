"""The official code's loader of grprune's exported GOOD datasets: what ``GOODMotif.load``
returns, built from ``export.py``'s numpy arrays instead of GOOD's processed files.

Runs in the official code's venv (torch, torch_geometric). The patched ``run.py`` calls
:func:`load_good` instead of ``GOODMotif.load`` when ``OFFICIAL_EXPORT=grprune`` (``runs.py``
sets it and puts this folder on ``PYTHONPATH``); ``check.py`` calls it to re-compute the
counts and hashes that ``export.py`` printed.

What ``run.py`` and ``modelNew`` read of GOOD's datasets, and what this gives them (GOOD's
``GOODMotif.gen_data`` and ``GOODMotif.load``, divelab/GOOD):

* ``dataset['train' | 'val' | 'test']``: PyG ``InMemoryDataset`` s whose ``transform`` may
  be set; here one dataset of all the graphs, indexed by each part's indices (so
  ``.indices()`` gives the split back);
* per graph ``x`` float32 (N, 1) ones, ``edge_index`` int64 (2, E) both directions,
  ``y`` int64 (1,), ``env_id`` int64 (1,) and ``edge_gt`` bool (E,), as GOOD stores them;
  no ``edge_attr`` (GOOD-Motif has none), so ``data.edge_attr`` is None;
* ``meta_info``: ``dataset_type``, ``model_level``, ``dim_node``, ``dim_edge``,
  ``num_envs``, ``num_classes``, as GOOD computes them (``run.py`` reads none of them).

GOOD's ``node_gt``, ``basis_id`` and ``motif_id`` are not exported: nothing in the
official code reads them.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import torch
from torch_geometric.data import Data, InMemoryDataset

from benchmarks.accuracy.official import common


class ExportedGOOD(InMemoryDataset):
    """Graphs collated as GOOD's processed files are (``InMemoryDataset.collate``); a
    module-level class, so DataLoader workers can import it under any start method."""

    def __init__(self, data_list: list[Data]):
        super().__init__(None)
        self._data, self.slices = self.collate(data_list)


def load_good(root: str | os.PathLike, name: str = "good-motif", domain: str = "basis",
              shift: str = "covariate") -> tuple[dict, SimpleNamespace]:
    """``GOODMotif.load(root, domain, shift)``'s return value, from grprune's export.

    Parameters
    ----------
    root : path
        ``export.py``'s root (the official ``--root``); the data is in
        ``root/<name>_<domain>`` (``good_motif_basis``).
    name : str
        grprune's dataset name (``good-motif``).
    domain : str
        The split (``basis``, ``size``).
    shift : str
        Only ``covariate`` is exported.

    Returns
    -------
    (dataset, meta_info)
        ``dataset``: ``train``, ``val``, ``test``, ``id_val``, ``id_test`` (PyG datasets),
        ``task`` and ``metric`` as GOOD names them; ``meta_info`` as the module says.

    Raises
    ------
    ValueError
        If ``shift`` is not ``covariate``.
    FileNotFoundError
        If the export is missing.
    """
    if shift != "covariate":
        raise ValueError(f"only the covariate shift is exported, not {shift!r}")
    folder = Path(root) / f"{name.replace('-', '_')}_{domain}"
    graphs, env_id, parts = common.read_graph_arrays(folder)
    data_list = [Data(x=torch.from_numpy(x.copy()), edge_index=torch.from_numpy(ei.copy()),
                      y=torch.tensor([y], dtype=torch.long),
                      env_id=torch.tensor([int(env)], dtype=torch.long),
                      edge_gt=torch.from_numpy(gt.copy()))
                 for (x, ei, gt, y), env in zip(graphs, env_id.tolist())]
    full = ExportedGOOD(data_list)
    dataset = {good: full[torch.as_tensor(parts[part], dtype=torch.long)]
               for part, good in common.GOOD_PARTS.items() if part in parts}
    dataset.update(task="Multi-label classification", metric="Accuracy")
    train = dataset["train"]
    labels = torch.cat([train[i].y for i in range(len(train))])
    meta_info = SimpleNamespace(
        dataset_type="syn", model_level="graph", dim_node=full.num_node_features,
        dim_edge=full.num_edge_features,
        num_envs=int(torch.unique(torch.as_tensor(env_id[parts["train"]])).numel()),
        num_classes=int(torch.unique(labels).numel()))
    return dataset, meta_info


def official_side(root: str | os.PathLike, name: str = "good-motif", domain: str = "basis"
                  ) -> dict:
    """Counts and hashes of the export as :func:`load_good` (so ``run.py``) gives it: the
    graphs in their order, the env ids, and train/val/test's indices (``.indices()``).

    Returns
    -------
    dict
        :func:`common.good_side`'s fields, to compare with ``grprune.json``.
    """
    import numpy as np
    dataset, _ = load_good(root, name, domain)
    whole = {}
    for good in ("train", "val", "test", "id_val", "id_test"):
        if dataset.get(good) is None:
            continue
        for i, d in zip(dataset[good].indices(), dataset[good]):
            whole[int(i)] = d
    graphs = [(d.x.numpy(), d.edge_index.numpy(), d.edge_gt.numpy(), int(d.y.view(-1)[0]))
              for _, d in sorted(whole.items())]
    env_id = np.asarray([int(d.env_id.view(-1)[0]) for _, d in sorted(whole.items())])
    parts = {p: np.asarray(dataset[common.GOOD_PARTS[p]].indices()) for p in common.PARTS}
    return common.good_side(name, domain, graphs, env_id, parts)
