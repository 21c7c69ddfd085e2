"""Names of runs and methods: the run directory's slug and the label in tables.

One place decides both, so ``grprune run``'s default directory, its printed title and
summary, ``sweep`` and ``collect`` name a configuration the same way.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from grprune.regularizers.base import Regularizer
    from grprune.selectors.base import Selector

#: labels of combinations of parts; a single part's label is its class's ``display_name``
_COMBINED_LABELS = {("gumbel-gin", ("size", "eps-align")): "PrunE", ("none", ()): "ERM"}
#: rows of the ablation layout (paper Figure 3a), in this order, then any others
ABLATION_ROWS = ("size,eps-align", "size", "eps-align", "none")


def _reg_class(name: str) -> type[Regularizer] | None:
    try:
        from grprune.regularizers.base import REGULARIZERS
        return REGULARIZERS.get(name)
    except Exception:  # an unknown or broken plugin: named by its own name
        return None


def _selector_class(name: str) -> type[Selector] | None:
    if name == "none":
        return None
    try:
        from grprune.selectors.base import SELECTORS
        return SELECTORS.get(name)
    except Exception:
        return None


def canonical_reg(reg: Iterable[str]) -> tuple[str, ...]:
    """Regularizer names in a fixed order: by each class's ``name_order`` (PrunE's
    first), then A-Z.

    >>> canonical_reg(["eps-align", "size"])
    ('size', 'eps-align')
    """
    def key(name: str) -> tuple:
        cls = _reg_class(name)
        return (math.inf if cls is None else cls.name_order, name)
    return tuple(sorted(reg, key=key))


def method_slug(cfg: Mapping[str, Any]) -> str:
    """The method part of a default run directory name: the regularizers joined with
    ``+`` (``size+eps-align``), ``erm`` without regularizer and selector, and
    ``SELECTOR-noreg`` for a selector without regularizer.

    >>> method_slug({"reg": {"size": {}, "eps-align": {}}, "selector": {"name": "gumbel-gin"}})
    'size+eps-align'
    >>> method_slug({"reg": {}, "selector": {"name": "drop-edge"}})
    'drop-edge-noreg'
    """
    if cfg["selector"]["name"] != "none" and not cfg["reg"]:
        return f"{cfg['selector']['name']}-noreg"
    return "+".join(cfg["reg"]) or "erm"


def _needs_selector(name: str) -> bool:
    cls = _reg_class(name)
    if cls is None:
        return False
    from grprune.regularizers.base import needs_selector
    return needs_selector(cls)


def _single_label(selector: str, reg: tuple[str, ...]) -> str | None:
    """The ``display_name`` of the one part of a run (one regularizer with the selector
    ``--selector auto`` picks for it, or a selector without regularizers), else None."""
    if len(reg) == 1:
        cls = _reg_class(reg[0])
        auto = "gumbel-gin" if _needs_selector(reg[0]) else "none"
        return cls.display_name if cls is not None and selector == auto else None
    if not reg:
        selector_cls = _selector_class(selector)
        return None if selector_cls is None else selector_cls.display_name
    return None


def _label(selector: str, reg: tuple[str, ...]) -> str | None:
    return _COMBINED_LABELS.get((selector, reg)) or _single_label(selector, reg)


def method_label(reg: Sequence[str], selector: str, preset: str = "paper") -> str:
    """The method's name in tables.

    ``ERM`` (no regularizer, no selector), ``PrunE`` (``size`` + ``eps-align``
    with the gumbel-gin selector), ``GSAT``, ``CIGA``, ``IRM``, ``VREx``,
    ``GroupDRO``, ``DropEdge``; otherwise the regularizers joined with ``+``,
    followed by the selector in brackets when it is not the one ``--selector
    auto`` would pick (gumbel-gin when a regularizer needs one, else none), and by
    the preset in parentheses when it is not ``paper``.

    >>> method_label(["eps-align", "size"], "gumbel-gin"), method_label([], "none")
    ('PrunE', 'ERM')
    >>> method_label(["size"], "gumbel-gin"), method_label(["size", "eps-align"], "gumbel-gcn")
    ('size', 'PrunE [gumbel-gcn]')
    >>> method_label(["size", "eps-align"], "gumbel-gin", "official")
    'PrunE (official)'
    """
    reg = canonical_reg(reg)
    suffix = "" if preset == "paper" else f" ({preset})"
    label = _label(selector, reg)
    if label:
        return label + suffix
    auto = "gumbel-gin" if any(_needs_selector(n) for n in reg) else "none"
    base = (_label(auto, reg) if reg else None) or "+".join(reg) or "none"
    return (base if selector == auto else f"{base} [{selector}]") + suffix


def ablation_label(reg: Sequence[str], selector: str) -> str:
    """The row name in the ablation layout: ``size,eps-align``, ``size``, ``none``, ...

    The selector is added in brackets when it is not the default for the set.

    >>> ablation_label(["eps-align", "size"], "gumbel-gin"), ablation_label([], "none")
    ('size,eps-align', 'none')
    """
    reg = canonical_reg(reg)
    auto = "gumbel-gin" if any(_needs_selector(n) for n in reg) else "none"
    base = ",".join(reg) or "none"
    return base if selector == auto else f"{base} [{selector}]"


def _table_orders() -> dict[str, float]:
    """``display_name`` -> ``table_order`` of every registered regularizer and selector."""
    from grprune.regularizers.base import REGULARIZERS
    from grprune.selectors.base import SELECTORS
    out = {}
    for registry in (REGULARIZERS, SELECTORS):
        for name in registry.names():
            cls = registry.get(name)
            if cls.display_name:
                out[cls.display_name] = cls.table_order
    return out


def method_rank(label: str) -> tuple:
    """Sort key of a method label: ERM, then the methods with a ``table_order`` (Table 1's
    order), the others, PrunE last."""
    base = label.split(" [")[0].split(" (")[0]
    if base == "PrunE":
        return (2, label)
    if base == "ERM":
        return (0, -math.inf, label)
    order = _table_orders().get(base)
    if order is not None and order < math.inf:
        return (0, order, label)
    return (1, label)


def ablation_rank(label: str) -> tuple:
    """Sort key of an ablation row: :data:`ABLATION_ROWS` in order, then the others."""
    base, _, rest = label.partition(" [")
    if base in ABLATION_ROWS:
        return (0, ABLATION_ROWS.index(base), rest, label)
    return (1, label)
