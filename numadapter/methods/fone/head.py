"""FoNE digit head: one 2-vector per digit place, scored against the ten digit angles (FoNE Section 3.2).

Implements Zhou et al., "FoNE: Precise Single-Token Number Embeddings via Fourier Features" (2025,
docs/papers.md, "FoNE"):

- Definition 3.7 (Fourier Number Loss): for digit ``i``,
  ``logits = [h[2i], h[2i+1]] (1 x 2) . [phi(0, 10); ...; phi(9, 10)]^T (2 x 10)``, ``L_i = CE(y_i, logits)`` with
  ``phi(j, 10) = (cos(2*pi*j/10), sin(2*pi*j/10))`` (Definition 3.1); the loss is the average over digit positions
  (Algorithm 3, ``FourierNumberFinalLoss``).
- Definition 3.8 / Algorithm 2: ``y_i = argmax_j logits[j]``; the number is the concatenation of the digits
  (Algorithm 3, ``FourierNumberFinalPrediction``).

Target (config ``fone_head_target``)
    ``"digit"`` (paper): the candidate directions of every place are the ten ``phi(j, 10)`` above, so pair ``i`` must
    point at its own digit. ``"feature"``: the candidates of place ``i`` are ``phi((j + f_i) / 10, 1)``, where
    ``f_i = 0.d_{i-1} d_{i-2} ...`` is the value of the lower digits as a fraction; the true candidate is then the
    answer's exact FoNE feature ``phi(y, 10^(i+1))`` (``y mod 10^(i+1) = 10^i (d_i + f_i)``). Training uses the
    target's lower digits for ``f_i`` (teacher forcing, `FoNEDigitHead.target_logits`); prediction decodes the
    lowest place first and takes ``f_i`` from the digits already decoded (`FoNEDigitHead.forward`), the carry-aware
    inversion of Lemmas 3.3 / 3.4 (`numadapter.methods.fone.embedding.fone_decode`), which tolerates an angle error of
    half a digit at every place. Why: the feature of ``a + b`` is the rotation of ``a``'s by ``b``'s, a smooth function
    of the inputs, while the paper's digit jumps at every carry boundary (``19.999`` has tens digit 1, ``20.000`` 2).

Layout
    The head forms ``2P`` numbers ``v`` (``P = m + n``): a learned projection ``H -> 2P``
    (``fone_head_input="linear"``, the read-out the other inputs build on) or the first ``2P`` hidden dims
    (``"slice"``, the paper's Figure 1(d)). The default input is ``"context"`` (below), a linear read-out combined
    with the numbers already in the text.
    As in Algorithm 3 (fraction digits first, digit ``i`` scaled by ``10^(i-n)``), pair ``k = (v[2k], v[2k+1])`` is
    the digit of place ``10^(k-n)``: least significant first, the same pair order as the FoNE input features.
    ``digit_logits`` are returned most significant first, ``[N, P, 10]`` with index ``j`` the place ``10^(m-1-j)``,
    like ``num_digits``.

Rotation (``fone_head_input="rotation"``, numadapter's own, not in the paper)
    Two learned read-outs ``u = W_u h + b_u`` and ``v = W_v h + b_v`` (each ``[P, 2]``), and pair ``k`` is their
    complex product ``u_k * v_k``: the angles add. The FoNE feature of ``a + b`` at period ``T`` is the rotation of
    ``a``'s feature by ``b``'s (``phi(a + b, T) = phi(a, T) * phi(b, T)``), and of ``a - b`` by the conjugate; a
    linear read-out of one hidden state has to compute that product inside the model, which a pretrained base does
    not do at the answer position (it carries only the answer's leading digit there:
    ``eval_harness/results/pretrained_study``). With the product in the head, the model only has to bring each
    operand's features to the answer position, which attention can do. ``v`` starts at ``1 + 0i`` (``W_v = 0``), so
    the head starts as the ``"linear"`` one.

Context (``fone_head_input="context"``, numadapter's own, not in the paper)
    The answer as a signed combination of the numbers already in the text. With ``z_k`` the exact FoNE features of
    the k-th latest number at or before the position (`numadapter.methods.context`, K = ``fone_context_numbers``;
    conjugated for a negative number), a combination ``c`` in ``{-1, 0, +1}^K`` gives pair ``j`` as
    ``u_j * prod_k z_kj^(c_k)`` (``z^-1 = conj(z)``), with ``u = W_u h + b_u`` as in ``"linear"`` (starting at the
    constant ``1 + 0i``). That is exact integer arithmetic on the angles: ``a + b``, ``a - b``, ``a + b - c``, a copy
    of ``a``, or (all zeros) the plain linear read-out. The hidden state chooses the coefficients,
    ``P(c | h) = prod_k softmax(W_c h + b_c)_k[c_k]``; training maximises the answer's likelihood summed over all
    ``3^K`` combinations (the coefficients are latent), and prediction decodes the most likely one. So the model
    only has to choose the signs (what to add, what to subtract, what to leave out); the digits come from the
    numbers themselves, which a pretrained base does not carry intact to the answer position
    (``eval_harness/results/pretrained_study``). It needs ``fone_head_target="feature"``. On a causal LM the
    numbers are those of the input up to the position; on T5 the encoder's numbers come first, then the decoder's up
    to the position (`numadapter.methods.context.context_at`). A number it cannot form this way (a product, unless
    ``fone_context_products`` adds products and quotients of two numbers: `numadapter.methods.fone.pair_ops`; a
    number from words) falls back to the read-out ``u``. With ``fone_context_pointer=True`` the coefficients of up to
    16 slots come from each number's own key and the answer's state (`numadapter.methods.fone.pointer`), and the
    loss sums only the combinations that form the answer exactly, instead of scoring all ``3^K``.

Sign
    With ``sign_policy="feature"`` a learned ``H -> 2`` linear map gives ``sign_logits`` (class 0: ``+``, class 1:
    ``-``) in both input modes; the paper has no sign. Its cross-entropy is added to the digit loss.

Everything is computed in float32 whatever the hidden dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from numadapter.methods.base import NumberSettings
from numadapter.methods.context import ContextNumbers
from numadapter.methods.fone.embedding import digits_to_strings, lower_fractions
from numadapter.methods.fone.modes import get_head_mode
from numadapter.methods.fone.modes.base import shifted_digit_logits

REDUCTIONS = ("mean", "sum", "none")


class DigitHeadOutput(NamedTuple):
    """Output of `FoNEDigitHead.forward`.

    A NamedTuple, not a dataclass: DeepSpeed ZeRO-3 re-gathers parameters for backward by finding the tensors in a
    module's outputs, and it looks inside tuples but not inside dataclasses.

    Attributes:
        digit_logits: float32 ``[N, P, 10]``, most significant place first; ``[..., j]`` scores digit ``j``.
        sign_logits: float32 ``[N, 2]`` (class 0: ``+``, class 1: ``-``), or None when the sign is text.
        pairs: float32 ``[N, P, 2]`` the digit 2-vectors, most significant first, with
            ``fone_head_target="feature"`` (its training logits depend on the target); None otherwise.
        readout: ``fone_head_input="context"``: float32 ``[N, P, 2]`` the linear read-out ``u`` (low place first);
            None otherwise.
        coefficient_log_probs: ``fone_head_input="context"``: float32 ``[N, K, 3]`` log-probabilities of the
            coefficients ``(-1, 0, +1)`` of each of the K context numbers; None otherwise.
        powers: ``fone_head_input="context"``: float32 ``[N, K, 3, P, 2]`` each context number raised to those
            coefficients, ``conj(z), 1, z`` (low place first); None otherwise. The loss expands the ``3^K``
            combinations from them on the target rows only (`_mixture_loss`); ``pairs`` are the most likely one's.
        context: ``fone_head_input="context"``: the `ContextNumbers` the combination was taken from (``digits
            [N, K, P]``, ``sign`` and ``valid [N, K]``, as passed to `forward`), so that generation can compute the
            chosen combination's exact value (`numadapter.methods.context.combine_exactly`); None otherwise.
        operation_log_probs: with ``fone_context_products``: float32 ``[N, 1 + C]`` log-probabilities of the
            operation, index 0 the signed sum, then the pair operations of `numadapter.methods.fone.pair_ops`
            (-inf where a pair's result is not exact or does not fit); None otherwise.
        pair_powers: with ``fone_context_products``: float32 ``[N, C, P, 2]`` the FoNE features of each pair
            result's magnitude (low place first); None otherwise.
        pair_combined: with ``fone_context_products``: int64 ``[N, C, 2 + P]`` each pair result as
            `combine_exactly` rows (`PairResults.combined`); None otherwise.
    """

    digit_logits: torch.Tensor
    sign_logits: torch.Tensor | None = None
    pairs: torch.Tensor | None = None
    readout: torch.Tensor | None = None
    coefficient_log_probs: torch.Tensor | None = None
    powers: torch.Tensor | None = None
    context: ContextNumbers | None = None
    operation_log_probs: torch.Tensor | None = None
    pair_powers: torch.Tensor | None = None
    pair_combined: torch.Tensor | None = None


def digit_angles(device: torch.device | str | None = None) -> torch.Tensor:
    """The ten digit directions ``phi(j, 10) = (cos(2*pi*j/10), sin(2*pi*j/10))``, float32 ``[10, 2]``."""
    angle = torch.arange(10, dtype=torch.float64, device=device) * (2 * math.pi / 10)  # (10,)
    return torch.stack((torch.cos(angle), torch.sin(angle)), dim=-1).to(torch.float32)  # (10, 2)


class FoNEDigitHead(nn.Module):
    """Per-digit classification head of FoNE (Definitions 3.7 and 3.8), plus an optional sign classifier.

    Args:
        hidden_size: H, the width of the final hidden states.
        config: uses ``int_digits``, ``frac_digits``, ``fone_head_input``, ``fone_head_target`` and ``sign_policy``.
    """

    def __init__(self, hidden_size: int, config: NumberSettings) -> None:
        super().__init__()
        if not isinstance(hidden_size, int) or hidden_size < 1:
            raise ValueError(f"`hidden_size` must be a positive integer, got {hidden_size!r}.")
        self.hidden_size = hidden_size
        self.int_digits = config.int_digits
        self.frac_digits = config.frac_digits
        self.num_places = config.int_digits + config.frac_digits
        self.input_mode = config.fone_head_input
        self.target = config.fone_head_target
        self.predict_sign = config.sign_policy == "feature"
        self.mode = get_head_mode(self.input_mode)  # `numadapter.methods.fone.modes`: builds and reads the 2-vectors
        self.mode.check(config, hidden_size)
        self.mode.build(self, hidden_size, config)
        self.sign_proj = nn.Linear(hidden_size, 2) if self.predict_sign else None

    def extra_repr(self) -> str:
        return (
            f"hidden_size={self.hidden_size}, int_digits={self.int_digits}, frac_digits={self.frac_digits}, "
            f"input={self.input_mode!r}, target={self.target!r}, predict_sign={self.predict_sign}"
        )

    def forward(self, hidden: torch.Tensor, context: ContextNumbers | None = None) -> DigitHeadOutput:
        """Scores every digit place.

        Args:
            hidden: ``[N, H]`` final hidden states (any float dtype; leading dims beyond N are kept).
            context: with ``fone_head_input="context"`` (required there, ignored otherwise), the last K numbers at or
                before each of the N positions (`numadapter.methods.context.last_numbers`): ``digits
                [N, K, P]``, ``sign [N, K]``, ``valid [N, K]``.

        Returns:
            `DigitHeadOutput` with ``digit_logits [N, P, 10]``, ``sign_logits [N, 2]`` (or None) and, with
            ``fone_head_target="feature"``, ``pairs [N, P, 2]``; there each place's logits are scored with the
            fraction of the lower places' argmax digits, decoded lowest place first.
        """
        if hidden.dim() < 1 or hidden.shape[-1] != self.hidden_size:
            raise ValueError(f"`hidden` must have shape [N, {self.hidden_size}], got {tuple(hidden.shape)}.")
        h = hidden.float()
        pairs = self.mode.readout(self, h)  # (N, P, 2): pair k = place 10^(k-n), low first
        pairs, extras = self.mode.combine(self, h, pairs, context)  # the context mode: with the numbers before
        pairs = pairs.flip(-2)  # (N, P, 2): most significant first, like num_digits
        sign_logits = None
        if self.sign_proj is not None:
            sign_logits = F.linear(h, self.sign_proj.weight.float(), self.sign_proj.bias.float())  # (N, 2)
        if self.target == "digit":
            logits = pairs @ digit_angles(hidden.device).T  # (N, P, 2) @ (2, 10) -> (N, P, 10)
            return DigitHeadOutput(digit_logits=logits, sign_logits=sign_logits)
        lower = pairs.new_zeros(pairs.shape[:-2])  # (N,): nothing below the lowest place
        places = []
        for place in range(self.num_places - 1, -1, -1):  # lowest first: a place needs the digits below it
            place_logits = shifted_digit_logits(pairs[..., place, :], lower)  # (N, 10)
            lower = (place_logits.argmax(-1).float() + lower) / 10
            places.append(place_logits)
        logits = torch.stack(places[::-1], dim=-2)  # (N, P, 10), most significant first
        return DigitHeadOutput(logits, sign_logits, pairs, **extras)

    def number_keys(self, hidden: torch.Tensor) -> torch.Tensor | None:
        """The pointer's key of every position, float32 ``[..., D]`` from hidden states ``[..., H]`` (a number's key is
        the one at its position); None for the heads without keys (`HeadMode.number_keys`)."""
        return self.mode.number_keys(self, hidden)

    def target_logits(self, out: DigitHeadOutput, target_digits: torch.Tensor) -> torch.Tensor:
        """The digit logits the loss scores: ``out.digit_logits``, or with ``fone_head_target="feature"`` the
        candidates shifted by the *target's* lower digits (teacher forcing), float32 ``[N, P, 10]``."""
        if self.target == "digit":
            return out.digit_logits
        if out.pairs is None:
            raise ValueError("fone_head_target='feature' scores the head's `pairs`: pass this head's own output.")
        return shifted_digit_logits(out.pairs, lower_fractions(target_digits, torch.float32))  # (N, P, 10)

    def loss(
        self,
        out: DigitHeadOutput,
        target_digits: torch.Tensor,
        target_sign: torch.Tensor | None = None,
        reduction: str = "mean",
    ) -> torch.Tensor:
        """Digit cross-entropy averaged over places (Definition 3.7), plus the sign cross-entropy if predicted.

        Args:
            out: the forward output for N numbers.
            target_digits: int64 ``[N, P]`` exact place digits of ``|y|`` (the ``num_digits`` rows).
            target_sign: int64 ``[N]`` of +1 / -1; required when the head predicts the sign, ignored otherwise.
            reduction: ``"mean"`` over numbers (0 with a graph for N = 0), ``"sum"``, or ``"none"`` (``[N]``).

        Returns:
            A scalar, or ``[N]`` per-number losses with ``reduction="none"``.
        """
        if reduction not in REDUCTIONS:
            raise ValueError(f"`reduction` must be one of {list(REDUCTIONS)}, got {reduction!r}.")
        logits = out.digit_logits
        if tuple(target_digits.shape) != tuple(logits.shape[:-1]):
            raise ValueError(
                f"`target_digits` must have shape {list(logits.shape[:-1])} (one digit per place), "
                f"got {tuple(target_digits.shape)}."
            )
        if target_digits.dtype.is_floating_point:
            raise TypeError(f"`target_digits` must be an integer tensor, got dtype {target_digits.dtype}.")
        per_number = self.mode.number_loss(self, out, target_digits)  # (N,), or None: the digit cross-entropy
        if per_number is None:
            logits = self.target_logits(out, target_digits)
            per_digit = F.cross_entropy(logits.reshape(-1, 10), target_digits.reshape(-1).long(), reduction="none")
            per_number = per_digit.reshape(logits.shape[:-1]).mean(-1)  # (N * P,) -> (N, P) -> (N,)
        if out.sign_logits is not None:
            if target_sign is None:
                raise ValueError(
                    "this head predicts the sign (sign_policy='feature'): pass `target_sign` ([N] of +1/-1)."
                )
            if tuple(target_sign.shape) != tuple(per_number.shape):
                raise ValueError(
                    f"`target_sign` must have shape {list(per_number.shape)}, got {tuple(target_sign.shape)}."
                )
            if target_sign.numel() and bool((target_sign.abs() != 1).any()):
                bad = target_sign[target_sign.abs() != 1][0].item()
                raise ValueError(f"`target_sign` must hold +1 or -1 on number rows, got {bad}.")
            sign_class = (target_sign < 0).long()  # (N,): 0 for +, 1 for -
            per_number = per_number + F.cross_entropy(out.sign_logits, sign_class, reduction="none")
        if reduction == "none":
            return per_number
        if reduction == "sum":
            return per_number.sum()
        if per_number.numel() == 0:
            return logits.sum() * 0.0
        return per_number.mean()

    @torch.no_grad()
    def confidence(self, out: DigitHeadOutput) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """How well the output fits the number it reads, and the context head's chosen combination.

        The fit of a place is ``1 - d / (pi / 10)``, with ``d`` the angle between its 2-vector and the direction of
        the digit read there (at most half a digit, ``pi / 10``, since the read digit is the nearest): 1 when the
        vector points exactly at a digit, 0 halfway between two. The number's fit is its worst place's. With the
        context head it is multiplied by the probability of the chosen combination, ``P(c* | h)``. An answer that
        is a combination of the numbers before it, learned, scores near 1; one the head cannot form (a product, a
        conversion by a factor other than 1) comes out of an approximate read-out and scores lower.

        Args:
            out: the output at N positions (``pairs`` needed: ``fone_head_target="feature"``).

        Returns:
            float32 ``[N]`` confidences (None without ``pairs``) and int64 ``[N, K]`` coefficients (-1, 0, +1) of
            the context numbers, most recent first (None for the other heads).
        """
        combination, chosen = self.mode.choice(self, out)  # the context mode's combination and its log-probability
        if out.pairs is None:
            return None, combination
        digits = out.digit_logits.argmax(-1)  # (N, P), most significant first
        angle = (digits.float() + lower_fractions(digits, torch.float32)) * (2 * math.pi / 10)  # the read digits
        x, y = out.pairs[..., 0], out.pairs[..., 1]  # (N, P) each
        cos, sin = torch.cos(angle), torch.sin(angle)
        off = torch.atan2((x * sin - y * cos).abs(), x * cos + y * sin)  # (N, P): the angle to the read direction
        fit = (1 - off / (math.pi / 10)).clamp(0.0, 1.0).amin(-1)  # (N,)
        if chosen is not None:
            fit = fit * chosen.exp()
        return fit, combination

    @torch.no_grad()
    def predict(self, out: DigitHeadOutput) -> tuple[torch.Tensor, torch.Tensor]:
        """Argmax digits (Definition 3.8) and signs.

        Returns:
            ``digits`` int64 ``[N, P]`` (most significant first) and ``sign`` int64 ``[N]`` of +1 / -1 (all +1 when
            the sign is text; +1 for zero, as `ExactNumber` writes it).
        """
        digits = out.digit_logits.argmax(-1)  # (N, P)
        if out.sign_logits is None:
            sign = torch.ones(digits.shape[:-1], dtype=torch.long, device=digits.device)
        else:
            # zero has no sign: "-0" would be written "0" but fed back with the sign feature of a negative number
            negative = (out.sign_logits.argmax(-1) == 1) & (digits != 0).any(-1)
            sign = torch.where(negative, -1, 1)  # (N,)
        return digits, sign

    @staticmethod
    def to_strings(
        digits: torch.Tensor | Sequence[Sequence[int]],
        sign: torch.Tensor | Sequence[int] | None,
        int_digits: int,
        frac_digits: int,
    ) -> list[str]:
        """Exact canonical number text (``ExactNumber.from_place_digits``), e.g. ``"-12.5"``, ``"0"``."""
        return digits_to_strings(digits, sign, int_digits, frac_digits)
