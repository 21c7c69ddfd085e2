"""``grprune explain``: edge keep probabilities, pictures and explanation metrics of a run.

:func:`explain_run` takes the graphs of one split part with a finished run's
scores, writes one row per undirected bond to ``edges.csv``, one picture per
chosen graph (:mod:`grprune.draw`) and, on data with ground-truth motif edges
(GOOD-Motif, SPMotif), the explanation metrics of the paper
(:mod:`grprune.explain_metrics`) to ``metrics.json`` and, for a run with a selector, the
ground-truth-free scores of its explanations (fidelity+, fidelity−, characterization,
sparsity: :mod:`grprune.explain_fidelity`) to ``fidelity.json``.

**Where the scores come from.** The trainer saves its own evaluation of the
selected checkpoint on the test split to ``edge_probs.npz``
(:func:`grprune.evaluation.edge_probs_arrays`: logits, keep probabilities,
evaluation mask and class probabilities). When that file holds every graph
asked for, explain reads it and does not run the model
(:meth:`grprune.inference.Run.stored_scores`). Otherwise (other parts than
``test``, graphs outside ``data.limit``, a damaged or incomplete file) it re-scores the
graphs with the run's model under the same evaluation rule
(:meth:`grprune.inference.Run.score`).

The metric functions are re-exported here from :mod:`grprune.explain_metrics`, and the
``--graphs`` helpers from :mod:`grprune.explain_graphs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from grprune.errors import GrpruneError
from grprune.explain_graphs import (check_graph_ids, chosen_graphs, graph_label,  # noqa: F401
                                    parse_graph_ids, picture_name, resolve_graph_ids,
                                    skipped_id_reason)
from grprune.explain_metrics import (RANK_DECIMALS, RECALL_KS, TOPK_FACTORS,  # noqa: F401
                                     edge_rocauc, explanation_metrics, graph_of_bonds,
                                     marked_bonds, rank_within_graphs, ranking_score,
                                     select_graphs, spurious_at_k, top_k_counts)
from grprune.ops import rank_in_segment_np

if TYPE_CHECKING:
    from grprune.data.dataset import GraphDataset

#: graphs drawn when --graphs is not given
DEFAULT_GRAPHS = 8
MANIFEST = "explain.json"


# -- options and results -----------------------------------------------------
@dataclass
class ExplainResult:
    """What :func:`explain_run` wrote.

    Attributes
    ----------
    out_dir : Path
    files : list of str
        File names written under ``out_dir``.
    graphs : list of int
        Dataset indices drawn.
    metrics : dict or None
        ``metrics.json``'s content; None when skipped.
    fidelity : dict or None
        ``fidelity.json``'s content (:func:`grprune.explain_fidelity.part_fidelity`); None
        when skipped or not asked for.
    notes : list of str
        Why metrics were skipped, pictures that could not be drawn, ...
    """

    out_dir: Path
    files: list[str] = field(default_factory=list)
    graphs: list[int] = field(default_factory=list)
    metrics: dict | None = None
    notes: list[str] = field(default_factory=list)
    fidelity: dict | None = None


def _csv_bytes(df) -> bytes:
    return df.to_csv(index=False, float_format="%.6g").encode()


def _pred_text(prob: np.ndarray, per_task: bool = False) -> str:
    if per_task:  # multi-task probabilities or regression values, one per task
        return "predicted " + ";".join(f"{v:.3g}" for v in prob)
    c = int(np.argmax(prob))
    if len(prob) == 2:
        return f"p(y=1) = {prob[1]:.3f}"
    return f"predicted {c} (p = {prob[c]:.3f})"


# -- grprune explain, step by step ----------------------------------------------
def explain_run(run, *, part: str = "test", graph_ids: Sequence[int | str] | None = None,
                top_k: int | None = None, fmt: str = "png", out_dir: str | Path | None = None,
                log: Callable[[str], None] = lambda msg: None,
                fidelity: bool = True) -> ExplainResult:
    """Explain a finished run: ``edges.csv``, pictures, ``metrics.json``, ``fidelity.json``.

    Scores are read from the run's ``edge_probs.npz`` when it holds every graph
    needed, else computed with the run's model (see the module docstring).

    Parameters
    ----------
    run : grprune.inference.Run
        From :func:`grprune.inference.load_run`.
    part : str
        Split part (``test``, ``valid``, ``train``, ``id-test``, ...). The part
        is taken as the run used it (``data.limit`` applied).
    graph_ids : sequence of int or str, optional
        Graphs to draw and list in ``edges.csv``: dataset indices, or
        :func:`parse_graph_ids`' ``"row:N"`` and ``"id:TEXT"``; each must be in
        ``part`` (the full part, ``data.limit`` not applied). Default: the
        first :data:`DEFAULT_GRAPHS` graphs of the part.
    top_k : int, optional
        Mark the top-K bonds by keep probability instead of the kept bonds.
    fmt : {"png", "svg"}
    out_dir : path, optional
        Default ``RUN_DIR/explain``. Files of a previous explanation there
        (listed in its ``explain.json``) that this one does not write are removed.
    log : callable
        Receives progress notes.
    fidelity : bool
        Also score the explanations of the whole part without ground truth
        (:mod:`grprune.explain_fidelity`: fidelity+/- and characterization, which run the
        model twice more on every graph of the part, and sparsity) into ``fidelity.json``.

    Returns
    -------
    ExplainResult

    Raises
    ------
    GrpruneError
        Unknown part, graph outside the dataset or the part, unknown source
        row or ID, bad ``top_k``.
    """
    from grprune.record.files import atomic_write_bytes, atomic_write_json

    out = _check_options(run, fmt, top_k, out_dir)
    dataset = run.load_dataset()
    part_idx = run.part_indices(dataset, part)
    ids = ([int(i) for i in part_idx[:DEFAULT_GRAPHS]] if graph_ids is None
           else chosen_graphs(dataset, part, graph_ids, log))
    res = ExplainResult(out_dir=out, graphs=ids)
    if run.warmup_note:  # an ERM warm-up model: every bond is kept, every picture full
        res.notes.append(run.warmup_note)
    metrics_wanted = _metrics_wanted(run, dataset, res.notes)
    fidelity_wanted = fidelity and _fidelity_wanted(run, dataset, res.notes)
    # the whole part for the metrics, or just the chosen graphs
    todo = list(dict.fromkeys([int(i) for i in part_idx] if metrics_wanted or fidelity_wanted
                              else []) | dict.fromkeys(ids))
    scores = _scores(run, dataset, part, todo, log)
    labels = dataset.labels.numpy()
    molecules = _molecules(dataset, ids, scores, res.notes)
    atomic_write_bytes(out / "edges.csv", _csv_bytes(
        _edges_table(run, dataset, part, ids, scores, labels, molecules)))
    res.files.append("edges.csv")
    res.files.extend(_draw_pictures(out, dataset, part, ids, scores, labels, molecules, top_k,
                                    fmt, res.notes))
    if metrics_wanted:
        res.metrics = _part_metrics(run, dataset, part, part_idx, scores, labels)
        atomic_write_json(out / "metrics.json", res.metrics)
        res.files.append("metrics.json")
    if fidelity_wanted:
        from grprune.explain_fidelity import part_fidelity
        res.fidelity = part_fidelity(run, dataset, part, part_idx, scores, top_k, res.notes)
    if res.fidelity is not None:
        atomic_write_json(out / "fidelity.json", res.fidelity)
        res.files.append("fidelity.json")
    _write_manifest(run, dataset, part, top_k, fmt, res)
    return res


def _check_options(run, fmt: str, top_k: int | None, out_dir: str | Path | None) -> Path:
    """The output folder, after checking ``fmt``, ``top_k`` and ``out_dir``."""
    if fmt not in ("png", "svg"):
        raise GrpruneError(f"unknown picture format {fmt!r}. Choices: png, svg")
    if top_k is not None and top_k < 1:
        raise GrpruneError(f"--top-k must be at least 1, got {top_k}")
    out = Path(out_dir) if out_dir is not None else run.run_dir / "explain"
    if out.exists() and not out.is_dir():
        raise GrpruneError(f"--out {out} exists and is not a directory")
    return out


def _metrics_wanted(run, dataset: GraphDataset, notes: list[str]) -> bool:
    """Whether the explanation metrics are defined for this run (else say why in ``notes``)."""
    has_gt = dataset.has_edge_gt
    if not has_gt:
        notes.append(f"{dataset.name} has no ground-truth motif edges: explanation "
                     f"metrics skipped (no metrics.json)")
    elif not run.learned_selector:
        why = ("the run has no learned selector" if run.model.selector is None
               or not run.model.selector.learned
               else "the reported model is a warm-up epoch, evaluated without its selector")
        notes.append(f"explanation metrics skipped: {why} (every keep probability is 1)")
    return has_gt and run.learned_selector


def _fidelity_wanted(run, dataset, notes: list[str]) -> bool:
    """Whether the explanations have a fidelity (:mod:`grprune.explain_fidelity`; else say why
    in ``notes``)."""
    from grprune.explain_fidelity import fidelity_skip_reason
    why = fidelity_skip_reason(run, dataset)
    if why:
        notes.append(f"fidelity skipped: {why}")
    return not why


def _scores(run, dataset, part: str, todo: list[int], log: Callable[[str], None]) -> dict:
    """Dataset index -> GraphScore for ``todo``: the run's ``edge_probs.npz`` when it
    holds them all, else re-scored with the model (other parts, a damaged file, scores
    that are not finite: a NaN probability is no score)."""
    stored = run.stored_scores(todo, num_graphs=len(dataset))
    if stored is not None and not all(_finite_score(s) for s in stored.values()):
        log(f"{run.run_dir.name}/edge_probs.npz holds scores that are not finite (NaN or "
            f"infinite): treated as absent")
        stored = None
    if stored is not None:
        log(f"reading {len(todo)} graphs of {dataset.name} ({part}) from "
            f"{run.run_dir.name}/edge_probs.npz")
        return stored
    log(f"scoring {len(todo)} graphs of {dataset.name} ({part}) on {run.device}")
    from grprune.determinism import eval_seed
    return dict(zip(todo, run.score([dataset.graphs[i] for i in todo], keys=todo,
                                    seed=eval_seed(int(run.cfg.train.seed or 0), part))))


def _finite_score(s) -> bool:
    """Whether a stored GraphScore's probabilities are finite (``edge_logits`` may be
    ``+inf``: no selector; never NaN)."""
    return bool(np.isfinite(s.prob).all() and np.isfinite(s.edge_prob).all()
                and np.isfinite(s.edge_weight).all() and not np.isnan(s.edge_logits).any())


def _molecules(dataset: GraphDataset, ids: list[int], scores: dict, notes: list[str]) -> dict:
    """Graph -> ``(mol, RDKit bond id of each graph bond)`` for molecules, None where the
    SMILES does not match the graph; empty without SMILES."""
    from grprune.draw import parse_molecule, rdkit_bond_ids

    smiles = dataset.smiles
    out: dict[int, tuple[Any, np.ndarray] | None] = {}
    if smiles is None:
        return out
    for i in ids:
        s = scores[i]
        mol = parse_molecule(smiles[i])
        try:
            out[i] = (mol, rdkit_bond_ids(mol, s.bond_src, s.bond_dst, s.num_nodes))
        except (ValueError, AttributeError) as exc:
            out[i] = None
            notes.append(f"graph {i}: SMILES does not match the graph ({exc}); "
                         f"drawn without chemistry, bonds numbered by graph order")
    return out


def _label_cell(label: Any) -> Any:
    """A graph's label in ``edges.csv``: the class (an int); for multi-task or regression
    data (shape (T,)) the values joined by ``;``, empty where missing."""
    if np.ndim(label) == 0:
        return int(label)
    return ";".join("" if np.isnan(v) else f"{v:g}" for v in np.asarray(label, dtype=float))


def _edges_table(run, dataset: GraphDataset, part: str, ids: list[int], scores: dict,
                 labels: np.ndarray,
                 molecules: dict):
    """``edges.csv`` as a DataFrame: one row per undirected bond of the chosen graphs."""
    import pandas as pd

    smiles, has_gt = dataset.smiles, dataset.has_edge_gt
    num_classes = run.num_classes
    rows = []
    for i in ids:
        s = scores[i]
        cached = molecules.get(i)
        bond_ids = cached[1] if cached is not None else np.arange(s.num_bonds)
        rank = rank_in_segment_np(ranking_score(s.bond_logits),
                                  np.zeros(s.num_bonds, dtype=np.int64), 1, descending=True)
        gt = s.bond_gt
        for k in range(s.num_bonds):
            row: dict[str, Any] = {"graph_index": i, "source_row": int(dataset.source_rows[i])}
            if dataset.ids is not None:
                row["id"] = dataset.ids[i]
            row.update({"part": part, "label": _label_cell(labels[i]),
                        "pred_label": s.pred if np.ndim(labels[i]) == 0 else ""})
            row.update({f"prob_{c}": float(s.prob[c]) for c in range(num_classes)})
            if smiles is not None:
                row["smiles"] = smiles[i]
            row.update({"bond": int(bond_ids[k]), "src": int(s.bond_src[k]),
                        "dst": int(s.bond_dst[k]), "edge_prob": float(s.bond_prob[k]),
                        "edge_weight": float(s.bond_weight[k]),
                        "kept": int(s.bond_weight[k] > 0.5), "rank": int(rank[k]) + 1})
            if gt is not None:
                row["edge_gt"] = int(gt[k])
            rows.append(row)
    columns = (["graph_index", "source_row"] + (["id"] if dataset.ids is not None else [])
               + ["part", "label", "pred_label"]
               + [f"prob_{c}" for c in range(num_classes)]
               + (["smiles"] if smiles is not None else [])
               + ["bond", "src", "dst", "edge_prob", "edge_weight", "kept", "rank"]
               + (["edge_gt"] if has_gt else []))
    return pd.DataFrame(rows, columns=columns)


def _draw_pictures(out: Path, dataset, part: str, ids: list[int], scores: dict,
                   labels: np.ndarray, molecules: dict, top_k: int | None, fmt: str,
                   notes: list[str]) -> list[str]:
    """One picture per chosen graph; returns the file names written."""
    from grprune.record.files import atomic_write_bytes
    from grprune.draw import draw_graph, draw_molecule, highlight_caption, rdkit_drawing_error

    draw_error = rdkit_drawing_error() if molecules else None
    if draw_error:
        notes.append(f"RDKit cannot draw molecules here ({draw_error}); molecules drawn "
                     f"as plain graphs (node = atom index)")
    files = []
    for i in ids:
        s = scores[i]
        marked = marked_bonds(s.bond_logits, s.bond_weight, top_k)
        head = (f"{graph_label(dataset, i)}, {part} - label {_label_cell(labels[i])}, "
                f"{_pred_text(s.prob, np.ndim(labels[i]) > 0)} - "
                f"{int(marked.sum())}/{s.num_bonds} bonds marked")
        name = picture_name(dataset, i, fmt)
        cached = molecules.get(i)
        if cached is not None and not draw_error:
            mol, bond_ids = cached
            data = draw_molecule(mol, bond_ids, s.bond_prob, marked,
                                 legend=f"{head}\n{highlight_caption(top_k)}", fmt=fmt)
        else:
            data = draw_graph(s.num_nodes, s.bond_src, s.bond_dst, s.bond_prob, marked,
                              s.bond_gt, title=head, caption=highlight_caption(top_k, False),
                              top_k=top_k, fmt=fmt)
        atomic_write_bytes(out / name, data)
        files.append(name)
    return files


def _write_manifest(run, dataset, part: str, top_k: int | None, fmt: str,
                    res: ExplainResult) -> None:
    """Remove what an earlier explanation wrote there and this one did not; write ``explain.json``."""
    from grprune.record.files import atomic_write_json, read_json

    out = res.out_dir
    old = read_json(out / MANIFEST)
    if isinstance(old, dict):
        for name in old.get("files", []):
            if name not in res.files and "/" not in name and name != MANIFEST:
                (out / name).unlink(missing_ok=True)
    atomic_write_json(out / MANIFEST, {
        "run_dir": str(run.run_dir), "dataset": dataset.name, "part": part, "graphs": res.graphs,
        "top_k": top_k, "format": fmt, "use_selector": run.use_selector,
        "files": res.files, "notes": res.notes})


# -- metrics.json and its printed table -------------------------------------------
def _part_metrics(run, dataset, part: str, part_idx: np.ndarray, scores: dict,
                  labels: np.ndarray) -> dict[str, Any]:
    """``metrics.json``: metrics over all graphs of the part and the correct ones."""
    ss = [scores[int(i)] for i in part_idx]
    ptr = np.concatenate([[0], np.cumsum([s.num_bonds for s in ss])]).astype(np.int64)
    score = ranking_score(np.concatenate([s.bond_logits for s in ss]) if ss else np.zeros(0))
    gt = np.concatenate([s.bond_gt for s in ss]) if ss else np.zeros(0, dtype=np.int64)
    correct = np.asarray([s.pred == int(labels[int(i)]) for s, i in zip(ss, part_idx)],
                         dtype=bool)
    sub = select_graphs(ptr, correct, score, gt)
    return {
        "run_dir": str(run.run_dir), "dataset": dataset.name, "part": part,
        "graphs_in_part": int(len(part_idx)),
        "data_limit": int(run.cfg.data.limit or 0),
        "accuracy": float(correct.mean()) if len(correct) else None,
        "unit": "undirected bonds (both directions of a bond share one logit)",
        "score": f"selector logit w rounded to {RANK_DECIMALS} decimals (orders bonds like "
                 f"p = sigmoid(w); float rounding noise does not break ties)",
        "ties": "ranked by score descending, ties by lower bond id first",
        "recall_precision_at_k": "per graph, the floor(K% * bonds) lowest-score bonds are "
                                 "predicted spurious; counts summed over graphs (micro-average)",
        "top_k": "per graph with motif bonds, the ceil(f * |G_c|) highest-score bonds; "
                 "mean counts of G_c and G_s bonds among them",
        "all": explanation_metrics(ptr, score, gt),
        "correct": explanation_metrics(*sub),  # type: ignore[arg-type]  # (ptr, score, gt)
    }


def metrics_rows(metrics: dict) -> list[tuple[str, Any, Any]]:
    """``(name, all graphs, correctly predicted)`` rows for a printed table."""
    a, c = metrics["all"], metrics["correct"]
    rows: list[tuple[str, Any, Any]] = [
        ("graphs", a["graphs"], c["graphs"]),
        ("bonds (motif bonds)", f"{a['bonds']} ({a['motif_bonds']})",
         f"{c['bonds']} ({c['motif_bonds']})"),
        ("edge ROC-AUC (undirected bonds)", a["rocauc"], c["rocauc"])]
    for k in a["at_k"]:
        rows.append((f"Recall@{k}%", a["at_k"][k]["recall"], c["at_k"][k]["recall"]))
        rows.append((f"Precision@{k}%", a["at_k"][k]["precision"], c["at_k"][k]["precision"]))
    for f in a["top_k"]:
        ta, tc = a["top_k"][f], c["top_k"][f]
        rows.append((f"top-ceil({f}|G_c|): G_c bonds (oracle)", _pair(ta, "gc"), _pair(tc, "gc")))
        rows.append((f"top-ceil({f}|G_c|): G_s bonds (oracle)", _pair(ta, "gs"), _pair(tc, "gs")))
    return rows


def _pair(t: dict, key: str) -> str | None:
    if t[key] is None:
        return None
    return f"{t[key]:.2f} ({t[key + '_oracle']:.2f})"


def format_value(v: Any) -> str:
    """A table cell: 4 decimals for floats, ``-`` for None or NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)
