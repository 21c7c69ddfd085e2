"""Hyperparameters declared next to the code that uses them.

Every part (selector, encoder, regularizer, dataset, the trainer) is a
:class:`Configurable`: its class attribute ``params`` maps each hyperparameter to one
:class:`Param` (default, help, domain). Values given as text (``-H reg.size.eta=0.75``,
config files) are coerced to the type of the default by :func:`coerce` and checked
against the domain, so a bad value is refused before anything runs, with one message
that names the key, the value and the domain.

The older form, ``defaults`` / ``help`` / ``choices`` / ``parsers`` dicts, still works
(plugins written for it load unchanged): each form is derived from the other.

Example
-------
>>> class Part(Configurable):
...     params = {"eta": Param(0.85, "edge budget", low=0.0, high=1.0),
...               "form": Param("paper", "which loss", choices=("paper", "official"))}
>>> Part.resolve_hparams({"eta": "0.5"})
{'eta': 0.5, 'form': 'paper'}
>>> Part.resolve_hparams({"eta": "1.5"})
Traceback (most recent call last):
grprune.errors.GrpruneError: bad value '1.5' for eta: expected a number in [0, 1]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar, Mapping

from grprune.errors import GrpruneError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
#: the most characters of a given value that a message shows (:func:`short_repr`)
MAX_SHOWN = 200
#: the largest integer a hyperparameter without its own upper bound takes: counts and
#: sizes beyond it (2**31 - 1) fit no machine's memory or time
INT_CEILING = 2**31 - 1
#: the most characters of a setting's key (``reg.eps-align.official_static`` has 29): a
#: longer key, from ``-H`` or a config file, is refused before a message quotes it
MAX_KEY_CHARS = 100
#: the most characters of an integer's text read from a config file or ``-H`` (Python
#: refuses to convert more than 4,300 digits; no setting is near 1,000)
MAX_INT_CHARS = 1000


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


def _num(x: float) -> str:
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)  # 2**63 - 1 in full, not 9.22337e+18
    return "inf" if x == math.inf else ("-inf" if x == -math.inf else f"{x:g}")


@dataclass(frozen=True)
class Param:
    """One hyperparameter: its default, meaning and domain.

    Attributes
    ----------
    default : Any
        The default value; its type is the hyperparameter's (bool, int, float, str).
    help : str
        One line for ``grprune ls`` and the docs.
    choices : tuple, optional
        The allowed values.
    low, high : float, optional
        Bounds of a number (inclusive unless ``low_open`` / ``high_open``).
    low_open, high_open : bool
        Exclude the bound itself (``low=0, low_open=True`` is "> 0").
    parser : callable, optional
        Parses text when the type is mixed (``"auto"`` or a number).
    search : tuple
        Values a search over this key tries (``grprune sweep``; the paper's grid).
    """

    default: Any
    help: str = ""
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    parser: Callable[[str], Any] | None = None
    search: tuple = ()

    @property
    def upper(self) -> float | None:
        """The upper bound in force: ``high``, or :data:`INT_CEILING` for an integer
        without one (so that every integer has a bound)."""
        if self.high is None and isinstance(self.default, int) and not isinstance(
                self.default, bool) and not self.choices:
            return INT_CEILING
        return self.high

    def domain(self) -> str:
        """The domain in words: ``a number in (0, 1]``, ``an integer >= 1``, ``one of
        sum, mean``.

        Examples
        --------
        >>> Param(1, low=1).domain(), Param(0.5, low=0.0, high=1.0, high_open=True).domain()
        ('an integer in [1, 2147483647]', 'a number in [0, 1)')
        """
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        if isinstance(self.default, bool):
            return "true or false"
        kind = "an integer" if isinstance(self.default, int) else "a number"
        if isinstance(self.default, (int, float)):
            lo, hi = self.low, self.upper
            if lo is not None and hi is not None:
                return (f"{kind} in {'(' if self.low_open else '['}{_num(lo)}, {_num(hi)}"
                        f"{')' if self.high_open else ']'}")
            if lo is not None:
                return f"{kind} {'>' if self.low_open else '>='} {_num(lo)}"
            if hi is not None:
                return f"{kind} {'<' if self.high_open else '<='} {_num(hi)}"
            return kind
        return "a string" if isinstance(self.default, str) else type(self.default).__name__

    def contains(self, value: Any) -> bool:
        """Whether a coerced ``value`` lies in the domain: numbers must be finite and within
        the bounds; ``choices`` are checked by :func:`coerce`; other values have none."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True
        if not math.isfinite(value):  # no hyperparameter here is NaN or infinite
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        high = self.upper
        if high is not None and (value > high or (self.high_open and value == high)):
            return False
        return True


class Configurable:
    """Mixin for parts whose hyperparameters are declared on the class.

    Attributes
    ----------
    params : dict
        Hyperparameter name -> :class:`Param` (the declaration).
    defaults, help, choices, parsers : dict
        Views of ``params`` (name -> default, description, allowed values, text parser);
        a class may declare these instead of ``params`` (the older form).
    """

    params: ClassVar[dict[str, Param]] = {}
    defaults: ClassVar[dict[str, Any]] = {}
    help: ClassVar[dict[str, str]] = {}
    choices: ClassVar[dict[str, tuple]] = {}
    parsers: ClassVar[dict[str, Callable[[str], Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "params" in own:
            cls.params = dict(own["params"])
        elif any(n in own for n in ("defaults", "help", "choices", "parsers")):
            # the older form: build the Params, keeping the domains a base class declared
            inherited = getattr(super(cls, cls), "params", {})
            cls.params = {}
            for key, default in cls.defaults.items():
                base = inherited.get(key) or Param(default)
                cls.params[key] = replace(base, default=default,
                                          help=cls.help.get(key, base.help),
                                          choices=cls.choices.get(key, base.choices),
                                          parser=cls.parsers.get(key, base.parser))
        else:
            return
        cls.defaults = {k: p.default for k, p in cls.params.items()}
        cls.help = {k: p.help for k, p in cls.params.items()}
        cls.choices = {k: p.choices for k, p in cls.params.items() if p.choices}
        cls.parsers = {k: p.parser for k, p in cls.params.items() if p.parser}

    @classmethod
    def resolve_hparams(cls, given: Mapping[str, Any] | None = None,
                        prefix: str = "") -> dict[str, Any]:
        """Defaults updated with ``given``, each value coerced and checked.

        Raises
        ------
        GrpruneError
            On an unknown key (listing the known ones) or a bad value.
        """
        out = dict(cls.defaults)
        for key, value in (given or {}).items():
            if key not in cls.defaults:
                known = ", ".join(sorted(cls.defaults)) or "none"
                raise GrpruneError(
                    f"unknown hyperparameter {short_text(prefix + str(key))}. Known for "
                    f"{prefix.rstrip('.') or cls.__name__}: {known}"
                )
            param = cls.params[key]
            out[key] = coerce(prefix + key, value, param.default, param.choices, param.parser)
            if not param.contains(out[key]):
                raise GrpruneError(f"bad value {short_repr(value)} for {prefix}{key}: "
                                   f"expected {param.domain()}")
        return out

    @classmethod
    def describe_hparams(cls) -> list[tuple[str, Any, str, str]]:
        """``(name, default, help, domain)`` for each hyperparameter, for ``grprune ls``."""
        return [(key, p.default, p.help, p.domain()) for key, p in cls.params.items()]
