"""`digit_ntl`: NTL on 10-way digit distributions (FoNE's digit head), optionally weighted by place value."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from numadapter.ntl.value_loss import NumberValueLoss, _check_choice, _reduce
from numadapter.ntl.vocab import REDUCTIONS

_DIGIT_LOSSES: dict[tuple[Any, ...], NumberValueLoss] = {}  # digit_ntl's value tables, built once per option set


def digit_ntl(
    digit_logits: Tensor,
    target_digits: Tensor,
    kind: str = "was",
    *,
    squash_factor: float | None = None,
    sigma: float = 0.5,
    huber_delta: float = 1.0,
    place_weighted: bool = False,
    place_base: float = 10.0,
    reduction: str = "mean",
    ignore_index: int = -100,
    loss_weights: Tensor | None = None,
) -> Tensor:
    """NTL on 10-way digit distributions (values 0..9), e.g. FoNE's digit head: train with CE + lambda * this.

    Args:
        digit_logits: (N, P, 10) logits, places most significant first (the ``num_digits`` layout).
        target_digits: (N, P) int digits 0..9, or ``ignore_index``.
        kind, squash_factor, sigma, huber_delta: as `NTLoss` (``gce`` uses the 10-way softmax as the full one).
        place_weighted: weight place ``j`` by ``place_base^(P-1-j)``, normalised over each row's non-ignored places
            (number-level loss; ``"mean"`` then averages over numbers).
        reduction: ``"mean"`` (weighted mean), ``"sum"`` or ``"none"`` ((N, P)).
        loss_weights: optional (N, P) weights, multiplied with the place weights.

    Returns:
        float32 scalar, or (N, P) for ``"none"``.
    """
    _check_choice("reduction", reduction, REDUCTIONS)
    if digit_logits.dim() != 3 or digit_logits.shape[-1] != 10 or digit_logits.shape[:2] != target_digits.shape:
        raise ValueError(
            f"digit_ntl needs digit_logits (N, P, 10) and target_digits (N, P), got {tuple(digit_logits.shape)} "
            f"and {tuple(target_digits.shape)}."
        )
    if torch.is_floating_point(target_digits):
        raise TypeError(f"`target_digits` must be integer digits, got {target_digits.dtype}.")
    valid = target_digits != ignore_index
    bad = valid & ((target_digits < 0) | (target_digits > 9))
    if bool(bad.any()):
        raise ValueError(
            f"`target_digits` must be 0..9 or ignore_index={ignore_index}, got {target_digits[bad][0].item()}."
        )
    if loss_weights is not None and loss_weights.shape != target_digits.shape:
        raise ValueError(f"`loss_weights` must be {tuple(target_digits.shape)}, got {tuple(loss_weights.shape)}.")
    key = (kind, squash_factor, sigma, huber_delta)
    if key not in _DIGIT_LOSSES:
        _DIGIT_LOSSES[key] = NumberValueLoss(
            tuple(range(10)), (0,) * 10, kind, squash_factor=squash_factor, sigma=sigma, huber_delta=huber_delta
        )
    value_loss = _DIGIT_LOSSES[key]
    sub = torch.where(valid[..., None], digit_logits.float(), 0.0).reshape(-1, 10)  # (N*P, 10), no NaN if ignored
    slot = torch.where(valid, target_digits, 0).reshape(-1)
    lse = torch.logsumexp(sub, -1) if kind == "gce" else None
    loss = value_loss(sub, slot, lse)  # (N*P,)
    weight = valid.float()
    if place_weighted:
        if isinstance(place_base, bool) or not isinstance(place_base, (int, float)) or not 1 <= place_base < math.inf:
            raise ValueError(f"`place_base` must be a finite number >= 1, got {place_base!r}.")
        places = torch.arange(target_digits.shape[1], device=sub.device, dtype=torch.float32)  # (P,)
        logw = (-places * math.log(place_base)).expand(target_digits.shape).masked_fill(~valid, -math.inf)
        weight = torch.where(valid, logw.softmax(-1), 0.0)  # (N, P), rows sum to 1
    if loss_weights is not None:
        weight = weight * loss_weights.float()
    return _reduce(loss, weight.reshape(-1), reduction, target_digits.shape)
