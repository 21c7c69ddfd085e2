"""Markdown for the accuracy tables: table rows, ``mean ± std`` cells and README blocks.

The one renderer of ``table1.py`` (``table1.md`` and the top README's results table) and
``official/table.py`` (``official/README.md``'s comparison table). Standard library only, so
that any venv can import it: both scripts ``from benchmarks.accuracy.mdtable import ...``.
"""

from __future__ import annotations

import math
from typing import Iterable

#: ``pandas.read_csv(path, dtype=TEXT_COLUMNS)`` for every committed run table: a commit
#: such as ``02332e6`` or a config hash of digits is text, not the number it parses as
TEXT_COLUMNS = {"commit": str, "config_hash": str}


def row(cells: Iterable[object]) -> str:
    """One Markdown table row, ``| a | b |``; an empty cell is ``| |``.

    Examples
    --------
    >>> row(["GOOD-Motif", 91.48, ""])
    '| GOOD-Motif | 91.48 | |'
    """
    return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"


def header(names: Iterable[str]) -> list[str]:
    """A table's first two lines: the column names and ``|---|...|``.

    Examples
    --------
    >>> header(["column", "n"])
    ['| column | n |', '|---|---|']
    """
    names = list(names)
    return [row(names), "|" + "---|" * len(names)]


def mean_std(mean: float, std: float, n: int | None = None, *,
             n_below: float = math.inf) -> str:
    """A cell: ``mean ± std`` (two decimals) over ``n`` seeds.

    ``(n=N)`` follows it when ``n < n_below`` (always, by default); one seed has no std,
    ``mean (n=1)``; no seed is ``not run``; ``n=None`` gives no count.

    Examples
    --------
    >>> mean_std(63.0, 2.58, 4), mean_std(63.0, 2.58, 4, n_below=4), mean_std(77.0, 0.0, 1)
    ('63.00 ± 2.58 (n=4)', '63.00 ± 2.58', '77.00 (n=1)')
    >>> mean_std(91.48, 0.4), mean_std(math.nan, math.nan, 0)
    ('91.48 ± 0.40', 'not run')
    """
    if n == 0:
        return "not run"
    if n is not None and n < 2:
        return f"{mean:.2f} (n={n})"
    text = f"{mean:.2f} ± {std:.2f}"
    return text if n is None or n >= n_below else f"{text} (n={n})"


def splice(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with what stands between the marker lines ``begin`` and ``end`` replaced by
    ``block`` (the markers stay; ``block`` follows ``begin`` on a new line).

    Raises
    ------
    ValueError
        If either marker is missing.

    Examples
    --------
    >>> splice("a\\n<!-- b -->\\nold\\n<!-- /b -->\\n", "<!-- b -->", "<!-- /b -->", "new\\n")
    'a\\n<!-- b -->\\nnew\\n<!-- /b -->\\n'
    """
    if begin not in text or end not in text:
        raise ValueError(f"no '{begin}' ... '{end}' block")
    head, rest = text.split(begin, 1)
    return head + begin + "\n" + block + rest[rest.index(end):]
