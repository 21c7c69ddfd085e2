"""The tensor data path: batches gathered from a GraphStore equal DGL-batched ones, the
training shuffles are those of a DataLoader, and a training step never waits for the device."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest
import torch

from grprune.batch import collate
from grprune.resolve import resolve_config
from grprune.data import load_dataset
from grprune.data.dataset import GraphDataset
from grprune.data.store import GraphStore
from grprune.losses import cross_entropy
from grprune.regularizers import StepContext
from grprune.trainer import Trainer
from tests.conftest import steps_without_sync, toy_graphs


def _assert_same_batch(a, b):
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize("name", ["ogbg-molbbbp", "good-motif"])
def test_store_batches_equal_dgl_batched_ones_field_by_field(name):
    ds = load_dataset(name)
    store = GraphStore.from_dataset(ds)
    rng = np.random.default_rng(0)
    for size in (1, 7, 64):
        idx = rng.choice(len(ds), size=size, replace=False)
        _assert_same_batch(collate([ds[i] for i in idx]), store.batch(idx))


def test_graphs_without_edges_and_a_list_of_graphs():
    graphs = toy_graphs()  # a path, a single atom, one bond, a triangle
    ds = GraphDataset("toy", graphs, [0, 1, 0, 1], {"train": [0, 1], "valid": [2], "test": [3]},
                      num_classes=2,
                      metric="rocauc")
    store = GraphStore.from_dataset(ds)
    assert store.num_bonds.tolist() == [2, 0, 1, 3]
    for idx in ([1], [3, 1, 0], [1, 2]):
        _assert_same_batch(collate([ds[i] for i in idx]), store.batch(idx))


def test_training_shuffles_are_those_of_a_dataloader():
    cfg = resolve_config(flags={"train.device": "cpu", "data.limit": 100, "train.seed": 5})
    trainer = Trainer(cfg, load_dataset("ogbg-molbbbp"), "unused")
    n = len(trainer.splits["train"])
    loader: torch.utils.data.DataLoader = torch.utils.data.DataLoader(
        range(n), batch_size=n, shuffle=True,  # type: ignore[arg-type]  # a range is a dataset
                                         generator=torch.Generator().manual_seed(5))
    for _ in range(3):  # three epochs: every draw of the generator is replicated
        assert trainer.train_order().tolist() == next(iter([b for b in loader])).tolist()


class _NoSync:
    """Fails on the Tensor methods that read a device value on the host."""

    NAMES = ("item", "tolist", "__bool__", "__int__", "__float__", "nonzero", "numpy", "cpu")

    def __enter__(self):
        self.saved = {n: getattr(torch.Tensor, n) for n in self.NAMES}

        def fail(name):
            def raiser(*args, **kwargs):
                raise AssertionError(f"Tensor.{name} in a training step (a host sync on CUDA)")
            return raiser
        for n in self.NAMES:
            setattr(torch.Tensor, n, fail(n))
        return self

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(torch.Tensor, n, f)


@pytest.mark.parametrize("preset", ["paper", "official"])
def test_a_prune_training_step_reads_nothing_back_from_the_device(preset):
    """CPU stand-in for torch.cuda.set_sync_debug_mode("error"): forward, L_e, L_s and
    backward of a PrunE step call no Tensor method that copies a value to the host."""
    cfg = resolve_config(preset=preset, flags={"train.device": "cpu", "data.limit": 64})
    trainer = Trainer(cfg, load_dataset("ogbg-molbbbp"), "unused")
    trainer.model.train()
    batch = next(trainer._batches("train", train=True))
    with _NoSync():
        out = trainer.model(batch)
        total = cross_entropy(out.logits, batch.y)
        ctx = StepContext(batch=batch, output=out, model=trainer.model)
        for reg in trainer.regs.values():
            total = total + reg.weight * reg.loss(ctx)
        total.backward()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_cuda_training_epoch_makes_no_host_sync_per_step():
    cfg = resolve_config(flags={"train.device": "cuda", "data.limit": 256})
    trainer = Trainer(cfg, load_dataset("ogbg-molbbbp"), "unused")
    assert trainer.store.device.type == "cuda"  # the dataset lives on the device
    trainer.train_epoch(0)  # warm-up: lazy CUDA initialisation may sync
    steps_without_sync(trainer, trainer._batches("train", train=True))
