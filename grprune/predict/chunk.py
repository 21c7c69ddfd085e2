"""One chunk of a library for ``grprune predict --csv`` (:mod:`grprune.predict.stream`): featurize in a
worker, batch the flat arrays, score, and turn the scores into output rows, vectorized.

The statuses and reasons, the atom limit and the noise key are :mod:`grprune.predict.memory`'s
(:func:`~grprune.predict.memory.row_problem`, :data:`~grprune.data.molecules.MAX_ATOMS`,
:func:`~grprune.predict.memory.smiles_key`), so a molecule is parsed, skipped and scored the same
here as in :func:`grprune.predict.memory.predict_smiles` and in training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from grprune.data.molecules import MAX_ATOMS
from grprune.predict.memory import (MISMATCH, MOLECULE_COLUMNS, OK, UNPARSABLE,
                             row_problem, smiles_key)


@dataclass
class ChunkGraphs:
    """The featurized molecules of ``n`` input rows (:func:`featurize_rows`).

    Attributes
    ----------
    status, reason, canonical : list of str, length n
        As the molecule table's columns.
    ok : np.ndarray of bool, shape (n,)
        Rows with a graph (``status == "ok"``).
    keys : np.ndarray of int64, shape (G,)
        :func:`smiles_key` of each graph's canonical SMILES (G = ``ok.sum()``).
    flat : grprune.data.featurize.FlatGraphs
        The G graphs in row order (OGB features; RDKit bond ``k`` = edges ``2k, 2k + 1``).
    """

    status: list
    reason: list
    canonical: list
    ok: np.ndarray
    keys: np.ndarray
    flat: Any

    @classmethod
    def concat(cls, parts: list["ChunkGraphs"]) -> "ChunkGraphs":
        """The rows of ``parts`` one after the other."""
        from grprune.data.featurize import FlatGraphs
        return cls([s for p in parts for s in p.status], [s for p in parts for s in p.reason],
                   [s for p in parts for s in p.canonical],
                   np.concatenate([p.ok for p in parts]) if parts else np.zeros(0, bool),
                   np.concatenate([p.keys for p in parts]) if parts else np.zeros(0, np.int64),
                   FlatGraphs.concat([p.flat for p in parts]))


def featurize_rows(smiles: Sequence[str]) -> ChunkGraphs:
    """OGB graphs of SMILES rows for predict (a worker task of :mod:`grprune.predict.stream`).

    The rows are parsed as training parses them (:func:`grprune.data.featurize.featurize_chunk`,
    the featurizer of ``molecule-csv``: OGB's ``smiles2graph`` under RDKit's full
    sanitization), so a molecule training would skip is not scored here either and gets
    the same reason (:func:`grprune.predict.memory.row_problem`). The scored ones are
    canonicalized for their :func:`smiles_key`.

    Parameters
    ----------
    smiles : sequence of str, length n

    Returns
    -------
    ChunkGraphs
    """
    from rdkit import Chem, rdBase

    from grprune.data.featurize import featurize_chunk
    from grprune.draw import parse_molecule

    text = ["" if s is None else str(s).strip() for s in smiles]
    n = len(text)
    status, reason, canonical = [OK] * n, [""] * n, [""] * n
    for p, s in enumerate(text):
        problem = row_problem(s)
        if problem is not None:
            status[p], reason[p] = problem
    cand = [p for p in range(n) if status[p] == OK]
    flat, failed = featurize_chunk([text[p] for p in cand], max_atoms=MAX_ATOMS)
    for k, why in failed.items():
        status[cand[k]], reason[cand[k]] = UNPARSABLE, why
    rows = [cand[k] for k in range(len(cand)) if k not in failed]
    keep = np.ones(len(rows), dtype=bool)
    with rdBase.BlockLogs():
        for g, p in enumerate(rows):
            mol = parse_molecule(text[p])
            if (mol is None or mol.GetNumAtoms() != int(flat.num_nodes[g])
                    or 2 * mol.GetNumBonds() != int(flat.num_edges[g])):
                status[p], reason[p], keep[g] = MISMATCH, MISMATCH, False
                continue
            try:
                canonical[p] = Chem.MolToSmiles(mol)
            except Exception:
                canonical[p] = ""
    if not keep.all():
        flat = flat.take(np.flatnonzero(keep))
    ok = np.asarray([s == OK for s in status], dtype=bool)
    keys = np.asarray([smiles_key(canonical[p] or text[p]) for p in np.flatnonzero(ok)],
                      dtype=np.int64)
    return ChunkGraphs(status, reason, canonical, ok, keys, flat)


def chunk_batches(flat, keys: np.ndarray, batch_size: int):
    """GraphBatches of ``batch_size`` consecutive graphs of a FlatGraphs, ``index`` = ``keys``.

    Yields
    ------
    GraphBatch
        Equal to :func:`grprune.batch.collate` of the same graphs (int64 features).
    """
    import torch

    from grprune.batch import GraphBatch
    from grprune.ops import bond_ids
    node_ptr = np.concatenate([[0], np.cumsum(flat.num_nodes)])
    edge_ptr = np.concatenate([[0], np.cumsum(flat.num_edges)])
    for lo in range(0, len(flat), batch_size):
        hi = min(len(flat), lo + batch_size)
        nn = torch.from_numpy(flat.num_nodes[lo:hi].astype(np.int64))
        ne = torch.from_numpy(flat.num_edges[lo:hi].astype(np.int64))
        b = torch.arange(hi - lo)
        node_graph = torch.repeat_interleave(b, nn)
        edge_graph = torch.repeat_interleave(b, ne)
        e0, e1 = int(edge_ptr[lo]), int(edge_ptr[hi])
        ei = torch.from_numpy(flat.edge_index[:, e0:e1].astype(np.int64))
        shift = torch.from_numpy(node_ptr[lo:hi] - node_ptr[lo])[edge_graph]
        src, dst = ei[0] + shift, ei[1] + shift
        bond = bond_ids(src, dst, int(node_ptr[hi] - node_ptr[lo]))
        yield GraphBatch(
            src=src, dst=dst,
            node_feat=torch.from_numpy(flat.node_feat[node_ptr[lo]:node_ptr[hi]]).long(),
            edge_feat=torch.from_numpy(flat.edge_feat[e0:e1]).long(),
            node_graph=node_graph, edge_graph=edge_graph, num_nodes=nn, num_edges=ne,
            bond=bond, y=torch.zeros(hi - lo, dtype=torch.long),
            env=torch.zeros(hi - lo, dtype=torch.long),
            index=torch.from_numpy(keys[lo:hi].astype(np.int64)), edge_gt=None,
            bonds=int(bond.max()) + 1 if bond.numel() else 0)


def score_chunk(run, graphs: ChunkGraphs, batch_size: int, seed: int):
    """The run's evaluation of a chunk's graphs (:func:`grprune.evaluation.evaluate_batches`),
    each graph's noise keyed by its :func:`smiles_key`.

    Returns
    -------
    grprune.evaluation.EdgeScores
        One entry per graph of ``graphs.flat``, in order.
    """
    from grprune.evaluation import evaluate_batches
    ev = evaluate_batches(run.model, chunk_batches(graphs.flat, graphs.keys, batch_size),
                          num_classes=run.num_classes, use_selector=run.use_selector,
                          diagnostics=False, collect_edges=True, seed=seed)
    return ev.edges


def input_name(column: str) -> str:
    """The output name of an input column: ``input_<name>`` where predict's own columns
    use the name.

    >>> input_name("ID"), input_name("status"), input_name("prob_1")
    ('ID', 'input_status', 'input_prob_1')
    """
    ours = (column in MOLECULE_COLUMNS or column.startswith(("prob_", "pred_"))
            or column in ("pred_label", "num_bonds", "bonds_kept"))
    return f"input_{column}" if ours else column


def chunk_table(run, df, keep: Sequence[str], rows: np.ndarray, smiles: Sequence[str],
                graphs: ChunkGraphs, scores):
    """The output rows of one input chunk: its ``keep`` columns, then the prediction's.

    ``bonds_kept`` counts bonds whose first directed edge (``2k``) the evaluation mask keeps
    (> 0.5), as :attr:`grprune.evaluation.GraphScore.bond_weight` does.
    """
    import pandas as pd

    from grprune.predict.columns import has_label, score_columns, score_values
    n, names = len(df), score_columns(run)
    ok = graphs.ok
    out = df[list(keep)].reset_index(drop=True)
    out.columns = [input_name(k) for k in keep]
    out.insert(0, "row", rows)
    out["smiles"] = ["" if x is None else str(x).strip() for x in smiles]
    cols: dict[str, Any] = {"canonical_smiles": graphs.canonical, "status": graphs.status,
                            "reason": graphs.reason}
    prob = np.full((n, len(names)), np.nan, dtype=np.float32)
    label = pd.array([pd.NA] * n, dtype="Int64")
    num_bonds = pd.array([pd.NA] * n, dtype="Int64")
    kept = pd.array([pd.NA] * n, dtype="Int64")
    if scores is not None and len(scores):
        prob[ok] = score_values(run, scores.prob)
        if has_label(run):
            label[ok] = scores.prob.argmax(1)
        ne = np.diff(scores.edge_ptr)
        num_bonds[ok] = ne // 2
        first = scores.edge_weight[0::2] > 0.5  # each graph's edges 2k: bond k
        graph_of = np.repeat(np.arange(len(ne)), ne // 2)
        kept[ok] = np.bincount(graph_of, weights=first, minlength=len(ne)).astype(np.int64)
    for k, v in cols.items():
        out[k] = v
    for j, name in enumerate(names):
        out[name] = prob[:, j]
    out["pred_label"], out["num_bonds"], out["bonds_kept"] = label, num_bonds, kept
    return out


def bond_table(smiles: Sequence[str], rows: np.ndarray, graphs: ChunkGraphs, scores,
               ids: Sequence[str] | None = None):
    """The bond rows of one input chunk: one per RDKit bond of each scored molecule, with
    the molecule's ``row`` and ``id`` (``""`` without IDs)."""
    import pandas as pd

    from grprune.draw import parse_molecule
    recs: list[tuple] = []
    for g, p in enumerate(np.flatnonzero(graphs.ok).tolist()):
        mol = parse_molecule(str(smiles[p]).strip())
        e0 = int(scores.edge_ptr[g])
        for b in mol.GetBonds():
            k = b.GetIdx()
            a1, a2 = b.GetBeginAtom(), b.GetEndAtom()
            w = float(scores.edge_weight[e0 + 2 * k])
            recs.append((int(rows[p]), "" if ids is None else ids[p], k, a1.GetIdx(),
                         a2.GetIdx(), a1.GetSymbol(), a2.GetSymbol(), str(b.GetBondType()),
                         float(scores.edge_prob[e0 + 2 * k]), w, int(w > 0.5)))
    return pd.DataFrame(recs, columns=["row", "id", "bond", "begin_atom", "end_atom",
                                       "begin_symbol", "end_symbol", "bond_type", "edge_prob",
                                       "edge_weight", "kept"])
