"""``grprune explain``: edge keep probabilities, pictures and explanation metrics of a run.

:func:`explain_run` takes the graphs of one split part with a finished run's
scores, writes one row per undirected bond to ``edges.csv``, one picture per
chosen graph (:mod:`grprune.draw`) and, on data with ground-truth motif edges
(GOOD-Motif, SPMotif), the explanation metrics of the paper
(:mod:`grprune.explain_metrics`) to ``metrics.json``.

**Where the scores come from.** The trainer saves its own evaluation of the
selected checkpoint on the test split to ``edge_probs.npz``
(:func:`grprune.evaluation.edge_probs_arrays`: logits, keep probabilities,
evaluation mask and class probabilities). When that file holds every graph
asked for, explain reads it and does not run the model
(:meth:`grprune.inference.Run.stored_scores`). Otherwise (other parts than
``test``, graphs outside ``data.limit``, runs written before the file held
logits and class probabilities) it re-scores the graphs with the run's model
under the same evaluation rule (:meth:`grprune.inference.Run.score`).

The metric functions are re-exported here from :mod:`grprune.explain_metrics`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from grprune.errors import GrpruneError, did_you_mean
from grprune.explain_metrics import (RANK_DECIMALS, RECALL_KS, TOPK_FACTORS,  # noqa: F401
                                     edge_rocauc, explanation_metrics, graph_of_bonds,
                                     rank_within_graphs, ranking_score, select_graphs,
                                     spurious_at_k, top_k_counts)
from grprune.ops import rank_in_segment_np

#: graphs drawn when --graphs is not given
DEFAULT_GRAPHS = 8
MANIFEST = "explain.json"


# -- options and results -----------------------------------------------------
def parse_graph_ids(text: str) -> list[int | str]:
    """Parse ``--graphs``: dataset indices, source rows and IDs, order kept, duplicates dropped.

    ``3,17,40-45`` are dataset indices (ranges inclusive); ``row:204`` and
    ``row:200-210`` are rows of the source file (0-based data rows, as
    ``grprune data info`` and ``predict`` number them); ``id:CMPD-7`` is an ID of
    ``data.id_column`` (or a ``dgl-graphs`` file's ``id`` tensor), and a token that
    is not a number or range is taken as an ID too (an ID of digits and dashes
    alone needs ``id:``). :func:`resolve_graph_ids`
    turns rows and IDs into indices.

    Returns
    -------
    list of int or str
        Indices as ints; ``"row:N"`` and ``"id:TEXT"`` as strings.

    Raises
    ------
    GrpruneError
        On negative or reversed ranges, bad ``row:`` items, or nothing named.

    Examples
    --------
    >>> parse_graph_ids("3,17,40-42,row:204,CMPD-7")
    [3, 17, 40, 41, 42, 'row:204', 'id:CMPD-7']
    """
    out: list[int | str] = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        kind, colon, rest = item.partition(":")
        if colon and kind.strip().lower() == "id":
            out.append(f"id:{rest.strip()}")
            continue
        is_row = bool(colon) and kind.strip().lower() == "row"
        lo, sep, hi = (rest if is_row else item).partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            if is_row:
                raise GrpruneError(f"bad row {item!r} in --graphs {text!r}: expected "
                                   f"row:N or row:A-B") from None
            if re.fullmatch(r"[\d\s-]+", item):  # a broken range, not a name
                raise GrpruneError(f"bad graph range {item!r} in --graphs {text!r} "
                                   f"(an ID of digits and dashes needs id:)") from None
            out.append(f"id:{item}")
            continue
        if a < 0 or b < a:
            raise GrpruneError(f"bad graph range {item!r} in --graphs {text!r}")
        out.extend(f"row:{r}" if is_row else r for r in range(a, b + 1))
    if not out:
        raise GrpruneError(f"--graphs {text!r} names no graph")
    return list(dict.fromkeys(out))


def resolve_graph_ids(dataset, items: Sequence[int | str], part_members=None,
                      notes: list[str] | None = None) -> list[int]:
    """Dataset indices of :func:`parse_graph_ids`' items (ints pass through; ``"row:N"``
    is a source row, ``"id:TEXT"`` or any other string an ID).

    An ID that several graphs share (duplicate IDs in the source) names every one of them;
    with ``part_members`` (the part's dataset indices) those in the part, and ``notes``
    receives a line listing all matches.

    Raises
    ------
    GrpruneError
        For a source row that is not in the dataset (the message says why a
        skipped row was skipped), an ID of a skipped row (its skip reason), an ID
        the dataset does not have (or a dataset without IDs), or a duplicate ID none
        of whose graphs is in the part (the message lists them).
    """
    if all(isinstance(i, (int, np.integer)) for i in items):
        return [int(i) for i in items]
    row_of = {int(r): i for i, r in enumerate(dataset.source_rows)}
    id_of: dict[str, list[int]] = {}
    for i, x in enumerate(dataset.ids or ()):
        id_of.setdefault(x, []).append(i)
    skipped = {int(r["row"]): r["reason"] for r in dataset.info.get("bad_rows", ())
               if isinstance(r, dict) and "row" in r}
    out = []
    for item in items:
        if isinstance(item, (int, np.integer)):
            out.append(int(item))
        elif item.startswith("row:"):
            r = int(item[4:])
            if r not in row_of:
                n_rows = int(dataset.info.get("n_source_rows") or len(dataset))
                why = (f"it was skipped: {skipped[r]}" if r in skipped
                       else "it was skipped at loading; `grprune data info` lists why"
                       if r in set(dataset.info.get("skipped_rows") or ())
                       else f"the source has rows 0-{n_rows - 1}")
                raise GrpruneError(f"source row {r} is not in {dataset.name} ({why})")
            out.append(row_of[r])
        else:
            key = item[3:] if item.startswith("id:") else item
            if dataset.ids is None:
                raise GrpruneError(f"--graphs names ID {key!r}, but {dataset.name} has no IDs: "
                                   f"train with -H data.id_column=NAME (molecule-csv) or give "
                                   f"the dgl-graphs file an 'id' tensor; or pass indices "
                                   f"or row:N")
            if key not in id_of:
                why = skipped_id_reason(dataset, key, skipped)
                if why:
                    raise GrpruneError(f"ID {key!r} is not in {dataset.name}: {why}")
                raise GrpruneError(f"no graph of {dataset.name} has ID {key!r}."
                                   f"{did_you_mean(key, list(id_of))}")
            out.extend(_id_matches(dataset, key, id_of[key], part_members, notes))
    return list(dict.fromkeys(out))


def _id_matches(dataset, key: str, matches: list[int], part_members, notes) -> list[int]:
    """The graphs an ID names: all of them, or those in the part (a note lists every one)."""
    if len(matches) == 1:
        return matches
    listed = ", ".join(graph_label(dataset, i) for i in matches)
    if part_members is None:
        inside = matches
    else:
        inside = [i for i in matches if i in part_members]
        if not inside:
            where = {p for p, idx in dataset.splits.items()
                     for i in matches if i in set(np.asarray(idx).tolist())}
            raise GrpruneError(f"ID {key!r} names {len(matches)} graphs of {dataset.name} "
                               f"(duplicate IDs: {listed}), none of them in this part; "
                               f"they are in {', '.join(sorted(where)) or 'no part'}")
    if notes is not None:
        notes.append(f"ID {key!r} names {len(matches)} graphs (duplicate IDs): {listed}; "
                     f"drawing {len(inside)}")
    return inside


def skipped_id_reason(dataset, key: str, skipped: dict | None = None) -> str:
    """Why the source rows with ID ``key`` were skipped at loading (``""`` if no skipped
    row has it): read from the source CSV's ID column (``info["source"]``,
    ``info["id_column"]``) and the skip reasons (``info["bad_rows"]``)."""
    info = dataset.info
    if skipped is None:
        skipped = {int(r["row"]): r["reason"] for r in info.get("bad_rows", ())
                   if isinstance(r, dict) and "row" in r}
    if not skipped or not info.get("source") or not info.get("id_column"):
        return ""
    from grprune.data.molecules import match_columns, read_text_csv
    try:
        df = read_text_csv(info["source"], "data file")
        col = match_columns(df.columns, {"id": info["id_column"]}, "data file")["id"]
    except Exception:
        return ""
    rows = [r for r in np.flatnonzero(df[col].to_numpy() == key).tolist() if r in skipped]
    return "; ".join(f"source row {r} was skipped: {skipped[r]}" for r in rows[:5])


def graph_label(dataset, i: int) -> str:
    """How messages and pictures name graph ``i``: ``graph 200 (row 204, ID CMPD-7)``."""
    extra = [f"row {int(dataset.source_rows[i])}"] if int(dataset.source_rows[i]) != i else []
    if dataset.ids is not None:
        extra.append(f"ID {dataset.ids[i]}")
    return f"graph {i}" + (f" ({', '.join(extra)})" if extra else "")


def picture_name(dataset, i: int, fmt: str) -> str:
    """``graph-<index>[_row-<source row>][_id-<ID>].<fmt>``; the ID's characters outside
    letters, digits, ``.``, ``-`` and ``+`` become ``_``."""
    name = f"graph-{i}"
    if int(dataset.source_rows[i]) != i:
        name += f"_row-{int(dataset.source_rows[i])}"
    if dataset.ids is not None:
        name += "_id-" + (re.sub(r"[^A-Za-z0-9.+-]", "_", dataset.ids[i])[:80] or "_")
    return f"{name}.{fmt}"


def check_graph_ids(dataset, part: str, ids: Sequence[int]) -> None:
    """Check that every id is a graph of ``part``.

    Raises
    ------
    GrpruneError
        For an id outside the dataset or outside the part (the message says
        which part the graph is in).
    """
    n = len(dataset)
    members = set(np.asarray(dataset.splits[part]).tolist())
    for i in ids:
        if not 0 <= i < n:
            raise GrpruneError(f"graph {i} does not exist: {dataset.name} has {n} graphs "
                               f"(0-{n - 1})")
        if i not in members:
            where = [p for p, idx in dataset.splits.items() if i in set(np.asarray(idx).tolist())]
            hint = (f"it is in {', '.join(where)}; pass --part {where[0]}" if where
                    else "it is in no split part")
            raise GrpruneError(f"{graph_label(dataset, i)} is not in part {part!r} ({hint})")


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
    notes : list of str
        Why metrics were skipped, pictures that could not be drawn, ...
    """

    out_dir: Path
    files: list[str] = field(default_factory=list)
    graphs: list[int] = field(default_factory=list)
    metrics: dict | None = None
    notes: list[str] = field(default_factory=list)


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
                log: Callable[[str], None] = lambda msg: None) -> ExplainResult:
    """Explain a finished run: ``edges.csv``, pictures and ``metrics.json``.

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

    Returns
    -------
    ExplainResult

    Raises
    ------
    GrpruneError
        Unknown part, graph outside the dataset or the part, unknown source
        row or ID, bad ``top_k``.
    """
    from grprune.record import files as R

    out = _check_options(run, fmt, top_k, out_dir)
    dataset = run.load_dataset()
    part_idx = run.part_indices(dataset, part)
    if graph_ids is None:
        ids = [int(i) for i in part_idx[:DEFAULT_GRAPHS]]
    else:
        notes: list[str] = []
        members = set(np.asarray(dataset.splits[part]).tolist()) if part in dataset.splits \
            else None
        ids = resolve_graph_ids(dataset, graph_ids, members, notes)
        check_graph_ids(dataset, part, ids)
        for note in notes:
            log(note)
    res = ExplainResult(out_dir=out, graphs=ids)
    if run.warmup_note:  # an ERM warm-up model: every bond is kept, every picture full
        res.notes.append(run.warmup_note)
    metrics_wanted = _metrics_wanted(run, dataset, res.notes)
    # the whole part for the metrics, or just the chosen graphs
    todo = list(dict.fromkeys([int(i) for i in part_idx] if metrics_wanted else [])
                | dict.fromkeys(ids))
    scores = _scores(run, dataset, part, todo, log)
    labels = dataset.labels.numpy()
    molecules = _molecules(dataset, ids, scores, res.notes)
    R.atomic_write_bytes(out / "edges.csv", _csv_bytes(
        _edges_table(run, dataset, part, ids, scores, labels, molecules)))
    res.files.append("edges.csv")
    res.files.extend(_draw_pictures(out, dataset, part, ids, scores, labels, molecules, top_k,
                                    fmt, res.notes))
    if metrics_wanted:
        res.metrics = _part_metrics(run, dataset, part, part_idx, scores, labels)
        R.atomic_write_json(out / "metrics.json", res.metrics)
        res.files.append("metrics.json")
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


def _metrics_wanted(run, dataset, notes: list[str]) -> bool:
    """Whether the explanation metrics are defined for this run (else say why in ``notes``)."""
    has_gt = bool(getattr(dataset, "has_edge_gt", False))
    if not has_gt:
        notes.append(f"{dataset.name} has no ground-truth motif edges: explanation "
                     f"metrics skipped (pictures and edges.csv only)")
    elif not run.learned_selector:
        why = ("the run has no learned selector" if run.model.selector is None
               or not getattr(run.model.selector, "learned", False)
               else "the reported model is a warm-up epoch, evaluated without its selector")
        notes.append(f"explanation metrics skipped: {why} (every keep probability is 1)")
    return has_gt and run.learned_selector


def _scores(run, dataset, part: str, todo: list[int], log: Callable[[str], None]) -> dict:
    """Dataset index -> GraphScore for ``todo``: the run's ``edge_probs.npz`` when it
    holds them all, else re-scored with the model (older runs, other parts)."""
    stored = run.stored_scores(todo, num_graphs=len(dataset))
    if stored is not None:
        log(f"reading {len(todo)} graphs of {dataset.name} ({part}) from "
            f"{run.run_dir.name}/edge_probs.npz")
        return stored
    log(f"scoring {len(todo)} graphs of {dataset.name} ({part}) on {run.device}")
    from grprune.determinism import eval_seed
    return dict(zip(todo, run.score([dataset.graphs[i] for i in todo], keys=todo,
                                    seed=eval_seed(int(run.cfg.train.seed or 0), part))))


def _molecules(dataset, ids: list[int], scores: dict, notes: list[str]) -> dict:
    """Graph -> ``(mol, RDKit bond id of each graph bond)`` for molecules, None where the
    SMILES does not match the graph; empty without SMILES."""
    from grprune.draw import parse_molecule, rdkit_bond_ids

    smiles = getattr(dataset, "smiles", None)
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


def _edges_table(run, dataset, part: str, ids: list[int], scores: dict, labels: np.ndarray,
                 molecules: dict):
    """``edges.csv`` as a DataFrame: one row per undirected bond of the chosen graphs."""
    import pandas as pd

    smiles = getattr(dataset, "smiles", None)
    has_gt = bool(getattr(dataset, "has_edge_gt", False))
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
    from grprune.record import files as R
    from grprune.draw import (draw_graph, draw_molecule, highlight_caption, highlighted_bonds,
                              rdkit_drawing_error)

    draw_error = rdkit_drawing_error() if molecules else None
    if draw_error:
        notes.append(f"RDKit cannot draw molecules here ({draw_error}); molecules drawn "
                     f"as plain graphs (node = atom index)")
    files = []
    for i in ids:
        s = scores[i]
        marked = highlighted_bonds(ranking_score(s.bond_logits), s.bond_weight, top_k)
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
        R.atomic_write_bytes(out / name, data)
        files.append(name)
    return files


def _write_manifest(run, dataset, part: str, top_k: int | None, fmt: str,
                    res: ExplainResult) -> None:
    """Remove what an earlier explanation wrote there and this one did not; write ``explain.json``."""
    from grprune.record import files as R

    out = res.out_dir
    old = R.read_json(out / MANIFEST)
    if isinstance(old, dict):
        for name in old.get("files", []):
            if name not in res.files and "/" not in name and name != MANIFEST:
                (out / name).unlink(missing_ok=True)
    R.atomic_write_json(out / MANIFEST, {
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
