"""The numbers before each position, for the heads that read them: FoNE's context head (``fone_head_input=
"context"``, `numadapter.methods.fone.head`) and xVal's head over the latest numbers (``xval_context_numbers``,
`numadapter.methods.xval.head`).

A causal LM's hidden state at position t predicts the token at t + 1; when that token is [NUM], such a head may build
the answer from the numbers at positions ``<= t``: FoNE from their exact features combined with learned signs, xVal
from their values with learned weights. This module finds those numbers:

- `last_numbers`: for every position of a batch, the last K numbers at or before it, most recent first (training,
  and the forward's per-position outputs).
- `ContextMemory`: the same for the last position of every row during generation, fed the prompt's numbers once and
  then every generated number fed back, so the cached decode loop (one token per step) sees what the full forward
  sees.
- `combine_exactly`: the exact value of a signed combination of those numbers (integer digit arithmetic, no
  wrapping), which generation compares with what the head wrote: the head computes on angles, modulo
  ``10^int_digits``.

Shapes: B rows, T positions, K = the method's `context_size` (``fone_context_numbers`` / ``xval_context_numbers``),
P = ``int_digits + frac_digits`` places.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from numadapter.schema import NumberInputs


class ContextNumbers(NamedTuple):
    """The last K numbers before some positions, most recent first (slot 0 is the latest).

    Attributes:
        digits: int64 ``[..., K, P]`` place digits of ``|x|``, most significant first (zeros in empty slots).
        sign: int64 ``[..., K]`` of +1 / -1 (+1 in empty slots and when the sign is text).
        valid: bool ``[..., K]``: whether the slot holds a number.
        keys: ``fone_context_pointer``: float ``[..., K, D]`` each number's key, read from the hidden state at its
            own position (`FoNEDigitHead.number_keys`; zeros in empty slots); None otherwise.
    """

    digits: torch.Tensor
    sign: torch.Tensor
    valid: torch.Tensor
    keys: torch.Tensor | None = None

    def select(self, index: tuple[torch.Tensor, ...] | torch.Tensor | slice) -> ContextNumbers:
        """The same slots at the positions `index` selects (e.g. the target rows ``(b, t)``)."""
        keys = None if self.keys is None else self.keys[index]
        return ContextNumbers(self.digits[index], self.sign[index], self.valid[index], keys)


def last_numbers(
    mask: torch.Tensor,
    digits: torch.Tensor,
    sign: torch.Tensor | None,
    count: int,
    starts: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
) -> ContextNumbers:
    """For every position, the last `count` numbers at or before it in its row (and in its example, with `starts`).

    Args:
        mask: ``[B, T]`` nonzero at number ([NUM]) positions.
        digits: int64 ``[B, T, P]`` place digits at number positions.
        sign: int64 ``[B, T]`` of +1 / -1 at number positions, or None (every number non-negative).
        count: K, the slots per position.
        starts: bool ``[B, T]``, True where a new example begins inside the row (packed rows: where
            ``position_ids`` restart at 0), or None (one example per row). A number never counts for another example.
        keys: float ``[B, T, D]`` a key at every position (``fone_context_pointer``), gathered at the numbers'
            positions like their digits; or None.

    Returns:
        `ContextNumbers` with ``digits [B, T, K, P]``, ``sign [B, T, K]``, ``valid [B, T, K]`` and, with `keys`,
        ``keys [B, T, K, D]``.
    """
    is_number = mask != 0  # (B, T)
    batch, length = is_number.shape
    seen = is_number.long().cumsum(-1)  # (B, T): numbers at or before t
    order = (seen - 1).clamp(min=0)  # (B, T): the index (in the row's numbers) of each number position
    width = max(int(seen[:, -1].max()) if length else 0, 1)  # the most numbers in a row (one host sync)
    rows = torch.arange(batch, device=mask.device)[:, None].expand(batch, length)  # (B, T)
    listed = digits.new_zeros(batch, width + 1, digits.shape[-1])  # (B, W + 1, P); column W is a dump
    listed_sign = torch.ones(batch, width + 1, dtype=torch.long, device=mask.device)  # (B, W + 1)
    column = torch.where(is_number, order, torch.full_like(order, width))  # (B, T): non-numbers go to the dump
    listed[rows, column] = digits.long()
    if sign is not None:
        listed_sign[rows, column] = torch.where(is_number, sign.long(), 1)
    slots = torch.arange(count, device=mask.device)  # (K,)
    wanted = seen[..., None] - 1 - slots  # (B, T, K): the index of the k-th latest number
    first = torch.zeros_like(seen)  # (B, T): the index of the first number of each position's example
    if starts is not None:  # seen is non-decreasing, so a running max carries each example's start forward
        first = torch.where(starts, seen - is_number.long(), 0).cummax(-1).values
    valid = wanted >= first[..., None]
    wanted = wanted.clamp(min=0)
    picked = listed[rows[..., None], wanted]  # (B, T, K, P)
    picked_sign = listed_sign[rows[..., None], wanted]  # (B, T, K)
    picked_keys = None
    if keys is not None:  # gathered with a graph (the keys train): a new tensor, not an in-place write
        at = torch.full((batch, width + 1), length, dtype=torch.long, device=mask.device)  # (B, W + 1)
        at[rows, column] = torch.arange(length, device=mask.device).expand(batch, length)
        padded = torch.cat((keys, keys.new_zeros(batch, 1, keys.shape[-1])), 1)  # (B, T + 1, D): T is zeros
        where = at[rows[..., None], wanted]  # (B, T, K): the position of each slot's number
        where = torch.where(valid, where, length)
        picked_keys = padded[rows[..., None], where]  # (B, T, K, D)
    return ContextNumbers(
        digits=torch.where(valid[..., None], picked, 0),
        sign=torch.where(valid, picked_sign, 1),
        valid=valid,
        keys=picked_keys,
    )


def fixed_point_values(digits: torch.Tensor, sign: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """int ``[..., P]`` place digits (most significant first) and ``[...]`` signs -> int64 ``[...]`` signed
    fixed-point values in units of the lowest place (`numadapter.numbers.fixed_point` on tensors; exact for up to 18
    places); 0 where `valid` is False."""
    places = digits.shape[-1]
    weights = 10 ** torch.arange(places - 1, -1, -1, device=digits.device, dtype=torch.long)  # (P,)
    values = (digits.long() * weights).sum(-1) * torch.where(sign < 0, -1, 1)
    return values if valid is None else torch.where(valid, values, 0)


def combine_exactly(numbers: ContextNumbers, coefficients: torch.Tensor) -> torch.Tensor:
    """The exact value of ``sum_k c_k x_k`` over the K context numbers (signed, empty slots left out), in place digits.

    Integer arithmetic on the digits, place by place with carries, so it never wraps: the value is
    ``overflow * 10^P + digits`` in units of the lowest place (``10^-frac_digits``), where ``digits`` is the
    combination modulo ``10^P`` (what the head's angles hold) and ``overflow = floor(value / 10^P)`` (0 exactly
    when ``0 <= value < 10^int_digits``).

    Args:
        numbers: `ContextNumbers` with ``digits [N, K, P]``, ``sign [N, K]``, ``valid [N, K]``.
        coefficients: int ``[N, K]`` of -1, 0, +1 (slot 0 the latest number).

    Returns:
        int64 ``[N, 2 + P]``: column 0 the count of numbers combined (nonzero coefficients on valid slots), column 1
        the overflow, then the P place digits of the value modulo ``10^P``, most significant first.
    """
    weights = coefficients.long() * numbers.sign.long() * numbers.valid.long()  # (N, K)
    place_sums = (weights[..., None] * numbers.digits.long()).sum(-2)  # (N, P), each in [-9K, 9K]
    carry = torch.zeros_like(place_sums[..., 0])  # (N,)
    digits = []
    for place in range(place_sums.shape[-1] - 1, -1, -1):  # lowest place first
        total = place_sums[..., place] + carry
        digits.append(torch.remainder(total, 10))
        carry = torch.div(total, 10, rounding_mode="floor")
    terms = (weights != 0).sum(-1)  # (N,)
    return torch.stack([terms, carry, *digits[::-1]], -1)  # (N, 2 + P)


def context_at(
    before: NumberInputs | None, current: NumberInputs | None, batch: int, length: int, places: int, count: int,
    device: torch.device, position_ids: torch.Tensor | None = None, keys: torch.Tensor | None = None,
) -> ContextNumbers:  # fmt: skip
    """`last_numbers` for the last `length` positions of a forward call's side `current` (the hidden states the
    head reads: all of them, or fewer with ``logits_to_keep``).

    Args:
        before: a side whose numbers all come before every position of `current` (T5's encoder), or None.
        current: the side the hidden states belong to (a causal LM's input, T5's decoder), or None.
        batch: B.
        length: how many of `current`'s last positions to return.
        places: P.
        count: K.
        device: where empty slots are built.
        position_ids: ``[B, T]`` of the current side, or None: a packed row's examples begin where they restart at
            0, and a number never counts for another example.
        keys: ``fone_context_pointer``: float ``[B, T, D]`` the key at every position of `current` (a causal LM's
            input, all T positions, also those beyond `length`; no earlier side), or None.

    Returns:
        `ContextNumbers` with ``digits [B, length, K, P]``, ``sign`` and ``valid [B, length, K]`` (and ``keys
        [B, length, K, D]``); every slot empty when neither side has numbers.
    """
    if keys is not None and before is not None:
        raise ValueError(
            "fone_context_pointer reads each number's key from the hidden state at its own position, which a call "
            "with earlier numbers (past_key_values, or T5's encoder) does not have: run the forward on the whole "
            "sequence, or generate with numadapter.generate / model.generate, which keep the keys."
        )
    sides = [side for side in (before, current) if side is not None and side.has_numbers and side.digits is not None]
    if not sides:
        return ContextNumbers(
            torch.zeros(batch, length, count, places, dtype=torch.long, device=device),
            torch.ones(batch, length, count, dtype=torch.long, device=device),
            torch.zeros(batch, length, count, dtype=torch.bool, device=device),
            None if keys is None else keys.new_zeros(batch, length, count, keys.shape[-1]),
        )
    if sides[-1] is not current:  # no numbers on the current side: its positions come after the earlier numbers
        empty = torch.zeros(batch, length, dtype=torch.long, device=sides[0].mask.device)
        sides.append(NumberInputs(mask=empty, digits=empty.new_zeros(batch, length, places), sign=None))
    mask = torch.cat([side.mask for side in sides], 1)  # (B, T_before + T)
    digits = torch.cat([side.digits for side in sides], 1)  # (B, T_before + T, P)
    sign = torch.cat([side.sign if side.sign is not None else torch.ones_like(side.mask) for side in sides], 1)
    starts = None
    if position_ids is not None and position_ids.shape == sides[-1].mask.shape:
        earlier = [torch.zeros_like(side.mask, dtype=torch.bool) for side in sides[:-1]]
        starts = torch.cat([*earlier, position_ids == 0], 1)  # (B, T_before + T)
    numbers = last_numbers(mask, digits, sign, count, starts, keys)
    return numbers.select((slice(None), slice(mask.shape[1] - length, None)))


class ContextMemory:
    """The last K numbers of every row in a decode loop (what `last_numbers` gives at the row's last position).

    Args:
        mask: ``[B, T]`` the prompt's number mask.
        digits: int64 ``[B, T, P]`` the prompt's place digits.
        sign: int64 ``[B, T]`` or None.
        count: K.
        keys: ``fone_context_pointer``: float ``[B, T, D]`` the key at every prompt position, or None.
    """

    def __init__(
        self,
        mask: torch.Tensor,
        digits: torch.Tensor,
        sign: torch.Tensor | None,
        count: int,
        keys: torch.Tensor | None = None,
    ) -> None:
        self.numbers = last_numbers(mask, digits, sign, count, keys=keys).select((slice(None), -1))  # (B, K, ...)

    def rows(self, rows: list[int]) -> ContextNumbers:
        """The context of `rows`, each ``[1, 1, K, ...]`` stacked to ``[N, 1, K, ...]`` (the head's row layout)."""
        index = torch.tensor(rows, dtype=torch.long, device=self.numbers.valid.device)
        return ContextNumbers(
            *(None if part is None else part.index_select(0, index).unsqueeze(1) for part in self.numbers)
        )

    def push(
        self, rows: list[int], digits: torch.Tensor, sign: torch.Tensor, keys: torch.Tensor | None = None
    ) -> None:
        """Records the numbers fed back to `rows` as their latest (the oldest slot drops out).

        Args:
            rows: the rows whose fed token is [NUM].
            digits: int64 ``[B, P]`` the fed numbers' digits (read on `rows` only).
            sign: int64 ``[B]`` their signs.
            keys: ``[B, D]`` their keys (``fone_context_pointer``), or None: zeros until `set_latest_keys` gives
                them (a [NUM]'s key is the hidden state at the [NUM] itself, one step after its number is known).
        """
        if not rows:
            return
        index = torch.tensor(rows, dtype=torch.long, device=digits.device)
        old = self.numbers
        new_keys = None
        if old.keys is not None:
            latest = keys if keys is not None else old.keys.new_zeros(old.keys.shape[0], old.keys.shape[-1])
            new_keys = torch.cat((latest[:, None].to(old.keys.dtype), old.keys[:, :-1]), 1)
        shifted = ContextNumbers(
            torch.cat((digits[:, None], old.digits[:, :-1]), 1),
            torch.cat((sign[:, None], old.sign[:, :-1]), 1),
            torch.cat((torch.ones_like(old.valid[:, :1]), old.valid[:, :-1]), 1),
            new_keys,
        )
        self.numbers = ContextNumbers(
            *(
                None if part is None else part.index_copy(0, index, new.index_select(0, index))
                for part, new in zip(old, shifted)
            )
        )

    def set_latest_keys(self, rows: list[int], keys: torch.Tensor) -> None:
        """Sets the key of the latest number of `rows` (``keys [B, D]``, read on `rows`): a [NUM] pushed one step
        before, whose key the step that fed it has just computed."""
        if not rows or self.numbers.keys is None:
            return
        index = torch.tensor(rows, dtype=torch.long, device=keys.device)
        current = self.numbers.keys
        latest = current[:, 0].index_copy(0, index, keys.index_select(0, index).to(current.dtype))  # (B, D)
        self.numbers = self.numbers._replace(keys=torch.cat((latest[:, None], current[:, 1:]), 1))
