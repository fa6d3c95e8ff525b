"""`NTLoss` (LM logits vs labels) and `PlaceValueNTL` (number-level NTL for digit-tokenised numbers)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from numadapter.ntl.value_loss import NumberValueLoss, _check_choice, _reduce
from numadapter.ntl.vocab import REDUCTIONS, number_vocab


class NTLoss(nn.Module):
    """Number Token Loss on LM logits: ``loss = ntl(logits, labels)``.

    ``logits[:, t]`` is scored against ``labels[:, t]`` (no shift inside, like ``F.cross_entropy``); positions whose
    label is not a number token (text, ``ignore_index``, ids beyond the tokenizer) contribute nothing.

    Args:
        tokenizer: a Hugging Face tokenizer; read once, never modified.
        kind: ``"was"`` (default), ``"was-cdf"``, ``"mse"``, ``"mae"``, ``"huber"`` or ``"gce"`` (module docstring).
        digit_level: only single digits are number tokens (default, the paper's recommendation); ``False`` also
            accepts multi-digit tokens ("123", "\u2581" / "\u0120"-prefixed).
        squash_factor: cost ratio ``> 1`` of the farthest to the nearest wrong value, which costs 1 (``kind="was"``
            only, section 4.5; the ``ntloss`` package's scale, see the package docstring).
        reweigh: charge the probability mass outside the number tokens at the worst number's loss.
        sigma: Gaussian width of ``kind="gce"`` (eq. 7; the paper found 0.5 best).
        huber_delta: threshold of ``kind="huber"``.
        ignore_index: label id that marks positions to skip.
        reduction: ``"mean"`` (weighted mean over number positions, 0 when there are none), ``"sum"`` or
            ``"none"`` (``[B, T]``, zeros off number positions).
    """

    def __init__(
        self,
        tokenizer: Any,
        kind: str = "was",
        *,
        digit_level: bool = True,
        squash_factor: float | None = None,
        reweigh: bool = False,
        sigma: float = 0.5,
        huber_delta: float = 1.0,
        ignore_index: int = -100,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        _check_choice("reduction", reduction, REDUCTIONS)
        self.vocab = number_vocab(tokenizer, digit_level=digit_level)
        self.value_loss = NumberValueLoss(
            self.vocab.values,
            self.vocab.groups,
            kind,
            squash_factor=squash_factor,
            reweigh=reweigh,
            sigma=sigma,
            huber_delta=huber_delta,
        )
        self.kind, self.digit_level, self.ignore_index, self.reduction = kind, digit_level, ignore_index, reduction
        self._lookup: dict[torch.device, tuple[Tensor, Tensor]] = {}

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, number_tokens={len(self.vocab.token_ids)}, digit_level={self.digit_level}"

    @property
    def number_token_ids(self) -> tuple[int, ...]:
        """Ids of the K number tokens; column k of ``target_probs`` belongs to ``number_token_ids[k]``."""
        return self.vocab.token_ids

    def _tables(self, device: torch.device) -> tuple[Tensor, Tensor]:
        if device not in self._lookup:
            ids = torch.tensor(self.vocab.token_ids, dtype=torch.long, device=device)
            slot_of = torch.full((self.vocab.token_ids[-1] + 1,), -1, dtype=torch.long, device=device)
            slot_of[ids] = torch.arange(len(ids), device=device)
            self._lookup[device] = (ids, slot_of)
        return self._lookup[device]

    def slots(self, labels: Tensor) -> Tensor:
        """Index of each label among the number tokens, -1 where the label is not a number token (same shape)."""
        _, slot_of = self._tables(labels.device)
        inside = (labels >= 0) & (labels < slot_of.numel()) & (labels != self.ignore_index)
        return torch.where(inside, slot_of[labels.clamp(0, slot_of.numel() - 1)], -1)

    def number_mask(self, labels: Tensor) -> Tensor:
        """Bool mask of the positions NTL scores (label is a number token): e.g. to count them per batch."""
        return self.slots(labels) >= 0

    def position_weights(self, labels: Tensor, slot: Tensor, loss_weights: Tensor | None) -> Tensor:
        """Weight of each position (0 off number positions). Subclasses (`PlaceValueNTL`) override this."""
        weight = (slot >= 0).float()
        return weight if loss_weights is None else weight * loss_weights.float()

    def _check(self, logits: Tensor, labels: Tensor, loss_weights: Tensor | None, target: Tensor | None) -> None:
        if not torch.is_floating_point(logits):
            raise TypeError(f"`logits` must be a floating-point tensor, got {logits.dtype}.")
        if torch.is_floating_point(labels) or labels.dtype == torch.bool:
            raise TypeError(f"`labels` must hold integer token ids, got {labels.dtype}.")
        if logits.dim() < 2 or tuple(labels.shape) != tuple(logits.shape[:-1]):
            raise ValueError(
                f"`logits` must be [..., V] with `labels` [...] (e.g. [B, T, V] and [B, T]), got logits "
                f"{tuple(logits.shape)} and labels {tuple(labels.shape)}; shift labels before calling NTL."
            )
        if logits.shape[-1] <= self.vocab.token_ids[-1]:
            raise ValueError(
                f"`logits` has {logits.shape[-1]} columns but the tokenizer's number token "
                f"{self.vocab.tokens[-1]!r} has id {self.vocab.token_ids[-1]}: pass logits over the full vocabulary."
            )
        if loss_weights is not None and tuple(loss_weights.shape) != tuple(labels.shape):
            raise ValueError(f"`loss_weights` must have the labels' shape {tuple(labels.shape)}, got "
                             f"{tuple(loss_weights.shape)}.")  # fmt: skip
        if target is not None:
            if self.kind != "was-cdf":
                raise ValueError(f"`target_probs` needs kind='was-cdf' (eq. 5), got kind={self.kind!r}.")
            want = (*labels.shape, len(self.vocab.token_ids))
            if tuple(target.shape) != want:
                raise ValueError(
                    f"`target_probs` must be {want} (one column per number token, in `number_token_ids` order), "
                    f"got {tuple(target.shape)}."
                )

    def _loss_from_columns(
        self, sub: Tensor, lse: Tensor | None, labels: Tensor, loss_weights: Tensor | None, target: Tensor | None
    ) -> Tensor:
        """Reduced loss from the gathered number-token logits ``sub`` (N, K) of ``labels`` (B, T), N = B * T."""
        slot = self.slots(labels)  # (B, T)
        weight = self.position_weights(labels, slot, loss_weights).reshape(-1)  # (N,)
        slot = slot.reshape(-1)  # (N,)
        on = slot >= 0
        sub = torch.where(on[:, None], sub, 0.0)  # off-number rows: finite dummies, no NaN through -inf logits
        if lse is not None:
            lse = torch.where(on, lse, 0.0)
        loss = self.value_loss(sub, slot.clamp(min=0), lse, target)  # (N,)
        return _reduce(loss, weight, self.reduction, labels.shape)

    def forward(
        self,
        logits: Tensor,
        labels: Tensor,
        loss_weights: Tensor | None = None,
        *,
        target_probs: Tensor | None = None,
        logsumexp: Tensor | None = None,
    ) -> Tensor:
        """Compute NTL.

        Args:
            logits: (B, T, V) (any leading shape); V may exceed the tokenizer (padded vocabularies).
            labels: (B, T) token ids aligned with ``logits`` (already shifted).
            loss_weights: optional (B, T) per-token weights (``"mean"`` becomes a weighted mean).
            target_probs: optional (B, T, K) target distributions over the number tokens (``kind="was-cdf"``).
            logsumexp: optional (B, T) logsumexp of ``logits`` over V, reused by ``gce`` / ``reweigh`` instead of
                a second pass over the vocabulary.

        Returns:
            A scalar (``"mean"`` / ``"sum"``) or (B, T) (``"none"``), float32. Without number labels the result
            is a zero that still depends on ``logits`` (backward works, no NaN).
        """
        self._check(logits, labels, loss_weights, target_probs)
        ids, _ = self._tables(logits.device)
        flat = logits.reshape(-1, logits.shape[-1])  # (N, V)
        sub = flat.index_select(1, ids).float()  # (N, K)
        lse = None
        if self.value_loss.needs_logsumexp:
            lse = torch.logsumexp(flat.float(), -1) if logsumexp is None else logsumexp.reshape(-1).float()
        target = None if target_probs is None else target_probs.reshape(-1, target_probs.shape[-1])
        return self._loss_from_columns(sub, lse, labels, loss_weights, target)


def place_weights_from_runs(k_left: Tensor, length: Tensor, base: float) -> Tensor:
    """Place-value weight of the digit ``k_left`` places from the left of an ``length``-digit number.

    ``w = base^(L-1-k) / sum_{j<L} base^j = base^-k (1 - 1/base) / (1 - base^-L)`` (``1/L`` for ``base == 1``),
    computed without overflow for any length. Weights of one number sum to 1.
    """
    k_left, length = k_left.float(), length.float().clamp(min=1)
    if base == 1:
        return 1.0 / length
    log_base = math.log(base)  # log space, float32: no overflow, underflow only to 0 for negligible places
    return torch.exp(-k_left * log_base + math.log1p(-1 / base) - torch.log1p(-torch.exp(-length * log_base)))


class PlaceValueNTL(NTLoss):
    """Number-level NTL for digit-tokenised numbers: each digit's NTL is weighted by its place value.

    Numbers are maximal runs of consecutive positions whose labels are digit tokens; a "\u2581"/"\u0120"-prefixed
    digit starts a new number ("3 4" is two numbers) and, with ``join_decimal_point``, one bare "." between digits
    joins "3", ".", "1", "4" into one number (the "." itself gets no loss). Digit ``k`` (from the left) of an
    ``L``-digit number gets ``w_k = base^(L-1-k) / sum_j base^j`` (see `place_weights_from_runs`); the weights of a
    number sum to 1, so ``"mean"`` is the mean over numbers of their place-weighted digit losses. ``base=10`` is
    naive place value (the paper's suggested fix); a smaller base softens it and ``base=1`` averages digits equally.
    Thousands separators ("1,000") are not joined: "," also separates list items.

    Args:
        tokenizer, kind, **kwargs: as `NTLoss` (``digit_level`` is always True here).
        base: place-value base, >= 1.
        join_decimal_point: treat digit "." digit as one number.
    """

    def __init__(self, tokenizer: Any, kind: str = "was", *, base: float = 10.0, join_decimal_point: bool = True,
                 **kwargs: Any) -> None:  # fmt: skip
        if kwargs.pop("digit_level", True) is not True:
            raise ValueError("PlaceValueNTL works on digit tokens only: drop `digit_level=False` (or use NTLoss).")
        if isinstance(base, bool) or not isinstance(base, (int, float)) or not 1 <= base < math.inf:
            raise ValueError(f"`base` must be a finite number >= 1 (10 = place value, 1 = plain mean), got {base!r}.")
        super().__init__(tokenizer, kind, digit_level=True, **kwargs)
        self.base, self.join_decimal_point = float(base), bool(join_decimal_point)
        self._points: dict[torch.device, Tensor] = {}

    def position_weights(self, labels: Tensor, slot: Tensor, loss_weights: Tensor | None) -> Tensor:
        """Place-value weights (B, T) times ``loss_weights``; numbers never continue across batch rows."""
        if labels.dim() != 2:
            raise ValueError(f"PlaceValueNTL needs labels [B, T] to find numbers, got {tuple(labels.shape)}.")
        weight = self.place_weights(labels, slot)
        return weight if loss_weights is None else weight * loss_weights.float()

    def place_weights(self, labels: Tensor, slot: Tensor | None = None) -> Tensor:
        """Per-position place-value weights for ``labels`` (B, T); 0 off digit positions."""
        slot = self.slots(labels) if slot is None else slot
        digit = slot >= 0  # (B, T)
        groups = self.value_loss.tensors(labels.device)["groups"]
        prefixed = digit & (groups[slot.clamp(min=0)] != 0)
        member = digit
        if self.join_decimal_point and self.vocab.point_ids:
            if labels.device not in self._points:
                self._points[labels.device] = torch.tensor(self.vocab.point_ids, device=labels.device)
            point = torch.isin(labels, self._points[labels.device])
            before = F.pad(digit[:, :-1], (1, 0), value=False)
            after = F.pad((digit & ~prefixed)[:, 1:], (0, 1), value=False)
            member = digit | (point & before & after)
        start = member & (~F.pad(member[:, :-1], (1, 0), value=False) | prefixed)  # (B, T), a row starts fresh
        n = labels.numel()
        run = (start.reshape(-1).long().cumsum(0) - 1).clamp(min=0)  # (N,) run id, valid on members
        count = digit.reshape(-1).long()
        seen = count.cumsum(0) - count  # (N,) digits before this position (whole batch)
        first = torch.zeros(n + 1, dtype=torch.long, device=labels.device)
        first.scatter_(0, torch.where(start.reshape(-1), run, n), seen)  # digits before each run; slot n = dump
        length = torch.zeros(n, dtype=torch.long, device=labels.device)
        length.index_add_(0, run, count * member.reshape(-1).long())  # digits per run
        weight = place_weights_from_runs(seen - first[run], length[run], self.base)
        return torch.where(digit.reshape(-1), weight, 0.0).view(labels.shape)
