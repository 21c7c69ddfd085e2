"""Subgraph selector interface: a batch in, a :class:`Selection` (edge logits, keep
probabilities, the edge mask the encoder consumes) out."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from grprune.batch import GraphBatch
from grprune.errors import GrpruneError
from grprune.hparams import Configurable
from grprune.ops import bond_value, top_fraction_in_segment
from grprune.registry import Registry

SELECTORS = Registry("selector", entry_point_group="grprune.selectors")

#: evaluation rules for the edge mask, see :class:`~grprune.selectors.gumbel.GumbelSelector`
EVAL_MODES = ("threshold", "soft", "sample", "budget")
#: what one Gumbel sample covers, ``selector.sample_per``
SAMPLE_UNITS = ("bond", "edge")


@dataclass
class Selection:
    """What a selector chose for one batch.

    Attributes
    ----------
    edge_logits : Tensor of shape (E,)
        Logit :math:`w_{ij}` (paper Eq. 1); both directions of a bond share it.
    edge_prob : Tensor of shape (E,), values in (0, 1)
        Keep probability :math:`p_{ij} = \\sigma(w_{ij})`.
    edge_weight : Tensor of shape (E,), values in [0, 1]
        The mask the encoder consumes (1 = edge kept). In training a hard
        straight-through sample (values exactly 0 or 1, gradient of the relaxed
        sample); in evaluation per the selector's ``eval_mode``.
    relaxed : Tensor of shape (E,) or None
        The relaxed (soft) concrete sample behind ``edge_weight`` in training.
    tau : float
        Temperature of the concrete relaxation.
    """

    edge_logits: Tensor
    edge_prob: Tensor
    edge_weight: Tensor
    relaxed: Tensor | None = None
    tau: float = 1.0

    def validate(self, num_edges: int | None = None) -> "Selection":
        """Check shapes and ranges; returns ``self``.

        Raises
        ------
        ValueError
            On a shape mismatch, a non-finite logit or a value outside [0, 1].
        """
        e = self.edge_logits.shape
        for name in ("edge_prob", "edge_weight"):
            if getattr(self, name).shape != e:
                raise ValueError(f"{name} has shape {tuple(getattr(self, name).shape)}, "
                                 f"edge_logits {tuple(e)}")
        if num_edges is not None and e != (num_edges,):
            raise ValueError(f"selection covers {tuple(e)} edges, the batch has {num_edges}")
        if not torch.isfinite(self.edge_logits).all():
            raise ValueError("edge_logits contain NaN or inf")
        for name in ("edge_prob", "edge_weight"):
            t = getattr(self, name)
            if t.numel() and (t.min() < 0 or t.max() > 1):
                raise ValueError(f"{name} outside [0, 1]")
        return self


# -- evaluation noise that depends on the graph alone ------------------------------------
_MIX1 = 0xBF58476D1CE4E5B9 - (1 << 64)   # splitmix64's multipliers, as signed int64
_MIX2 = 0x94D049BB133111EB - (1 << 64)
_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)


def _lsr(x: Tensor, k: int) -> Tensor:
    """Logical right shift of int64 ``x`` by ``k`` bits (torch's ``>>`` is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def _mix64(x: Tensor) -> Tensor:
    """splitmix64's finaliser (Steele, Lea and Flood 2014) on int64, wrapping arithmetic."""
    x = (x ^ _lsr(x, 30)) * _MIX1
    x = (x ^ _lsr(x, 27)) * _MIX2
    return x ^ _lsr(x, 31)


def keyed_uniform(seed: int, graph_key: Tensor, unit_key: Tensor, draw: int = 0) -> Tensor:
    """Uniform noise in (0, 1) that is a function of its keys alone (counter-based).

    .. math::
        u = (\\lfloor h / 2^{40} \\rfloor + \\tfrac12) / 2^{24},\\quad
        h = \\mathrm{mix}(\\mathrm{mix}(\\mathrm{mix}(\\mathrm{mix}(s) + k_G) + d) + k_e)

    with ``mix`` splitmix64's finaliser and additions modulo :math:`2^{64}`. No RNG
    state: the same (seed, graph, edge, draw) gives the same bits in any batch, batch
    size, order or device, so an evaluation mask drawn from it depends on the graph
    alone.

    Parameters
    ----------
    seed : int
        The evaluation's seed (e.g. :func:`grprune.determinism.eval_seed`).
    graph_key : Tensor of shape (M,), int64
        Each unit's graph identity (dataset index, or a hash of the canonical SMILES).
    unit_key : Tensor of shape (M,), int64
        The unit's identity inside its graph (e.g. its local node pair).
    draw : int
        Which of ``selector.eval_samples`` draws.

    Returns
    -------
    Tensor of shape (M,), float32, values in (0, 1) (multiples of :math:`2^{-24}`
    plus :math:`2^{-25}`)

    Examples
    --------
    >>> u = keyed_uniform(7, torch.tensor([3, 3, 4]), torch.tensor([0, 1, 0]))
    >>> bool(((u > 0) & (u < 1)).all()), u[0] == keyed_uniform(7, torch.tensor([3]), torch.tensor([0]))[0]
    (True, tensor(True))
    """
    s = _mix64(torch.tensor(int(seed) & ((1 << 63) - 1), dtype=torch.int64,
                            device=graph_key.device) + _GOLDEN)
    h = _mix64(_mix64(s + graph_key.to(torch.int64)) + int(draw))
    h = _mix64(h + unit_key.to(torch.int64))
    return ((_lsr(h, 40).to(torch.float32) + 0.5) * (1.0 / (1 << 24)))


def graph_noise(batch: GraphBatch, per_bond: bool, seed: int, draw: int = 0,
                num_bonds: int | None = None) -> Tensor:
    """:func:`keyed_uniform` noise per bond (shape (U,)) or per directed edge (shape (E,)).

    The graph key is ``batch.index`` (dataset index, or what the caller put there, e.g.
    :func:`grprune.predict.memory.smiles_key`); a directed edge's key is its local node pair
    ``(src, dst)``, a bond's the ordered pair ``(min, max)``: numbers of the graph
    itself, so a graph's noise does not depend on where it sits in the batch.
    """
    src, dst = batch.local_edges()
    graph = batch.index.to(src.device)[batch.edge_graph]
    if per_bond:
        src, dst = torch.minimum(src, dst), torch.maximum(src, dst)
    pair = src * (1 << 32) + dst
    u = keyed_uniform(seed, graph, pair, draw)
    if not per_bond:
        return u
    from grprune.ops import bond_value
    return bond_value(u, batch.bond, batch.num_bonds if num_bonds is None else num_bonds)


def concrete_sample(logits: Tensor, tau: float, hard: bool, noise: Tensor | None = None
                    ) -> tuple[Tensor, Tensor]:
    """Binary concrete (Gumbel) sample, paper Eq. 2.

    .. math::
        \\tilde p = \\sigma\\big((\\log u - \\log(1-u) + w) / \\tau\\big),\\quad
        u \\sim \\mathcal U(0, 1), \\qquad
        \\tilde A = \\mathbb 1[\\tilde p > 0.5] - \\mathrm{sg}(\\tilde p) + \\tilde p

    (the paper prints :math:`1 - \\mathrm{sg}(p) + p`; the hard indicator is the
    standard straight-through form and what the official code does.)

    Parameters
    ----------
    logits : Tensor of shape (M,)
    tau : float
        Temperature (> 0). It does not change the hard sample, only its gradient.
    hard : bool
        Straight-through hard sample if True, relaxed sample otherwise.
    noise : Tensor of shape (M,), optional
        Uniform noise ``u``; drawn from the global RNG if omitted.

    Returns
    -------
    (sample, relaxed) : two Tensors of shape (M,)
    """
    if noise is None:
        noise = torch.rand_like(logits)
    noise = noise.clamp(1e-10, 1 - 1e-10)
    relaxed = torch.sigmoid((torch.log(noise) - torch.log1p(-noise) + logits) / tau)
    if not hard:
        return relaxed, relaxed
    hard_sample = (relaxed > 0.5).to(relaxed.dtype)
    return hard_sample - relaxed.detach() + relaxed, relaxed


class Selector(nn.Module, Configurable, ABC):
    """A subgraph selector :math:`t(\\cdot)` (paper Section 4): a batch in, a :class:`Selection` out.

    Subclasses implement :meth:`forward` and declare their hyperparameters (``selector.*``
    keys) in a nested ``Hparams`` class that subclasses their base class's, read as
    ``self.hp.<name>`` (annotate ``hp: Hparams``); :class:`~grprune.selectors.gumbel.GumbelSelector`
    adds the Gumbel (binary concrete) sampling of PrunE, so that a learned
    selector only scores edges.

    Attributes
    ----------
    learned : bool
        False for selectors without learned edge scores (e.g. random dropping);
        regularizers that need edge logits refuse them (``Regularizer.supports``).
    display_name : str or None
        The method's name in tables when this selector runs without regularizers
        (``DropEdge``); None: the registered name.
    table_order : float
        Position of that method among the rows of a results table (smaller first).
    method_keys : frozenset of str
        Hyperparameters that define the method, which a preset's ``selector.*`` keys leave
        as they are (DropEdge's full-graph evaluation: the ``official`` preset's sampled
        evaluation is the PrunE selector's); ``-H`` still sets them.
    """

    learned: ClassVar[bool] = True
    display_name: ClassVar[str | None] = None
    table_order: ClassVar[float] = math.inf
    method_keys: ClassVar[frozenset[str]] = frozenset()
    #: the name :data:`SELECTORS` registered the class under (set by the registry)
    registered_name: ClassVar[str] = ""

    def __init__(self, feature_kind: str = "ogb", node_dim: int = 0, edge_dim: int = 0,
                 **hparams) -> None:
        super().__init__()
        self.init_hparams(hparams)

    @property
    def hparam_prefix(self) -> str:
        """The prefix of a selector's keys, ``selector.``."""
        return "selector."

    @abstractmethod
    def forward(self, batch: GraphBatch) -> Selection:
        """The selection for ``batch``: one entry per directed edge (E,)."""

    #: seed of evaluation noise (``eval_mode=sample``), set by
    #: :func:`grprune.evaluation.evaluate_batches` for its call
    eval_seed: int = 0
    _draw_batch: GraphBatch | None = None
    _draw: int = 0

    def eval_draw(self, batch: GraphBatch) -> int:
        """Which draw of :attr:`eval_draws` this evaluation forward pass on ``batch`` is:
        0 on a new batch, then 1, 2, ... while the same batch object comes back
        (:meth:`grprune.model.GraphClassifier.predict` averages draws on one batch)."""
        draw = self._draw + 1 if self._draw_batch is batch else 0
        self._draw_batch, self._draw = batch, draw
        return draw

    def reset_eval_draws(self) -> None:
        """Forget the last batch seen (:meth:`eval_draw`); called when an evaluation ends."""
        self._draw_batch, self._draw = None, 0

    @property
    def eval_draws(self) -> int:
        """Forward passes whose predictions evaluation averages: 1 here; a selector whose
        evaluation samples (``eval_mode=sample``) returns its ``eval_samples``."""
        return 1


SELECTORS.base = Selector


def check_selection(selection: Any, batch: GraphBatch, name: str) -> Selection:
    """:meth:`Selection.validate` for the selector ``name``'s output on ``batch``.

    Raises
    ------
    GrpruneError
        If it is not a :class:`Selection` or fails validation; the message names
        the selector.
    """
    if not isinstance(selection, Selection):
        raise GrpruneError(f"selector {name!r} returned {type(selection).__name__}, "
                           f"not a Selection")
    try:
        return selection.validate(batch.src.numel())
    except (ValueError, TypeError, AttributeError, RuntimeError) as exc:
        raise GrpruneError(f"selector {name!r} returned an invalid Selection: {exc}") from None


def budget_mask(bond_score: Tensor, batch: GraphBatch, budget: float) -> Tensor:
    """Keep the :math:`\\lceil \\eta\\, U_G \\rceil` highest-scored bonds of each graph.

    Parameters
    ----------
    bond_score : Tensor of shape (U,)
        A score per bond of the batch (the logit; any increasing function of
        :math:`p` ranks the same).
    batch : GraphBatch
    budget : float
        :math:`\\eta` in [0, 1].

    Returns
    -------
    Tensor of shape (U,), bool
        True for a kept bond. Ties keep the earlier bond.
    """
    bond_graph = bond_value(batch.edge_graph, batch.bond, bond_score.shape[0])
    return top_fraction_in_segment(bond_score, bond_graph, batch.num_graphs, budget)
