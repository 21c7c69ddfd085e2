"""Predictions of a molecule run on new SMILES: class probabilities and kept bonds.

:func:`predict_smiles` is ``grprune predict``. Each SMILES is featurized with
the run's featurizer (:func:`grprune.data.molecules.smiles_to_graph`, OGB's
features, or dgllife's canonical ones for a ``molecule-csv`` run trained with
``data.featurizer=dgllife-canonical``) under RDKit's full sanitization, as
``molecule-csv`` parses its training rows: a molecule training would skip (a valence
error such as ``N#N#N``) is not scored, and its ``reason`` is the one training gives.
The molecules are batched with :func:`grprune.batch.collate` (256 per batch)
and scored with the run's model under the trainer's evaluation rule
(:mod:`grprune.inference`). An empty or unparsable SMILES gets a status, not
an exception.

Outputs are two tables:

* molecules, one row per input: ``row`` (0-based position in the input),
  ``smiles``, ``canonical_smiles``, ``status`` (``ok``, ``empty SMILES``,
  ``unparsable SMILES`` or ``too large``), ``reason`` (why a row is not scored, in
  the words of training's skip reasons; ``""`` when scored), ``prob_1``
  (binary tasks) or ``prob_0 .. prob_{C-1}``, ``pred_label``, ``num_bonds``,
  ``bonds_kept``;
* bonds, one row per RDKit bond of each scored molecule: ``row``, ``bond``
  (RDKit bond index), ``begin_atom``, ``end_atom``, ``begin_symbol``,
  ``end_symbol``, ``bond_type``, ``edge_prob`` (:math:`\\sigma(w)`),
  ``edge_weight`` (evaluation mask), ``kept``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from grprune.data.molecules import MAX_ATOMS, TOO_LARGE, too_large_reason
from grprune.errors import GrpruneError

EMPTY, UNPARSABLE, OK = "empty SMILES", "unparsable SMILES", "ok"
MISMATCH = "RDKit molecule does not match the featurized graph"
#: the per-molecule columns of predict's output, after the input's own
MOLECULE_COLUMNS = ("row", "smiles", "canonical_smiles", "status", "reason")
#: the reason of an empty row, as training words it
MISSING = "missing SMILES"


def smiles_key(text: str) -> int:
    """A molecule's identity for its evaluation noise: the first 8 bytes of the BLAKE2b
    hash of its canonical SMILES, as a non-negative int64 (the same in every process).

    >>> smiles_key("CCO") == smiles_key("CCO"), 0 <= smiles_key("CCO") < 2**63
    (True, True)
    """
    import hashlib
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(),
                          "little") >> 1


def row_problem(smiles: str) -> tuple[str, str] | None:
    """The status and reason of a row that is not parsed at all: an empty SMILES, or one
    over :data:`~grprune.data.molecules.MAX_ATOMS` atoms, wildcards included, or
    :data:`~grprune.data.molecules.MAX_SMILES_BYTES` bytes (decided from its text before
    RDKit sees it, :func:`grprune.data.molecules.too_large_reason`); None for a row to
    parse.

    >>> row_problem("*" * 20000)
    ('too large', 'too large: 20,000 atoms (the limit is 500, data.max_atoms)')

    >>> row_problem(""), row_problem("CCO")
    (('empty SMILES', 'missing SMILES'), None)
    """
    if not smiles:
        return EMPTY, MISSING
    large = too_large_reason(smiles, MAX_ATOMS)
    return (TOO_LARGE, large) if large else None


def read_smiles_csv(path: str | Path, column: str | None = None) -> list[str]:
    """The SMILES column of a CSV file (plain or compressed, read with pandas).

    Parameters
    ----------
    path : str or Path
    column : str, optional
        Column name, matched as everywhere else
        (:func:`grprune.data.csv_tables.match_columns`: exact, else up to case).
        Default ``smiles``.

    Returns
    -------
    list of str
        One per data row; a missing value is ``""``.

    Raises
    ------
    DataError
        If the file is missing or unreadable, or has no such column (the
        message lists the columns).
    """
    from grprune.data.csv_tables import match_columns, read_text_csv
    path = Path(path)
    df = read_text_csv(path, "--csv")
    col = match_columns(df.columns, {"--smiles-column": column or "smiles"}, f"--csv {path}")
    return [str(s) for s in df[col["--smiles-column"]].tolist()]


def with_input_columns(molecules, inputs, keep: Sequence[str] | None = None,
                       smiles_column: str | None = None):
    """The molecule table with the input CSV's own columns in front, row by row.

    The input's SMILES column is not carried: its text is the table's ``smiles``.

    Parameters
    ----------
    molecules : pandas.DataFrame
        :attr:`Prediction.molecules` (its ``row`` is the 0-based data row of the CSV).
    inputs : pandas.DataFrame
        The CSV as read (one row per data row, in order).
    keep : sequence of str, optional
        The input columns to carry (matched as
        :func:`grprune.data.csv_tables.match_columns` does); default every one.
    smiles_column : str, optional
        The input's SMILES column (matched the same way); default ``smiles``.

    Returns
    -------
    pandas.DataFrame
        Input columns first (one whose name the table already uses is prefixed
        ``input_``), then the prediction's columns; one row per input row.

    Raises
    ------
    DataError
        If ``keep`` names columns the CSV lacks (all of them in one message).
    """
    from grprune.data.csv_tables import match_columns
    cols = [str(c) for c in inputs.columns]
    smiles = match_columns(cols, {"--smiles-column": smiles_column or "smiles"},
                           "--csv")["--smiles-column"]
    if keep:
        found = match_columns(cols, {k: k for k in keep}, "--csv (--keep-columns)")
        cols = list(dict.fromkeys(found[k] for k in keep))
    cols = [c for c in cols if c != smiles]
    carried = inputs[cols].reset_index(drop=True)
    carried.columns = [f"input_{c}" if c in molecules.columns else c for c in cols]
    return carried.join(molecules.set_index("row"), how="left").rename_axis(
        "row").reset_index()


@dataclass
class Molecule:
    """One input SMILES, featurized (or not).

    Attributes
    ----------
    row : int
        0-based position in the input.
    smiles : str
    status : str
        ``ok``, ``empty SMILES``, ``unparsable SMILES`` or ``too large``.
    mol : rdkit.Chem.Mol or None
    graph : dgl.DGLGraph or None
    reason : str
        Why the row is not scored, as training words its skip reasons (``""`` if scored).
    canonical : str
        RDKit canonical SMILES (``""`` if it cannot be written).
    """

    row: int
    smiles: str
    status: str
    mol: Any = None
    graph: Any = None
    reason: str = ""
    canonical: str = ""


def featurize(smiles: Sequence[str], to_graph=None) -> list[Molecule]:
    """Featurize SMILES as training does: the run's featurizer under RDKit's full
    sanitization; a row it rejects gets the featurizer's message as its ``reason``.

    Parameters
    ----------
    smiles : sequence of str, length S
    to_graph : callable, optional
        ``to_graph(smiles, lenient=False) -> DGLGraph``, the run's featurizer
        (:func:`molecule_featurizer`); default OGB's.

    Returns
    -------
    list of Molecule, length S
        ``graph`` has ``2 * mol.GetNumBonds()`` directed edges, RDKit bond
        ``k`` as edges ``2k`` and ``2k + 1``.
    """
    from rdkit import Chem, rdBase

    from grprune.data.molecules import smiles_to_graph
    from grprune.draw import parse_molecule
    from grprune.errors import DataError

    to_graph = to_graph or smiles_to_graph
    out = []
    for row, s in enumerate(smiles):
        s = "" if s is None else str(s).strip()
        problem = row_problem(s)
        if problem is not None:
            out.append(Molecule(row, s, problem[0], reason=problem[1]))
            continue
        try:
            graph = to_graph(s)
        except DataError as exc:
            out.append(Molecule(row, s, UNPARSABLE, reason=str(exc)))
            continue
        mol = parse_molecule(s)
        if (mol is None or mol.GetNumAtoms() != graph.num_nodes()
                or 2 * mol.GetNumBonds() != graph.num_edges()):
            out.append(Molecule(row, s, MISMATCH, reason=MISMATCH))
            continue
        canonical = ""
        try:
            with rdBase.BlockLogs():
                canonical = Chem.MolToSmiles(mol)
        except Exception:
            pass
        out.append(Molecule(row, s, OK, mol=mol, graph=graph, canonical=canonical))
    return out


@dataclass
class Prediction:
    """What :func:`predict_smiles` returns.

    Attributes
    ----------
    molecules : pandas.DataFrame
        One row per input (module docstring).
    bonds : pandas.DataFrame
        One row per RDKit bond of each scored molecule.
    items : list of Molecule
    scores : dict of int to GraphScore
        Row -> the model's output for the scored molecules.
    bond_ids : dict of int to np.ndarray
        Row -> RDKit bond index of each graph bond (shape (U,)).
    """

    molecules: Any
    bonds: Any
    items: list[Molecule]
    scores: dict = field(default_factory=dict)
    bond_ids: dict = field(default_factory=dict)

    @property
    def n_ok(self) -> int:
        return sum(m.status == OK for m in self.items)


def molecule_featurizer(run):
    """The featurizer of a molecule run (:attr:`grprune.inference.Run.featurizer`):
    OGB's, or dgllife's canonical features for a ``molecule-csv`` run trained with them.

    Raises
    ------
    GrpruneError
        If the run's features come from no SMILES featurizer (synthetic graphs).
    """
    to_graph = run.featurizer
    if to_graph is None:
        raise GrpruneError(f"predict works on molecule models; this run was trained on "
                           f"{run.dataset_name} (synthetic features)")
    return to_graph


def check_molecule_run(run) -> None:
    """Refuse runs whose model does not read molecule features (:func:`molecule_featurizer`).

    Raises
    ------
    GrpruneError
        If the run was not trained on SMILES featurized by grprune.
    """
    molecule_featurizer(run)


def predict_smiles(run, smiles: Sequence[str], batch_size: int = 256) -> Prediction:
    """Score SMILES with a molecule run's model.

    Parameters
    ----------
    run : grprune.inference.Run
        A run trained on molecules (``feature_kind == "ogb"``).
    smiles : sequence of str, length S
    batch_size : int
        Molecules per batch.

    Returns
    -------
    Prediction
        ``molecules`` has S rows; failed rows have a status and empty values. A
        molecule's scores depend on it alone: its evaluation noise (``eval_mode=sample``)
        is keyed by :func:`smiles_key` of its canonical SMILES and the run's seed
        (:attr:`grprune.inference.Run.prediction_seed`), not by its position or batch.

    Raises
    ------
    GrpruneError
        If the run is not a molecule run.
    """
    import pandas as pd

    from grprune.draw import rdkit_bond_ids

    items = featurize(smiles, molecule_featurizer(run))
    ok = [m for m in items if m.status == OK]
    scored = run.score([m.graph for m in ok], batch_size=batch_size,
                       keys=[smiles_key(m.canonical or m.smiles) for m in ok],
                       seed=run.prediction_seed)
    scores = {m.row: s for m, s in zip(ok, scored)}
    from grprune.predict.columns import has_label, score_columns, score_values
    prob_cols = score_columns(run)
    mol_rows, bond_rows, bond_ids = [], [], {}
    for m in items:
        row: dict[str, Any] = {"row": m.row, "smiles": m.smiles, "canonical_smiles": m.canonical,
                               "status": m.status, "reason": m.reason}
        s = scores.get(m.row)
        if s is None:
            row.update({k: None for k in prob_cols})
            row.update({"pred_label": None, "num_bonds": None, "bonds_kept": None})
            mol_rows.append(row)
            continue
        row.update(zip(prob_cols, score_values(run, s.prob[None])[0].tolist()))
        kept = s.bond_weight > 0.5
        row.update({"pred_label": s.pred if has_label(run) else None, "num_bonds": s.num_bonds,
                    "bonds_kept": int(kept.sum())})
        mol_rows.append(row)
        ids = rdkit_bond_ids(m.mol, s.bond_src, s.bond_dst, s.num_nodes)
        bond_ids[m.row] = ids
        for k in np.argsort(ids, kind="stable"):
            b = m.mol.GetBondWithIdx(int(ids[k]))
            a1, a2 = b.GetBeginAtom(), b.GetEndAtom()
            bond_rows.append({
                "row": m.row, "bond": int(ids[k]), "begin_atom": a1.GetIdx(),
                "end_atom": a2.GetIdx(), "begin_symbol": a1.GetSymbol(),
                "end_symbol": a2.GetSymbol(), "bond_type": str(b.GetBondType()),
                "edge_prob": float(s.bond_prob[k]), "edge_weight": float(s.bond_weight[k]),
                "kept": int(kept[k])})
    molecules = pd.DataFrame(mol_rows, columns=[*MOLECULE_COLUMNS, *prob_cols, "pred_label",
                                                "num_bonds", "bonds_kept"])
    for col in ("pred_label", "num_bonds", "bonds_kept"):
        molecules[col] = molecules[col].astype("Int64")
    bonds = pd.DataFrame(bond_rows, columns=["row", "bond", "begin_atom", "end_atom",
                                             "begin_symbol", "end_symbol", "bond_type",
                                             "edge_prob", "edge_weight", "kept"])
    return Prediction(molecules=molecules, bonds=bonds, items=items, scores=scores,
                      bond_ids=bond_ids)


def bonds_path(out: str | Path) -> Path:
    """``preds.csv`` -> ``preds.bonds.csv`` (next to it)."""
    out = Path(out)
    return out.with_name(f"{out.stem}.bonds.csv")


def draw_prediction(pred: Prediction, out_dir: str | Path, fmt: str = "png",
                    top_k: int | None = None, ids: Sequence[str] | None = None) -> list[Path]:
    """One picture per scored molecule, ``mol-<row>.<fmt>``, as ``grprune explain`` draws.

    With ``ids`` (one per input row, e.g. the CSV's compound IDs) the names are
    ``mol-<row>_id-<ID>.<fmt>`` (characters outside letters, digits, ``.``,
    ``-`` and ``+`` become ``_``) and the legend names the ID.

    Where RDKit's drawing code cannot load (:func:`grprune.draw.rdkit_drawing_error`)
    molecules are drawn as plain graphs.

    Returns
    -------
    list of Path
        The files written.
    """
    from grprune.record.files import atomic_write_bytes
    from grprune.draw import draw_graph, draw_molecule, highlight_caption, rdkit_drawing_error
    from grprune.explain_metrics import marked_bonds

    out_dir = Path(out_dir)
    written = []
    plain = rdkit_drawing_error() is not None  # RDKit cannot draw here: plain graphs
    caption = highlight_caption(top_k, molecule=not plain)
    for m in pred.items:
        s = pred.scores.get(m.row)
        if s is None:
            continue
        marked = marked_bonds(s.bond_logits, s.bond_weight, top_k)
        p = (f"p(y=1) = {s.prob[1]:.3f}" if len(s.prob) == 2
             else f"predicted {s.pred} (p = {s.prob[s.pred]:.3f})")
        who = f"row {m.row}" + (f", ID {ids[m.row]}" if ids is not None else "")
        legend = (f"{who}: {p} - {int(marked.sum())}/{s.num_bonds} bonds marked\n"
                  f"{caption}")
        if plain:
            data = draw_graph(s.num_nodes, s.bond_src, s.bond_dst, s.bond_prob, marked,
                              title=legend.splitlines()[0], caption=caption, top_k=top_k,
                              fmt=fmt)
        else:
            data = draw_molecule(m.mol, pred.bond_ids[m.row], s.bond_prob, marked,
                                 legend=legend, fmt=fmt)
        tag = ("" if ids is None else
               "_id-" + (re.sub(r"[^A-Za-z0-9.+-]", "_", str(ids[m.row]))[:80] or "_"))
        path = out_dir / f"mol-{m.row}{tag}.{fmt}"
        atomic_write_bytes(path, data)
        written.append(path)
    return written
