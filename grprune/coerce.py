"""Values given as text (``-H reg.size.eta=0.75``, config files) converted to a setting's type.

:func:`coerce` converts a value to the type of the declared default and checks its
choices; :meth:`grprune.hparams.Configurable.check_hparam` then checks the domain.
"""

from __future__ import annotations

from typing import Any, Callable

from grprune.errors import GrpruneError
from grprune.messages import short_repr, short_text

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def coerce(key: str, value: Any, default: Any, choices: tuple | None = None,
           parser: Callable[[str], Any] | None = None) -> Any:
    """Convert ``value`` to the type of ``default`` and check ``choices``.

    Parameters
    ----------
    key : str
        Full key for messages (``reg.size.eta``).
    value : Any
        The given value; strings are parsed.
    default : Any
        The declared default; its type decides the conversion.
    choices : tuple, optional
        Allowed values.
    parser : callable, optional
        Custom parser for string values (overrides type inference).

    Raises
    ------
    GrpruneError
        If the value cannot be converted or is not among ``choices`` (a list or a
        mapping given for a scalar is refused before anything converts it).
    """
    if isinstance(value, (list, tuple, dict, set, frozenset)) and not isinstance(
            default, (list, tuple, dict, set, frozenset)):
        raise GrpruneError(f"bad value {short_repr(value)} for {key}: expected "
                           f"{type(default).__name__} like the default {default!r}, not a "
                           f"{type(value).__name__}")
    try:
        if parser is not None and isinstance(value, str):
            out = parser(value)
        elif isinstance(default, bool):
            if isinstance(value, bool):
                out = value
            elif str(value).strip().lower() in _TRUE:
                out = True
            elif str(value).strip().lower() in _FALSE:
                out = False
            else:
                raise ValueError("expected true/false")
        elif isinstance(default, int):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError("expected an integer")
            text = value.strip() if isinstance(value, str) else value
            if isinstance(text, str) and len(text) > 40:  # int() of 10**6 digits is slow
                raise ValueError("more than 40 digits")
            out = int(text)
        elif isinstance(default, float):
            out = float(value)
        elif isinstance(default, str):
            out = str(value)
        else:
            out = value
    except (TypeError, ValueError, OverflowError) as exc:  # float(10**400) overflows
        raise GrpruneError(
            f"bad value {short_repr(value)} for {key}: expected {type(default).__name__} "
            f"like the default {default!r} ({short_text(exc)})"
        ) from None
    if choices is not None and out not in choices:
        raise GrpruneError(
            f"bad value {short_repr(value)} for {key}. Choices: {', '.join(map(str, choices))}"
        )
    return out
