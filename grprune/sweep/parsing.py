"""Parsing of sweep option values: comma lists, seed ranges, regularizer sets, ``-H`` keys.

The same rules serve the command line (``--data a,b``, ``--seeds 1-4``, repeated
``--reg``, ``-H key=v1,v2``) and YAML sweep specs (:func:`grprune.sweep.grid.load_spec`).

Example
-------
>>> parse_seeds("1-3,7")
[1, 2, 3, 7]
>>> parse_reg(["size,eps-align;size", "none"])
['size,eps-align', 'size', 'none']
>>> parse_hparams(["reg.size.eta=0.75,0.85"])
{'reg.size.eta': ['0.75', '0.85']}
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from grprune.errors import GrpruneError
from grprune.messages import short_repr

#: the most seeds one sweep takes (``--seeds 0-100000`` is refused, not expanded)
MAX_SEEDS = 10_000

_COMMA = re.compile(r"(?<!\\),")


def split_list(text: str, what: str) -> list[str]:
    """Items of a comma list; ``\\,`` is a literal comma.

    Parameters
    ----------
    text : str
        The option's value, e.g. ``"ogbg-molbbbp,good-motif"``.
    what : str
        The option, for messages (``"--data"``).

    Returns
    -------
    list of str
        The stripped items, in order.

    Raises
    ------
    GrpruneError
        If an item is empty (``"a,,b"``, ``""``).
    """
    items = [p.strip().replace("\\,", ",") for p in _COMMA.split(str(text))]
    if not all(items):
        raise GrpruneError(f"bad {what} value {short_repr(text)}: empty item in the comma "
                           f"list")
    return items


def parse_seeds(text: str | int | Iterable) -> list[int]:
    """Seeds from ``"1-4"`` (inclusive range), ``"0,2,5"``, a mix, an int or a list.

    Returns
    -------
    list of int
        The seeds in the given order, without repeats.

    Raises
    ------
    GrpruneError
        On anything that is not an integer or a range ``a-b`` with ``a <= b``.

    Examples
    --------
    >>> parse_seeds("0-2,5"), parse_seeds(3), parse_seeds([1, "4-5"])
    ([0, 1, 2, 5], [3], [1, 4, 5])
    """
    if isinstance(text, bool):
        raise GrpruneError(f"bad seeds value {short_repr(text)}: expected integers or ranges "
                           f"like 1-4")
    if isinstance(text, int):
        return [text]
    items: list[str] = []
    if isinstance(text, str):
        items = split_list(text, "--seeds")
    else:
        for item in text:
            items += parse_seeds_items(item)
    out: dict[int, None] = {}  # ordered, without repeats
    for item in items:
        m = re.fullmatch(r"\s*(\d{1,19})\s*-\s*(\d{1,19})\s*", item)
        try:
            seeds = (range(int(m.group(1)), int(m.group(2)) + 1) if m
                     else range(int(item), int(item) + 1) if len(item) <= 40 else range(0))
        except ValueError:
            seeds = range(0)
        if not seeds:
            raise GrpruneError(f"bad seeds value {short_repr(item)}: expected integers and "
                               f"ranges like --seeds 1-4 or --seeds 0,2,5")
        if len(out) + len(seeds) > MAX_SEEDS:  # counted before any list is built
            raise GrpruneError(f"--seeds {short_repr(str(text))} asks for more than "
                               f"{MAX_SEEDS:,} seeds; a sweep takes at most {MAX_SEEDS:,} "
                               f"(split it into several sweeps)")
        out.update(dict.fromkeys(seeds))
    return list(out)


def parse_seeds_items(item: Any) -> list[str]:
    """One element of a YAML seeds list as comma items (``3`` -> ``["3"]``)."""
    if isinstance(item, bool) or not isinstance(item, (int, str)):
        raise GrpruneError(f"bad seeds value {short_repr(item)}: expected integers or ranges "
                           f"like 1-4")
    return split_list(str(item), "seeds")


def parse_ints(text: str | int | Iterable, what: str) -> list[int]:
    """Integers from a comma list, an int or a list (``--epochs 5,10``).

    Raises
    ------
    GrpruneError
        If an item is not an integer.
    """
    if isinstance(text, (str, int)) and not isinstance(text, bool):
        items = split_list(str(text), what)
    else:
        items = [str(v) for v in text]  # type: ignore[union-attr]  # a bool was refused above
    try:
        return [int(v) for v in items]
    except ValueError:
        raise GrpruneError(f"bad {what} value {short_repr(text)}: expected integers, "
                           f"e.g. {what} 5,10") from None


def parse_reg(values: Iterable[str]) -> list[str]:
    """Regularizer sets from repeated ``--reg`` values; ``;`` also separates sets.

    Each set stays a comma list (``"size,eps-align"`` is *one* set, PrunE), so
    ``--reg size,eps-align --reg none`` and ``--reg "size,eps-align;none"`` both give
    the two alternatives ``["size,eps-align", "none"]``.

    Raises
    ------
    GrpruneError
        If a set is empty.
    """
    out: list[str] = []
    for value in values:
        for item in str(value).split(";"):
            item = item.strip()
            if not item:
                raise GrpruneError(f"bad --reg value {short_repr(value)}: empty regularizer set "
                                   f"(write none for plain ERM)")
            out.append(item)
    return out


def parse_hparams(items: Iterable[str]) -> dict[str, list[str]]:
    """``-H key=v1,v2`` strings -> ``{key: [v1, v2]}``; a repeated key adds values.

    Raises
    ------
    GrpruneError
        On a malformed ``key=value`` or an unknown section (see
        :func:`grprune.record.settings.parse_override`) or an empty value.
    """
    from grprune.record.settings import parse_override
    out: dict[str, list[str]] = {}
    for item in items:
        key, value = parse_override(item)
        values = out.setdefault(key, [])
        values += [v for v in split_list(value, f"-H {key}") if v not in values]
    return out
