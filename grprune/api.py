"""The Python API: :func:`train` a configuration, :func:`load_run` a finished one.

:func:`train` takes the options of ``grprune run`` as keywords and resolves them the
same way (:func:`grprune.run.plan_run`: the parts' defaults, then the preset, then
``config``, then the keywords, then the hyperparameters), runs in the same run
directory (a finished one is skipped, an interrupted one resumed, another
configuration's refused; :func:`grprune.run.execute`) and returns the finished
:class:`~grprune.inference.Run`.

Hyperparameters are namespaced keys, as with ``-H``: pass them as a dict,
``hparams={"reg.size.eta": 0.75, "data.limit": 48}``, or as keywords with the dots
written ``_``: ``reg_size_eta=0.75``, ``data_limit=48``, ``data_path="mols.csv"``,
``reg_eps_align_k=5`` (a keyword wins over the dict when both give one key).

``data`` is a registered dataset name, or a dataset built in memory with
:func:`grprune.data.from_graphs`. The latter is trained as the ``dgl-graphs``
dataset with ``data.split=file``: its graphs, labels, environments and split are
saved once to ``DATA_ROOT/graphs/<name>-<sha256>.bin`` and ``data.path`` points
there, so the configuration hash follows the graphs' content, and the run can be
resumed, explained and re-run from its ``config.json`` like any other.

>>> import grprune
>>> run = grprune.train(data="ogbg-molbbbp", epochs=1, out="runs/tiny")  # doctest: +SKIP
>>> run.summary.test, run.records[["epoch", "valid.rocauc"]]              # doctest: +SKIP
>>> run.predict(["CCO", "c1ccccc1O"])                                      # doctest: +SKIP
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from grprune.errors import GrpruneError
from grprune.progress import epoch_progress
from grprune.record.epoch import EpochRecord
from grprune.record.settings import SECTIONS  # what keyword hyperparameters may name



def _log(msg: str) -> None:
    print(f"grprune: {msg}", file=sys.stderr)


def hparam_keywords(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword hyperparameters as namespaced keys: ``train_lr`` -> ``train.lr``,
    ``reg_eps_align_k`` -> ``reg.eps-align.k`` (the longest registered regularizer
    name that fits).

    Raises
    ------
    GrpruneError
        On a keyword that names no section, or ``reg_...`` naming no regularizer.

    Examples
    --------
    >>> hparam_keywords({"data_path": "a.csv", "train_lr": 0.01, "model_head_layers": 3})
    {'data.path': 'a.csv', 'train.lr': 0.01, 'model.head_layers': 3}
    """
    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        section, _, rest = key.partition("_")
        if section not in SECTIONS or not rest:
            raise GrpruneError(
                f"unknown keyword {key!r}: hyperparameters are SECTION_KEY keywords "
                f"(data_path=..., train_lr=..., reg_size_eta=...) or hparams="
                f"{{'reg.size.eta': 0.75}}; sections: {', '.join(SECTIONS)}")
        if section == "reg":
            from grprune.regularizers.base import REGULARIZERS
            names = sorted(REGULARIZERS.names(), key=len, reverse=True)
            name = next((n for n in names if rest.startswith(n.replace("-", "_") + "_")), None)
            if name is None:
                raise GrpruneError(f"keyword {key!r} names no regularizer: expected "
                                   f"reg_NAME_KEY with NAME one of {', '.join(sorted(names))}")
            rest = f"{name}.{rest[len(name) + 1:]}"
        out[f"{section}.{rest}"] = value
    return out


def _values(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Check namespaced keys; lists and tuples become comma lists (``train.lr_milestones``).

    Raises
    ------
    GrpruneError
        On a key without a known section.
    """
    out = {}
    for key, value in hparams.items():
        section = str(key).split(".", 1)[0]
        if "." not in str(key) or section not in SECTIONS:
            raise GrpruneError(f"bad hyperparameter key {key!r}: expected section.key "
                               f"(reg.size.eta, train.lr, data.path); sections: "
                               f"{', '.join(SECTIONS)}")
        if isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        out[str(key)] = value
    return out


def graphs_fingerprint(dataset) -> str:
    """sha256 of a dataset's content: every graph's edges and feature tensors, the
    labels, environments and split parts (``dgl.save_graphs`` files of the same graphs
    differ byte for byte, so the file is not hashed)."""
    import hashlib

    import numpy as np
    h = hashlib.sha256()

    def add(tag: str, array) -> None:
        a = np.ascontiguousarray(np.asarray(array))
        h.update(f"{tag}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())

    for g in dataset.graphs:
        src, dst = g.edges()
        add("n", [g.num_nodes()])
        add("src", src.numpy())
        add("dst", dst.numpy())
        for kind, frame in (("ndata", g.ndata), ("edata", g.edata)):
            for key in sorted(frame):
                add(f"{kind}.{key}", frame[key].numpy())
    add("label", dataset.labels.numpy())
    add("env", dataset.envs.numpy())
    for part in sorted(dataset.splits):
        add(f"split.{part}", dataset.splits[part])
    return h.hexdigest()


def store_graphs(dataset, root: str | Path | None = None) -> Path:
    """Save an in-memory dataset once, under a name that is its content's hash.

    Parameters
    ----------
    dataset : GraphDataset
        From :func:`grprune.data.from_graphs`.
    root : path, optional
        Data root; default :func:`grprune.data.default_root`.

    Returns
    -------
    Path
        ``ROOT/graphs/<name>-<sha256[:16]>.bin`` (:func:`graphs_fingerprint`), a
        ``dgl-graphs`` file (:func:`grprune.data.save_dataset`) with the ``split``
        tensor; written only when it is not there yet.
    """
    from grprune.data.registry import default_root
    from grprune.data.dgl_graphs import save_dataset
    folder = Path(root or default_root()).expanduser() / "graphs"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(dataset.name)) or "graphs"
    path = folder / f"{name}-{graphs_fingerprint(dataset)[:16]}.bin"
    if not path.is_file():
        save_dataset(dataset, path)  # atomic
    return path


def _in_memory(dataset, hparams: dict[str, Any], split: str | None,
               root: str | Path | None) -> dict[str, Any]:
    """The ``data.*`` values that train the ``dgl-graphs`` source on ``dataset``.

    Raises
    ------
    GrpruneError
        If ``dataset`` is no dataset, or ``split``, ``data.path`` or ``data.split`` is
        given too.
    """
    from grprune.data.dataset import GraphDataset
    if not isinstance(dataset, GraphDataset):
        raise GrpruneError(f"data must be a dataset name or a dataset built by "
                           f"grprune.from_graphs(...), not {type(dataset).__name__}")
    clash = [k for k in ("data.path", "data.split") if k in hparams]
    if split is not None or clash:
        raise GrpruneError(f"{clash[0] if clash else 'split'} cannot be set for a dataset in "
                           f"memory: its split is from_graphs(split=...)")
    out = {"data.path": str(store_graphs(dataset, root or hparams.get("data.root"))),
           "data.split": "file"}
    if dataset.metric in ("rocauc", "accuracy"):
        out["data.metric"] = dataset.metric
    return out


def train(data: Any = None, reg: str | None = None, *, selector: str | None = None,
          encoder: str | None = None, split: str | None = None, shift: str | None = None,
          preset: str | None = None, epochs: int | None = None, seed: int | None = None,
          device: str | None = None, out: str | Path | None = None,
          config: str | Path | None = None, root: str | Path | None = None,
          download: bool = False, deterministic: bool | None = None,
          progress: str | None = None, force: bool = False,
          hparams: Mapping[str, Any] | None = None,
          on_epoch: Callable[[EpochRecord], None] | None = None, **kwargs: Any):
    """Train one configuration, as ``grprune run`` does, and return the finished run.

    Parameters
    ----------
    data : str or GraphDataset, optional
        A registered dataset name (``"ogbg-molbbbp"``, ``"molecule-csv"`` with
        ``data_path=...``), or a dataset from :func:`grprune.data.from_graphs`
        (module docstring). Default: the config file's, else ``ogbg-molbbbp``.
    reg : str, optional
        Comma list of regularizers (``"size,eps-align"``, the default), or ``"none"``.
    selector, encoder, split, shift, preset : str, optional
        As ``--selector`` (``auto``), ``--encoder``, ``--split``, ``--shift``, ``--preset``.
    epochs, seed : int, optional
    device : str, optional
        ``auto`` (default), ``cpu``, ``cuda`` or ``cuda:N``; also the returned run's.
    out : path, optional
        Run directory; default ``runs/<dataset>/<method>-seed<seed>-<hash>``.
    config : path, optional
        A JSON or YAML config file (``--config``; a run's ``config.json`` works).
    root, download, deterministic
        As ``--root``, ``--download``, ``--deterministic``.
    progress : str, optional
        ``auto`` (default: rich on a terminal, plain lines on stderr otherwise),
        ``rich``, ``plain`` or ``none``.
    force : bool
        Re-run into a finished (or corrupt, or other configuration's) run directory.
    hparams : mapping, optional
        Namespaced hyperparameters, ``{"reg.size.eta": 0.75}``; keywords win over them.
    on_epoch : callable, optional
        Called after each epoch with its :class:`~grprune.record.epoch.EpochRecord` (the
        ``results.jsonl`` line, typed, with ``improved`` and ``epochs``: see the Python
        API guide; ``record[key]`` of the old dict still works, deprecated).
    **kwargs
        Hyperparameters as ``SECTION_KEY=value`` (:func:`hparam_keywords`).

    Returns
    -------
    grprune.inference.Run
        The finished run (also when the directory already held it: nothing is trained
        then, and a note goes to stderr).

    Raises
    ------
    GrpruneError
        As ``grprune run``: unknown names or keys, bad values, missing data, or a run
        directory of another configuration or process, or not a run directory.
    """
    from grprune.run import execute, plan_run

    values = {**_values(hparams or {}), **_values(hparam_keywords(kwargs))}
    dataset = None
    if data is not None and not isinstance(data, str):
        dataset = data
        values.update(_in_memory(dataset, values, split, root))
        data = "dgl-graphs"
    plan = plan_run(data=data, selector=selector, reg=reg, encoder=encoder, preset=preset,
                    config_file=config, split=split, shift=shift, epochs=epochs, seed=seed,
                    device=device, root=root, download=download, progress=progress,
                    deterministic=deterministic, hparams=values, out=out)
    train_cfg = plan.cfg.train
    with epoch_progress(train_cfg.progress, train_cfg.epochs, plan.title, plan.run_dir,
                        log=_log, on_epoch=on_epoch) as callback:
        status, _ = execute(plan.cfg, plan.run_dir, force=force, on_epoch=callback, log=_log,
                            dataset=dataset)
    if status == "finished":
        _log(f"{plan.run_dir} already holds this finished run; nothing to do "
             f"(force=True re-runs it)")
    run = load_run(plan.run_dir, device=plan.cfg.train.device)
    if dataset is not None:
        run._dataset = dataset
    return run


def load_run(path: str | Path, device: str = "cpu"):
    """Open a finished run directory (``grprune run`` or :func:`train` wrote it).

    Parameters
    ----------
    path : str or Path
    device : str
        Where the model goes when first used: ``auto``, ``cpu``, ``cuda``, ``cuda:N``.

    Returns
    -------
    grprune.inference.Run
        Its model is loaded from ``checkpoint.pt`` on first use of ``run.model``.

    Raises
    ------
    GrpruneError
        If ``path`` does not exist or is no run directory, holds an unfinished
        (interrupted, running, failed) or corrupt run, has no ``checkpoint.pt``, or
        CUDA is asked for and absent.
    """
    from grprune.inference import load_run as _load
    return _load(path, device=device, lazy=True)


# -- ensembles ---------------------------------------------------------------------------
def member_dirs(paths: Sequence[str | Path], log: Callable[[str], None] = lambda msg: None
                ) -> list[Path]:
    """The run directories that ``paths`` name: each a finished run's directory, or a
    folder holding finished runs (a sweep's output; its unfinished or failed runs are
    skipped, with a note on ``log``).

    Raises
    ------
    GrpruneError
        A path that does not exist, or a folder with no finished run.
    """
    from grprune.collect.reading import scan_runs
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise GrpruneError(f"run directory {p} does not exist")
        if not p.is_dir():
            out.append(p)  # a file: load_run says why it is no run
            continue
        runs, problems = scan_runs(p)
        if not runs and [q.path for q in problems] == [p]:
            out.append(p)  # one run, unfinished or failed: load_run says why
            continue
        if not runs:
            raise GrpruneError(f"{p} holds no finished run")
        if problems:
            log(f"{p}: {len(problems)} run director{'ies' if len(problems) > 1 else 'y'} "
                f"not used (unfinished, failed or duplicate), e.g. {problems[0].path}: "
                f"{problems[0].reason}")
        out.extend(r.path for r in runs)
    return list(dict.fromkeys(out))


def load_model(paths: Sequence[str | Path], device: str = "cpu", calibrated: bool = False,
               log: Callable[[str], None] = lambda msg: None):
    """What ``grprune predict`` scores with: the run that ``paths`` name, or a
    :class:`grprune.predict.ensemble.Ensemble` of several (:func:`member_dirs`), or of one with
    ``calibrated``.

    Returns
    -------
    grprune.inference.Run or grprune.predict.ensemble.Ensemble
        Models loaded now, on ``device``.

    Raises
    ------
    GrpruneError
        No path; as :func:`member_dirs`, :func:`grprune.inference.load_run` and
        :class:`~grprune.predict.ensemble.Ensemble`.
    """
    from grprune.predict.ensemble import Ensemble
    from grprune.inference import load_run as _load
    if not paths:
        raise GrpruneError("name at least one run directory")
    dirs = member_dirs(paths, log)
    runs = [_load(d, device) for d in dirs]
    if len(runs) == 1 and not calibrated:
        return runs[0]
    return Ensemble(runs, calibrated=calibrated)


def predict_ensemble(runs: Sequence[str | Path], molecules, *, calibrated: bool = False,
                     device: str = "cpu", batch_size: int = 256, bonds: bool = False,
                     smiles_column: str | None = None, id_column: str | None = None,
                     out: str | Path | None = None, chunk_rows: int | None = None, log=None):
    """Score molecules with several runs as one ensemble, as ``grprune predict --run A --run
    B`` does: each member scores as :meth:`grprune.inference.Run.predict` scores alone (calibrated
    first with ``calibrated``), then ``score_mean``, ``score_sd`` and ``ensemble_size`` per
    molecule (:mod:`grprune.predict.ensemble`).

    Parameters
    ----------
    runs : sequence of path
        Run directories, or folders of finished runs (a sweep's output).
    molecules, batch_size, bonds, smiles_column, id_column, out, chunk_rows, log
        As :meth:`grprune.inference.Run.predict` (``bonds`` only for a single run).
    calibrated : bool
        Apply each run's ``calibration.json`` (``grprune calibrate``).
    device : str
        ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

    Returns
    -------
    pandas.DataFrame or grprune.predict.stream.ScreenSummary
        As :meth:`~grprune.inference.Run.predict`; for two or more runs the score columns
        are ``score_mean``, ``score_sd`` (sample standard deviation over the members) and
        ``ensemble_size`` (``prob_k_mean``, ``prob_k_sd`` per class for more classes).

    Raises
    ------
    GrpruneError
        No run, incompatible runs (another dataset, task, metric or featurizer), a run
        without a calibration when ``calibrated``; otherwise as ``Run.predict``.

    Examples
    --------
    >>> grprune.api.predict_ensemble(["runs/a", "runs/b"], "library.csv")  # doctest: +SKIP
    """
    from grprune.predict.flow import predict_molecules
    model = load_model(runs, device, calibrated=calibrated)
    return predict_molecules(model, molecules, batch_size, bonds, smiles_column=smiles_column,
                             id_column=id_column, out=out, chunk_rows=chunk_rows, log=log)
