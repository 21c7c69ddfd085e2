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
