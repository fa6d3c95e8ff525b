"""`NTLoss`: the Number Token Loss on LM logits vs labels."""

from __future__ import annotations

from typing import Any

import torch
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
        weight = (slot >= 0).float() if loss_weights is None else (slot >= 0).float() * loss_weights.float()
        weight = weight.reshape(-1)  # (N,), 0 off number positions
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
