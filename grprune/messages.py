"""Values shown in messages: a name or value cut to a length a message can hold.

Every message that quotes what a user gave (a value, a key, a column, a path) shows it
through :func:`short_text` (unquoted) or :func:`short_repr` (quoted), so that a long or
deeply nested input never floods a terminal or a log: at most :data:`MAX_SHOWN`
characters, its head and tail kept and its length said.
"""

from __future__ import annotations

from typing import Any

#: the most characters of a given value that a message shows (:func:`short_repr`)
MAX_SHOWN = 200


def short_text(text: Any, limit: int = MAX_SHOWN) -> str:
    """``str(text)`` for messages, unquoted: itself when at most ``limit`` characters,
    else its head and tail and how long it is (at most ``limit`` characters in all).

    For a name or value a message shows without quotes (a column, a path); quoted
    values go through :func:`short_repr`.

    Examples
    --------
    >>> short_text("smiles")
    'smiles'
    >>> short_text("k" * 100_000, 40)
    'kkkkkk...kkkkkk (100,000 characters)'
    """
    text = str(text)
    if len(text) <= limit:
        return text
    tail = f" ({len(text):,} characters)"
    half = max((limit - len(tail) - 3) // 2, 1)
    return f"{text[:half]}...{text[-half:]}{tail}"


def short_repr(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` for messages, at most ``limit`` characters, without expanding it.

    Nested containers are walked only a few levels and items deep (:mod:`reprlib`), so a
    YAML alias bomb (a 1 KB file that names a billion-element list) costs microseconds;
    a long string keeps its head and tail and says how long it is.

    Examples
    --------
    >>> short_repr("C" * 20000)[:24], len(short_repr("C" * 20000)) <= 200
    ("'CCCCCCCCCCCCCCCCCCCCCCC", True)
    >>> short_repr([[1] * 9] * 9)
    '[[1, 1, 1, 1, 1, 1, ...], [1, 1, 1, 1, 1, 1, ...], ...] (a list of 9 items)'
    """
    import reprlib
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 6, 6, 4, 6
    r.maxstring, r.maxother, r.maxlong = limit, limit, 40
    if isinstance(value, str) and len(value) > limit:
        half = (limit - 40) // 2
        return f"{value[:half]!r}...{value[-half:]!r} ({len(value):,} characters)"
    text = r.repr(value)
    tail = (f" (a {type(value).__name__} of {len(value):,} items)"
            if isinstance(value, (list, tuple, dict, set, frozenset)) and len(value) > 2 else "")
    room = max(limit - len(tail), 20)
    return (text if len(text) <= room else text[:room - 3] + "...") + tail
