"""Which graphs ``grprune explain`` draws: ``--graphs`` parsed, resolved and checked, and how
messages and picture files name a graph.

``--graphs`` names graphs by dataset index (``3,17,40-45``), by source row (``row:204``)
or by ID (``id:CMPD-7``, ``data.id_column``); :func:`parse_graph_ids` reads the text,
:func:`resolve_graph_ids` turns rows and IDs into dataset indices and
:func:`check_graph_ids` checks that each is in the part (:func:`chosen_graphs`: all
three). :mod:`grprune.explain` re-exports these names.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np

from grprune.errors import GrpruneError, did_you_mean


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
    from grprune.data.csv_tables import match_columns, read_text_csv
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


def chosen_graphs(dataset, part: str, graph_ids: Sequence[int | str],
                  log: Callable[[str], None]) -> list[int]:
    """The dataset indices ``--graphs`` names (:func:`resolve_graph_ids`), each checked to be
    in ``part`` (:func:`check_graph_ids`); ``log`` receives the notes on duplicate IDs."""
    notes: list[str] = []
    members = set(np.asarray(dataset.splits[part]).tolist()) if part in dataset.splits \
        else None
    ids = resolve_graph_ids(dataset, graph_ids, members, notes)
    check_graph_ids(dataset, part, ids)
    for note in notes:
        log(note)
    return ids
