"""Digit aggregation: a weighted sum of digit embeddings, as an [AGG] input token and as an auxiliary loss.

Implements "How to Leverage Digit Embeddings to Represent Numbers?" (docs/papers.md, "Digit aggregation"):

- Section 3, equation 1: the aggregate of a number with digits ``d_1 .. d_N`` (most significant first) is
  ``a = sum_i w_i * E[d_i]`` with ``w_i = 2^(N-i) * 3(N+1-i)(N+2-i) / (N(N+1)(N+2))`` (`aggregation_weights`).
- Section 4.1 ([AGG] + digits): an [AGG] token placed before the digit tokens carries the aggregate
  (`AggregateEmbedding`). The paper initialises one [AGG] embedding with the aggregation; numadapter computes it
  per number and *adds* it to the [AGG] row (see `AggregateEmbedding`).
- Section 4.2, equations 2-3: ``L_AUX = log2(||W(p) - W(l)||_2)`` between the aggregates of the predicted and the
  gold number, interpolated with cross-entropy: ``L = lam * L_CE + (1 - lam) * L_AUX``; footnote 2: a non-numeric
  prediction gets ``L_AUX = 20`` (`aggregate_loss`; `aggregate_aux_loss` gives ``L_AUX`` alone).

Decimals (a known limitation, kept as the paper defines it): equation 1 is built for integers (the paper's
Limitations: "it may not be compatible with decimals"). It sees only the digit string, not the decimal point:

- [AGG] (`AggregateEmbedding`) reads a decimal as one run of significant digits, so 12.5, 125 and 1.25 (digits
  1, 2, 5) get the *same* aggregate; the digit tokens after [AGG] (with the "." token) still tell them apart.
- The auxiliary loss (`aggregate_aux_loss`) works on runs of digit tokens in the labels, and "." ends a run, so
  "12.5" is scored as two numbers, "12" and "5", while [AGG] treats it as one three-digit number.

Both are pinned by tests (``tests/numadapter/methods/aggregate/test_aggregate.py``); use FoNE or xVal where decimals
must be told apart by one token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from numadapter.methods.base import NumberSettings

__all__ = ["AggregateEmbedding", "AggregateLossOutput", "aggregate_aux_loss", "aggregate_loss", "aggregation_weights"]

# Footnote 2 of the paper: "Should the answers not be numerical, the model is penalise[d] by arbitrarily setting
# L_AUX to 20."
NON_NUMERIC_AUX_LOSS = 20.0


def _eq1(n: Tensor, i: Tensor) -> Tensor:
    """Equation 1 elementwise: ``w_i = 2^(N-i) * 3(N+1-i)(N+2-i) / (N(N+1)(N+2))`` in float64 (same shapes)."""
    n = n.to(torch.float64)
    i = i.to(torch.float64)
    return torch.pow(2.0, n - i) * 3.0 * (n + 1 - i) * (n + 2 - i) / (n * (n + 1) * (n + 2))


def aggregation_weights(n: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """The weights ``w_1 .. w_N`` of equation 1 for an N-digit number (most significant digit first).

    ``N = 1`` gives ``[1]`` (single digits keep their pretrained embedding); the weights grow by about 2x per place
    and do not sum to 1 (so "11" and "111" differ).

    Args:
        n: the number of digits N, at least 1.
        dtype: the returned dtype (computed in float64).

    Returns:
        `(N,)` weights.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"aggregation_weights needs a digit count n >= 1, got {n!r}.")
    i = torch.arange(1, n + 1)  # (N,)
    return _eq1(torch.full_like(i, n), i).to(dtype)


class AggregateEmbedding(nn.Module):
    """The [AGG] input token (paper section 4.1): ``out[AGG row] = e[AGG] + sum_i w_i * E[d_i]`` (eq. 1).

    Decision: the aggregate is *added* to the [AGG] row's embedding rather than replacing it. With the [AGG] row
    initialised to zero the input is exactly the paper's aggregate; a trainable [AGG] row (PEFT
    ``trainable_token_indices``) then learns a marker/offset instead of receiving no gradient at all.

    The digits ``d_1 .. d_N`` are the number's canonical significant digits read from `num_digits`: from the most
    significant non-zero integer place (the units place when the integer part is 0) down to the last non-zero
    fraction place (the units place when there is none). So the aggregate is a function of the value: "007", "7" and
    "7.0" all give ``E[7]``; "12.5" gives digits 1, 2, 5; "0.05" gives 0, 0, 5; 0 gives ``E[0]``. With
    ``int_digits = 0`` a units digit 0 is still counted, so 0.05 aggregates identically under every config. The
    sign is not part of the aggregate (with digit tokens a minus sign stays a text token).

    The module has no parameters; the digit embeddings are passed in at every call (read them inside forward, or
    under a gather, for ZeRO-3). They must be on the same scale as `embeds` (the raw embedding rows when the
    wrapper patches the embedding module, so architecture multipliers apply to both alike).

    Args:
        config: a `NumberAdapterConfig` (reads ``int_digits``, ``frac_digits``).
    """

    def __init__(self, config: NumberSettings) -> None:
        super().__init__()
        self.int_digits = int(config.int_digits)
        self.frac_digits = int(config.frac_digits)

    @property
    def num_places(self) -> int:
        return self.int_digits + self.frac_digits

    def aggregate(self, num_digits: Tensor, digit_embeddings: Tensor) -> Tensor:
        """Equation 1 for every row: `(B, T, P)` place digits, `(10, H)` digit embeddings -> `(B, T, H)` float32."""
        digits = num_digits.to(torch.long)
        units = self.int_digits - 1
        if self.int_digits == 0:
            # No integer places: prepend the units digit 0 so "0.05" still aggregates as 0, 0, 5.
            digits = F.pad(digits, (1, 0))  # (B, T, P + 1)
            units = 0
        places = digits.shape[-1]
        j = torch.arange(places, device=digits.device)  # (P,)
        nonzero = digits != 0  # (B, T, P)
        big = torch.full_like(digits, places)
        first_nonzero = torch.where(nonzero, j, big).amin(-1)  # (B, T); P when all zero
        last_nonzero = torch.where(nonzero, j, torch.full_like(digits, -1)).amax(-1)  # (B, T); -1 when all zero
        start = first_nonzero.clamp(max=units)  # (B, T)
        end = last_nonzero.clamp(min=units)  # (B, T)
        n = (end - start + 1).unsqueeze(-1)  # (B, T, 1) digit count N >= 1
        i = j - start.unsqueeze(-1) + 1  # (B, T, P) 1-based position in the number
        inside = (i >= 1) & (i <= n)  # (B, T, P)
        w = torch.where(inside, _eq1(n, i), torch.zeros((), dtype=torch.float64, device=digits.device))
        # Coefficient of each digit value: coef[b, t, k] = sum of w over places holding digit k.
        coef = torch.zeros(*digits.shape[:-1], 10, dtype=torch.float64, device=digits.device)  # (B, T, 10)
        coef.scatter_add_(-1, digits, w)
        return coef.to(torch.float32) @ digit_embeddings.to(torch.float32)  # (B, T, 10) @ (10, H) -> (B, T, H)

    def forward(
        self,
        embeds: Tensor,
        num_mask: Tensor,
        num_digits: Tensor,
        num_sign: Tensor | None = None,
        num_values: Tensor | None = None,
        digit_embeddings: Tensor | None = None,
    ) -> Tensor:
        """Adds the digit aggregate to the [AGG] rows.

        Args:
            embeds: `(B, T, H)` token embeddings.
            num_mask: `(B, T)` 1 at [AGG] rows.
            num_digits: `(B, T, P)` place digits, P = int_digits + frac_digits, most significant first.
            num_sign: unused (see class docstring).
            num_values: unused (the aggregate is exact from the digits).
            digit_embeddings: `(10, H)`; row k is the embedding of the token for digit k.

        Returns:
            `(B, T, H)` in ``embeds.dtype``; rows with ``num_mask == 0`` are bit-identical to `embeds`.

        Raises:
            ValueError: shape mismatches, digits outside 0..9 at [AGG] rows, or an aggregate that overflows
                ``embeds.dtype`` (fp16 with many digit places: use bf16/float32 or fewer ``int_digits``).
        """
        if digit_embeddings is None:
            raise ValueError("AggregateEmbedding.forward needs `digit_embeddings` (10, H): the digit token rows.")
        b, t, h = embeds.shape
        if digit_embeddings.shape != (10, h):
            raise ValueError(
                f"digit_embeddings must be (10, {h}) to match embeds, got {tuple(digit_embeddings.shape)}."
            )
        if num_mask.shape != (b, t):
            raise ValueError(f"num_mask must be (B, T) = {(b, t)}, got {tuple(num_mask.shape)}.")
        if num_digits.shape != (b, t, self.num_places):
            raise ValueError(
                f"num_digits must be (B, T, P) = {(b, t, self.num_places)} with P = int_digits + frac_digits = "
                f"{self.int_digits} + {self.frac_digits}, got {tuple(num_digits.shape)}: build the side tensors with "
                f"the same config."
            )
        mask = num_mask != 0  # (B, T)
        digits = torch.where(mask.unsqueeze(-1), num_digits, torch.zeros_like(num_digits))  # (B, T, P)
        bad = ((digits < 0) | (digits > 9)).any(-1)  # (B, T)
        if bad.any():
            row = bad.nonzero()[0].tolist()
            raise ValueError(
                f"num_digits at [AGG] row {row} holds {num_digits[row[0], row[1]].tolist()}: place digits must be "
                f"in 0..9."
            )
        agg = self.aggregate(digits, digit_embeddings)  # (B, T, H) float32
        out = (embeds.to(torch.float32) + agg).to(embeds.dtype)
        if not torch.isfinite(out[mask]).all() and torch.isfinite(embeds[mask]).all():
            raise ValueError(
                f"the digit aggregate overflows {embeds.dtype} (eq. 1 weights reach 2^(N-1) for N digits, N <= "
                f"{self.num_places}): use bfloat16/float32 or lower `int_digits`/`frac_digits`."
            )
        return torch.where(mask.unsqueeze(-1), out, embeds)

    def extra_repr(self) -> str:
        return f"int_digits={self.int_digits}, frac_digits={self.frac_digits}"


class AggregateLossOutput(NamedTuple):
    """Result of `aggregate_loss`: ``loss = lam * ce + (1 - lam) * aux`` (eq. 3) and its parts."""

    loss: Tensor  # scalar, float32
    ce: Tensor  # scalar cross-entropy
    aux: Tensor  # scalar mean L_AUX over the numbers (0 with the graph kept when there are none)
    num_numbers: int  # how many numbers (digit runs) the labels hold


def aggregate_aux_loss(
    logits: Tensor,
    labels: Tensor,
    digit_token_ids: Tensor | Sequence[int],
    embedding_weight: Tensor,
    ignore_index: int = -100,
    *,
    eps: float = 1e-6,
) -> tuple[Tensor, int]:
    """``L_AUX`` alone (paper section 4.2, eq. 2), averaged over the numbers in `labels`.

    Reads the logits at gold-digit positions only, so it never copies the full `(B, T, V)` logits: use it when the
    cross-entropy is computed elsewhere. Conventions (alignment, runs, W(p), fallback, eps): see `aggregate_loss`.

    Args:
        logits: `(B, T, V)` token logits (any float dtype; computed in float32).
        labels: `(B, T)` token ids, `ignore_index` where not scored.
        digit_token_ids: `(10,)` the token id of each digit 0..9.
        embedding_weight: `(V', H)` the input embedding matrix (only the digit rows are read; detached).
        ignore_index: label value that is not scored.
        eps: distance floor of the log.

    Returns:
        ``(aux, num_numbers)``: a float32 scalar (0 that keeps the graph when there are no numbers) and the count.
    """
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(
            f"logits must be (B, T, V) and labels (B, T) with the same B, T; got logits {tuple(logits.shape)}, "
            f"labels {tuple(labels.shape)}."
        )
    vocab = logits.shape[-1]
    device = logits.device
    digit_ids = torch.as_tensor(digit_token_ids, dtype=torch.long, device=device).reshape(-1)  # (10,)
    limit = min(vocab, embedding_weight.shape[0])
    if (
        digit_ids.numel() != 10
        or digit_ids.unique().numel() != 10
        or not bool(((digit_ids >= 0) & (digit_ids < limit)).all())
    ):
        raise ValueError(
            f"digit_token_ids must be 10 distinct token ids in [0, {limit}) (one per digit 0..9), "
            f"got {digit_ids.tolist()}."
        )
    labels = labels.to(device)

    # -- digit runs in the labels ----------------------------------------------------------------------------------
    is_digit = torch.isin(labels, digit_ids)  # (B, T); ignore_index is never a digit id
    prev_is_digit = F.pad(is_digit[:, :-1], (1, 0), value=False)  # (B, T): the label before, within the row
    is_start = (is_digit & ~prev_is_digit).reshape(-1)  # (B*T,)
    positions = is_digit.reshape(-1).nonzero().squeeze(-1)  # (K,) flat positions of gold digits
    num_runs = int(is_start.sum().item())
    if num_runs == 0:
        return logits.sum().float() * 0.0, 0  # zero that keeps the graph
    run = (is_start.cumsum(0) - 1)[positions]  # (K,) run index of each gold digit
    run_start = is_start.nonzero().squeeze(-1)  # (R,) flat position of each run's first digit
    run_length = torch.bincount(run, minlength=num_runs)  # (R,) N per run
    index_in_run = positions - run_start[run] + 1  # (K,) 1-based i
    w = _eq1(run_length[run], index_in_run).to(torch.float32).unsqueeze(-1)  # (K, 1)

    # -- W(l), W(p) and eq. 2 ----------------------------------------------------------------------------------------
    digit_emb = embedding_weight.detach()[digit_ids].to(device=device, dtype=torch.float32)  # (10, H)
    gold_digit = (labels.reshape(-1)[positions].unsqueeze(-1) == digit_ids).to(torch.long).argmax(-1)  # (K,) 0..9
    pos_logits = logits.reshape(-1, vocab)[positions].float()  # (K, V)
    probs = pos_logits[:, digit_ids].softmax(-1)  # (K, 10) renormalised over digit tokens
    hidden = digit_emb.shape[-1]
    gold_agg = torch.zeros(num_runs, hidden, device=device).index_add_(0, run, w * digit_emb[gold_digit])  # (R, H)
    pred_agg = torch.zeros(num_runs, hidden, device=device).index_add_(0, run, w * (probs @ digit_emb))  # (R, H)
    sq_dist = (pred_agg - gold_agg).pow(2).sum(-1)  # (R,)
    per_run = 0.5 * torch.log2(sq_dist + eps * eps)  # (R,) log2(sqrt(d^2 + eps^2))

    # -- footnote 2: a non-numeric prediction costs 20 ---------------------------------------------------------------
    not_digit = (~torch.isin(pos_logits.argmax(-1), digit_ids)).to(torch.float32)  # (K,)
    non_numeric = torch.zeros(num_runs, device=device).index_add_(0, run, not_digit) > 0  # (R,)
    per_run = torch.where(non_numeric, torch.full_like(per_run, NON_NUMERIC_AUX_LOSS), per_run)
    return per_run.mean(), num_runs


def aggregate_loss(
    logits: Tensor,
    labels: Tensor,
    digit_token_ids: Tensor | Sequence[int],
    embedding_weight: Tensor,
    lam: float,
    ignore_index: int = -100,
    *,
    eps: float = 1e-6,
    num_items_in_batch: int | Tensor | None = None,
) -> AggregateLossOutput:
    """Cross-entropy interpolated with the aggregate auxiliary loss (paper section 4.2, eq. 2-3).

    - **Alignment**: ``logits[:, t]`` is scored against ``labels[:, t]`` (no shift inside, like
      `torch.nn.functional.cross_entropy`); shift before calling for a causal LM.
    - **Numbers**: the maximal runs of digit tokens in each row of `labels` (``ignore_index`` and every other
      token ends a run; a run never crosses rows). Note: "12.5" written as digit tokens is two runs, "12" and "5".
    - **W(l)** ``= sum_i w_i * E[d_i]`` over the gold digits, with eq. 1 weights for the run length N.
    - **W(p)**: at each digit position the softmax over the 10 digit logits only (renormalised), giving the expected
      digit embedding ``sum_k p_k E[k]``; ``W(p) = sum_i w_i * expected_i``. Differentiable, unlike the aggregate of
      the argmax digits (which would give no gradient). The prediction is aligned with the gold digits by position
      (teacher forcing), so it has the gold length N.
    - **Non-numeric prediction** (footnote 2): if the argmax over the whole vocabulary is not a digit token at any
      position of a run, that run's ``L_AUX`` is 20 (a constant, no gradient; CE pushes toward the digit).
    - ``L_AUX = log2(sqrt(||W(p) - W(l)||^2 + eps^2))``: equals eq. 2 when the distance is well above `eps` and
      stays finite with a finite gradient at an exact match (floor ``log2(eps)``).
    - The embedding is a fixed metric here: `embedding_weight` is detached, otherwise the loss could fall by
      shrinking the digit embeddings instead of improving predictions.
    - ``aux`` is the mean over the numbers in this call; ``ce`` is the mean over non-ignored tokens, or the sum
      divided by `num_items_in_batch` when given (gradient accumulation).
    - The CE here reads all `(B, T, V)` logits in float32; a caller that has its own CE should call
      `aggregate_aux_loss` and combine with eq. 3 itself.

    Args:
        logits: `(B, T, V)` token logits (any float dtype; computed in float32).
        labels: `(B, T)` token ids, `ignore_index` where not scored.
        digit_token_ids: `(10,)` the token id of each digit 0..9.
        embedding_weight: `(V', H)` the input embedding matrix (V' may differ from V; digit ids index both).
        lam: eq. 3's lambda in [0, 1] (config ``aggregate_loss_lambda``); 1 gives plain CE.
        ignore_index: label value that is not scored.
        eps: distance floor of the log (see above).
        num_items_in_batch: optional CE normaliser.

    Returns:
        `AggregateLossOutput` (loss, ce, aux, num_numbers); the tensors are float32 scalars.
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"`lam` (config `aggregate_loss_lambda`) must be in [0, 1], got {lam!r}.")
    aux, num_numbers = aggregate_aux_loss(logits, labels, digit_token_ids, embedding_weight, ignore_index, eps=eps)
    vocab = logits.shape[-1]
    flat_labels = labels.reshape(-1).to(logits.device)  # (B*T,)
    ce_sum = F.cross_entropy(
        logits.reshape(-1, vocab).float(), flat_labels, ignore_index=ignore_index, reduction="sum"
    )
    if num_items_in_batch is None:
        ce = ce_sum / (flat_labels != ignore_index).sum().clamp(min=1)
    else:
        ce = ce_sum / num_items_in_batch
    return AggregateLossOutput(lam * ce + (1.0 - lam) * aux, ce, aux, num_numbers)
