"""One configuration, one run directory: start, resume, or skip when finished.

:func:`plan_run` resolves a run's configuration and directory from the options of
``grprune run`` (and :func:`grprune.train`, which takes the same options), and
:func:`execute` runs it; both front ends call these two functions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from grprune.build import data_root, load_config_dataset
from grprune.errors import DivergedError, GrpruneError
from grprune.record.epoch import EpochRecord
from grprune.record.error import DIVERGED, ErrorRecord
from grprune.record.runconfig import FeatureSpec, RunConfig
from grprune.record.rundir import RunDir
from grprune.record.settings import OPTION_KEYS, config_hash
from grprune.record.summary import RunSummary

if TYPE_CHECKING:
    from grprune.data.dataset import GraphDataset


def default_run_dir(cfg: RunConfig, root: str | Path = "runs") -> Path:
    """``runs/<dataset>/<method>-seed<seed>-<hash>`` for a resolved config."""
    from grprune.naming import method_slug
    return Path(root) / cfg.data.name / f"{method_slug(cfg)}-seed{cfg.train.seed}-{cfg.hash}"


@dataclass(frozen=True)
class RunPlan:
    """A resolved configuration and the directory it runs in (:func:`plan_run`)."""

    cfg: RunConfig
    run_dir: Path

    @property
    def title(self) -> str:
        """``"ogbg-molbbbp PrunE seed 0"``: dataset, method label and seed."""
        from grprune.naming import method_label
        cfg = self.cfg
        method = method_label(list(cfg.reg), cfg.selector.name, cfg.preset)
        return f"{cfg.data.name} {method} seed {cfg.train.seed}"


def plan_run(*, data: str | None = None, selector: str | None = None, reg: str | None = None,
             encoder: str | None = None, preset: str | None = None,
             config_file: str | Path | None = None, split: str | None = None,
             shift: str | None = None, epochs: int | None = None, seed: int | None = None,
             device: str | None = None, root: str | Path | None = None, download: bool = False,
             progress: str | None = None, deterministic: bool | None = None,
             hparams: Mapping[str, Any] | None = None, overrides: Iterable[str] = (),
             out: str | Path | None = None) -> RunPlan:
    """The configuration and run directory of ``grprune run`` with these options.

    Options left at None take their value from the config file, the preset or the
    parts' defaults (:func:`grprune.resolve.resolve_config`, in that order of
    precedence after the flags).

    Parameters
    ----------
    data, selector, reg, encoder, preset : str, optional
        Part names, as ``--data``, ``--selector``, ``--reg`` (comma list or ``none``),
        ``--encoder``, ``--preset``.
    config_file : path, optional
        ``--config``.
    split, shift, epochs, seed, device, root, download, progress, deterministic
        The flags of the same names (``data.split``, ``data.shift``, ``train.epochs``,
        ``train.seed``, ``train.device``, ``data.root``, ``data.download``,
        ``train.progress``, ``train.deterministic``).
    hparams : mapping, optional
        Namespaced values (``{"reg.size.eta": 0.75}``); they win over the flags.
    overrides : iterable of str
        ``-H key=value`` strings; they win over everything.
    out : path, optional
        Run directory; default :func:`default_run_dir`.

    Returns
    -------
    RunPlan

    Raises
    ------
    GrpruneError
        As :func:`grprune.resolve.resolve_config`.
    """
    from grprune.resolve import resolve_config
    flags = option_flags(split=split, shift=shift, epochs=epochs, seed=seed, device=device,
                         root=root, progress=progress, deterministic=deterministic,
                         download=download or None)
    flags.update(hparams or {})
    cfg = resolve_config(data=data, selector=selector, reg=reg, encoder=encoder, flags=flags,
                         overrides=overrides, file=config_file, preset=preset)
    return RunPlan(cfg, Path(out) if out else default_run_dir(cfg))


def option_flags(**options: Any) -> dict[str, Any]:
    """The settings that run options give (:data:`~grprune.record.settings.OPTION_KEYS`),
    as namespaced keys; an option left at None gives none.

    Examples
    --------
    >>> option_flags(epochs=5, seed=None, download=True)
    {'train.epochs': 5, 'data.download': True}
    """
    return {OPTION_KEYS[name]: value for name, value in options.items() if value is not None}


def prepare_run_dir(cfg: RunConfig, run_dir: Path, force: bool = False,
                    held: bool = False) -> tuple[str, Any]:
    """Decide what to do with ``run_dir`` (:meth:`grprune.record.rundir.RunDir.status`);
    ``held``: the caller holds the run's lock.

    Returns
    -------
    (status, payload)
        ``("finished", summary)`` when the same configuration already finished;
        ``("resume", state)`` when an interrupted (or failed) run of it can continue
        from its ``state.pt`` (a :class:`~grprune.record.trainstate.TrainState`); ``("fresh", None)`` otherwise (old run files are removed).

    Raises
    ------
    GrpruneError
        If the directory is not a run directory (``foreign``), its ``config.json`` or
        ``summary.json`` is corrupt, it holds a run older than grprune reads
        (``outdated``) or a run of another configuration, or another process is running
        it; ``force`` starts over in all but the first and the last case. A directory of
        another configuration that never trained an epoch (only ``config.json``, left by a
        bad-input failure) is taken over without ``force``.
    """
    rundir = RunDir(run_dir)
    status = rundir.status(cfg, held=held)
    state = status.state
    if state == "running":
        raise GrpruneError(f"{run_dir} is being run by another process; wait for it, or "
                           f"choose another --out")
    if state == "foreign":  # not even --force deletes what grprune did not write
        raise GrpruneError(f"--out {run_dir} is not a grprune run directory "
                           f"({status.reason}); choose another --out")
    if state == "corrupt" and not force:
        raise GrpruneError(f"--out {run_dir}: {status.reason}; move the directory away, or "
                           f"--force to start this run over")
    if state == "outdated" and not force:  # the reason says how to re-make it
        raise GrpruneError(f"--out {run_dir}: {status.reason}")
    # a run that stopped before its first epoch (bad input) leaves only config.json: the
    # fixed command may take the directory over, for nothing of a trained run is lost
    if state == "other-config" and not force and rundir.trained():
        done = "a finished" if rundir.has_summary() else "an unfinished"
        other = config_hash(status.config) if status.config is not None else "?"
        raise GrpruneError(f"{run_dir} holds {done} run of a different configuration "
                           f"(hash {other} vs {config_hash(cfg)}); choose "
                           f"another --out, or --force to overwrite it")
    if state == "finished" and not force:
        return "finished", status.summary
    if state in ("interrupted", "failed", "pruned") and rundir.has_state() and not force:
        from grprune.record.marks import remove_pruned
        remove_pruned(run_dir)  # a pruned run asked to go on trains to its end
        return "resume", rundir.read_state(epochs=cfg.train.epochs)
    rundir.clear()
    return "fresh", None


def execute(cfg: RunConfig, run_dir: str | Path, *, force: bool = False,
            on_epoch: Callable[[EpochRecord], None] | None = None,
            log: Callable[[str], None] = print, dataset: GraphDataset | None = None
            ) -> tuple[str, RunSummary]:
    """Run (or resume, or skip) one configuration.

    Parameters
    ----------
    cfg : RunConfig
        A resolved configuration (:func:`plan_run`; a stored ``config.json`` through
        :meth:`RunConfig.from_dict`).
    run_dir : str or Path
    force : bool
        Start over in a finished, corrupt or other-configuration directory
        (:func:`prepare_run_dir`).
    on_epoch : callable, optional
        Receives each epoch's :class:`~grprune.record.epoch.EpochRecord` once its line is
        in ``results.jsonl`` (``improved``: it became the selected epoch; ``epochs``: the
        run's ``train.epochs``).
    log : callable
        Receives notes (``"resuming ..."``).
    dataset : GraphDataset, optional
        The data to train on; default :func:`grprune.build.load_config_dataset` of ``cfg``. One
        given here must be what ``cfg.data`` describes (:func:`grprune.train`
        passes graphs built in memory, saved where ``data.path`` points).

    Returns
    -------
    (status, summary)
        ``status`` is ``"finished"`` (nothing done), ``"resumed"`` or ``"completed"``;
        ``summary`` is ``summary.json`` (:class:`~grprune.record.summary.RunSummary`).

    Raises
    ------
    GrpruneError
        As :func:`prepare_run_dir`; if ``run_dir`` is a file; as
        :func:`grprune.build.data_root` or for
        ``train.compile`` without ``train.pad_buckets``, before ``run_dir`` is made; as the
        data's loader (a missing column), after which a ``run_dir`` this call made is
        removed.
    """
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise GrpruneError(f"--out {run_dir} exists and is not a directory")
    # what can be refused without the data is refused before the run directory is made
    from grprune.trainer import compile_refusal
    refusal = compile_refusal(str(cfg.train.compile), bool(cfg.train.pad_buckets))
    if refusal:
        raise GrpruneError(refusal)
    root = data_root(cfg) if dataset is None else None
    fresh = not run_dir.exists()
    with RunDir(run_dir).lock():  # one process per run directory
        try:
            return _execute_locked(cfg, run_dir, force, on_epoch, log, dataset, root)
        except GrpruneError:  # refused (the data lacks a column, say): nothing was trained
            if fresh:
                RunDir(run_dir).remove_if_untrained()
            raise


def _execute_locked(cfg: RunConfig, run_dir: Path, force: bool, on_epoch, log,
                    dataset: GraphDataset | None = None, root: Path | None = None
                    ) -> tuple[str, RunSummary]:
    """:func:`execute` with the run's lock held.

    ``config.json`` is written once, when the data is loaded and its :class:`FeatureSpec`
    known: nothing before that needs it on disk (the lock keeps other processes out, and a
    run that dies loading its data has trained nothing to resume)."""
    from grprune.resume import model_problem
    from grprune.trainer import Trainer

    status, payload = prepare_run_dir(cfg, run_dir, force, held=True)
    if status == "finished":
        return "finished", payload
    t0 = time.perf_counter()
    if dataset is None:
        dataset = load_config_dataset(cfg, root)
    load_s = time.perf_counter() - t0
    from grprune.data.info import duplicate_ids_note  # duplicate compound IDs
    if dataset.ids is not None and duplicate_ids_note(dataset):
        log(f"note: {duplicate_ids_note(dataset)}")
    # the data's sizes, so that a checkpoint can be rebuilt without loading the data
    cfg = cfg.with_features(FeatureSpec.of(dataset))
    rundir = RunDir(run_dir)
    rundir.write_config(cfg)
    trainer = Trainer(cfg, dataset, run_dir, on_epoch=on_epoch)
    if status == "resume":
        # read (and a damaged line refused) before the note; the trainer takes them as read
        records = rundir.resumed_records(payload.n_records)
        problem = model_problem(trainer, payload)  # another model's weights: refused whole
        if problem:
            rundir.reject_state(problem, loaded=True)
        log(f"resuming {run_dir} after epoch {payload.epoch}")
    else:
        records = None
    try:
        summary = trainer.fit(resume=payload, records=records, data_load_s=load_s,
                              started=t0)
    except DivergedError as exc:  # the run can't go on: its directory says so
        rundir.write_error(ErrorRecord(message=str(exc), kind=DIVERGED, epoch=exc.epoch,
                                       hash=cfg.hash))
        raise
    rundir.write_summary(summary)
    rundir.remove_state()
    return ("resumed" if status == "resume" else "completed"), summary
