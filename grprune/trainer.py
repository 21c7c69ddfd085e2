"""The training loop: knows only the dataset, model, selector and regularizer interfaces.

Algorithm (paper Appendix "Algorithmic Pseudocode"): for each batch, the
selector scores edges and samples a mask, the encoder classifies the masked
graphs, and the loss :math:`\\mathcal L_{GT} + \\sum_i \\lambda_i R_i` (Eq. 5)
is minimised with Adam. During ``warmup_epochs`` the model trains as ERM on the
full graphs. Every epoch evaluates train/valid/test; the reported test metric
is the one at the best validation epoch after warm-up.

``train.fast_path`` (off by default; :func:`make_optimizer`, :meth:`Trainer.train_order`,
:meth:`Trainer._batches`) computes the same method faster on a GPU. ``train.pad_buckets``
(off by default; :meth:`Trainer.prepare_batch`) pads every training batch to one of at most
8 static shapes (:func:`grprune.batch.choose_buckets`, :func:`grprune.batch.pad_batch`), the
padding masked out of BatchNorm, the readout, the losses, the regularizers and the logged
metrics: what CUDA graphs and ``torch.compile`` need. ``train.compile`` (off by default;
:class:`grprune.step.TrainStep`, needs ``train.pad_buckets``) runs each step's forward, loss
and backward through ``torch.compile``, one graph per bucket; ``train.compile=cuda-graph``
(:class:`grprune.step.GraphedStep`) captures the whole step, Adam's included, as one CUDA
graph per bucket and phase, and replays it; evaluation's passes too
(:class:`grprune.evaluation.GraphedForward`).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch

from grprune import determinism
from grprune.determinism import eval_seed, seed_everything, select_device
from grprune.record.rundir import RunDir
from grprune.batch import Bucket, GraphBatch, choose_buckets, pad_to_bucket
from grprune.compat import dgl  # noqa: F401  (DGL import order)
from grprune.record.settings import parse_milestones
from grprune.build import build_model
from grprune.data.store import GraphStore
from grprune.errors import DivergedError, GrpruneError
from grprune.evaluation import (EdgeScores, Evaluation, GraphedForward, edge_probs_arrays,
                                evaluate_batches)
from grprune.losses import EpochSums
from grprune.ops import all_finite
from grprune.record.epoch import EpochRecord, split_scores
from grprune.record.metricinfo import higher_is_better
from grprune.record.runconfig import RunConfig, TrainConfig
from grprune.record.summary import RunSummary
from grprune.record.trainstate import Best, TrainState
from grprune.resume import model_problem, restore_state, state_of
from grprune.selectors.base import check_selection
from grprune.step import GraphedStep, StepOut, TrainStep, optimizer_options, set_lr
from grprune.summarize import run_summary
from grprune.train_splits import EVAL_SPLITS, FINAL_SPLITS, check_labels, run_splits

if TYPE_CHECKING:
    from grprune.data.dataset import GraphDataset


def lr_at(epoch: int, lr: float, milestones: str, gamma: float) -> float:
    """Learning rate of an epoch: ``lr * gamma ** (number of milestones <= epoch)``.

    ``milestones`` is ``train.lr_milestones``, a comma list of epochs (0-based) or "";
    the same schedule as :class:`torch.optim.lr_scheduler.MultiStepLR` stepped once per
    epoch, computed from the epoch so a resumed run needs no scheduler state.

    Examples
    --------
    >>> [lr_at(e, 1.0, "2,4", 0.5) for e in range(6)]
    [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    """
    passed = sum(1 for m in parse_milestones(milestones) if m <= epoch)
    return lr * gamma ** passed


#: graphs per evaluation batch with ``train.fast_path`` (unless ``train.eval_batch_size``)
FAST_EVAL_BATCH = 4096


def make_optimizer(params, tc: TrainConfig | dict, device: torch.device) -> torch.optim.Adam:
    """Adam with ``train.lr`` and ``train.weight_decay``.

    With ``train.fast_path``: fused on CUDA (one kernel for all parameters); elsewhere
    the ``foreach`` implementation, which on the CPU gives the same numbers bit for bit as
    torch's default there (``tests/test_fast_path.py``). Without it: torch's default. With
    ``train.compile=cuda-graph`` on CUDA: fused, ``capturable`` and a Tensor learning rate
    (:func:`grprune.step.optimizer_options`; set it with :func:`grprune.step.set_lr`).
    """
    tc = tc if isinstance(tc, TrainConfig) else TrainConfig.from_dict(tc)
    return torch.optim.Adam(params, weight_decay=tc.weight_decay, **optimizer_options(
        str(tc.compile), device, bool(tc.fast_path), tc.lr))


def compile_refusal(mode: str, padded: bool) -> str:
    """Why ``train.compile=mode`` cannot run (``""``: it can); ``padded``: static shapes."""
    return "" if mode == "none" or padded else (f"train.compile={mode} needs static batch "
                                                f"shapes: add -H train.pad_buckets=true (or "
                                                f"-H train.compile=none)")


class Trainer:
    """Trains one configuration into one run directory.

    Parameters
    ----------
    cfg : RunConfig
        Resolved configuration (:func:`grprune.resolve.resolve_config`; a stored
        ``config.json`` through :meth:`RunConfig.from_dict`).
    dataset : GraphDataset
    run_dir : Path
    on_epoch : callable, optional
        Called after each epoch, once its line is in ``results.jsonl`` and its
        ``state.pt`` written, with its :class:`~grprune.record.epoch.EpochRecord`
        (``improved`` and ``epochs`` set; for progress display).
    """

    def __init__(self, cfg: RunConfig, dataset: GraphDataset, run_dir: str | Path,
                 on_epoch: Callable[[EpochRecord], None] | None = None) -> None:
        self.cfg, self.dataset, self.run_dir = cfg, dataset, Path(run_dir)
        self.rundir = RunDir(self.run_dir)  # the one reader and writer of its files
        self.tc = cfg.train
        self.on_epoch = on_epoch or (lambda record: None)
        self.device = select_device(self.tc.device)
        self.determinism = determinism.apply(self.device, self.tc.deterministic,
                                             self.tc.threads)
        #: the most CPU threads an epoch may use: train.threads, else torch's count now
        self.most_threads = self.determinism["threads"]
        seed_everything(cfg.train.seed)
        self.model, self.regs = build_model(cfg, dataset)
        self.model.to(self.device)
        for reg in self.regs.values():
            reg.to(self.device)
        params = list(self.model.parameters()) + [p for r in self.regs.values()
                                                  for p in r.parameters()]
        self.optimizer = make_optimizer(params, self.tc, self.device)
        self.metric = dataset.metric
        self.splits = run_splits(dataset, cfg.data.limit)
        check_labels(dataset, self.splits, cfg.data)
        self.loader_gen = torch.Generator().manual_seed(self.tc.seed)
        # train.fast_path on CUDA: the shuffle is drawn on the device, from its own stream
        self.fast = bool(self.tc.fast_path)
        self.device_gen = (torch.Generator(self.device).manual_seed(self.tc.seed)
                           if self.fast and self.device.type == "cuda" else None)
        self.store = self._store()
        self.buckets = self._buckets() if self.tc.pad_buckets else ()
        self.train_step = self._train_step()
        graphed = self.tc.compile == "cuda-graph"  # the step, and evaluation's passes
        self.graphed_step = GraphedStep(self.device) if graphed else None
        self.graphed_eval = GraphedForward(self.device) if graphed else None
        # evaluation batches are the same every epoch: batched once, then reused
        self._eval_batches: dict[str, list[GraphBatch]] = {}
        self._selection_checked = False  # the first selection is validated (check_selection)

    # -- data ---------------------------------------------------------------
    def _store(self) -> GraphStore:
        """The dataset as tensors (:class:`~grprune.data.store.GraphStore`), on the training
        device when it fits in a quarter of the device's free memory, else on the CPU
        (batches are then moved one by one)."""
        store = GraphStore.from_dataset(self.dataset)
        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
            if store.nbytes() < free / 4:
                store = store.to(self.device)
        return store

    def _buckets(self) -> tuple[Bucket, ...]:
        """``train.pad_buckets``' shapes for the training split (:func:`choose_buckets`);
        a GrpruneError for a regularizer that does not mask padding (``Regularizer.pads``).
        A regularizer with ``reserve(num_envs)`` (GroupDRO) gets the dataset's environment
        count, so its padded step reads nothing back to the host."""
        refused = [name for name, reg in self.regs.items() if not reg.pads]
        if refused:
            raise GrpruneError(f"train.pad_buckets: regularizer {', '.join(refused)} does not "
                               f"mask padding out; run it without train.pad_buckets")
        envs = np.asarray(self.dataset.envs)
        for reg in self.regs.values():  # GroupDRO: its buffers sized now, not read per step
            if reg.reserve is not None and envs.size and envs.max() >= 0:
                reg.reserve(int(envs.max()) + 1)
        idx = torch.as_tensor(self.splits["train"], dtype=torch.long)
        sizes = (getattr(self.store, k).cpu()[idx].numpy()
                 for k in ("num_nodes", "num_edges", "num_bonds"))
        return choose_buckets(*sizes, batch_size=self.tc.batch_size)

    def _train_step(self) -> TrainStep:
        """The step's loss, compiled with ``train.compile`` (:class:`grprune.step.TrainStep`;
        ``cuda-graph``: eager, the whole step captured by :class:`grprune.step.GraphedStep`),
        which needs ``train.pad_buckets``' static shapes: a GrpruneError without them."""
        mode = str(self.tc.compile)
        if compile_refusal(mode, bool(self.buckets)):
            raise GrpruneError(compile_refusal(mode, False))
        if mode not in ("none", "cuda-graph"):  # said before the silence, not after it
            warnings.warn(f"grprune: train.compile={mode} compiles the step for each batch "
                          f"shape during the first epoch, which takes minutes before its "
                          f"first progress", stacklevel=2)
        return TrainStep(mode)

    def prepare_batch(self, batch: GraphBatch) -> GraphBatch:
        """A training batch as the step takes it, padded (``train.pad_buckets``) and with its
        CSR layouts (:meth:`GraphBatch.prepare_segments`) computed here, not in the step."""
        return pad_to_bucket(batch, self.buckets) if self.buckets else batch.prepare_segments()

    def train_order(self) -> np.ndarray:
        """This epoch's order of the training split (positions into it).

        Drawn from ``self.loader_gen`` exactly as ``torch.utils.data.DataLoader`` with a
        ``RandomSampler`` draws it (one int64 for the iterator's worker seed, the
        permutation, and an empty remainder permutation when the pass ends), so runs
        shuffle as they did when batches came from a DataLoader.

        With ``train.fast_path`` on CUDA it is drawn on the device from a generator of its
        own (seeded with ``train.seed``) and read back once per epoch: another order than
        the CPU's, so such a run's numbers differ from one without the fast path.
        """
        n = len(self.splits["train"])
        if self.device_gen is not None:
            perm = torch.randperm(n, generator=self.device_gen, device=self.device)
            return perm.cpu().numpy()
        torch.empty((), dtype=torch.int64).random_(generator=self.loader_gen)
        order = torch.randperm(n, generator=self.loader_gen)
        torch.randperm(n, generator=self.loader_gen)
        return order.numpy()

    def _batches(self, split: str, train: bool = False):
        """The split's batches on the device.

        ``train=True``: the training split, reshuffled every pass (:meth:`train_order`),
        in batches of ``train.batch_size``. With ``train.fast_path`` and the store on the
        training device, the pass's batches are all gathered before its first step: forming
        a batch copies its index to the device, which waits for the device to finish its
        queue, so between steps it would keep the host from queueing the next step while the
        device runs this one. Batches take no random numbers: the numbers are the same.
        Otherwise the split in its stored order, in batches of :meth:`eval_batch_size`,
        batched on first use and kept: evaluation neither re-batches nor draws random
        numbers, so it never moves the random streams that training uses (a resumed run,
        whose cache starts empty, then continues exactly as an uninterrupted one).
        """
        if train:
            size = self.tc.batch_size
            idx = self.splits["train"][self.train_order()]
            batches = (self.prepare_batch(self.store.batch(idx[k:k + size]))
                       .to(self.device, non_blocking=True)
                       for k in range(0, len(idx), size))
            early = self.fast and self.store.device.type == self.device.type
            yield from (list(batches) if early else batches)
            return
        if split not in self._eval_batches:
            idx, size = self.splits[split], self.eval_batch_size()
            self._eval_batches[split] = [self.store.batch(idx[k:k + size]).to(self.device)
                                         for k in range(0, len(idx), size)]
        yield from self._eval_batches[split]

    def eval_batch_size(self) -> int:
        """Graphs per evaluation batch: ``train.eval_batch_size``, else
        :data:`FAST_EVAL_BATCH` with ``train.fast_path`` on CUDA, else ``train.batch_size``.

        A larger batch may round scores differently in the last bit (on the CPU, 6 of 19k
        GOOD-Motif edge logits moved by one ulp), so the CPU fast path keeps the batch size."""
        size = int(self.tc.eval_batch_size or 0)
        fast = self.fast and self.device.type == "cuda"
        return size or (FAST_EVAL_BATCH if fast else int(self.tc.batch_size))

    # -- one epoch ---------------------------------------------------------
    def train_epoch(self, epoch: int) -> dict[str, float]:
        """One pass over the training split; returns mean loss terms per graph.

        Nothing in a step reads the device back (``tests/test_no_readback.py``): the loss
        terms, the kept edges and whether the weights are finite are summed on the device
        and read once, after the last step (:class:`~grprune.losses.EpochSums`).
        """
        warm = epoch < self.tc.warmup_epochs
        self.model.train()
        for reg in self.regs.values():
            reg.train()
        # accumulated on the device and read once per epoch: no host sync per step
        sums = EpochSums()
        kept = torch.zeros((), device=self.device)
        graphs, edges = 0, 0
        first_step = (epoch - self.tc.warmup_epochs) * self._train_batches_per_epoch()
        for i, batch in enumerate(self._batches("train", train=True)):
            _, terms, selection, kept_step = self._step(batch, warm, epoch, first_step + i)
            if not warm and not self._selection_checked and selection is not None:
                check_selection(selection, batch, self.cfg.selector.name)
                self._selection_checked = True
            b = batch.num_real_graphs
            graphs += b
            sums.add(terms, b)
            kept += kept_step if kept_step is not None else batch.num_real_edges
            edges += batch.num_real_edges
        finite = all_finite(list(self.model.parameters()))
        totals, (kept_sum, weights_ok) = sums.read(kept, finite)  # one device sync an epoch
        losses = {k: v / max(graphs, 1) for k, v in totals.items()}
        if not math.isfinite(losses.get("total", 0.0)):
            raise DivergedError(f"loss became {losses['total']} at epoch {epoch}; "
                                f"try a lower train.lr or smaller regularizer weights", epoch)
        if not weights_ok:
            raise DivergedError(f"weights became nan or inf at epoch {epoch}; try a lower "
                                f"train.lr or smaller regularizer weights", epoch)
        losses["kept_edge_fraction"] = kept_sum / edges if edges else 1.0
        return losses

    def _step(self, batch: GraphBatch, warm: bool, epoch: int, step: int) -> StepOut:
        """One training step, the parameters updated: :attr:`train_step`'s loss, backward
        and Adam, or all of it as a replayed graph (:attr:`graphed_step`)."""
        if self.graphed_step is not None:
            return self.graphed_step(self.model, self.regs, self.optimizer, batch, warm,
                                     epoch, step)
        out = self.train_step(self.model, self.regs, batch, warm, epoch, step)
        self.optimizer.zero_grad(set_to_none=True)
        out[0].backward()
        self.optimizer.step()
        return out

    def _train_batches_per_epoch(self) -> int:
        n, size = len(self.splits["train"]), self.tc.batch_size
        return (n + size - 1) // size

    def evaluate(self, split: str, use_selector: bool = True,
                 collect_edges: bool = False) -> tuple[Evaluation, EdgeScores | None]:
        """Metric, class probabilities, kept-edge fraction and, for a learned selector in
        use, its diagnostics on a split: :func:`grprune.evaluation.evaluate_batches`, the
        evaluation that inference shares. The second value is :attr:`Evaluation.edges`
        (every edge's selector output with ``collect_edges``, else None).

        What evaluation draws at random (a Gumbel or Bernoulli edge mask with
        ``selector.eval_mode=sample``) comes from :func:`evaluate_batches`' own stream,
        seeded by :func:`eval_seed` of the run's seed and ``split``: the training RNG is
        left as it was. So how, and how
        often, a run is evaluated never changes what it trains, and a checkpoint scores the
        same on a split whenever it is evaluated (the summary's score of the selected epoch
        is the one ``results.jsonl`` logged for it)."""
        ev = evaluate_batches(self.model, self._batches(split), use_selector=use_selector,
                              metric=self.metric, num_classes=self.dataset.num_classes,
                              collect_edges=collect_edges,
                              seed=eval_seed(self.tc.seed, split), forward=self.graphed_eval)
        return ev, ev.edges

    # -- the run -----------------------------------------------------------
    def fit(self, resume: TrainState | None = None, *,
            records: Sequence[EpochRecord] | None = None, data_load_s: float = 0.0,
            started: float | None = None) -> RunSummary:
        """Train all epochs (continuing from ``resume`` state), write outputs, return the summary.

        ``records``: the epochs ``resume`` counts, as :func:`grprune.run.execute` read them
        (:meth:`RunDir.resumed_records`; read here when not given). ``results.jsonl`` is
        first cut to those epochs (:meth:`RunDir.keep_records`: none on a fresh start),
        then each epoch's line is appended to it. ``data_load_s`` (seconds the caller spent
        loading the data) and ``started`` (when the run began, :func:`time.perf_counter`;
        default now) go into the summary, whose
        ``wall_time_s`` counts from ``started``. Warns
        (``UserWarning``) when a run with a selector has no epoch after the ERM warm-up
        (``train.epochs <= train.warmup_epochs``).
        """
        tc = self.tc
        started = time.perf_counter() if started is None else started
        if self.model.selector is not None and tc.epochs <= tc.warmup_epochs:
            warnings.warn(f"grprune: all {tc.epochs} epochs are ERM warm-up "
                          f"(train.warmup_epochs={tc.warmup_epochs}), so the selector and "
                          f"the regularizers never train; raise --epochs or set "
                          f"-H train.warmup_epochs", stacklevel=2)
        return self._fit(resume, records, data_load_s, started)

    def _fit(self, resume: TrainState | None, resumed: Sequence[EpochRecord] | None,
             data_load_s: float, started: float) -> RunSummary:
        t_start = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        records: list[EpochRecord] = []
        best, start, tc = Best(), 0, self.tc
        if resume is not None:
            problem = model_problem(self, resume)  # another model's weights: refused whole
            if problem:
                self.rundir.reject_state(problem, loaded=True)
            restore_state(self, resume)
            best = dataclasses.replace(resume.best)
            records = list(resumed if resumed is not None
                           else self.rundir.resumed_records(resume.n_records))
            # early-stopped runs killed before their summary finish without training more
            start = resume.next_epoch(tc.epochs)
        # results.jsonl: the epochs state.pt counts (a later or torn line goes), then appended
        self.rundir.keep_records(len(records))
        threads_before = torch.get_num_threads()
        try:
            return self._epochs(records, best, start, t_start, data_load_s, started)
        finally:
            torch.set_num_threads(threads_before)

    def _threads_for_epoch(self) -> None:
        """Torch's CPU threads for the next epoch: ``train.threads`` when set, else 1 or
        :attr:`most_threads`, whichever is faster now
        (:func:`grprune.determinism.faster_thread_count`); the numbers are the same."""
        if self.device.type != "cpu":
            return
        if self.tc.threads:
            torch.set_num_threads(self.tc.threads)
        else:
            determinism.faster_thread_count(self.most_threads)

    def _epochs(self, records: list[EpochRecord], best: Best, start: int, t_start: float,
                data_load_s: float, started: float) -> RunSummary:
        tc = self.tc
        for epoch in range(start, tc.epochs):
            self._threads_for_epoch()
            t0 = time.perf_counter()
            warm = epoch < tc.warmup_epochs
            lr = lr_at(epoch, tc.lr, tc.lr_milestones, tc.lr_gamma)
            set_lr(self.optimizer, lr)  # a Tensor learning rate (cuda-graph) is filled
            losses = self.train_epoch(epoch)
            t_train = time.perf_counter() - t0
            evals = {split: self.evaluate(split, use_selector=not warm)[0]
                     for split in EVAL_SPLITS if split in self.splits
                     and (split != "train" or tc.eval_train)}
            scores = {split: split_scores(self.metric, ev.metric, ev.kept, ev.selector)
                      for split, ev in evals.items()}
            epoch_time = time.perf_counter() - t0
            improved = (not warm or tc.select_warmup) and best.update(
                epoch, evals, warm, higher=higher_is_better(self.metric))
            if improved:
                self.rundir.save_checkpoint(self.model.state_dict())
            record = EpochRecord(epoch=epoch, phase="warmup" if warm else "train", lr=lr,
                                 loss=losses, scores=scores, epoch_time_s=epoch_time,
                                 train_time_s=t_train, best_epoch=best.epoch,
                                 improved=bool(improved), epochs=tc.epochs)
            records.append(record)
            stop = bool(tc.patience and not warm and best.since >= tc.patience)
            self.rundir.append_record(record)
            self.rundir.save_state(state_of(self, epoch, best, len(records), stop))
            self.on_epoch(record)
            if stop:
                break
        if tc.save_last:
            self.rundir.save_checkpoint(self.model.state_dict(), last=True)
        return self._finish(records, best, time.perf_counter() - t_start, data_load_s, started)

    def _finish(self, records: list[EpochRecord], best: Best, train_time: float,
                data_load_s: float, started: float) -> RunSummary:
        """Evaluate the selected model (``checkpoint.pt``, or the last one when no epoch was
        selected), write ``edge_probs.npz`` and return the run's summary."""
        last = records[-1] if records else None
        # an ERM warm-up epoch may be selected (train.select_warmup): evaluate it as trained
        use_selector, selected = not best.warm, "best-valid"
        if self.rundir.has_checkpoint():
            self.model.load_state_dict(self.rundir.read_checkpoint(self.device))
        else:
            # No post-warm-up epoch (epochs <= warmup_epochs), or validation was
            # always NaN: report the last model, evaluated as it was trained.
            self.rundir.save_checkpoint(self.model.state_dict())
            selected = "last-epoch"
            use_selector = last is None or not last.warmup
            if last is not None:
                best = dataclasses.replace(best, epoch=last.epoch,
                                           valid=last.value("valid", self.metric),
                                           train=last.value("train", self.metric, math.nan))
        ev, edges = self.evaluate("test", use_selector=use_selector, collect_edges=True)
        assert edges is not None  # collect_edges=True always collects
        self.rundir.write_edge_arrays(edge_probs_arrays(
            edges, self.dataset.smiles, source_rows=self.dataset.source_rows,
            ids=self.dataset.ids))
        evals = {name: self.evaluate(name, use_selector=use_selector)[0]
                 for name in ("valid", *FINAL_SPLITS) if name in self.splits}
        evals["test"] = ev
        return run_summary(self.cfg, self.dataset, self.device, self.determinism, records, best,
                           evals, selected, use_selector, train_time, data_load_s, started)
