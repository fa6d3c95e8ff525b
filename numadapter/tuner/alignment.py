"""Alignment between hidden states, labels and number tensors: one function per architecture kind.

docs/DESIGN.md, "One function owns each alignment":

- Causal LM (`causal_targets`): the hidden state at position t predicts token t+1. The number head at t is trained
  on the number of the [NUM] at t+1, and only where ``labels[t+1]`` is that [NUM] (a label of -100 means "not
  trained"). The LM cross-entropy pairs ``logits[t]`` with ``labels[t+1]`` (`causal_lm_labels`).
- T5 (`seq2seq_targets`): decoder hidden state t predicts ``labels[t]``; the number head at t is trained on the
  number of ``labels[t]``. Decoder inputs are the labels shifted right, and so are their number tensors
  (`shift_right_numbers`): decoder position t carries the number of ``labels[t-1]``.
- Causal LM with ``shift_labels`` (labels already aligned with the logits) and ``labels_num_*``: the same function
  as T5 (`seq2seq_targets`); the last position can then be trained on a number that is not fed.

Every function takes and returns plain tensors (no model), so tests pin them with hand-made inputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from numadapter.schema import IGNORE_INDEX, NumberInputs, NumberTargets  # noqa: F401  (NumberTargets: re-exported)


def _shift_left(tensor: torch.Tensor | None, fill: float | int) -> torch.Tensor | None:
    """``out[:, t] = tensor[:, t + 1]``; the last position gets `fill`."""
    if tensor is None:
        return None
    out = torch.full_like(tensor, fill)
    out[:, :-1] = tensor[:, 1:]
    return out


def _shift_right(tensor: torch.Tensor | None, fill: float | int) -> torch.Tensor | None:
    """``out[:, t] = tensor[:, t - 1]``; the first position gets `fill`."""
    if tensor is None:
        return None
    out = torch.full_like(tensor, fill)
    out[:, 1:] = tensor[:, :-1]
    return out


def _targets(mask: torch.Tensor, numbers: NumberInputs, shift: bool) -> NumberTargets:
    move = _shift_left if shift else (lambda tensor, fill: tensor)
    digits = move(numbers.digits, 0)
    sign = move(numbers.sign, 1)
    values = move(numbers.values, 0.0)
    if digits is not None:
        digits = torch.where(mask.unsqueeze(-1), digits, torch.zeros_like(digits))
    if sign is not None:
        sign = torch.where(mask, sign, torch.ones_like(sign))
    if values is not None:
        values = torch.where(mask, values, torch.zeros_like(values))
    return NumberTargets(mask=mask, digits=digits, sign=sign, values=values)


def causal_targets(labels: torch.Tensor, marker_id: int, numbers: NumberInputs) -> NumberTargets:
    """Number-head targets of a causal LM: hidden t is trained on the number at t+1 where ``labels[t+1] == marker``.

    Args:
        labels: int64 ``[B, T]`` aligned with ``input_ids`` (-100 = not trained).
        marker_id: the [NUM] token id.
        numbers: the number tensors aligned with ``input_ids`` (the [NUM] at t+1 carries ``numbers[:, t+1]``).

    Returns:
        `NumberTargets` aligned with the hidden states.
    """
    mask = torch.zeros_like(labels, dtype=torch.bool)
    mask[:, :-1] = labels[:, 1:] == marker_id
    return _targets(mask, numbers, shift=True)


def seq2seq_targets(labels: torch.Tensor, marker_id: int, label_numbers: NumberInputs) -> NumberTargets:
    """Number-head targets of T5: decoder hidden t is trained on the number of ``labels[t]`` where it is [NUM].

    Args:
        labels: int64 ``[B, L]`` decoder labels (-100 = not trained).
        marker_id: the [NUM] token id.
        label_numbers: the number tensors aligned with `labels` (``labels_num_*``).

    Returns:
        `NumberTargets` aligned with the decoder hidden states.
    """
    return _targets(labels == marker_id, label_numbers, shift=False)


def causal_lm_labels(labels: torch.Tensor) -> torch.Tensor:
    """Labels for ``logits[:, t]``: ``labels[:, t + 1]``, the last position -100 (no copy of the logits needed)."""
    return F.pad(labels[:, 1:], (0, 1), value=IGNORE_INDEX)


def shift_right_numbers(label_numbers: NumberInputs, decoder_input_ids: torch.Tensor, marker_id: int) -> NumberInputs:
    """T5 decoder-side number tensors from the label-side ones: shifted right by one, like the decoder inputs.

    Decoder position 0 is the start token (no number); position t carries the number of ``labels[t-1]``. Where the
    label was -100, T5 feeds a pad token instead, which carries no number: the mask is also and-ed with
    ``decoder_input_ids == marker_id``.

    Args:
        label_numbers: number tensors aligned with the labels ``[B, L]``.
        decoder_input_ids: ``[B, L]`` the shifted-right labels the decoder reads.
        marker_id: the [NUM] / [AGG] token id.

    Returns:
        `NumberInputs` aligned with `decoder_input_ids`.
    """
    mask = _shift_right(label_numbers.mask, 0)
    mask = mask * (decoder_input_ids == marker_id).to(mask.dtype)
    return NumberInputs(
        mask=mask,
        digits=_shift_right(label_numbers.digits, 0),
        sign=_shift_right(label_numbers.sign, 0),
        values=_shift_right(label_numbers.values, 0.0),
        has_numbers=label_numbers.has_numbers,
    )
