"""The digit-aggregation auxiliary loss L_AUX (paper eq. 2) as a term of the adapter's loss."""

from __future__ import annotations

import torch

from numadapter.methods.base import NumberSettings


def aggregate_term(
    config: NumberSettings,
    logits: torch.Tensor,
    labels: torch.Tensor,
    digit_embeddings: torch.Tensor,
    numbers: torch.Tensor | int | None = None,
) -> torch.Tensor:
    """L_AUX of the digit-aggregation paper (eq. 2) on the aligned LM logits: summed over the numbers, / M.

    Args:
        config: the adapter config (``digit_token_ids``).
        logits: ``[B, T, V]`` aligned with `labels` ``[B, T]``.
        digit_embeddings: ``[10, H]`` the digit token embeddings (the metric of eq. 2).
        numbers: M, the number count of the accumulated batch; None: the count of this call (a per-call mean).
    """
    from numadapter.methods.aggregate.embedding import aggregate_aux_loss

    ids = config.digit_token_ids
    table = digit_embeddings.new_zeros(max(ids) + 1, digit_embeddings.shape[-1])  # rows only for the digit ids
    table[ids] = digit_embeddings
    mean, count = aggregate_aux_loss(logits, labels, ids, table)
    if numbers is None:
        return mean
    summed = mean * count  # the mean over this call's `count` numbers, back to their sum
    return summed / torch.as_tensor(numbers, device=summed.device).to(torch.float32).clamp(min=1)
