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
from numadapter.methods.context import ContextNumbers, fixed_point_values
from numadapter.methods.fone.embedding import digits_to_strings, fone_features_from_digits, lower_fractions
from numadapter.methods.fone.modes import complex_product, get_head_mode
from numadapter.methods.fone.pair_ops import pair_results
from numadapter.methods.fone.pointer import exact_log_likelihood, likeliest_combination

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


def _pick(powers: torch.Tensor, choice: torch.Tensor) -> torch.Tensor:
    """``powers [..., K, 3, P, 2]`` at one coefficient per slot (``choice [..., K]``): ``[..., K, P, 2]``."""
    index = choice[..., None, None, None].expand(*choice.shape, 1, *powers.shape[-2:])  # (..., K, 1, P, 2)
    return torch.gather(powers, -3, index).squeeze(-3)


def most_likely_coefficients(log_p: torch.Tensor) -> torch.Tensor:
    """The most likely coefficient of every slot, index 0 / 1 / 2 for ``-1 / 0 / +1`` (``log_p [..., K, 3]`` ->
    int64 ``[..., K]``), a tie going to 0, then +1.

    A slot that never held a number in training keeps its initial logits, exactly equal (its weights got an exact
    zero gradient), and so does every slot of a fresh head: a plain ``argmax`` would break that tie to index 0,
    coefficient -1, so "Q3. a + b =" after training on "a + b =" subtracted the 3 and a fresh head wrote minus the
    sum of the prompt's numbers. Here such a slot leaves its number out.
    """
    preference = torch.tensor([1, 2, 0], device=log_p.device)  # coefficient 0 first, then +1, then -1
    return preference[log_p.index_select(-1, preference).argmax(-1)]  # (..., K)


def _product(factors: torch.Tensor) -> torch.Tensor:
    """The complex product over the slot dim of ``[..., K, P, 2]`` -> ``[..., P, 2]``."""
    product = factors[..., 0, :, :]
    for slot in range(1, factors.shape[-3]):
        product = complex_product(product, factors[..., slot, :, :])
    return product


def _target_log_likelihood(logits: torch.Tensor, target_digits: torch.Tensor) -> torch.Tensor:
    """``sum_places log p(target digit)`` per candidate: ``[N, C, P, 10]``, ``[N, P]`` -> ``[N, C]``."""
    index = target_digits.long().unsqueeze(-2).expand(*logits.shape[:-1]).unsqueeze(-1)  # (N, C, P, 1)
    return torch.log_softmax(logits, -1).gather(-1, index).squeeze(-1).sum(-1)


def shifted_digit_logits(pairs: torch.Tensor, lower: torch.Tensor) -> torch.Tensor:
    """Scores of the ten candidates ``phi((j + lower) / 10, 1)`` for every pair (``fone_head_target="feature"``).

    Args:
        pairs: float32 ``[..., 2]`` digit 2-vectors.
        lower: float ``[...]`` the lower digits' value as a fraction in [0, 1) (0: the paper's ``phi(j, 10)``).

    Returns:
        float32 ``[..., 10]``: ``pairs . (cos, sin)(2*pi*(j + lower)/10)`` for ``j = 0 ... 9``.
    """
    steps = torch.arange(10, dtype=torch.float32, device=pairs.device)
    angle = (steps + lower.float()[..., None]) * (2 * math.pi / 10)  # (..., 10)
    return (pairs[..., None, :] * torch.stack((torch.cos(angle), torch.sin(angle)), dim=-1)).sum(-1)


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
        self.reads_context = self.mode.reads_context
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
        readout = log_p = powers = None
        if self.reads_context:
            readout, powers = pairs, self._powers(context, tuple(h.shape[:-1]))  # (N, P, 2), (N, K, 3, P, 2)
            if self.pointer is not None:  # each slot's logits from its number's key and this state
                if context.keys is None:
                    raise ValueError(
                        "fone_context_pointer=True chooses each number by its key: pass `context` with keys "
                        "(numadapter.methods.context.last_numbers(..., keys=head.number_keys(hidden)))."
                    )
                log_p = torch.log_softmax(self.pointer(h, context.keys), -1)  # (N, K, 3)
            else:
                logits = F.linear(h, self.coefficients.weight.float(), self.coefficients.bias.float())  # (N, 3K)
                log_p = torch.log_softmax(logits.unflatten(-1, (self.context_numbers, 3)), -1)  # (N, K, 3)
            # an empty slot multiplies by 1 whatever its coefficient: give it coefficient 0 for sure, so its logits
            # get an exact zero gradient (not rounding noise, which Adam would scale up to full steps)
            empty = log_p.new_tensor([-math.inf, 0.0, -math.inf])
            log_p = torch.where(context.valid[..., None], log_p, empty)
            pairs = complex_product(pairs, _product(_pick(powers, most_likely_coefficients(log_p))))
            if self.products:
                op_log_p, pair_powers, pair_combined = self._pair_operations(h, context)
                op = op_log_p.argmax(-1)  # (N,): 0 the sum (first among equals), k > 0 the pair k - 1
                index = (op - 1).clamp(min=0)[..., None, None, None].expand(*op.shape, 1, *pair_powers.shape[-2:])
                chosen = torch.gather(pair_powers, -3, index).squeeze(-3)  # (N, P, 2)
                pairs = torch.where((op > 0)[..., None, None], complex_product(readout, chosen), pairs)
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
        combined = context if self.reads_context else None
        if self.reads_context and self.products:
            return DigitHeadOutput(logits, sign_logits, pairs, readout, log_p, powers, combined, op_log_p,
                                   pair_powers, pair_combined)  # fmt: skip
        return DigitHeadOutput(logits, sign_logits, pairs, readout, log_p, powers, combined)

    def number_keys(self, hidden: torch.Tensor) -> torch.Tensor | None:
        """``fone_context_pointer``: the key of every position, float32 ``[..., D]`` from hidden states ``[..., H]``
        (a number's key is the one at its position); None for the other heads."""
        pointer = getattr(self, "pointer", None)
        return None if pointer is None else pointer.keys(hidden)

    def _pair_operations(
        self, h: torch.Tensor, context: ContextNumbers
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``fone_context_products``: the operation log-probabilities ``[N, 1 + C]`` (a pair whose result is not exact
        or does not fit is impossible), the pair results' features ``[N, C, P, 2]`` (low place first) and their
        `combine_exactly` rows ``[N, C, 2 + P]``."""
        results = pair_results(context, self.frac_digits)
        logits = F.linear(h, self.operations.weight.float(), self.operations.bias.float())  # (N, 1 + C)
        allowed = torch.cat([torch.ones_like(results.valid[..., :1]), results.valid], -1)
        op_log_p = torch.log_softmax(logits.masked_fill(~allowed, -math.inf), -1)
        features = fone_features_from_digits(results.digits, self.int_digits, self.frac_digits)  # (N, C, 2P)
        return op_log_p, features.unflatten(-1, (self.num_places, 2)), results.combined

    def _powers(self, context: ContextNumbers | None, leading: tuple[int, ...]) -> torch.Tensor:
        """Each context number raised to the coefficients ``(-1, 0, +1)``: ``conj(z), 1, z`` per place, float32
        ``[N, K, 3, P, 2]`` (low place first; an empty slot's coefficient is fixed at 0 in `forward`)."""
        count = self.context_numbers
        if context is None:
            raise ValueError(
                "fone_head_input='context' builds the answer from the numbers before it: pass `context` (the last "
                f"{count} numbers at each position, numadapter.methods.context.last_numbers), or read the head's "
                "outputs from the model's forward (`number_logits`), which passes them, also with past_key_values "
                '(docs/guide.md, "Which forwards are number-aware").'
            )
        expected = (*leading, count)
        if tuple(context.valid.shape) != expected or tuple(context.digits.shape) != (*expected, self.num_places):
            raise ValueError(
                f"`context` must hold {count} numbers of {self.num_places} places for each of the {list(leading)} "
                f"positions (digits {list(expected) + [self.num_places]}, valid {list(expected)}), got digits "
                f"{list(context.digits.shape)} and valid {list(context.valid.shape)}."
            )
        features = fone_features_from_digits(context.digits, self.int_digits, self.frac_digits)  # (N, K, 2P)
        z = features.unflatten(-1, (self.num_places, 2))  # (N, K, P, 2), low place first
        flip = z.new_tensor([1.0, -1.0])
        z = torch.where((context.sign < 0)[..., None, None], z * flip, z)  # a negative number: the conjugate
        one = torch.zeros_like(z)
        one[..., 0] = 1.0
        return torch.stack((z * flip, one, z), dim=-3)  # (N, K, 3, P, 2)

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
        if out.powers is not None and getattr(self, "pointer", None) is not None:
            per_number = self._pointer_loss(out, target_digits)  # (N,)
        elif out.powers is not None:
            per_number = self._mixture_loss(out, target_digits)  # (N,)
        else:
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

    def _mixture_loss(self, out: DigitHeadOutput, target_digits: torch.Tensor) -> torch.Tensor:
        """Context head: ``-log sum_c P(c | h) prod_places p(y_place | c)``, divided by the places (so it reads like
        the other heads' mean digit cross-entropy), float32 ``[N]``.

        The coefficients are latent: the likelihood of the answer under every combination is scored, so the one that
        explains it gets the credit at once. A single coefficient alone carries no signal (with one operand right
        and the other left out, the angles of the lower places are off by a uniformly random amount), which is why
        a soft mixture of the coefficients inside one product does not learn."""
        combo_log_p, logits = self.combination_logits(out, target_digits)  # (N, C), (N, C, P, 10)
        per_combo = _target_log_likelihood(logits, target_digits)  # (N, C)
        sums = torch.logsumexp(combo_log_p + per_combo, -1)  # (N,)
        if out.operation_log_probs is None:
            return -sums / self.num_places  # (N,)
        # with pair operations: the sum is one operation among them, each pair's result another explanation
        pair_pairs = complex_product(out.readout.unsqueeze(-3), out.pair_powers).flip(-2)  # (N, C2, P, 2)
        lower = lower_fractions(target_digits, torch.float32).unsqueeze(-2)  # (N, 1, P)
        per_pair = _target_log_likelihood(shifted_digit_logits(pair_pairs, lower), target_digits)  # (N, C2)
        op_log_p = out.operation_log_probs
        terms = torch.cat([op_log_p[..., :1] + sums[..., None], op_log_p[..., 1:] + per_pair], -1)  # (N, 1 + C2)
        return -torch.logsumexp(terms, -1) / self.num_places  # (N,)

    def _pointer_loss(self, out: DigitHeadOutput, target_digits: torch.Tensor) -> torch.Tensor:
        """Pointer form, float32 ``[N]``: ``-log`` of the probability of every combination that forms the answer's
        magnitude exactly (`numadapter.methods.fone.pointer.exact_log_likelihood`: the coefficients are latent, as in
        `_mixture_loss`, but only exact combinations are summed), or where none does the cross-entropy of all 0
        (the read-out alone); plus the digit loss of ``u * prod_k z_k^(c_k)`` under the likeliest exact combination
        (`numadapter.methods.fone.pointer.likeliest_combination`, the fewest terms among equals), which trains the
        read-out ``u``; divided by the places."""
        context = out.context
        values = fixed_point_values(context.digits, context.sign)  # (N, K)
        target = fixed_point_values(target_digits, torch.ones_like(target_digits[..., 0]))  # (N,)
        log_p = out.coefficient_log_probs
        wanted = likeliest_combination(values, context.valid, target, log_p.detach()) + 1  # (N, K) of 0, 1, 2
        chosen = log_p.gather(-1, wanted[..., None]).squeeze(-1)  # (N, K)
        hard_nll = -torch.where(context.valid, chosen, 0.0).sum(-1)  # (N,): all 0 where nothing forms it
        exact = exact_log_likelihood(values, context.valid, target, log_p)  # (N,)
        choice_nll = torch.where(torch.isfinite(exact), -exact, hard_nll)
        pairs = complex_product(out.readout, _product(_pick(out.powers, wanted))).flip(-2)  # (N, P, 2)
        logits = shifted_digit_logits(pairs, lower_fractions(target_digits, torch.float32))  # (N, P, 10)
        digit_nll = -_target_log_likelihood(logits.unsqueeze(-3), target_digits).squeeze(-1)  # (N,)
        return (choice_nll + digit_nll) / self.num_places

    def combination_logits(
        self, out: DigitHeadOutput, target_digits: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Context head: every one of the ``C = 3^K`` combinations on the target rows, with its log-probability
        ``log P(c | h)`` (float32 ``[N, C]``) and the digit logits it gives, shifted by the target's lower digits
        (teacher forcing, as `target_logits`): float32 ``[N, C, P, 10]``, most significant place first."""
        if out.powers is None:
            raise ValueError("`combination_logits` needs the context head's output (fone_head_input='context').")
        if getattr(self, "pointer", None) is not None:
            raise ValueError(
                "`combination_logits` scores all 3^K combinations, which the pointer form (fone_context_pointer=True) "
                "does not: its loss teaches the fewest-terms combination (`FoNEDigitHead.loss`)."
            )
        combos = self.combinations.to(out.powers.device)  # (C, K) of 0, 1, 2 (coefficients -1, 0, +1)
        slots = torch.arange(self.context_numbers, device=combos.device)
        combo_log_p = out.coefficient_log_probs[..., slots, combos].sum(-1)  # (N, C)
        products = _product(out.powers[..., slots, combos, :, :])  # (N, C, P, 2)
        combo_pairs = complex_product(out.readout.unsqueeze(-3), products).flip(-2)  # (N, C, P, 2), high place first
        lower = lower_fractions(target_digits, torch.float32).unsqueeze(-2)  # (N, 1, P)
        return combo_log_p, shifted_digit_logits(combo_pairs, lower)  # (N, C), (N, C, P, 10)

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
        combination = operation = None
        if out.coefficient_log_probs is not None:
            choice = most_likely_coefficients(out.coefficient_log_probs)  # (N, K) of 0, 1, 2
            combination = choice - 1
            if out.operation_log_probs is not None:  # a pair operation combines no number with a coefficient
                operation = out.operation_log_probs.argmax(-1)  # (N,)
                combination = torch.where((operation > 0)[..., None], 0, combination)
        if out.pairs is None:
            return None, combination
        digits = out.digit_logits.argmax(-1)  # (N, P), most significant first
        angle = (digits.float() + lower_fractions(digits, torch.float32)) * (2 * math.pi / 10)  # the read digits
        x, y = out.pairs[..., 0], out.pairs[..., 1]  # (N, P) each
        cos, sin = torch.cos(angle), torch.sin(angle)
        off = torch.atan2((x * sin - y * cos).abs(), x * cos + y * sin)  # (N, P): the angle to the read direction
        fit = (1 - off / (math.pi / 10)).clamp(0.0, 1.0).amin(-1)  # (N,)
        if out.coefficient_log_probs is not None:
            chosen = out.coefficient_log_probs.gather(-1, choice.unsqueeze(-1)).squeeze(-1).sum(-1)  # (N,)
            if operation is not None:  # P(operation), times P(coefficients) for the sum
                op_log_p = out.operation_log_probs.gather(-1, operation.unsqueeze(-1)).squeeze(-1)  # (N,)
                chosen = op_log_p + torch.where(operation > 0, 0.0, chosen)
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
