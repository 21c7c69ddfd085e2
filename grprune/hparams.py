"""Hyperparameters declared next to the code that uses them.

Every part (selector, encoder, regularizer, dataset, the trainer) is a
:class:`Configurable`: its class attribute ``defaults`` maps each hyperparameter
to its default value, ``help`` explains it and ``choices`` restricts it. Values
given as text (``-H reg.size.eta=0.75``, config files) are coerced to the type
of the default by :func:`coerce`.

Example
-------
>>> class Part(Configurable):
...     defaults = {"eta": 0.85, "form": "paper"}
...     choices = {"form": ("paper", "official")}
>>> Part.resolve_hparams({"eta": "0.5"})
{'eta': 0.5, 'form': 'paper'}
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Mapping

from grprune.errors import GrpruneError

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
        If the value cannot be converted or is not among ``choices``.
    """
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
            out = int(value) if not isinstance(value, str) else int(value.strip())
        elif isinstance(default, float):
            out = float(value)
        elif isinstance(default, str):
            out = str(value)
        else:
            out = value
    except (TypeError, ValueError) as exc:
        raise GrpruneError(
            f"bad value {value!r} for {key}: expected {type(default).__name__} "
            f"like the default {default!r} ({exc})"
        ) from None
    if choices is not None and out not in choices:
        raise GrpruneError(
            f"bad value {value!r} for {key}. Choices: {', '.join(map(str, choices))}"
        )
    return out


class Configurable:
    """Mixin for parts whose hyperparameters are declared on the class.

    Attributes
    ----------
    defaults : dict
        Hyperparameter name -> default value (the paper's where one exists).
    help : dict
        Hyperparameter name -> one-line description.
    choices : dict
        Hyperparameter name -> tuple of allowed values.
    parsers : dict
        Hyperparameter name -> parser for text values (when the type is mixed).
    """

    defaults: ClassVar[dict[str, Any]] = {}
    help: ClassVar[dict[str, str]] = {}
    choices: ClassVar[dict[str, tuple]] = {}
    parsers: ClassVar[dict[str, Callable[[str], Any]]] = {}

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
                    f"unknown hyperparameter {prefix}{key}. Known for "
                    f"{prefix.rstrip('.') or cls.__name__}: {known}"
                )
            out[key] = coerce(prefix + key, value, cls.defaults[key],
                              cls.choices.get(key), cls.parsers.get(key))
        return out

    @classmethod
    def describe_hparams(cls) -> list[tuple[str, Any, str]]:
        """``(name, default, help)`` for each hyperparameter, for ``grprune ls``."""
        rows = []
        for key, default in cls.defaults.items():
            text = cls.help.get(key, "")
            if key in cls.choices:
                text = f"{text} [{'|'.join(map(str, cls.choices[key]))}]".strip()
            rows.append((key, default, text))
        return rows
