"""A finished run's model, rebuilt from its directory and evaluated as the trainer does.

:func:`load_run` reads ``config.json``, ``summary.json`` and ``checkpoint.pt``
and rebuilds the model with :func:`grprune.build.build_model_from_features` (the
feature and class sizes are ``config.json``'s ``features`` record, a
:class:`~grprune.record.runconfig.FeatureSpec`), importing nothing of training. It reads run
directories of :data:`~grprune.record.runconfig.MIN_VERSION` and later; an older one is
refused with the command that re-makes it. :meth:`Run.score`
(:func:`grprune.scoring.score_graphs`) scores DGL graphs with it and returns, per graph,
the class probabilities and every edge's keep probability
:math:`p_{ij} = \\sigma(w_{ij})` and evaluation mask
(:class:`~grprune.evaluation.GraphScore`). :meth:`Run.stored_scores` returns the
same for the run's test graphs from its ``edge_probs.npz``, without the model.
:class:`Run` is also what :func:`grprune.train` returns and ``grprune.load_run``
opens (``load_run(path, lazy=True)``): summary, configuration, ``results.jsonl`` as
a DataFrame, :meth:`Run.explain` and :meth:`Run.predict`.

Scoring is :func:`grprune.evaluation.evaluate_batches`, the evaluation the
trainer runs (:meth:`grprune.trainer.Trainer.evaluate`), as the trainer evaluated the
selected checkpoint: with the selector unless ``summary.json`` says otherwise
(``use_selector``: false for a model reported at an ERM warm-up epoch,
:attr:`Run.use_selector`); the selector's ``eval_mode`` decides the mask (see
:mod:`grprune.evaluation`).

>>> run = load_run("runs/ogbg-molbbbp/size+eps-align-seed0-abc")   # doctest: +SKIP
>>> scores = run.score([smiles_to_graph("CCO")])                   # doctest: +SKIP
>>> scores[0].prob, scores[0].bond_prob                            # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from grprune.record.rundir import RunDir
from grprune.record.rundir import error_detail
from grprune.batch import GraphBatch
from grprune.build import build_model_from_features, load_config_dataset
from grprune.compat import dgl  # noqa: F401  (DGL import order)
from grprune.errors import GrpruneError
from grprune.evaluation import GraphScore, edge_scores_from_arrays
from grprune.explain import ExplainResult
from grprune.model import GraphClassifier
from grprune.record.runconfig import FeatureSpec, RunConfig
from grprune.record.summary import RunSummary, warmup_model_text
from grprune.scoring import BATCH_SIZE, score_graphs

class Run:
    """A finished run: its configuration, summary, results and model.

    :func:`load_run` (``grprune.load_run``) opens one; :func:`grprune.train` returns
    one. The model is loaded from ``checkpoint.pt`` on first use.

    Parameters
    ----------
    run_dir : str or Path
    cfg : RunConfig or mapping
        The resolved configuration (``config.json``; a plain mapping, as a user may pass
        to this public class, is read once here, with :meth:`RunConfig.from_dict`).
    summary : RunSummary or dict
        ``summary.json`` (kept as a :class:`~grprune.record.summary.RunSummary`).
    device : torch.device
        Where :attr:`model` is put.
    features : FeatureSpec, optional
        The training data's :class:`~grprune.record.runconfig.FeatureSpec`; default
        ``config.json``'s ``features`` record.
    model : GraphClassifier, optional
        An already loaded model (eval mode, on ``device``).
    dataset : GraphDataset, optional
        The training data, when it is at hand (graphs built in memory).

    Attributes
    ----------
    run_dir : Path
        Also :attr:`path`.
    cfg : RunConfig
        Also :attr:`config` (in the current layout, :func:`grprune.record.runconfig.upgrade`).
    summary : RunSummary
    device : torch.device
    use_selector : bool
        Whether the trainer evaluated the reported model with its selector:
        ``summary.json``'s ``use_selector`` (False for a model reported at an ERM warm-up
        epoch, evaluated as it was trained; a summary that does not record it reads as
        True).

    Examples
    --------
    >>> run = grprune.load_run("runs/ogbg-molbbbp/size+eps-align-seed0-abc")  # doctest: +SKIP
    >>> run.summary.test, run.records["valid.rocauc"].max()                  # doctest: +SKIP
    >>> run.predict(["CCO", "c1ccccc1O"])                                    # doctest: +SKIP
    """

    def __init__(self, run_dir: str | Path, cfg: RunConfig | Mapping[str, Any],
                 summary: RunSummary | dict,
                 device: torch.device | str = "cpu", *,
                 features: FeatureSpec | None = None,
                 model: GraphClassifier | None = None, dataset: Any = None) -> None:
        self.run_dir = Path(run_dir)
        # the public boundary: a plain config.json mapping is read (and upgraded) once here
        self.cfg, self.summary = RunConfig.from_dict(cfg), RunSummary.from_dict(summary)
        self.device = torch.device(device)
        self._model, self._dataset = model, dataset
        self._features = features
        self.rundir = RunDir(self.run_dir)  # reads only: a finished run takes no lock
        self.use_selector = self.summary.use_selector is not False

    def __repr__(self) -> str:
        return (f"Run({str(self.run_dir)!r}, dataset={self.dataset_name!r}, "
                f"test={self.summary.test!r})")

    @property
    def path(self) -> Path:
        """The run directory."""
        return self.run_dir

    @property
    def config(self) -> RunConfig:
        """The resolved configuration (``config.json``, with its ``hash``; read-only:
        :meth:`~grprune.record.runconfig.RunConfig.to_dict` gives a plain ``dict``)."""
        return self.cfg

    @property
    def records(self):
        """``results.jsonl`` as a pandas DataFrame, one row per epoch.

        Nested fields are flattened with dots: ``epoch``, ``phase``, ``loss.total``,
        ``loss.size``, ``valid.rocauc``, ``test.kept_edge_fraction``, ...
        """
        import pandas as pd
        return pd.json_normalize(self.rundir.record_lines(), sep=".")

    @property
    def features(self) -> FeatureSpec:
        """The training data's :class:`~grprune.record.runconfig.FeatureSpec`: ``config.json``'s
        ``features`` record.

        Raises
        ------
        GrpruneError
            If ``config.json`` has none (a run stopped before its data was loaded).
        """
        if self._features is None:
            if self.cfg.features is None:
                raise GrpruneError(f"{self.rundir.config_path} has no features record (the "
                                   f"data's sizes); {self.rundir.rerun_hint()}")
            self._features = self.cfg.features
        return self._features

    @property
    def model(self) -> GraphClassifier:
        """The selected model (``checkpoint.pt``), in eval mode, on :attr:`device`;
        loaded on first use.

        Raises
        ------
        GrpruneError
            If the checkpoint is missing or does not fit the configuration.
        """
        if self._model is None:
            self._model = _load_model(self.run_dir, self.cfg, self.features, self.device)
        return self._model

    @property
    def dataset_name(self) -> str:
        """The training dataset's name (``data.name``)."""
        return self.cfg.data.name

    @property
    def num_classes(self) -> int:
        return self.features.classes

    @property
    def featurizer(self):
        """The SMILES featurizer the training data was built with
        (:func:`grprune.data.molecule_featurizers.run_featurizer`): a function of one SMILES
        to a DGL graph, OGB's or dgllife's canonical features; None for a run trained on
        graphs without SMILES (synthetic features). :meth:`predict` featurizes with it."""
        from grprune.data.molecule_featurizers import run_featurizer
        return run_featurizer(self.cfg, self.features)

    @property
    def prediction_seed(self) -> int:
        """The evaluation seed :meth:`predict` scores with:
        :func:`grprune.determinism.eval_seed` of the run's seed and ``"predict"`` (the
        noise's keys are the molecules' own, :func:`grprune.predict.memory.smiles_key`)."""
        from grprune.determinism import eval_seed
        return eval_seed(int(self.cfg.train.seed or 0), "predict")

    @property
    def warmup_note(self) -> str | None:
        """Why this model keeps every bond, when a run with a selector reports an ERM
        warm-up epoch's model (:func:`grprune.record.summary.warmup_model_text`, under the
        rule :attr:`use_selector`); None otherwise. ``explain`` and ``predict`` print it."""
        if self.cfg.selector.name == "none" or self.use_selector:
            return None
        return warmup_model_text(self.summary.best_epoch, self.summary.selected)

    @property
    def learned_selector(self) -> bool:
        """Whether edge probabilities come from a learned selector used at evaluation.

        False for ERM (no selector), for selectors without learned scores
        (``drop-edge``) and for a run reported at a warm-up epoch: their
        probabilities are all 1 and explain nothing.
        """
        sel = self.model.selector
        return sel is not None and self.use_selector and sel.learned

    def load_dataset(self):
        """The run's dataset, loaded with its data configuration (cached per run).

        Raises
        ------
        GrpruneError, DataError
            As :func:`grprune.data.load_dataset`.
        """
        if self._dataset is None:
            self._dataset = load_config_dataset(self.cfg)
        return self._dataset

    def part_indices(self, dataset, part: str) -> np.ndarray:
        """Dataset indices of a split part as the run used it (``data.limit`` applied).

        Raises
        ------
        GrpruneError
            If the dataset has no such part (the message lists the parts).
        """
        if part not in dataset.splits:
            raise GrpruneError(f"dataset {dataset.name} has no part {part!r}. "
                               f"Choices: {', '.join(dataset.splits)}")
        idx = np.asarray(dataset.splits[part], dtype=np.int64)
        limit = int(self.cfg.data.limit or 0)
        return idx[:limit] if limit else idx

    def score(self, graphs: Sequence | GraphBatch, batch_size: int = BATCH_SIZE, *,
              keys: Sequence[int] | None = None, seed: int = 0) -> list[GraphScore]:
        """:func:`score_graphs` with this run's model and evaluation rule (``keys``: each
        graph's identity, e.g. its dataset index; ``seed``: the evaluation seed)."""
        return score_graphs(self.model, graphs, use_selector=self.use_selector,
                            batch_size=batch_size, keys=keys, seed=seed)

    def stored_scores(self, indices: Sequence[int], num_graphs: int | None = None
                      ) -> dict[int, GraphScore] | None:
        """The trainer's own scores of dataset graphs, read from ``edge_probs.npz``.

        The trainer writes that file from the evaluation of the selected checkpoint
        on the test split (``data.limit`` applied), under the rule :attr:`use_selector`
        follows, so it holds what :meth:`score` would compute for those graphs.

        Parameters
        ----------
        indices : sequence of int
            Dataset indices.
        num_graphs : int, optional
            The dataset's size: a file naming a graph index at or beyond it is refused.

        Returns
        -------
        dict of int to GraphScore, or None
            None when the file is absent, damaged, inconsistent as a whole
            (:func:`grprune.evaluation.edge_arrays_problem`: lengths, pointers, node ids;
            graph indices outside the dataset), lacks one of its arrays
            (:data:`grprune.evaluation.SCORE_ARRAYS`) or one of the graphs: score them
            instead.
        """
        edges = edge_scores_from_arrays(self.rundir.edge_arrays())
        if edges is None:
            return None
        if num_graphs is not None and len(edges) and int(edges.graph_index.max()) >= num_graphs:
            return None
        return edges.by_index(indices)

    def explain(self, part: str = "test", graphs: int | str | Sequence[int | str] | None = None,
                *, top_k: int | None = None, fmt: str = "png", out: str | Path | None = None,
                fidelity: bool = True, log=lambda msg: None) -> Explanation:
        """``grprune explain``: kept edges, pictures and explanation metrics
        (:func:`grprune.explain.explain_run`).

        Parameters
        ----------
        part : str
            Split part (``test``, ``valid``, ``train``, ``id-test``, ...).
        graphs : int, str or sequence of int and str, optional
            Graphs in ``part``: dataset indices, ``"row:N"`` (a source row), ``"id:TEXT"``
            or any other string (an ID); one index or one string names one graph
            (``graphs="id:CMPD-0010"``). Default the part's first 8 graphs.
        top_k : int, optional
            Mark the top-K bonds by keep probability instead of the kept bonds.
        fmt : {"png", "svg"}
        out : path, optional
            Folder for ``edges.csv``, the pictures and ``metrics.json``; default
            ``RUN_DIR/explain``.
        fidelity : bool
            Also score the explanations without ground truth (``fidelity.json``: two more
            passes of the model over every graph of ``part``; ``--no-fidelity`` skips it).
        log : callable
            Receives progress notes.

        Returns
        -------
        Explanation
            :class:`~grprune.explain.ExplainResult` plus ``edges``, ``edges.csv`` as a
            pandas DataFrame (one row per undirected bond of each graph).

        Raises
        ------
        GrpruneError
            Unknown part, a graph outside the part, bad ``top_k`` or ``fmt``.
        """
        import dataclasses

        import pandas as pd

        from grprune.explain import explain_run
        if isinstance(graphs, (str, int, np.integer)):  # one selector, not its characters
            graphs = [graphs]
        res = explain_run(self, part=part, graph_ids=graphs, top_k=top_k, fmt=fmt,
                          out_dir=out, log=log, fidelity=fidelity)
        fields = {f.name: getattr(res, f.name) for f in dataclasses.fields(res)}
        return Explanation(**fields, edges=pd.read_csv(res.out_dir / "edges.csv"))

    def predict(self, molecules, batch_size: int = BATCH_SIZE, bonds: bool = False, *,
                smiles_column: str | None = None, id_column: str | None = None,
                out: str | Path | None = None, chunk_rows: int | None = None,
                log=None):
        """Score molecules with this run's model, as ``grprune predict`` does.

        Parameters
        ----------
        molecules : str, sequence of str, pandas.DataFrame or path
            One SMILES or a list, scored in memory (:func:`grprune.predict.memory.predict_smiles`);
            or a table with a SMILES column and any others (IDs): a DataFrame or a CSV file
            (:func:`grprune.predict.is_table`), scored in chunks as ``--csv`` is
            (:func:`grprune.predict.predict_table`).
        batch_size : int
            Molecules per batch (scores do not depend on it).
        bonds : bool
            Return the bond table instead of the molecule table.
        smiles_column, id_column, chunk_rows
            For a table: ``--smiles-column`` (default ``smiles``), ``--id-column``
            (default the run's ``data.id_column`` when the table has it), ``--chunk-rows``.
        out : path, optional
            For a table: write the rows there as ``--out`` does (``.csv``, or ``.parquet``
            with pyarrow; atomic, resumable) and return what was written instead of the
            table: a library of any size in bounded memory.
        log : callable, optional
            With ``out``: receives the state line (resuming after row N, or starting
            clean and why).

        Returns
        -------
        pandas.DataFrame or grprune.predict.stream.ScreenSummary
            One row per input, in order: a table's own columns (but its SMILES column),
            then ``row``, ``smiles``, ``canonical_smiles``, ``status`` (``ok`` or why it
            could not be scored), ``reason`` (training's words for a skipped row),
            ``prob_1`` (binary; ``prob_0`` .. ``prob_{C-1}`` otherwise), ``pred_label``,
            ``num_bonds``, ``bonds_kept``. With ``bonds=True``, one row per RDKit bond of
            each scored molecule, with its ``edge_prob`` and ``kept``. With ``out``, the
            :class:`~grprune.predict.stream.ScreenSummary` (rows, scored, skipped by status, files).

        Raises
        ------
        GrpruneError
            If the run was not trained on molecules featurized from SMILES; table options
            with SMILES; for a table, a missing file or column, a bad ``chunk_rows``,
            Parquet without pyarrow.
        """
        from grprune.predict.flow import predict_molecules
        return predict_molecules(self, molecules, batch_size, bonds, smiles_column=smiles_column,
                                 id_column=id_column, out=out, chunk_rows=chunk_rows, log=log)


@dataclass
class Explanation(ExplainResult):
    """What :meth:`Run.explain` wrote (:class:`~grprune.explain.ExplainResult`), and
    ``edges``: ``edges.csv`` as a pandas DataFrame."""

    edges: Any = None


def _load_model(run_dir: Path, cfg: RunConfig, features: FeatureSpec,
                device: torch.device) -> GraphClassifier:
    """A run's model from ``checkpoint.pt``, in eval mode, on ``device``.

    Raises
    ------
    GrpruneError
        If the checkpoint is missing, unreadable (:meth:`grprune.record.rundir.RunDir.read_checkpoint`)
        or of another model.
    """
    rundir = RunDir(run_dir)
    state = rundir.read_checkpoint(device)  # missing or damaged: one message, before building
    model, _ = build_model_from_features(cfg, features)
    try:
        model.load_state_dict(state)
    except Exception as exc:  # a checkpoint of another model
        raise GrpruneError(f"cannot load {rundir.checkpoint_path} ({error_detail(exc)}): it is "
                           f"of another model; {rundir.rerun_hint()}") from None
    model.to(device)
    model.eval()
    return model


def load_run(run_dir: str | Path, device: str = "cpu", *, lazy: bool = False) -> Run:
    """Open a finished run from its directory.

    Parameters
    ----------
    run_dir : str or Path
        A directory written by ``grprune run`` or :func:`grprune.train`.
    device : str
        ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (:func:`grprune.determinism.select_device`).
    lazy : bool
        Load the model on first use of :attr:`Run.model` instead of now (then a
        missing or broken checkpoint is reported there).

    Returns
    -------
    Run

    Raises
    ------
    GrpruneError
        If ``run_dir`` is not a run directory, the run has not finished (no
        ``summary.json``), is corrupt, or is older than grprune reads (``outdated``:
        :meth:`grprune.record.rundir.RunDir.status`; the message says how to re-make it),
        the checkpoint is missing or does not fit the configuration, or CUDA is asked for
        and absent.
    """
    from grprune.determinism import select_device

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise GrpruneError(f"run directory {run_dir} does not exist")
    rundir = RunDir(run_dir)
    status = rundir.status()
    if status.state in ("interrupted", "running", "failed"):
        raise GrpruneError(
            f"{run_dir} holds an unfinished run ({status}); finish it first with "
            f"`grprune run --config {rundir.config_path} --out {run_dir}`")
    if status.state == "outdated":
        raise GrpruneError(f"{run_dir}: {status.reason}")
    if status.state != "finished":
        what = {"corrupt": "holds a corrupt run", "empty": "is empty"}.get(
            status.state, "is not a grprune run directory")
        raise GrpruneError(f"{run_dir} {what} ({status.reason or status.state})")
    rundir.require_checkpoint()
    assert status.config is not None and status.summary is not None  # a finished run has both
    run = Run(run_dir, status.config, status.summary, select_device(device))
    if not lazy:
        _ = run.model  # load now, so that a broken checkpoint is reported here
    return run
