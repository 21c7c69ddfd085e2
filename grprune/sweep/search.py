"""``grprune sweep --search default``: the parts' declared search spaces as a grid.

Every hyperparameter may declare the values a search tries
(:class:`grprune.hparams.Param` ``search``); for PrunE these are the paper's
(appendix "Hyperparameter search for PrunE": eta in {0.5, 0.75, 0.85}, K in
{50, 70, 90}, lambda_1 in {10, 40}, lambda_2 in {0.1, 0.01, 0.001}, selector layers
in {2, 3}) and for the baselines the paper's "Baseline setup and hyperparameters".
:func:`with_search` adds them to a sweep grid as ``-H`` axes, for every part the grid
can use: its regularizers, its selectors (``auto``: the Gumbel GIN selector when a
regularizer needs one) and its encoders. A key the grid sets itself keeps the grid's
values; a key a configuration does not have (``selector.layers`` of ``drop-edge``) is
dropped from that configuration by the sweep, as for any ``-H`` key.

>>> from grprune.sweep.grid import Grid
>>> sorted(with_search(Grid(axes={"reg": ["size"]})).hparams.items())
[('reg.size.eta', ['0.5', '0.75', '0.85']), ('reg.size.weight', ['10.0', '40.0']), \
('selector.layers', ['2', '3'])]
"""

from __future__ import annotations

from typing import Any, Iterable

from grprune.sweep.grid import Grid

#: what ``--search`` accepts
SEARCHES = ("none", "default")


def search_space(parts: Iterable[tuple[str, Any]]) -> dict[str, list[str]]:
    """``{"-H key": [values as text]}`` of the declared searches of ``parts``.

    Parameters
    ----------
    parts : iterable of (prefix, class)
        ``("reg.size.", SizeConstraint)``, ``("selector.", GumbelGINSelector)``, ...
    """
    out: dict[str, list[str]] = {}
    for prefix, cls in parts:
        for key, param in cls.params.items():
            if param.search:
                out[prefix + key] = [str(v) for v in param.search]
    return out


def _parts(grid: Grid) -> list[tuple[str, Any]]:
    """The regularizers, selectors and encoders a grid's configurations can use."""
    from grprune.encoders.base import ENCODERS
    from grprune.regularizers.base import REGULARIZERS
    from grprune.regularizers.base import needs_selector
    from grprune.selectors.base import SELECTORS

    reg_names: list[str] = []
    for reg_set in grid.axes.get("reg", ["size,eps-align"]):
        reg_names += [n for n in REGULARIZERS.split(reg_set) if n not in reg_names]
    regs = [(f"reg.{n}.", REGULARIZERS.get(n)) for n in reg_names]
    selectors = []
    for name in grid.axes.get("selector", ["auto"]):
        if name == "auto":
            if any(needs_selector(cls) for _, cls in regs):
                selectors.append("gumbel-gin")
        elif name != "none":
            selectors.append(SELECTORS.canonical(name))
    encoders = [ENCODERS.canonical(n) for n in grid.axes.get("encoder", ["gin"])]
    return (regs + [("selector.", SELECTORS.get(n)) for n in dict.fromkeys(selectors)]
            + [("encoder.", ENCODERS.get(n)) for n in encoders])


def with_search(grid: Grid, search: str = "default") -> Grid:
    """``grid`` with the declared search spaces of its parts as ``-H`` axes.

    Parameters
    ----------
    grid : Grid
    search : {"none", "default"}
        ``none`` returns ``grid`` unchanged.

    Raises
    ------
    GrpruneError
        On an unknown part name in the grid.
    """
    if search == "none":
        return grid
    space = {k: v for k, v in search_space(_parts(grid)).items() if k not in grid.hparams}
    return Grid(dict(grid.axes), {**space, **grid.hparams}, dict(grid.fixed), grid.origin)
