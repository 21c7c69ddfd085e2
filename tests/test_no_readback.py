"""Nothing in a training step reads back to the host (issue 49): the losses, progress and
the divergence checks read once per epoch.

A read-back is an op whose result the host needs before it can queue the next one, which on
a GPU waits for the device to finish its queue: ``.item()``, ``float()``, ``int()`` and
``bool()`` of a tensor (all ``aten::_local_scalar_dense``), ops whose output size depends on
the values (``nonzero``, ``masked_select``, ``unique``, ``repeat_interleave`` without
``output_size``), and copies from the device to the host. A
:class:`~torch.utils._python_dispatch.TorchDispatchMode` sees every op the step dispatches,
on any device, so the rule is checked on the CPU as well: a whole epoch of
:meth:`Trainer.train_epoch` (forward, losses, regularizers, backward, Adam) on batches
gathered before it (the gathering reads nothing either) may read back only its one copy
of the epoch's sums. The exception is Adam's own step counters: ``torch.optim.Adam``
(``foreach`` or single-tensor, not ``capturable``) keeps them on the host and reads each
with ``.item()``, which copies nothing from the device (fused Adam, the CUDA fast path,
keeps them on the device and reads none).

The pieces that keep the step free of reads are tested below it: the epoch's loss sums
(:class:`~grprune.losses.EpochSums`, bit for bit the per-term sums they replace), the
weights' finiteness check (:func:`~grprune.ops.all_finite`), the multi-hot matrix made once
per batch, and ranks from known segment sizes.

The device is a parameter, as in ``tests/test_device.py``: ``cpu`` always, ``cuda`` where
torch sees a CUDA device.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grprune.data import load_dataset
from grprune.encoders import base as encoders_base
from grprune.encoders.base import EdgeEmbedding, NodeEmbedding, _multi_hot
from grprune.losses import EpochSums
from grprune.ops import all_finite, rank_in_segment
from grprune.resolve import resolve_config
from grprune.trainer import Trainer

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
#: ops whose output size depends on the values: the host reads it back
SIZED_BY_VALUES = {"nonzero", "nonzero_static", "masked_select", "_unique", "_unique2",
                   "unique_dim", "unique_consecutive", "unique_dim_consecutive", "bincount"}


@pytest.fixture(params=[pytest.param("cpu", id="cpu"),
                        pytest.param("cuda", id="cuda", marks=CUDA)])
def device(request) -> str:
    """The training device: ``cpu`` always, ``cuda`` where available."""
    return request.param


@pytest.fixture(scope="module")
def molbbbp():
    return load_dataset("ogbg-molbbbp")


class ReadBacks(TorchDispatchMode):
    """Records the ops that read a tensor back to the host, by name (``host_steps``: the
    scalar reads of tensors in ``host_steps``, Adam's step counters, counted apart)."""

    def __init__(self, host_steps: set[int]) -> None:
        super().__init__()
        self.host_steps = host_steps
        self.reads: Counter[str] = Counter()
        self.optimizer_steps = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name == "_local_scalar_dense":
            t = args[0]
            if t.device.type == "cpu" and t.untyped_storage().data_ptr() in self.host_steps:
                self.optimizer_steps += 1
            else:
                self.reads[name] += 1
        elif name in SIZED_BY_VALUES:
            self.reads[name] += 1
        elif (name == "repeat_interleave" and func._overloadname != "self_int"
              and kwargs.get("output_size") is None):
            self.reads[name] += 1
        elif name in ("index", "index_put", "index_put_", "_index_put_impl_") and any(
                i is not None and i.dtype == torch.bool for i in args[1]):
            self.reads[f"{name} (bool mask)"] += 1
        elif name in ("_to_copy", "copy_"):
            src = args[1] if name == "copy_" else args[0]
            dst = (args[0].device if name == "copy_"
                   else torch.device(kwargs.get("device") or src.device))
            if src.device.type != "cpu" and dst.type == "cpu":
                self.reads["device-to-host copy"] += 1
        return func(*args, **kwargs)


def _trainer(data, device: str, tmp_path: Path, pad: bool) -> Trainer:
    flags = {"train.device": device, "train.warmup_epochs": 0, "train.progress": "none",
             "data.limit": 96, "train.batch_size": 32, "train.pad_buckets": pad}
    cfg = resolve_config(data="ogbg-molbbbp", selector="gumbel-gin", reg="size,eps-align",
                         flags=flags)
    return Trainer(cfg, data, tmp_path)


def _second_epoch_reads_back_once(trainer, batches, device
                                  ) -> tuple[dict[str, float], "ReadBacks"]:
    """Epoch 1 of ``trainer`` over ``batches``, watched: its one read is a copy to the host
    on CUDA (:class:`~grprune.losses.EpochSums`), nothing to dispatch on the CPU; Adam's
    step counters (host tensors unless fused or capturable) are not reads. Its losses and
    the watching :class:`ReadBacks`."""
    trainer._batches = lambda split, train=False: iter(batches)  # type: ignore[method-assign]
    steps = {s["step"].untyped_storage().data_ptr()
             for s in trainer.optimizer.state.values() if "step" in s}
    mode = ReadBacks(steps)
    with mode:
        losses = trainer.train_epoch(1)
    allowed = Counter({"device-to-host copy": 1}) if device == "cuda" else Counter()
    assert mode.reads - allowed == Counter(), mode.reads
    return losses, mode


@pytest.mark.parametrize("pad", [False, True], ids=["unpadded", "pad-buckets"])
def test_a_prune_epoch_reads_back_once_and_its_steps_never(molbbbp, device, tmp_path, pad):
    trainer = _trainer(molbbbp, device, tmp_path, pad)
    trainer.train_epoch(0)  # lazily made state (Adam's), the first selection's check
    gathering = ReadBacks(set())
    with gathering:  # not a step, but it reads nothing either (sizes come from the host)
        batches = list(trainer._batches("train", train=True))
    assert gathering.reads == Counter(), gathering.reads
    assert len(batches) >= 2 and all(b.device.type == device for b in batches)
    losses, mode = _second_epoch_reads_back_once(trainer, batches, device)
    assert {"ce", "total", "size", "eps-align"} <= set(losses)
    assert 0.0 < losses["kept_edge_fraction"] <= 1.0
    params = sum(1 for p in trainer.model.parameters() if p.requires_grad)
    if device == "cpu" or not trainer.fast:  # per parameter a step: one read, two (foreach)
        assert mode.optimizer_steps in (params * len(batches), 2 * params * len(batches))
    else:  # fused Adam: the counters live on the device
        assert mode.optimizer_steps == 0


@pytest.mark.parametrize("reg", ["irm", "vrex", "groupdro"])
def test_an_env_objective_epoch_on_padded_batches_reads_back_once(molbbbp, device, tmp_path,
                                                                  reg):
    """IRM, VREx and GroupDRO on padded batches (their static forms,
    ``tests/test_static_regs.py``); GroupDRO with its weights' room reserved for the
    dataset's environment ids, which the trainer reserves with ``train.pad_buckets``
    (:meth:`~grprune.regularizers.env.GroupDRO.reserve`). On
    unpadded batches they still read (``torch.unique``, ``.item()``)."""
    flags = {"train.device": device, "train.warmup_epochs": 0, "train.progress": "none",
             "data.limit": 96, "train.batch_size": 32, "train.pad_buckets": True}
    trainer = Trainer(resolve_config(data="ogbg-molbbbp", reg=reg, flags=flags), molbbbp,
                      tmp_path)
    if reg == "groupdro":
        from grprune.regularizers.env import GroupDRO
        dro = trainer.regs[reg]
        assert isinstance(dro, GroupDRO)
        # the trainer reserves it with train.pad_buckets: nothing to do by hand
        assert dro.reserved == int(torch.as_tensor(molbbbp.envs).max()) + 1
    trainer.train_epoch(0)
    batches = list(trainer._batches("train", train=True))
    assert len(batches) >= 2 and all(b.padded for b in batches)
    losses, _ = _second_epoch_reads_back_once(trainer, batches, device)
    assert {"ce", "total", reg} <= set(losses)


def test_the_read_back_counter_sees_each_kind_of_read(device):
    x = torch.arange(6.0, device=device)
    mode = ReadBacks(set())
    with mode:
        float(x.sum())
        x.nonzero()
        x[x > 2]
        torch.repeat_interleave(x, 2)  # an int count: the size is known
        repeats = torch.full((6,), 2, device=device)
        torch.repeat_interleave(x, repeats, output_size=12)
        torch.repeat_interleave(x, repeats)
    assert mode.reads["_local_scalar_dense"] == 1
    assert mode.reads["nonzero"] == 1
    assert mode.reads["index (bool mask)"] == 1
    assert mode.reads["repeat_interleave"] == 1  # the one without its output size


# -- the pieces that keep the step free of reads --------------------------------------------
def _sequential(steps: list[tuple[dict[str, torch.Tensor], int]]) -> dict[str, float]:
    """Each term summed by itself, as the trainer summed before :class:`EpochSums`."""
    sums: dict[str, Any] = {}
    for terms, b in steps:
        for k, v in terms.items():
            sums[k] = sums.get(k, 0.0) + v.detach() * b
    return {k: float(v) for k, v in sums.items()}


@pytest.mark.parametrize("vary", [False, True], ids=["same-terms", "a-term-skipped"])
def test_epoch_sums_equal_each_term_summed_alone_bit_for_bit(vary):
    gen = torch.Generator().manual_seed(0)
    steps = []
    for i in range(7):
        terms = {k: torch.rand((), generator=gen) * 10 ** (j - 2)
                 for j, k in enumerate(("ce", "size", "size/penalty", "total"))}
        if vary and i in (2, 3):
            del terms["size"]
        if vary and i == 5:
            terms["extra"] = torch.rand((), generator=gen)
        steps.append((terms, 13 + i))
    sums = EpochSums()
    for terms, b in steps:
        sums.add(terms, b)
    kept, finite = torch.tensor(123.5), torch.tensor(False)
    totals, extra = sums.read(kept, finite)
    assert totals == _sequential(steps)  # == on floats: every bit
    assert list(totals) == list(_sequential(steps))
    assert extra == [123.5, 0.0]


def test_epoch_sums_of_mixed_dtypes_keep_each_terms_dtype():
    steps = [({"a": torch.tensor(0.1, dtype=torch.float64), "b": torch.tensor(0.2)}, 3)] * 3
    sums = EpochSums()
    for terms, b in steps:
        sums.add(terms, b)
    assert sums.read()[0] == _sequential(steps)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_all_finite_sees_one_bad_value_in_any_tensor(bad):
    tensors = [torch.randn(4, 3), torch.randn(5), torch.randn(2, dtype=torch.float64)]
    assert bool(all_finite(tensors))
    for t in tensors:
        t.view(-1)[1] = bad
        assert not bool(all_finite(tensors))
        t.view(-1)[1] = 0.0


def test_a_batchs_multi_hot_matrix_is_made_once_per_batch(toy_batch, monkeypatch):
    feat = torch.tensor([[0, 1], [2, 0], [1, 1]])
    hot = _multi_hot(feat, torch.tensor([0, 3]), (3, 2), torch.float32)
    assert hot.tolist() == [[1, 0, 0, 0, 1], [0, 0, 1, 1, 0], [0, 1, 0, 0, 1]]
    made: list[tuple] = []

    def counted(feat, offsets, sizes, dtype):
        made.append((sizes, dtype))
        return _multi_hot(feat, offsets, sizes, dtype)

    monkeypatch.setattr(encoders_base, "_multi_hot", counted)
    torch.manual_seed(0)
    atoms, atoms_too, bonds = NodeEmbedding("ogb", 8), NodeEmbedding("ogb", 8), EdgeEmbedding("ogb", 8)
    # a plain tensor: made every call, nothing kept on the batch
    expected = [atoms(toy_batch.node_feat), atoms_too(toy_batch.node_feat),
                bonds(toy_batch.edge_feat)]
    assert len(made) == 3 and not toy_batch.derived
    # the batch: made once for its atoms (two modules) and once for its bonds, same values
    for _ in range(2):
        got = [atoms(toy_batch), atoms_too(toy_batch), bonds(toy_batch)]
        assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert len(made) == 5
    assert sorted(key[0] for key in toy_batch.derived) == ["multi_hot/edge_feat",
                                                            "multi_hot/node_feat"]
    atoms.double()(toy_batch)  # another dtype: another matrix
    assert len(made) == 6 and len(toy_batch.derived) == 3
    copy = toy_batch.to("cpu")  # a copy of the batch keeps nothing of it
    with torch.inference_mode():  # made every call, not kept
        assert torch.equal(bonds(copy), expected[2]) and torch.equal(bonds(copy), expected[2])
    assert len(made) == 8 and not copy.derived


def test_rank_in_segment_with_known_counts_ranks_as_without():
    gen = torch.Generator().manual_seed(1)
    segment = torch.sort(torch.randint(0, 6, (40,), generator=gen)).values
    values = torch.rand(40, generator=gen).round(decimals=1)  # ties
    counts = torch.zeros(7, dtype=torch.long).index_add_(0, segment, torch.ones_like(segment))
    for descending in (False, True):
        assert torch.equal(rank_in_segment(values, segment, 7, descending, counts=counts),
                           rank_in_segment(values, segment, 7, descending))


def test_epoch_sums_keep_a_term_whose_dtype_changes_in_its_own_dtype():
    steps = [({"a": torch.tensor(0.1), "b": torch.tensor(0.2)}, 3),
             ({"a": torch.tensor(0.1, dtype=torch.float64), "b": torch.tensor(0.2)}, 3),
             ({"a": torch.tensor(0.3), "b": torch.tensor(0.7)}, 5)]
    sums = EpochSums()
    for terms, b in steps:
        sums.add(terms, b)
    assert sums.read()[0] == _sequential(steps)
