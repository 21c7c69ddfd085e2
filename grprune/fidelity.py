"""Explanation scores without ground truth: fidelity+, fidelity−, characterization, sparsity.

The definitions are GraphFramEx's (Amara et al., "GraphFramEx: Towards Systematic
Evaluation of Explainability Methods for Graph Neural Networks", LoG 2022,
arXiv:2206.09677), in the forms PyTorch Geometric implements them
(``torch_geometric.explain.metric.fidelity`` and ``characterization_score``, PyG 2.3+).
``tests/test_fidelity.py`` checks the accuracy forms and the characterization against
PyG on the same model and masks, where PyG is installed (the ``pyg`` extra).

For ``N`` graphs :math:`G_i` with explanation :math:`S_i \\subseteq E_i` (the bonds the
selector keeps) the model is run three times: on the graph, on the explanation alone
:math:`G_S` (the other bonds removed) and on its complement :math:`G_{C \\setminus S}`
(the explanation's bonds removed). With :math:`\\hat y_i` the prediction on
:math:`G_i` and :math:`y_i` the target:

* **accuracy form** (PyG's ``fidelity``). A *phenomenon* explanation (target = the
  label) scores

  .. math::

     \\mathrm{fid}_+ = \\frac{1}{N}\\sum_i \\bigl|\\mathbb 1(\\hat y_i = y_i)
        - \\mathbb 1(\\hat y_i^{G_{C\\setminus S}} = y_i)\\bigr|, \\qquad
     \\mathrm{fid}_- = \\frac{1}{N}\\sum_i \\bigl|\\mathbb 1(\\hat y_i = y_i)
        - \\mathbb 1(\\hat y_i^{G_S} = y_i)\\bigr|;

  a *model* explanation (target = the model's own prediction, :math:`y_i = \\hat y_i`)

  .. math::

     \\mathrm{fid}_+ = 1 - \\frac{1}{N}\\sum_i \\mathbb 1(\\hat y_i^{G_{C\\setminus S}}
        = \\hat y_i), \\qquad
     \\mathrm{fid}_- = 1 - \\frac{1}{N}\\sum_i \\mathbb 1(\\hat y_i^{G_S} = \\hat y_i).

* **probability form** (GraphFramEx Eq. 1–2; not in PyG): differences of the
  predicted probability :math:`f(\\cdot)_{y_i}` of the target class, signed
  (a negative value: the subgraph raises the target's probability)

  .. math::

     \\mathrm{fid}_+^{prob} = \\frac{1}{N}\\sum_i \\bigl(f(G_i)_{y_i}
        - f(G_{C\\setminus S,i})_{y_i}\\bigr), \\qquad
     \\mathrm{fid}_-^{prob} = \\frac{1}{N}\\sum_i \\bigl(f(G_i)_{y_i}
        - f(G_{S,i})_{y_i}\\bigr).

* **characterization** (GraphFramEx Eq. 3, PyG's ``characterization_score``), the
  weighted harmonic mean of :math:`\\mathrm{fid}_+` and :math:`1 - \\mathrm{fid}_-`
  of the accuracy form (a good explanation: high fid+, low fid−)

  .. math::

     \\mathrm{charact} = \\frac{w_+ + w_-}{\\frac{w_+}{\\mathrm{fid}_+}
        + \\frac{w_-}{1 - \\mathrm{fid}_-}}, \\qquad w_+ = w_- = 0.5;

  0 where :math:`\\mathrm{fid}_+ = 0` or :math:`\\mathrm{fid}_- = 1` (the limit, and
  what PyG's float arithmetic returns).

* **sparsity** (GraphFramEx §4): :math:`1 - |S_i| / |E_i|`, the share of a graph's
  bonds left out of its explanation, averaged over the graphs that have bonds (both
  directions of a bond share one mask, so bonds and directed edges give the same ratio).

Everything here is a pure function of tensors; running the model on :math:`G_S` and
:math:`G_{C\\setminus S}` is :mod:`grprune.explain_fidelity`'s.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

#: the two targets of GraphFramEx: the label (phenomenon) or the model's prediction (model)
EXPLANATION_TYPES = ("phenomenon", "model")


def fidelity(y: torch.Tensor, y_hat: torch.Tensor, y_hat_explanation: torch.Tensor,
             y_hat_complement: torch.Tensor, explanation_type: str = "phenomenon"
             ) -> tuple[float, float]:
    """Fidelity+ and fidelity− in the accuracy form (PyG's ``fidelity``; module docstring).

    Parameters
    ----------
    y : Tensor of int, shape (N,)
        Target class: the label (``phenomenon``) or the prediction on the full graph
        (``model``).
    y_hat, y_hat_explanation, y_hat_complement : Tensor of int, shape (N,)
        Predicted class on :math:`G`, on :math:`G_S` and on :math:`G_{C \\setminus S}`
        (``y_hat`` is not read for ``model``, whose target is it).
    explanation_type : {"phenomenon", "model"}

    Returns
    -------
    (float, float)
        :math:`(\\mathrm{fid}_+, \\mathrm{fid}_-)`, each in [0, 1]; NaN for N = 0.

    Examples
    --------
    >>> y, pred = torch.tensor([1, 0, 1, 1]), torch.tensor([1, 0, 0, 1])
    >>> fidelity(y, pred, torch.tensor([1, 0, 0, 0]), torch.tensor([0, 0, 1, 0]))
    (0.75, 0.25)
    >>> fidelity(pred, pred, torch.tensor([1, 0, 0, 0]), torch.tensor([0, 0, 1, 0]),
    ...          "model")
    (0.75, 0.25)
    """
    _check_type(explanation_type)
    if len(y) == 0:
        return math.nan, math.nan
    y = y.reshape(-1)
    hit_s = (y_hat_explanation.reshape(-1) == y).double()
    hit_c = (y_hat_complement.reshape(-1) == y).double()
    if explanation_type == "model":
        return float(1.0 - hit_c.mean()), float(1.0 - hit_s.mean())
    hit = (y_hat.reshape(-1) == y).double()
    return float((hit - hit_c).abs().mean()), float((hit - hit_s).abs().mean())


def fidelity_prob(target: torch.Tensor, prob: torch.Tensor, prob_explanation: torch.Tensor,
                  prob_complement: torch.Tensor) -> tuple[float, float]:
    """Fidelity+ and fidelity− in the probability form (GraphFramEx; module docstring).

    Parameters
    ----------
    target : Tensor of int, shape (N,)
        The class whose probability is compared (label or prediction).
    prob, prob_explanation, prob_complement : Tensor of float, shape (N, C)
        Class probabilities on :math:`G`, :math:`G_S` and :math:`G_{C \\setminus S}`.

    Returns
    -------
    (float, float)
        :math:`(\\mathrm{fid}_+^{prob}, \\mathrm{fid}_-^{prob})`, each in [-1, 1]; NaN for
        N = 0.

    Examples
    --------
    >>> p = torch.tensor([[0.2, 0.8], [0.6, 0.4]])
    >>> fidelity_prob(torch.tensor([1, 0]), p, torch.tensor([[0.3, 0.7], [0.5, 0.5]]),
    ...               torch.tensor([[0.9, 0.1], [0.6, 0.4]]))  # doctest: +ELLIPSIS
    (0.35..., 0.1...)
    """
    if len(target) == 0:
        return math.nan, math.nan
    t = target.reshape(-1, 1).long()

    def at_target(p: torch.Tensor) -> torch.Tensor:
        return p.double().gather(1, t).reshape(-1)

    full = at_target(prob)
    return (float((full - at_target(prob_complement)).mean()),
            float((full - at_target(prob_explanation)).mean()))


def characterization_score(pos_fidelity: float, neg_fidelity: float, pos_weight: float = 0.5,
                           neg_weight: float = 0.5) -> float:
    """GraphFramEx's characterization score (PyG's ``characterization_score``).

    .. math::

       \\mathrm{charact} = \\frac{w_+ + w_-}{\\frac{w_+}{\\mathrm{fid}_+}
          + \\frac{w_-}{1 - \\mathrm{fid}_-}}

    Parameters
    ----------
    pos_fidelity, neg_fidelity : float
        :math:`\\mathrm{fid}_+` and :math:`\\mathrm{fid}_-` of the accuracy form, in [0, 1].
    pos_weight, neg_weight : float
        :math:`w_+`, :math:`w_-`, summing to 1.

    Returns
    -------
    float
        In [0, 1]; 0 where :math:`\\mathrm{fid}_+ = 0` or :math:`\\mathrm{fid}_- = 1`; NaN
        where a fidelity is NaN.

    Raises
    ------
    ValueError
        If the weights do not sum to 1 (PyG's rule).

    Examples
    --------
    >>> round(characterization_score(0.75, 0.25), 6)
    0.75
    >>> characterization_score(0.8, 0.4)  # doctest: +ELLIPSIS
    0.685...
    >>> characterization_score(0.0, 0.5)
    0.0
    """
    if pos_weight + neg_weight != 1.0:
        raise ValueError(f"the weights need to sum to 1 (got {pos_weight} and {neg_weight})")
    if math.isnan(pos_fidelity) or math.isnan(neg_fidelity):
        return math.nan
    if pos_fidelity <= 0.0 or neg_fidelity >= 1.0:
        return 0.0
    return 1.0 / (pos_weight / pos_fidelity + neg_weight / (1.0 - neg_fidelity))


def sparsity(kept: torch.Tensor, total: torch.Tensor) -> float:
    """Mean over graphs of :math:`1 - |S_i| / |E_i|`, the share of bonds not in the explanation.

    Parameters
    ----------
    kept : Tensor of int, shape (N,)
        :math:`|S_i|`, bonds in each graph's explanation.
    total : Tensor of int, shape (N,)
        :math:`|E_i|`, bonds of each graph; graphs without bonds are left out.

    Returns
    -------
    float
        In [0, 1]; NaN when no graph has a bond.

    Examples
    --------
    >>> sparsity(torch.tensor([1, 3, 0]), torch.tensor([4, 3, 0]))
    0.375
    """
    total = total.reshape(-1).double()
    has = total > 0
    if not bool(has.any()):
        return math.nan
    return float((1.0 - kept.reshape(-1).double()[has] / total[has]).mean())


@dataclass(frozen=True)
class Fidelity:
    """The scores of one explanation type (:func:`fidelity_scores`); floats, NaN where
    undefined.

    Attributes
    ----------
    explanation_type : {"phenomenon", "model"}
    graphs : int
        N.
    fid_plus, fid_minus : float
        Accuracy form, in [0, 1].
    fid_plus_prob, fid_minus_prob : float
        Probability form, in [-1, 1].
    characterization : float
        Of the accuracy form, :math:`w_+ = w_- = 0.5`.
    sparsity : float
        Mean :math:`1 - |S|/|E|`.
    """

    explanation_type: str
    graphs: int
    fid_plus: float
    fid_minus: float
    fid_plus_prob: float
    fid_minus_prob: float
    characterization: float
    sparsity: float

    def to_dict(self) -> dict:
        """JSON values: NaN becomes None."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else v)
                for k, v in asdict(self).items()}


def fidelity_scores(label: torch.Tensor, prob: torch.Tensor, prob_explanation: torch.Tensor,
                    prob_complement: torch.Tensor, kept: torch.Tensor, total: torch.Tensor,
                    explanation_type: str = "phenomenon") -> Fidelity:
    """Every score of one explanation type from the three predictions.

    Predicted classes are the argmax of each row of class probabilities (ties: the lower
    class, as ``torch.argmax`` and PyG's ``get_target``).

    Parameters
    ----------
    label : Tensor of int, shape (N,)
        Class labels (read for ``phenomenon`` only).
    prob, prob_explanation, prob_complement : Tensor of float, shape (N, C)
        Class probabilities on :math:`G`, :math:`G_S` and :math:`G_{C \\setminus S}`.
    kept, total : Tensor of int, shape (N,)
        Bonds in each explanation and in each graph (:func:`sparsity`).
    explanation_type : {"phenomenon", "model"}

    Returns
    -------
    Fidelity

    Examples
    --------
    >>> p = torch.tensor([[0.2, 0.8], [0.7, 0.3]])
    >>> f = fidelity_scores(torch.tensor([1, 1]), p, p, p.flip(1), torch.tensor([1, 2]),
    ...                     torch.tensor([2, 2]))
    >>> f.fid_plus, f.fid_minus, f.characterization, f.sparsity
    (1.0, 0.0, 1.0, 0.25)
    """
    _check_type(explanation_type)
    y_hat = prob.argmax(-1)
    target = label.reshape(-1).long() if explanation_type == "phenomenon" else y_hat
    plus, minus = fidelity(target, y_hat, prob_explanation.argmax(-1),
                           prob_complement.argmax(-1), explanation_type)
    plus_p, minus_p = fidelity_prob(target, prob, prob_explanation, prob_complement)
    return Fidelity(explanation_type=explanation_type, graphs=int(len(label)),
                    fid_plus=plus, fid_minus=minus, fid_plus_prob=plus_p,
                    fid_minus_prob=minus_p,
                    characterization=characterization_score(plus, minus),
                    sparsity=sparsity(kept, total))


def _check_type(explanation_type: str) -> None:
    if explanation_type not in EXPLANATION_TYPES:
        raise ValueError(f"unknown explanation type {explanation_type!r}. Choices: "
                         f"{', '.join(EXPLANATION_TYPES)}")


__all__ = ["EXPLANATION_TYPES", "Fidelity", "characterization_score", "fidelity",
           "fidelity_prob", "fidelity_scores", "sparsity"]
