"""A run's summary: the :class:`~grprune.record.summary.RunSummary` that the trainer builds
once, at the end of a run (:meth:`grprune.trainer.Trainer.fit`), from its epochs' records
and the selected model's final evaluations.
"""

from __future__ import annotations

import resource
import time
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import torch

from grprune.evaluation import Evaluation
from grprune.provenance import environment
from grprune.record.epoch import EpochRecord
from grprune.record.runconfig import FeatureSpec, RunConfig
from grprune.record.summary import EarlyStop, RunSummary
from grprune.record.trainstate import Best
from grprune.train_splits import EVAL_SPLITS, FINAL_SPLITS

if TYPE_CHECKING:
    from grprune.data.dataset import GraphDataset


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_summary(cfg: RunConfig, dataset: GraphDataset, device: torch.device,
                determinism: Mapping[str, Any], records: Sequence[EpochRecord], best: Best,
                evals: Mapping[str, Evaluation], selected: str, use_selector: bool,
                train_time: float, data_load_s: float, started: float) -> RunSummary:
    """The run's :class:`~grprune.record.summary.RunSummary`, built here and only here.

    Parameters
    ----------
    cfg : RunConfig
        The run's resolved configuration.
    dataset : GraphDataset
        The dataset it trained on (its metric, features and info).
    device : torch.device
        The training device (peak memory: CUDA's allocator there, else the peak RSS).
    determinism : mapping
        The determinism settings' record (:func:`grprune.determinism.apply`).
    records : sequence of EpochRecord
        Every epoch's record, in order.
    best : Best
        The selected epoch.
    evals : mapping of str to Evaluation
        The selected model's evaluations: ``test`` and those of :data:`FINAL_SPLITS` and
        ``valid`` that the dataset has.
    selected : str
        ``best-valid`` or ``last-epoch``.
    use_selector : bool
        Whether the final evaluations used the selector.
    train_time, data_load_s : float
        Seconds spent training and loading the data.
    started : float
        When the run began (:func:`time.perf_counter`): ``wall_time_s`` counts from it.
    """
    metric = dataset.metric
    ev, last = evals["test"], records[-1] if records else None
    final = {name: evals[name].metric for name in FINAL_SPLITS if name in evals}
    diagnostics = {name: e.selector for name, e in evals.items() if e.selector is not None}
    test_diag = diagnostics.get("test") or {}
    peak_rss = _peak_rss_mib()
    peak = (torch.cuda.max_memory_allocated(device) / 2**20
            if device.type == "cuda" else peak_rss)
    return RunSummary(
        dataset=cfg.data.name, split=cfg.data.split, selector=cfg.selector.name,
        reg=tuple(cfg.reg), preset=cfg.preset, seed=cfg.train.seed, metric=metric,
        best_epoch=best.epoch, valid=best.valid if best.epoch >= 0 else None,
        test=ev.metric, train=best.train, id_valid=final.get("id-valid"),
        id_test=final.get("id-test"), kept_edge_fraction=ev.kept,
        selected=selected, use_selector=use_selector, epochs_run=len(records),
        early_stop=EarlyStop.of(len(records), cfg.train.patience, cfg.train.epochs),
        last={s: last.value(s, metric) if last is not None else None
              for s in EVAL_SPLITS},
        train_time_s=round(train_time, 3),
        epoch_time_s_median=float(np.median([r.epoch_time_s for r in records]))
        if records else None,
        selected_phase="warmup" if best.warm else "train",
        motif_edge_rocauc=test_diag.get("motif_rocauc"),
        motif_edge_rocauc_correct=test_diag.get("motif_rocauc_correct"),
        spurious_precision_at_50=test_diag.get("precision@50"),
        selector_diagnostics=diagnostics,
        peak_mem_mib=round(peak, 1), peak_rss_mib=round(peak_rss, 1),
        device=str(device), config_hash=cfg.hash,
        environment=environment(device), determinism=determinism,
        features=FeatureSpec.of(dataset), data_load_s=round(data_load_s, 3),
        wall_time_s=round(time.perf_counter() - started, 3),
        dataset_info=dataset.info,
        absent=frozenset(n.replace("-", "_") for n in FINAL_SPLITS if n not in final))

