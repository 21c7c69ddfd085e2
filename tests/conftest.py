"""Shared fixtures: toy molecular-format graphs and a session-wide data root."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

# Tiny graphs gain nothing from intra-op threads, and OpenMP threads that busy-wait
# become very slow when other processes share the cores: keep tests single-threaded, and
# the grprune processes they start too (a test that means two threads asks for them).
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")

from grprune.batch import collate
from grprune.compat import dgl


def make_graph(num_nodes: int, bonds: list[tuple[int, int]], gt: list[int] | None = None):
    """A DGL graph in OGB format: zero features, both directions of each bond in order."""
    src, dst = [], []
    for u, v in bonds:
        src += [u, v]
        dst += [v, u]
    g = dgl.graph((torch.tensor(src, dtype=torch.long), torch.tensor(dst, dtype=torch.long)),
                  num_nodes=num_nodes)
    g.ndata["feat"] = torch.zeros(num_nodes, 9, dtype=torch.long)
    g.edata["feat"] = torch.zeros(len(src), 3, dtype=torch.long)
    if gt is not None:
        g.edata["edge_gt"] = torch.tensor([x for x in gt for _ in (0, 1)], dtype=torch.long)
    return g


def toy_graphs():
    """Path of 3 atoms, a single atom (no edges), one bond, a triangle."""
    return [make_graph(3, [(0, 1), (1, 2)]), make_graph(1, []), make_graph(2, [(0, 1)]),
            make_graph(3, [(0, 1), (1, 2), (2, 0)])]


@pytest.fixture
def sums_as_on_cuda(monkeypatch):
    """The CPU's segment sums take the ``segment_reduce`` path CUDA takes
    (``grprune.csr.SPARSE_ON_CPU`` off), for steps traced with ``make_fx`` as a CUDA graph
    keeps them: make_fx cannot trace the CPU's sparse CSR product."""
    from grprune import csr
    monkeypatch.setattr(csr, "SPARSE_ON_CPU", False)


@pytest.fixture
def toy_batch():
    graphs = toy_graphs()
    return collate([(g, i % 2, i % 2, i) for i, g in enumerate(graphs)])


@pytest.fixture
def toy_dataset():
    graphs = toy_graphs()
    return SimpleNamespace(name="toy", graphs=graphs, num_classes=2, atom_encoder="ogb",
                           task="classification", target_scale=None,
                           envs=torch.tensor([0, 1, 0, 1]), metric="rocauc")


@pytest.fixture(scope="session", autouse=True)
def data_root(tmp_path_factory):
    """One data root (cache) for the whole session, so molbbbp is featurized once."""
    root = tmp_path_factory.mktemp("data-root")
    old = os.environ.get("GRPRUNE_DATA_ROOT")
    os.environ["GRPRUNE_DATA_ROOT"] = str(root)
    yield root
    if old is None:
        os.environ.pop("GRPRUNE_DATA_ROOT", None)
    else:
        os.environ["GRPRUNE_DATA_ROOT"] = old


def train_steps(trainer, batches) -> None:
    """Train ``trainer`` on ``batches`` as its loop does (loss, regularizers, step)."""
    from grprune.losses import cross_entropy
    from grprune.regularizers import StepContext

    for batch in batches:
        out = trainer.model(batch)
        total = cross_entropy(out.logits, batch.y)
        ctx = StepContext(batch=batch, output=out, model=trainer.model)
        for reg in trainer.regs.values():
            total = total + reg.weight * reg.loss(ctx)
        trainer.optimizer.zero_grad(set_to_none=True)
        total.backward()
        trainer.optimizer.step()


def steps_without_sync(trainer, batches) -> None:
    """:func:`train_steps` with CUDA's sync debug mode at "error", so a host-device sync
    inside a step raises (CUDA only: the mode does not exist on the CPU)."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        train_steps(trainer, batches)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def strip_keys(obj, keys):
    """``obj`` (nested dicts and lists) without the dict entries named in ``keys``, at any
    depth: records and summaries compared without their timings."""
    if isinstance(obj, dict):
        return {k: strip_keys(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [strip_keys(v, keys) for v in obj]
    return obj


def tiny_molbbbp_run(out, limit: int):
    """A finished 2-epoch ogbg-molbbbp run of ``limit`` graphs per split part in ``out``,
    trained through ``grprune run`` on the CPU with the ``paper`` preset (whose selector
    trains from the first epoch; ``official`` warms up for 10)."""
    from click.testing import CliRunner

    from grprune.cli import main
    res = CliRunner().invoke(main, ["run", "--data", "ogbg-molbbbp", "--preset", "paper",
                                    "--epochs", "2", "-H",
                                    f"data.limit={limit}", "--progress", "none", "--device",
                                    "cpu", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def force_valid_scores(mp, scores) -> None:
    """Make each epoch's validation score ``scores[epoch]`` (a mapping or sequence) through
    ``mp`` (a ``pytest.MonkeyPatch``); the final evaluation after training stays real."""
    from grprune.trainer import Trainer
    real_eval, real_epoch, real_finish = (Trainer.evaluate, Trainer.train_epoch,
                                          Trainer._finish)

    def evaluate(self, split, use_selector=True, collect_edges=False):
        ev, parts = real_eval(self, split, use_selector, collect_edges)
        if split == "valid" and getattr(self, "_epoch", None) is not None:
            ev.metric = scores[self._epoch]
        return ev, parts

    def train_epoch(self, epoch):
        self._epoch = epoch
        return real_epoch(self, epoch)

    def finish(self, *args):
        self._epoch = None
        return real_finish(self, *args)

    mp.setattr(Trainer, "evaluate", evaluate)
    mp.setattr(Trainer, "train_epoch", train_epoch)
    mp.setattr(Trainer, "_finish", finish)


def interrupt_screen_at_chunk(mp, n: int = 4) -> None:
    """Make ``grprune.predict.stream.score_chunk`` raise ``KeyboardInterrupt`` (Ctrl-C) at its
    ``n``-th call, through the MonkeyPatch ``mp``; the chunks before it are scored."""
    import grprune.predict.stream
    real, calls = grprune.predict.stream.score_chunk, []

    def score_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    mp.setattr(grprune.predict.stream, "score_chunk", score_chunk)
