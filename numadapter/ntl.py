"""Number Token Loss (NTL): regression-like losses on the LM head's number-token probabilities.

Paper: Zausinger et al., "Regress, Don't Guess - A Regression-like Loss on Number Tokens for Language Models"
(ICML 2025), ``shared/papers/number-token-loss-paper.txt``. Notation: at a position whose label is a number token
with value ``y``, ``v_j`` is the value of number token ``j`` and ``p~ = softmax(number-token logits)``: the softmax
is taken over the number tokens only (Algorithm A1/A2, ``n_probs = Softmax(n_logits)``).

Kinds (``kind=``):
    - ``"was"`` (default, eq. 4): ``sum_j p~_j * c(|y - v_j|)``, the Wasserstein-1 distance to the one-hot label.
    - ``"was-cdf"`` (eq. 5): ``sum_k |CDF_p(u_k) - CDF_t(u_k)| * (u_{k+1} - u_k)`` over the sorted distinct values
      ``u``. For unit-spaced digits this is eq. 5 term by term; the gap factor makes it the exact W1 on the line
      for any spacing. The target ``t`` may be any distribution (``target_probs=``), e.g. label smoothing.
    - ``"mse"``, ``"mae"``, ``"huber"`` (the L_p family, eq. 1): ``f(y - yhat)`` with ``yhat = sum_j p~_j v_j``.
    - ``"gce"`` (Gaussian cross entropy, eq. 7-8): ``-sum_j t_j log p_j`` with ``t_j`` proportional to
      ``exp(-(v_j - y)^2 / (2 sigma^2))``, normalised to sum to 1 (eq. 7's constant, printed as
      ``1/(sqrt(2 pi) sigma^2)``, cancels in the normalisation a discrete label needs). ``p_j`` is the model's
      probability over the *full* vocabulary (eq. 8's ``y^_i``), so GCE can stand in for CE at number positions.
      The Gaussian only spreads over number tokens of the label's own form (bare, "\u2581"- or "\u0120"-prefixed):
      a label "5" never sends target mass to "\u25815", which is another surface form, not a nearby number.

Scale: distances are the raw token values, exactly as in eq. 1 and eq. 4 (no normalisation; the ``1/V`` of
Algorithm A2, line 15, is a constant factor that only rescales lambda and is not applied). With multi-digit tokens
(``digit_level=False``) values reach 999 and more, so NTL-WAS can be hundreds of times CE and NTL-MSE ~10^6.
Section 4.5's remedy is ``squash_factor`` ``S`` (``kind="was"`` only): the cost of a wrong value at distance ``d``
becomes ``c(d) = d_min + (d - d_min) * (S - 1) * d_min / (d_max - d_min)`` (``c(0) = 0``), where ``d_min`` /
``d_max`` are the smallest non-zero / the largest distance between number values. The farthest wrong token then
costs exactly ``S`` times the nearest one, and ``S`` moves linearly between plain NTL and CE as the paper describes:
with digits, ``S = 9`` is plain NTL and ``S = 1`` a 0/1 cost (``1 - p~`` of the correct value). The paper gives
only the ratio; this linear form is the one the authors' ``ntloss`` package shows on digits (compared in the tests).

``reweigh=True`` (off by default, as in the paper's experiments): ``m`` is the probability the model puts on the
number tokens (full softmax) and the loss becomes ``m * loss + (1 - m) * loss_worst``: mass outside the number
tokens is charged as if it sat on the worst number token (the farther extreme value). Pure scaling by ``m`` would
reward moving mass *off* the numbers; this form is never smaller than the unweighted loss.

Number tokens (`parse_number_token`): a token counts when, after at most one "\u2581" (SentencePiece) or "\u0120"
(byte-level BPE) prefix, it is a non-empty run of ASCII digits; its value is that integer ("007" -> 7, like the
paper's ``int(token)``). Everything else is excluded: "\u00bd", "1st", "inf", "nan", "0x1", "1e5", "-3" (the sign is
its own token in text) and "1.5" (a piece's place value is unknown). With ``digit_level=True`` (the default; the
paper's recommended setup and what ``encoding="digits"`` produces) only single digits count.

The limitation named in the paper's conclusion (every digit counts the same) is addressed by `PlaceValueNTL` for
digit-tokenised numbers and by ``place_weighted=True`` in `digit_ntl` (FoNE's 10-way digit head): digit ``k`` of an
``L``-digit number (``k = 0`` most significant) gets ``w_k = base^(L-1-k) / sum_j base^j``, i.e.
``w_k = base^-k (1 - 1/base) / (1 - base^-L)``; weights sum to 1 per number, so ``"mean"`` averages over numbers.

Speed: `NTLoss.forward` gathers the K number columns (``logits[..., ids]``) and never materialises a probability
over the vocabulary; its backward still writes one dense zero-filled ``[B, T, V]`` gradient (autograd's rule for
indexing). `cross_entropy_and_ntl` computes CE and NTL in one autograd node from one logsumexp and writes a single
gradient, adding NTL's ``[N, K]`` part in place: use it in trainers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

KINDS = ("was", "was-cdf", "mse", "mae", "huber", "gce")  # kept equal to numadapter.config.NTL_KINDS (tested)
REDUCTIONS = ("mean", "sum", "none")
PREFIX_GROUPS = {"\u2581": 1, "\u0120": 2}  # SentencePiece word start, byte-level BPE space
_ASCII_DIGITS = re.compile(r"[0-9]+")
_EXACT_F32 = 2**24  # integers above this are not exact in float32: such values are handled in float64


def parse_number_token(token: str) -> tuple[int, int] | None:
    """Value of a vocabulary token that is a plain non-negative integer.

    Args:
        token: the token as stored in the vocabulary (e.g. "7", "\u25817", "\u01207", "123").

    Returns:
        ``(value, group)`` with group 0 for a bare token, 1 for a "\u2581" prefix, 2 for a "\u0120" prefix; ``None``
        when the token is not a plain number ("\u00bd", "1st", "-3", "1.5", "1e5", "0x1", "inf", ...).
    """
    group = PREFIX_GROUPS.get(token[:1], 0)
    body = token[1:] if group else token
    if not _ASCII_DIGITS.fullmatch(body):
        return None
    return int(body), group


@dataclass(frozen=True)
class NumberVocab:
    """The number tokens of a tokenizer, sorted by token id (built by `number_vocab`, read-only)."""

    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    values: tuple[int, ...]
    groups: tuple[int, ...]  # 0 bare, 1 "\u2581"-prefixed, 2 "\u0120"-prefixed
    point_ids: tuple[int, ...]  # ids of the bare "." token(s), used by PlaceValueNTL to join "3", ".", "1", "4"


def number_vocab(tokenizer: Any, *, digit_level: bool = True) -> NumberVocab:
    """Find the number tokens of a Hugging Face tokenizer without changing it.

    Args:
        tokenizer: anything with ``get_vocab() -> dict[str, int]`` (a wrapper exposing ``.tokenizer`` also works).
        digit_level: only single-digit tokens ("0".."9", optionally prefixed) count as number tokens.

    Raises:
        TypeError: the object has no vocabulary.
        ValueError: the tokenizer has no number tokens at all.
    """
    source = tokenizer if hasattr(tokenizer, "get_vocab") else getattr(tokenizer, "tokenizer", None)
    if source is None or not hasattr(source, "get_vocab"):
        raise TypeError(f"NTL needs a tokenizer with `get_vocab()`, got {type(tokenizer).__name__}.")
    found = []
    points = []
    for token, token_id in source.get_vocab().items():
        if token == ".":
            points.append(int(token_id))
        parsed = parse_number_token(token)
        if parsed is None or digit_level and len(token) - (parsed[1] != 0) != 1:  # one digit after the prefix
            continue
        found.append((int(token_id), token, *parsed))
    if not found:
        what = "single-digit tokens ('0'..'9')" if digit_level else "tokens that are ASCII digit strings"
        raise ValueError(
            f"The tokenizer ({type(source).__name__}, {len(source.get_vocab())} tokens) has no number tokens: NTL "
            f"needs {what}, optionally prefixed by '\u2581' or '\u0120'. Use a tokenizer that has digit tokens"
            + (" or pass digit_level=False to also accept multi-digit tokens." if digit_level else ".")
        )
    found.sort()
    ids, tokens, values, groups = zip(*found)
    return NumberVocab(tuple(ids), tuple(tokens), tuple(values), tuple(groups), tuple(sorted(points)))


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {list(choices)}, got {value!r}.")


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise ValueError(f"`{name}` must be a positive finite number, got {value!r}.")


class NumberValueLoss:
    """The per-position loss of one NTL kind over a fixed set of number values (shared by all entry points).

    Args:
        values: the number value of each of the K number tokens (exact Python ints).
        groups: the surface-form group of each number token (see `parse_number_token`).
        kind, squash_factor, reweigh, sigma, huber_delta: see `NTLoss`.
    """

    def __init__(
        self,
        values: tuple[int, ...],
        groups: tuple[int, ...],
        kind: str = "was",
        *,
        squash_factor: float | None = None,
        reweigh: bool = False,
        sigma: float = 0.5,
        huber_delta: float = 1.0,
    ) -> None:
        _check_choice("kind", kind, KINDS)
        _check_positive("sigma", sigma)
        _check_positive("huber_delta", huber_delta)
        if reweigh and kind == "gce":
            raise ValueError("`reweigh=True` does not apply to kind='gce' (GCE already uses the full softmax).")
        self.kind, self.reweigh, self.sigma, self.huber_delta = kind, bool(reweigh), float(sigma), float(huber_delta)
        distinct = sorted(set(values))
        self.squash: tuple[float, float] | None = None  # (d_min, slope) of the squashed cost
        if squash_factor is not None:
            if kind != "was":
                raise ValueError(
                    f"`squash_factor` rescales the Wasserstein cost and needs kind='was', got kind={kind!r} "
                    f"(squash_factor={squash_factor!r}); set squash_factor=None or kind='was'."
                )
            _check_positive("squash_factor", squash_factor)
            if squash_factor < 1:
                raise ValueError(f"`squash_factor` must be >= 1 (1 = 0/1 cost), got {squash_factor!r}.")
            d_min = min((b - a for a, b in zip(distinct, distinct[1:])), default=0)
            d_max = distinct[-1] - distinct[0]
            if d_max > d_min > 0:
                self.squash = (float(d_min), (squash_factor - 1) * d_min / (d_max - d_min))
            elif squash_factor != 1 and d_max > 0:
                raise ValueError(
                    f"`squash_factor`={squash_factor!r} needs at least three distinct number values to set a ratio; "
                    f"this vocabulary has {len(distinct)}. Use squash_factor=None."
                )
        self._values, self._groups, self._distinct = values, groups, distinct
        self._cache: dict[torch.device, dict[str, Tensor]] = {}

    @property
    def needs_logsumexp(self) -> bool:
        """Whether the loss reads the full-vocabulary logsumexp (``gce`` and ``reweigh``)."""
        return self.kind == "gce" or self.reweigh

    def tensors(self, device: torch.device) -> dict[str, Tensor]:
        """Value tables on ``device`` (built once per device)."""
        if device not in self._cache:
            exact = max(abs(v) for v in self._values) <= _EXACT_F32
            vdtype = torch.float32 if exact else torch.float64
            distinct = torch.tensor(self._distinct, dtype=vdtype, device=device)
            rank = {v: i for i, v in enumerate(self._distinct)}
            self._cache[device] = {
                "values": torch.tensor(self._values, dtype=vdtype, device=device),  # (K,)
                "groups": torch.tensor(self._groups, dtype=torch.long, device=device),  # (K,)
                "rank": torch.tensor([rank[v] for v in self._values], device=device),  # (K,) index into distinct
                "distinct": distinct,  # (K',)
                "gaps": (distinct[1:] - distinct[:-1]).float(),  # (K'-1,)
            }
        return self._cache[device]

    def _cost(self, dist: Tensor) -> Tensor:
        """Transport cost of a value distance (float32; squashed when ``squash_factor`` is set)."""
        if self.squash is None:
            return dist.float()
        d_min, slope = self.squash
        return torch.where(dist > 0, d_min + (dist - d_min) * slope, 0.0).float()

    def _regression(self, residual: Tensor) -> Tensor:
        if self.kind == "mse":
            return residual.square()
        if self.kind == "mae":
            return residual.abs()
        return F.huber_loss(residual, torch.zeros_like(residual), reduction="none", delta=self.huber_delta)

    def gaussian_target(self, slot: Tensor) -> Tensor:
        """Eq. 7 label distribution over the number tokens, normalised, within the label's form group.

        Args:
            slot: (M,) index of the label among the number tokens.

        Returns:
            (M, K) float32 rows summing to 1.
        """
        t = self.tensors(slot.device)
        d2 = (t["values"][None, :] - t["values"][slot][:, None]).float().square()  # (M, K)
        logit = (-d2 / (2 * self.sigma**2)).masked_fill(t["groups"][None, :] != t["groups"][slot][:, None], -math.inf)
        return logit.softmax(-1)

    def __call__(self, sub: Tensor, slot: Tensor, lse: Tensor | None = None, target: Tensor | None = None) -> Tensor:
        """Per-position loss.

        Args:
            sub: (M, K) float32 logits of the number tokens.
            slot: (M,) long, index of the label among the number tokens (any valid index on ignored rows).
            lse: (M,) float32 logsumexp over the full vocabulary (``gce`` / ``reweigh`` only).
            target: (M, K) target distribution over the number tokens (``was-cdf`` only; default one-hot).

        Returns:
            (M,) float32 losses.
        """
        t = self.tensors(sub.device)
        values = t["values"]
        y = values[slot]  # (M,)
        if self.kind == "gce":
            return -(self.gaussian_target(slot) * (sub - lse[:, None])).sum(-1)
        log_z = torch.logsumexp(sub, -1)  # (M,)
        prob = torch.exp(sub - log_z[:, None])  # (M, K), softmax over number tokens only
        if self.kind == "was":
            loss = (prob * self._cost((y[:, None] - values[None, :]).abs())).sum(-1)
            center = y
        elif self.kind == "was-cdf":
            mass = sub.new_zeros(sub.shape[0], len(self._distinct)).index_add_(1, t["rank"], prob)  # (M, K')
            if target is None:
                goal = F.one_hot(t["rank"][slot], len(self._distinct)).float()  # (M, K')
            else:
                goal = sub.new_zeros(mass.shape).index_add_(1, t["rank"], target.float())
            cdf_gap = (mass.cumsum(-1) - goal.cumsum(-1))[:, :-1].abs()  # (M, K'-1)
            loss = cdf_gap @ t["gaps"]
            center = (goal * t["distinct"]).sum(-1)  # W1(goal, point mass at a) = E_goal|u - a|: linear in a
        else:
            y_hat = prob.to(values.dtype) @ values  # (M,)
            loss = self._regression((y - y_hat).float())
        if self.reweigh:
            lo, hi = t["distinct"][0], t["distinct"][-1]  # the worst number token is an extreme value
            if self.kind in ("was", "was-cdf"):
                worst = self._cost(torch.maximum(center - lo, hi - center))
            else:
                worst = torch.maximum(self._regression((y - lo).float()), self._regression((y - hi).float()))
            on_numbers = torch.exp(log_z - lse).clamp(max=1.0)  # (M,) probability mass on number tokens
            loss = on_numbers * loss + (1.0 - on_numbers) * worst
        return loss


def _reduce(loss: Tensor, weight: Tensor, reduction: str, shape: torch.Size) -> Tensor:
    """Reduce per-position losses; ``weight`` is 0 off number positions. ``"mean"`` = sum(w * l) / sum(w)."""
    weighted = torch.where(weight != 0, loss * weight, 0.0)
    if reduction == "none":
        return weighted.view(shape)
    total = weighted.sum()
    if reduction == "sum":
        return total
    denom = weight.sum()
    return total / torch.where(denom != 0, denom, 1.0)


class NTLoss(nn.Module):
    """Number Token Loss on LM logits: ``loss = ntl(logits, labels)``.

    ``logits[:, t]`` is scored against ``labels[:, t]`` (no shift inside, like ``F.cross_entropy``); positions whose
    label is not a number token (text, ``ignore_index``, ids beyond the tokenizer) contribute nothing.

    Args:
        tokenizer: a Hugging Face tokenizer; read once, never modified.
        kind: ``"was"`` (default), ``"was-cdf"``, ``"mse"``, ``"mae"``, ``"huber"`` or ``"gce"`` (module docstring).
        digit_level: only single digits are number tokens (default, the paper's recommendation); ``False`` also
            accepts multi-digit tokens ("123", "\u2581" / "\u0120"-prefixed).
        squash_factor: cost ratio of the farthest to the nearest wrong value (``kind="was"`` only, section 4.5).
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


def _rows_per_chunk(logits: Tensor) -> int:
    """Rows per chunk: bounds float32 temporaries (64 MB on CPU, 512 MB elsewhere) with few, large kernels."""
    budget = 2**24 if logits.device.type == "cpu" else 2**27  # elements
    return max(1, budget // max(1, logits.shape[-1]))


def _logsumexp_rows(logits: Tensor) -> Tensor:
    """(N, V) -> (N,) float32 logsumexp, chunked over rows (no [N, V] float32 temporary)."""
    out = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
    step = _rows_per_chunk(logits)
    for i in range(0, logits.shape[0], step):
        torch.logsumexp(logits[i : i + step].float(), -1, out=out[i : i + step])
    return out


def _scaled_softmax(logits: Tensor, lse: Tensor, scale: Tensor) -> Tensor:
    """(N, V) gradient ``softmax(logits) * scale[:, None]`` in the logits' dtype, computed chunk by chunk."""
    grad = torch.empty_like(logits)
    step = _rows_per_chunk(logits)
    for i in range(0, logits.shape[0], step):
        rows = slice(i, i + step)
        if logits.dtype == torch.float32:
            chunk = torch.sub(logits[rows], lse[rows, None], out=grad[rows])
            chunk.exp_().mul_(scale[rows, None])
        else:
            grad[rows] = (logits[rows].float() - lse[rows, None]).exp_().mul_(scale[rows, None])
    return grad


class _CrossEntropyWithNTL(torch.autograd.Function):
    """CE and NTL from one logsumexp; backward writes one dense gradient and adds NTL's (N, K) part in place."""

    @staticmethod
    def forward(ctx, logits, labels, ntl, ce_mean, ignore_index, loss_weights, target):  # type: ignore[override]
        lse = _logsumexp_rows(logits)  # (N,)
        shaped, labels = labels, labels.reshape(-1)  # (B, T) for NTL's number runs, (N,) for CE
        valid = labels != ignore_index
        safe = torch.where(valid, labels, 0)  # (N,) other negative ids fail in gather, as in F.cross_entropy
        picked = logits.gather(1, safe[:, None]).squeeze(1).float()
        denom = valid.sum().clamp(min=1).float() if ce_mean else torch.ones((), device=logits.device)
        ce = torch.where(valid, lse - picked, 0.0).sum() / denom
        ctx.graph = None
        ntl_value = torch.zeros((), device=logits.device)
        if ntl is not None:
            ids, _ = ntl._tables(logits.device)
            with torch.enable_grad():
                sub = logits.index_select(1, ids).float().requires_grad_(True)  # (N, K) leaf
                lse_leaf = lse.clone().requires_grad_(True) if ntl.value_loss.needs_logsumexp else None
                value = ntl._loss_from_columns(sub, lse_leaf, shaped, loss_weights, target)
            ctx.graph = (value, sub, lse_leaf, ids)
            ntl_value = value.detach()
        ctx.save_for_backward(logits, lse, valid, safe, denom)
        return ce, ntl_value

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_ce, grad_ntl):  # type: ignore[override]
        logits, lse, valid, safe, denom = ctx.saved_tensors
        ce_scale = torch.where(valid, grad_ce.float() / denom, 0.0)  # (N,) d loss / d lse from CE
        row_scale, grad_sub = ce_scale, None
        if ctx.graph is not None and ctx.graph[0].requires_grad:
            value, sub, lse_leaf, ids = ctx.graph
            inputs = (sub,) if lse_leaf is None else (sub, lse_leaf)
            grads = torch.autograd.grad(value, inputs, grad_ntl.float(), allow_unused=True)
            grad_sub = grads[0]
            if lse_leaf is not None and grads[1] is not None:
                row_scale = row_scale + grads[1]  # d lse / d logits = softmax: folds into the same pass
        grad = _scaled_softmax(logits, lse, row_scale)  # (N, V)
        rows = torch.arange(logits.shape[0], device=logits.device)
        grad.index_put_((rows, safe), (-ce_scale).to(grad.dtype), accumulate=True)
        if grad_sub is not None:
            grad.index_add_(1, ids, grad_sub.to(grad.dtype))
        ctx.graph = None
        return grad, None, None, None, None, None, None


def cross_entropy_and_ntl(
    logits: Tensor,
    labels: Tensor,
    ntl: NTLoss | None,
    *,
    ce_reduction: str = "mean",
    ignore_index: int | None = None,
    loss_weights: Tensor | None = None,
    target_probs: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Cross-entropy and NTL in one pass: the fast path for trainers (``loss = ce + lambda * ntl``).

    Equal to ``(F.cross_entropy(logits.flatten(0, -2), labels.flatten(), ignore_index=ntl.ignore_index,
    reduction=ce_reduction), ntl(logits, labels, loss_weights))`` in value and gradient (tested), but the
    vocabulary is read for one logsumexp, no log-probability tensor is stored, and backward writes a single
    ``[N, V]`` gradient. CE is computed in float32; ``"mean"`` over zero valid labels gives 0 (torch gives NaN).

    Args:
        logits: (B, T, V) (any leading shape), labels: (B, T), aligned (no shift inside).
        ntl: the NTL to add, or None for CE alone (the second output is then a constant 0).
        ce_reduction: ``"mean"`` over non-ignored labels or ``"sum"`` (divide by ``num_items_in_batch`` yourself).
        ignore_index: label id CE skips; defaults to ``ntl.ignore_index`` (-100 without NTL). Must agree with it.
        loss_weights, target_probs: as `NTLoss.forward`. NTL's reduction must be ``"mean"`` or ``"sum"``.

    Returns:
        ``(ce, ntl)`` float32 scalars, each with its own gradient.
    """
    _check_choice("ce_reduction", ce_reduction, ("mean", "sum"))
    default = -100 if ntl is None else ntl.ignore_index
    if ignore_index is not None and ignore_index != default and ntl is not None:
        raise ValueError(
            f"`ignore_index`={ignore_index} differs from the NTL's ignore_index={default}; build NTLoss with "
            f"ignore_index={ignore_index}."
        )
    ignore_index = default if ignore_index is None else ignore_index
    if ntl is not None:
        if ntl.reduction == "none":
            raise ValueError("cross_entropy_and_ntl needs ntl.reduction 'mean' or 'sum', got 'none'.")
        ntl._check(logits, labels, loss_weights, target_probs)
    elif tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"`labels` {tuple(labels.shape)} must match `logits` {tuple(logits.shape)} minus the last dim."
        )
    flat = logits.reshape(-1, logits.shape[-1])  # (N, V)
    target = None if target_probs is None else target_probs.reshape(-1, target_probs.shape[-1])
    return _CrossEntropyWithNTL.apply(flat, labels, ntl, ce_reduction == "mean", ignore_index, loss_weights, target)


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
