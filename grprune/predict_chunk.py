"""One chunk of a library for ``grprune predict --csv`` (:mod:`grprune.screen`): featurize in a
worker, batch the flat arrays, score, and turn the scores into output rows, vectorized.

The statuses, the heavy-atom limit and the noise key are :mod:`grprune.predict`'s
(:data:`~grprune.predict.TOO_LARGE`, :data:`~grprune.predict.MAX_HEAVY_ATOMS`,
:func:`~grprune.predict.smiles_key`), so a molecule scores the same here as in
:func:`grprune.predict.predict_smiles`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from grprune.predict import EMPTY, MISMATCH, MOLECULE_COLUMNS, OK, UNPARSABLE, smiles_key, too_large
from grprune.data.molecules import TOO_LARGE


@dataclass
class ChunkGraphs:
    """The featurized molecules of ``n`` input rows (:func:`featurize_rows`).

    Attributes
    ----------
    status, parse, canonical : list of str, length n
        As the molecule table's columns.
    ok : np.ndarray of bool, shape (n,)
        Rows with a graph (``status == "ok"``).
    keys : np.ndarray of int64, shape (G,)
        :func:`smiles_key` of each graph's canonical SMILES (G = ``ok.sum()``).
    flat : grprune.data.featurize.FlatGraphs
        The G graphs in row order (OGB features; RDKit bond ``k`` = edges ``2k, 2k + 1``).
    """

    status: list
    parse: list
    canonical: list
    ok: np.ndarray
    keys: np.ndarray
    flat: Any

    @classmethod
    def concat(cls, parts: list["ChunkGraphs"]) -> "ChunkGraphs":
        """The rows of ``parts`` one after the other."""
        from grprune.data.featurize import FlatGraphs
        return cls([s for p in parts for s in p.status], [s for p in parts for s in p.parse],
                   [s for p in parts for s in p.canonical],
                   np.concatenate([p.ok for p in parts]) if parts else np.zeros(0, bool),
                   np.concatenate([p.keys for p in parts]) if parts else np.zeros(0, np.int64),
                   FlatGraphs.concat([p.flat for p in parts]))


def _flat_of_graph(graph):
    """A DGLGraph with OGB features as a one-graph FlatGraphs."""
    from grprune.data.featurize import OGB_FEAT_DTYPE, FlatGraphs
    src, dst = graph.edges()
    return FlatGraphs(graph.ndata["feat"].numpy().astype(OGB_FEAT_DTYPE),
                      np.stack([src.numpy(), dst.numpy()]).astype(np.int32),
                      graph.edata["feat"].numpy().astype(OGB_FEAT_DTYPE),
                      np.asarray([graph.num_nodes()], np.int64),
                      np.asarray([graph.num_edges()], np.int64))


def featurize_rows(smiles: Sequence[str]) -> ChunkGraphs:
    """OGB graphs of SMILES rows for predict (a worker task of :mod:`grprune.screen`).

    Empty rows, rows over :data:`MAX_HEAVY_ATOMS` heavy atoms (:func:`too_large`, checked
    before anything else touches the molecule) and unparsable rows get a status; the others
    are featurized by :func:`grprune.data.featurize.featurize_chunk` (OGB's
    ``smiles2graph``), those it rejects once more without RDKit's valence check
    (``parse = "lenient"``), and canonicalized for their :func:`smiles_key`.

    Parameters
    ----------
    smiles : sequence of str, length n

    Returns
    -------
    ChunkGraphs
    """
    from rdkit import Chem, rdBase

    from grprune.data.featurize import FlatGraphs, featurize_chunk
    from grprune.data.molecules import smiles_to_graph
    from grprune.draw import parse_molecule

    text = ["" if s is None else str(s).strip() for s in smiles]
    n = len(text)
    status, parse, canonical = [OK] * n, ["strict"] * n, [""] * n
    for p, s in enumerate(text):
        if not s:
            status[p], parse[p] = EMPTY, ""
        elif too_large(s):
            status[p], parse[p] = TOO_LARGE, ""
    cand = [p for p in range(n) if status[p] == OK]
    flat, failed = featurize_chunk([text[p] for p in cand])
    pieces, order = [flat], [cand[k] for k in range(len(cand)) if k not in failed]
    for k in sorted(failed):
        p = cand[k]
        try:
            pieces.append(_flat_of_graph(smiles_to_graph(text[p], lenient=True)))
            parse[p] = "lenient"
            order.append(p)
        except Exception:
            status[p], parse[p] = UNPARSABLE, ""
    flat = FlatGraphs.concat(pieces)
    rank = np.argsort(np.asarray(order, dtype=np.int64), kind="stable")
    if len(failed):
        flat = flat.take(rank)
    rows = sorted(order)
    keep = np.ones(len(rows), dtype=bool)
    with rdBase.BlockLogs():
        for g, p in enumerate(rows):
            mol = parse_molecule(text[p])
            if (mol is None or mol.GetNumAtoms() != int(flat.num_nodes[g])
                    or 2 * mol.GetNumBonds() != int(flat.num_edges[g])):
                status[p], parse[p], keep[g] = MISMATCH, "", False
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
    return ChunkGraphs(status, parse, canonical, ok, keys, flat)


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


def chunk_table(run, df, keep: Sequence[str], rows: np.ndarray, smiles: Sequence[str],
                graphs: ChunkGraphs, scores):
    """The output rows of one input chunk: its ``keep`` columns, then the prediction's.

    ``bonds_kept`` counts bonds whose first directed edge (``2k``) the evaluation mask keeps
    (> 0.5), as :attr:`grprune.evaluation.GraphScore.bond_weight` does.
    """
    import pandas as pd
    n, c = len(df), run.num_classes
    ok = graphs.ok
    out = df[list(keep)].reset_index(drop=True)
    out.columns = [f"input_{k}" if k in MOLECULE_COLUMNS or k.startswith("prob_")
                   or k in ("pred_label", "num_bonds", "bonds_kept") else k for k in keep]
    out.insert(0, "row", rows)
    out["smiles"] = ["" if x is None else str(x).strip() for x in smiles]
    cols: dict[str, Any] = {"canonical_smiles": graphs.canonical, "status": graphs.status,
                            "parse": graphs.parse}
    prob = np.full((n, c), np.nan, dtype=np.float32)
    label = pd.array([pd.NA] * n, dtype="Int64")
    num_bonds = pd.array([pd.NA] * n, dtype="Int64")
    kept = pd.array([pd.NA] * n, dtype="Int64")
    if scores is not None and len(scores):
        prob[ok] = scores.prob
        label[ok] = scores.prob.argmax(1)
        ne = np.diff(scores.edge_ptr)
        num_bonds[ok] = ne // 2
        first = scores.edge_weight[0::2] > 0.5  # each graph's edges 2k: bond k
        graph_of = np.repeat(np.arange(len(ne)), ne // 2)
        kept[ok] = np.bincount(graph_of, weights=first, minlength=len(ne)).astype(np.int64)
    for k, v in cols.items():
        out[k] = v
    if c == 2:
        out["prob_1"] = prob[:, 1]
    else:
        for j in range(c):
            out[f"prob_{j}"] = prob[:, j]
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
