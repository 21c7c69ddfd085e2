"""The table ``grprune predict`` prints: the first rows of a prediction as plain text cells
(:class:`PrintedTable`, :func:`printed_table`); the command escapes them and prints."""

from __future__ import annotations

from dataclasses import dataclass, field

from grprune.predict.columns import shown_score_columns
from grprune.predict.memory import OK


@dataclass
class PrintedTable:
    """The first rows of a prediction as the command prints them: plain text cells (the
    command escapes them), and the line under the table (None when every row is shown)."""

    title: str
    columns: list = field(default_factory=list)  # (name, "left" | "right")
    rows: list = field(default_factory=list)
    more: str | None = None


def _short(text: str, width: int = 120) -> str:
    """User text for a printed table, cut to ``width`` characters (a 20,000-atom chain
    would fill the screen)."""
    return text if len(text) <= width else text[:width - 1] + "…"


def _label(value, ok: bool) -> str:
    """The label cell: the predicted class; ``-`` where there is none (a molecule not
    scored; a regression or multi-task run, whose ``pred_label`` is empty)."""
    import pandas as pd
    return "-" if not ok or value is None or pd.isna(value) or str(value) == "" else str(value)


def _kept(r: dict) -> str:
    """The kept-bonds cell: ``kept/bonds``, or the bonds alone (an ensemble keeps none)."""
    return (f"{r['bonds_kept']}/{r['num_bonds']}" if "bonds_kept" in r
            else f"{r['num_bonds']} bonds")


def printed_table(title: str, df, with_ids: bool, ids: list[str] | None) -> PrintedTable:
    """The :class:`PrintedTable` of a prediction's first rows ``df`` (``ids``: theirs)."""
    prob_cols = [*shown_score_columns([str(c) for c in df.columns]),
                 *(c for c in ("score_mean", "score_sd") if c in df.columns)]
    table = PrintedTable(_short(title, 400))
    for col in ("row", *(("id",) if with_ids else ()), "canonical SMILES", "status", *prob_cols,
                "label", "kept bonds"):
        table.columns.append((col, "left" if col in ("id", "canonical SMILES", "status")
                              else "right"))
    for k, r in enumerate(df.to_dict("records")):
        ok = r["status"] == OK
        table.rows.append([str(r["row"]), *((_short(ids[k]),) if ids is not None else ()),
                           _short(r["canonical_smiles"] or r["smiles"]),
                           _short(str(r.get("reason") or r["status"]), 200),
                           *((f"{r[c]:.4f}" if ok else "-") for c in prob_cols),
                           _label(r["pred_label"], ok), _kept(r) if ok else "-"])
    return table
