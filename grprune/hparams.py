"""Hyperparameters declared next to the code that uses them.

Every part (selector, encoder, regularizer, dataset, the trainer) is a
:class:`Configurable`. A part declares its hyperparameters once, as the fields of its
nested ``Hparams`` class (a :class:`Hyperparameters`: a frozen dataclass), each with
:func:`hparam` (default, help, domain); the part reads them as typed attributes of that
frozen view, ``self.hp.eta``, which a type checker checks. The class attribute ``params``
(name -> :class:`Param`) is derived from the fields, for ``grprune ls``, the sweeps'
search spaces and the config files. Values given as text (``-H reg.size.eta=0.75``,
config files) are coerced to the type of the default by :func:`~grprune.coerce.coerce`
and checked against the domain, so a bad value is refused before anything runs, with one
message that names the key, the value and the domain.

A ``params`` dict of :class:`Param` (the form datasets use) declares them too: ``Hparams``
is then derived from it (its fields are untyped for a type checker). ``defaults`` /
``help`` / ``choices`` / ``parsers`` are derived views, never declared.

Example
-------
>>> class Part(Configurable):
...     class Hparams(Configurable.Hparams):
...         eta: float = hparam(0.85, "edge budget", low=0.0, high=1.0)
...         form: str = hparam("paper", "which loss", choices=("paper", "official"))
...     hp: Hparams
>>> Part.resolve_hparams({"eta": "0.5"})
{'eta': 0.5, 'form': 'paper'}
>>> Part.build_hparams({"eta": "0.5"}).eta
0.5
>>> Part.params["eta"].domain()
'a number in [0, 1]'
>>> Part.resolve_hparams({"eta": "1.5"})
Traceback (most recent call last):
grprune.errors.GrpruneError: bad value '1.5' for eta: expected a number in [0, 1]
"""

from __future__ import annotations

import keyword
import math
import sys
import types
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Callable, ClassVar, Mapping, TypeVar, cast

from grprune.coerce import coerce
from grprune.errors import GrpruneError
from grprune.messages import short_repr, short_text

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10: the decorator only informs type checkers
    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda cls: cls

T = TypeVar("T")

#: the largest integer a hyperparameter without its own upper bound takes: counts and
#: sizes beyond it (2**31 - 1) fit no machine's memory or time
INT_CEILING = 2**31 - 1
#: the most characters of a setting's key (``reg.eps-align.official_static`` has 29): a
#: longer key, from ``-H`` or a config file, is refused before a message quotes it
MAX_KEY_CHARS = 100
#: the most characters of an integer's text read from a config file or ``-H`` (Python
#: refuses to convert more than 4,300 digits; no setting is near 1,000)
MAX_INT_CHARS = 1000


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
        the bounds; ``choices`` are checked by :func:`~grprune.coerce.coerce`; other values
        have none."""
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


def hparam(default: T, help: str = "", *, choices: tuple | None = None,
           low: float | None = None, high: float | None = None, low_open: bool = False,
           high_open: bool = False, parser: Callable[[str], Any] | None = None,
           search: tuple = ()) -> T:
    """Declare one field of a :class:`Hyperparameters` view: its default and its :class:`Param`.

    ``name: type = hparam(default, help, ...)`` in a part's ``Hparams`` class declares the
    hyperparameter ``name`` once: the part reads its value as ``self.hp.name``, and the
    class's ``params["name"]`` is ``Param(default, help, ...)`` (the arguments are
    :class:`Param`'s).

    Returns
    -------
    dataclasses.Field
        Carrying the :class:`Param` in its metadata; typed as ``default`` for a type
        checker, which so checks the default against the annotation.
    """
    param = Param(default, help, choices, low, high, low_open, high_open, parser, search)
    return cast(T, field(default=default, metadata={"param": param}))


@dataclass_transform(frozen_default=True, kw_only_default=True)
class Hyperparameters:
    """The typed, frozen view of a part's hyperparameters: one field per hyperparameter.

    A subclass is made a frozen, keyword-only dataclass when it is defined (no decorator
    needed); its fields are declared with :func:`hparam` (or with a plain default, which
    keeps the help and domain an overridden field had in a base class). Assigning to a
    field raises :class:`dataclasses.FrozenInstanceError`; a changed copy comes from
    :meth:`Configurable.replace_hparams` (checked) or :func:`dataclasses.replace`.

    Raises
    ------
    TypeError
        When a subclass declares a field without a default.

    Examples
    --------
    >>> class Hp(Hyperparameters):
    ...     tau: float = hparam(1.0, "temperature", low=0.0, low_open=True)
    ...     hard: bool = True
    >>> Hp(tau=0.5), Hp._params["tau"].domain(), Hp._params["hard"].default
    (Hp(tau=0.5, hard=True), 'a number > 0', True)
    """

    #: name -> :class:`Param` of every field (inherited ones included), in field order
    _params: ClassVar[dict[str, Param]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        inherited: dict[str, Param] = {}
        for base in reversed(cls.__mro__[1:]):
            if issubclass(base, Hyperparameters):
                inherited.update(base._params)
        dataclass(frozen=True, kw_only=True)(cls)
        params: dict[str, Param] = {}
        for f in fields(cls):  # type: ignore[arg-type]  # a dataclass from the line above
            if f.default is MISSING:
                raise TypeError(f"{cls.__qualname__}.{f.name}: a hyperparameter needs a "
                                f"default (declare it with hparam(default, help, ...))")
            declared = f.metadata.get("param")
            if declared is None:  # a plain default: the base's help and domain, if any
                base_param = inherited.get(f.name)
                declared = (Param(f.default) if base_param is None
                            else replace(base_param, default=f.default))
            params[f.name] = declared
        cls._params = params


def _derived_view(owner: type, params: Mapping[str, Param]) -> type[Hyperparameters]:
    """The ``Hparams`` class of a part that declares a ``params`` dict: one
    field per key that is a Python identifier (others are not attributes of the view)."""
    names = [k for k in params if k.isidentifier() and not keyword.iskeyword(k)]

    def body(ns: dict[str, Any]) -> None:
        ns["__annotations__"] = {k: "Any" for k in names}
        ns.update({k: field(default=params[k].default, metadata={"param": params[k]})
                   for k in names})
        ns["__module__"] = owner.__module__
        ns["__qualname__"] = f"{owner.__qualname__}.Hparams"

    return cast(type[Hyperparameters], types.new_class("Hparams", (Hyperparameters,),
                                                       exec_body=body))


class Configurable:
    """Mixin for parts whose hyperparameters are declared on the class.

    A part declares its hyperparameters as the fields of a nested ``Hparams`` class that
    subclasses its base class's ``Hparams`` (:class:`Hyperparameters`; fields declared
    with :func:`hparam`) and annotates ``hp: Hparams``; its ``__init__`` calls
    :meth:`init_hparams`, and its code reads ``self.hp.name``.

    Attributes
    ----------
    Hparams : type
        The frozen view's class (:class:`Hyperparameters`); derived from ``params`` for a
        class that declares that dict instead (datasets do).
    hp : Hparams
        The part's values (set by :meth:`init_hparams`).
    params : dict
        Hyperparameter name -> :class:`Param`, derived from ``Hparams`` (or declared).
    defaults, help, choices, parsers : dict
        Read-only views of ``params`` (name -> default, description, allowed values, text
        parser), derived here; a class does not declare them.

    Raises
    ------
    TypeError
        When a class declares both ``Hparams`` and ``params``, one of the derived views, or
        an ``Hparams`` that does not subclass its base class's.
    """

    class Hparams(Hyperparameters):
        """No hyperparameters."""

    hp: Hparams
    params: ClassVar[dict[str, Param]] = {}
    defaults: ClassVar[dict[str, Any]] = {}
    help: ClassVar[dict[str, str]] = {}
    choices: ClassVar[dict[str, tuple]] = {}
    parsers: ClassVar[dict[str, Callable[[str], Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        views = [n for n in ("defaults", "help", "choices", "parsers") if n in own]
        if views:
            raise TypeError(f"{cls.__qualname__} declares {', '.join(views)}: declare its "
                            f"hyperparameters as Hparams fields (hparam(default, help, ...)) "
                            f"or a params dict of Param, from which {views[0]} is derived")
        if "Hparams" in own:
            view, parent = own["Hparams"], _inherited(cls).Hparams
            if "params" in own:
                raise TypeError(f"{cls.__qualname__} declares its hyperparameters twice "
                                f"(Hparams and params); keep Hparams")
            if not (isinstance(view, type) and issubclass(view, parent)):
                raise TypeError(f"{cls.__qualname__}.Hparams must subclass "
                                f"{parent.__qualname__} (the base class's Hparams)")
            cls.params = dict(cast(type[Hyperparameters], view)._params)
        elif "params" in own:
            cls.params = dict(own["params"])
            cls.Hparams = _derived_view(cls, cls.params)  # type: ignore[misc, assignment]
        else:
            return
        cls.defaults = {k: p.default for k, p in cls.params.items()}
        cls.help = {k: p.help for k, p in cls.params.items()}
        cls.choices = {k: p.choices for k, p in cls.params.items() if p.choices}
        cls.parsers = {k: p.parser for k, p in cls.params.items() if p.parser}

    @classmethod
    def check_hparam(cls, key: str, value: Any, prefix: str = "") -> Any:
        """``value`` for the hyperparameter ``key``, coerced (:func:`~grprune.coerce.coerce`)
        and checked against its domain.

        Raises
        ------
        GrpruneError
            On an unknown key (listing the known ones) or a bad value.
        """
        param = cls.params.get(key)
        if param is None:
            known = ", ".join(sorted(cls.defaults)) or "none"
            raise GrpruneError(
                f"unknown hyperparameter {short_text(prefix + str(key))}. Known for "
                f"{prefix.rstrip('.') or cls.__name__}: {known}"
            )
        out = coerce(prefix + key, value, param.default, param.choices, param.parser)
        if not param.contains(out):
            raise GrpruneError(f"bad value {short_repr(value)} for {prefix}{key}: "
                               f"expected {param.domain()}")
        return out

    @classmethod
    def resolve_hparams(cls, given: Mapping[str, Any] | None = None,
                        prefix: str = "") -> dict[str, Any]:
        """Defaults updated with ``given``, each value coerced and checked
        (:meth:`check_hparam`): the values a config file records.

        Raises
        ------
        GrpruneError
            On an unknown key (listing the known ones) or a bad value.
        """
        out = dict(cls.defaults)
        for key, value in (given or {}).items():
            out[key] = cls.check_hparam(key, value, prefix)
        return out

    @classmethod
    def build_hparams(cls, given: Mapping[str, Any] | None = None,
                      prefix: str = "") -> Any:
        """The frozen view (an ``Hparams`` instance) of :meth:`resolve_hparams`' values.

        Raises
        ------
        GrpruneError
            As :meth:`resolve_hparams`.
        """
        values = cls.resolve_hparams(given, prefix)
        names = {f.name for f in fields(cls.Hparams)}
        return cls.Hparams(**{k: v for k, v in values.items() if k in names})

    @property
    def hparam_prefix(self) -> str:
        """The prefix of this part's keys in messages (``selector.``; a part base class
        overrides it)."""
        return ""

    def init_hparams(self, given: Mapping[str, Any] | None = None) -> None:
        """Set ``self.hp`` to :meth:`build_hparams` of ``given`` (a part's ``__init__``
        calls this with its keyword arguments).

        Raises
        ------
        GrpruneError
            As :meth:`resolve_hparams`, the keys named with :attr:`hparam_prefix`.
        """
        self.hp = self.build_hparams(given, self.hparam_prefix)

    def replace_hparams(self, changes: Mapping[str, Any]) -> Hparams:
        """Set ``self.hp`` to a copy with ``changes`` (each checked as
        :meth:`resolve_hparams` checks it) and return the previous view, so that a caller
        that changes a value for a while restores it with ``part.hp = previous``.

        Raises
        ------
        GrpruneError
            On an unknown key or a bad value; ``self.hp`` is then unchanged.

        Examples
        --------
        >>> class Part(Configurable):
        ...     class Hparams(Configurable.Hparams):
        ...         draws: int = hparam(1, "draws averaged", low=1)
        ...     hp: Hparams
        >>> part = Part()
        >>> part.init_hparams()
        >>> before = part.replace_hparams({"draws": "4"})
        >>> part.hp.draws, before.draws
        (4, 1)
        """
        checked = {k: self.check_hparam(k, v, self.hparam_prefix) for k, v in changes.items()}
        before = self.hp
        self.hp = replace(before, **checked)
        return before

    @classmethod
    def describe_hparams(cls) -> list[tuple[str, Any, str, str]]:
        """``(name, default, help, domain)`` for each hyperparameter, for ``grprune ls``."""
        return [(key, p.default, p.help, p.domain()) for key, p in cls.params.items()]


def _inherited(cls: type) -> type[Configurable]:
    """The nearest :class:`Configurable` base class of ``cls`` (``Configurable`` itself at
    the latest): whose declarations a subclass's extend."""
    return next(b for b in cls.__mro__[1:] if issubclass(b, Configurable))
