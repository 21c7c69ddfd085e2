"""Losses shared by the trainer and the regularizers."""

from __future__ import annotations

import torch
from torch import Tensor


def cross_entropy(logits: Tensor, y: Tensor, reduction: str = "mean",
                  mask: Tensor | None = None) -> Tensor:
    """Cross-entropy :math:`-\\log \\mathrm{softmax}(z)_y` per graph (paper Eq. 6).

    The same values as :func:`torch.nn.functional.cross_entropy`, written as
    ``log_softmax`` and ``gather``: PyTorch's CUDA ``nll_loss`` backward accumulates with
    atomic adds and is refused under ``torch.use_deterministic_algorithms(True)``
    (``train.deterministic``), while ``gather`` has a deterministic backward.

    Parameters
    ----------
    logits : Tensor of shape (B, C)
    y : Tensor of shape (B,), int64 class ids
    reduction : {"mean", "none"}
    mask : Tensor of shape (B,), bool, optional
        Graphs that count (False: padding, :func:`grprune.batch.pad_batch`); the mean is
        then over them, :math:`\\sum_i m_i \\ell_i / \\max(1, \\sum_i m_i)`, written
        without a host synchronisation. Ignored by ``reduction="none"``.

    Returns
    -------
    Tensor, a scalar (``mean``; 0 with a gradient path for ``B = 0``) or of shape (B,)
    """
    per_graph = -torch.log_softmax(logits, dim=-1).gather(1, y.view(-1, 1)).squeeze(1)
    if reduction == "none":
        return per_graph
    if mask is not None:
        m = mask.to(per_graph.dtype)
        return (per_graph * m).sum() / m.sum().clamp_min(1)
    return per_graph.mean() if per_graph.numel() else per_graph.sum()


class EpochSums:
    """An epoch's sums of per-step loss terms, kept on the device and read back once.

    Each step adds its terms (scalar Tensors, by name) times a weight, the step's number of
    real graphs; :meth:`read` returns the sums as Python floats with one device-to-host copy
    for the epoch (``.tolist()`` of one vector), instead of one ``float(tensor)``, a device
    synchronisation, per term. While every step gives the same terms, of one dtype, they are
    added as one vector (``stack``, ``mul``, ``add``: three ops a step, not two per term); a
    step with other terms (a regularizer that skips one) turns the vector into one sum per
    term. Either way each sum is :math:`((0 + w_1 x_1) + w_2 x_2) + \\dots` over the steps
    that gave the term, in step order: the values of summing each term by itself, bit for bit.

    Examples
    --------
    >>> sums = EpochSums()
    >>> sums.add({"ce": torch.tensor(0.5), "total": torch.tensor(1.5)}, 2)
    >>> sums.add({"ce": torch.tensor(0.25), "total": torch.tensor(1.0)}, 4)
    >>> sums.read(torch.tensor(3.0))
    ({'ce': 2.0, 'total': 7.0}, [3.0])
    """

    def __init__(self) -> None:
        self._names: tuple[str, ...] | None = None  # the terms of the vector ``_vector``
        self._vector: Tensor | None = None
        self._each: dict[str, Tensor] = {}  # one sum per term, once the terms varied

    def add(self, terms: dict[str, Tensor], weight: int) -> None:
        """Add ``weight * value`` to each term's sum (no gradient is kept).

        Parameters
        ----------
        terms : dict of str to Tensor
            Scalar (0-dim) Tensors, e.g. a step's ``ce`` and ``total``.
        weight : int
            The step's real graphs (a Python number: no Tensor is made for it).
        """
        with torch.no_grad():
            names = tuple(terms)
            values = list(terms.values())
            # one vector while the terms, their shapes (scalars) and their dtype stay the same:
            # stacking other dtypes would promote them and round the products otherwise
            uniform = bool(values) and all(
                v.dim() == 0 and v.dtype == values[0].dtype and v.device == values[0].device
                for v in values) and (self._vector is None or values[0].dtype == self._vector.dtype)
            if self._vector is None and not self._each and uniform:
                self._names = names
            if self._names is not None and names == self._names and uniform:
                step = torch.stack(values) * weight
                self._vector = step + 0.0 if self._vector is None else self._vector + step
                return
            if self._names is not None and self._vector is not None:
                self._each = dict(zip(self._names, self._vector.unbind()))
            self._names, self._vector = None, None
            for k, v in terms.items():
                self._each[k] = self._each.get(k, 0.0) + v * weight

    def read(self, *extra: Tensor) -> tuple[dict[str, float], list[float]]:
        """The sums by name, and ``extra`` (scalar Tensors read in the same copy), as floats.

        Returns
        -------
        (dict of str to float, list of float)
            The sums (in the order the terms first came) and one float per ``extra`` (a
            bool Tensor reads as 1.0 or 0.0).
        """
        names = list(self._names or ()) + list(self._each)
        parts = ([] if self._vector is None else [self._vector]) + [
            v.reshape(1) for v in (*self._each.values(), *extra)]
        if not parts:
            return {}, []
        values = torch.cat(parts).tolist()  # the one read-back
        return dict(zip(names, values)), values[len(names):]


def masked_target_loss(pred: Tensor, y: Tensor, task: str, mask: Tensor | None = None) -> Tensor:
    """The loss of a multi-label or regression head over the labelled entries only.

    ``multilabel``: binary cross-entropy on the logits,
    :math:`-[y \\log \\sigma(z) + (1 - y) \\log(1 - \\sigma(z))]`
    (:func:`torch.nn.functional.binary_cross_entropy_with_logits`); ``regression``: the
    squared error :math:`(z - y)^2` of the head's output against the (standardized) target.
    An entry counts when its label is not NaN (a missing label, OGB's and chemprop's
    masking) and its graph is real (``mask``); the loss is the mean over the counted
    entries, :math:`\\sum_{ij} m_{ij} \\ell_{ij} / \\max(1, \\sum_{ij} m_{ij})`.

    Parameters
    ----------
    pred : Tensor of shape (B, T)
        Logits (``multilabel``) or standardized predictions (``regression``).
    y : Tensor of shape (B, T), float
        0/1 labels or standardized targets; NaN where missing.
    task : {"multilabel", "regression"}
    mask : Tensor of shape (B,), bool, optional
        Graphs that count (False: padding).

    Returns
    -------
    Tensor, a scalar (0 with a gradient path when no entry counts)

    Examples
    --------
    >>> y = torch.tensor([[1.0, float("nan")], [3.0, 0.0]])
    >>> float(masked_target_loss(torch.tensor([[0.0, 5.0], [1.0, 0.0]]), y, "regression"))
    1.6666666269302368
    """
    seen = ~torch.isnan(y)
    if mask is not None:
        seen = seen & mask.view(-1, 1)
    target = torch.where(seen, y, torch.zeros_like(y))
    if task == "multilabel":
        per = torch.nn.functional.binary_cross_entropy_with_logits(pred, target,
                                                                   reduction="none")
    else:
        per = (pred - target) ** 2
    m = seen.to(per.dtype)
    return (per * m).sum() / m.sum().clamp_min(1)
