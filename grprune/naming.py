"""Names of runs and methods: the run directory's slug and the label in tables.

One place decides both, so ``grprune run``'s default directory, its printed title and
summary, ``sweep`` and ``collect`` name a configuration the same way.
"""

from __future__ import annotations

from typing import Iterable, Sequence

# Paper names of the registered methods, and the order of Table 1 (PrunE last).
_METHOD_LABELS = {("gumbel-gin", ("size", "eps-align")): "PrunE",
                  ("gumbel-gin", ("gsat",)): "GSAT", ("gumbel-gin", ("ciga",)): "CIGA",
                  ("none", ()): "ERM", ("none", ("irm",)): "IRM",
                  ("none", ("groupdro",)): "GroupDRO", ("none", ("vrex",)): "VREx",
                  ("drop-edge", ()): "DropEdge"}
_METHOD_ORDER = ["ERM", "IRM", "GroupDRO", "VREx", "DropEdge", "GSAT", "CIGA"]
_REG_ORDER = ["size", "eps-align", "gsat", "ciga", "irm", "vrex", "groupdro"]
_SELECTOR_REGS = {"size", "eps-align", "gsat", "ciga"}
#: rows of the ablation layout (paper Figure 3a), in this order, then any others
ABLATION_ROWS = ("size,eps-align", "size", "eps-align", "none")


def canonical_reg(reg: Iterable[str]) -> tuple[str, ...]:
    """Regularizer names in a fixed order: PrunE's first, then known ones, then A-Z.

    >>> canonical_reg(["eps-align", "size"])
    ('size', 'eps-align')
    """
    rank = {n: i for i, n in enumerate(_REG_ORDER)}
    return tuple(sorted(reg, key=lambda n: (rank.get(n, len(rank)), n)))


def method_slug(cfg: dict) -> str:
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
    if name in _SELECTOR_REGS:
        return True
    try:
        from grprune.regularizers import REGULARIZERS
        return "selector" in getattr(REGULARIZERS.get(name), "requires", ())
    except Exception:
        return False


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
    label = _METHOD_LABELS.get((selector, reg))
    if label:
        return label + suffix
    auto = "gumbel-gin" if any(_needs_selector(n) for n in reg) else "none"
    base = (_METHOD_LABELS.get((auto, reg)) if reg else None) or "+".join(reg) or "none"
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


def method_rank(label: str) -> tuple:
    """Sort key of a method label: Table 1's methods in order, others, PrunE last."""
    base = label.split(" [")[0].split(" (")[0]
    if base == "PrunE":
        return (2, label)
    if base in _METHOD_ORDER:
        return (0, _METHOD_ORDER.index(base), label)
    return (1, label)


def ablation_rank(label: str) -> tuple:
    """Sort key of an ablation row: :data:`ABLATION_ROWS` in order, then the others."""
    base, _, rest = label.partition(" [")
    if base in ABLATION_ROWS:
        return (0, ABLATION_ROWS.index(base), rest, label)
    return (1, label)
