"""One configuration, one run directory: start, resume, or skip when finished."""

from __future__ import annotations

import pickle
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

from grprune import results as R
from grprune.config import same_run
from grprune.errors import GrpruneError

RUN_FILES = (R.RESULTS, R.STATE, R.CHECKPOINT, R.LAST_CHECKPOINT, R.EDGE_PROBS, R.SUMMARY)


def load_config_dataset(cfg: dict):
    """The dataset a resolved config trains on (``data.limit`` is applied by the trainer)."""
    from grprune.data import load_dataset
    d = cfg["data"]
    params = {k: v for k, v in d.items() if k not in ("name", "root", "download", "limit")}
    return load_dataset(d["name"], root=d.get("root") or None,
                        download=bool(d.get("download", False)), **params)


def default_run_dir(cfg: dict, root: str | Path = "runs") -> Path:
    """``runs/<dataset>/<method>-seed<seed>-<hash>`` for a resolved config."""
    from grprune.naming import method_slug
    return (Path(root) / cfg["data"]["name"]
            / f"{method_slug(cfg)}-seed{cfg['train']['seed']}-{cfg['hash']}")


def prepare_run_dir(cfg: dict, run_dir: Path, force: bool = False) -> tuple[str, Any]:
    """Decide what to do with ``run_dir``.

    Returns
    -------
    (status, payload)
        ``("finished", summary)`` when the same configuration already finished;
        ``("resume", state)`` when an interrupted run of it can continue;
        ``("fresh", None)`` otherwise (old run files are removed).

    Raises
    ------
    GrpruneError
        If the directory holds a finished run of another configuration (without
        ``force``) or is a non-empty directory that is not a run directory.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise GrpruneError(f"--out {run_dir} exists and is not a directory")
    old_cfg = R.read_json(run_dir / R.CONFIG)
    if run_dir.is_dir() and old_cfg is None and any(run_dir.iterdir()):
        if (run_dir / R.CONFIG).exists():
            raise GrpruneError(f"--out {run_dir}: its {R.CONFIG} is corrupt (not readable "
                               f"JSON); move the directory away or choose another --out")
        raise GrpruneError(f"--out {run_dir} is a non-empty directory that is not a grprune "
                           f"run directory (no {R.CONFIG}); choose another --out")
    summary = R.read_json(run_dir / R.SUMMARY)
    if old_cfg is not None and not force:
        if summary is not None:
            if same_run(old_cfg, cfg):
                return "finished", summary
            raise GrpruneError(f"{run_dir} holds a finished run of a different configuration "
                               f"(hash {old_cfg.get('hash')} vs {cfg['hash']}); "
                               f"choose another --out, or --force to overwrite it")
        state_path = run_dir / R.STATE
        if same_run(old_cfg, cfg) and state_path.is_file():
            return "resume", load_state(state_path)
    for name in RUN_FILES:
        (run_dir / name).unlink(missing_ok=True)
    return "fresh", None


def load_state(path: Path) -> dict:
    """Read a run's ``state.pt`` without running code from it.

    :func:`torch.load` with ``weights_only=True`` accepts tensors and plain Python
    values only, so a pickle that would run code (a run directory copied from someone
    else) is refused before anything of it runs.

    Raises
    ------
    GrpruneError
        If the file cannot be read that way (corrupt, or not what grprune writes). The
        file is moved aside to ``state.rejected.pt`` first, so that running the same
        command again starts the run over and nothing is silently discarded.
    """
    reason = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note on foreign pickle protocols
            state = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or "epoch" not in state:
            reason = "it is not a grprune training state"
    except pickle.UnpicklingError:
        reason = "it holds objects other than tensors and plain values, or is no torch file"
    except Exception as exc:  # truncated or unreadable file
        detail = (str(exc).strip().splitlines() or ["no detail"])[0][:120]
        reason = f"it is truncated or unreadable ({type(exc).__name__}: {detail})"
    if reason is None:
        return state
    aside = path.with_name("state.rejected.pt")
    path.replace(aside)
    raise GrpruneError(f"{path} was not loaded, so no code in it ran: {reason}. It was moved to "
                       f"{aside.name}; run the same command again to start this run over")


def execute(cfg: dict, run_dir: str | Path, *, force: bool = False,
            on_epoch: Callable[[dict], None] | None = None,
            log: Callable[[str], None] = print) -> tuple[str, dict]:
    """Run (or resume, or skip) one configuration; returns ``(status, summary)``.

    ``status`` is ``"finished"`` (nothing done), ``"resumed"`` or ``"completed"``.
    """
    from grprune.train import Trainer

    run_dir = Path(run_dir)
    status, payload = prepare_run_dir(cfg, run_dir, force)
    if status == "finished":
        return "finished", payload
    run_dir.mkdir(parents=True, exist_ok=True)
    R.atomic_write_json(run_dir / R.CONFIG, cfg)
    t0 = time.perf_counter()
    dataset = load_config_dataset(cfg)
    load_s = time.perf_counter() - t0
    if status == "resume":
        log(f"resuming {run_dir} after epoch {payload['epoch']}")
    trainer = Trainer(cfg, dataset, run_dir, on_epoch=on_epoch)
    summary = trainer.fit(resume=payload)
    summary["data_load_s"] = round(load_s, 3)
    summary["wall_time_s"] = round(time.perf_counter() - t0, 3)
    summary["dataset_info"] = getattr(dataset, "info", {})
    R.atomic_write_json(run_dir / R.SUMMARY, summary)
    (run_dir / R.STATE).unlink(missing_ok=True)
    return ("resumed" if status == "resume" else "completed"), summary

