"""Fourier Number Embedding (FoNE): exact features from digits, an exact decoder, and the input-side module.

Implements Zhou et al., "FoNE: Precise Single-Token Number Embeddings via Fourier Features" (2025,
docs/papers.md, "FoNE"):

- Definition 3.1 (circular embedding): ``phi(x, T) = (cos(2*pi*x/T), sin(2*pi*x/T))``.
- Definition 3.2 / Algorithm 1: ``FoNE(x, m, n) = [phi(x, T_i)]`` for ``i = -n+1 ... m`` (ascending), ``T_i = 10^i``,
  ``2(m+n)`` dims. Example 3.6: ``FoNE(4.17, m=1, n=2) = [phi(4.17, 0.1), phi(4.17, 1), phi(4.17, 10)]``.
- Lemmas 3.3 / 3.4: pair ``i`` determines ``x mod T_i``; `fone_decode` uses this, carry-aware, to invert exactly.
- Section 3.1, "map to the model width": zero-padding (Algorithm 1, lines 9-11) or a learned ``W in R^{d x 2(m+n)}``.
- Section 3.3, steps 3-4: the features are added to the word embedding of the [NUM] token (`FoNEEmbedding`).
- Section 4.3, "Effect of different periods": extra base periods such as ``[2, 5, 10]``.

Feature layout
    For bases ``(b_1, ..., b_B)`` the vector is base-major, periods ascending within a base, (cos, sin) interleaved::

        [cos θ(b_1, -n+1), sin θ(b_1, -n+1), ..., cos θ(b_1, m), sin θ(b_1, m),   # base b_1: 2(m+n) dims
         ...,                                                                     # bases b_2 ... b_B
         s]                                                                       # only with a sign feature

    with ``θ(b, i) = 2*pi*x / P(b, i)`` and period ``P(b, i) = b * 10^(i-1)``, so ``b = 10`` gives the paper's
    ``T_i = 10^i``. ``F = 2 * B * (m + n)`` (+1 with the sign feature). Example, ``m = 1, n = 1, bases = (2, 10)``:
    periods ``(0.2, 2, 1, 10)``, i.e. ``[phi(x, 0.2), phi(x, 2), phi(x, 1), phi(x, 10)]``, F = 8.

Exactness (no float64 ``x`` anywhere)
    ``(x mod 10^i) / 10^i = 0.d_{i-1} d_{i-2} ... d_{-n}``: the digits below place ``10^i`` read as a decimal fraction.
    It is computed in float64 by Horner's rule from the lowest place up, ``f <- (d + f) / 10`` (each step divides the
    earlier rounding errors by 10, so ``f`` is accurate to ~1e-16 however many digits there are), and only then
    ``cos/sin(2*pi*f)``. A 30-digit integer is therefore encoded to float64 accuracy, where
    ``cos(2*pi*float(x)/T)`` is garbage (float64 keeps ~16 digits of ``x``). For base ``b``:
    ``x / P(b, i) = (Y + f) / b`` with ``Y = floor(x / 10^(i-1))`` and ``f = (x mod 10^(i-1)) / 10^(i-1)``, so
    ``frac(x / P) = ((Y mod b) + f) / b``; ``Y mod b`` is exact integer arithmetic on the digits
    (``Y mod b = (10 * (Y' mod b) + d) mod b`` from the most significant place down; just ``d mod b`` when ``b``
    divides 10). Memory is ``O(P)`` per number row. (MPS has no float64: there float32 is used, angle error ~1e-6.)

Sign (config ``sign_policy``)
    The features are always those of ``|x|``; with ``sign_policy="feature"`` one extra last component ``s = +1 / -1``
    is appended (0 on non-number rows). Defining ``phi`` on the signed value instead would be ambiguous: FoNE with
    ``m`` integer places only determines ``x mod 10^m`` (``x`` and ``x + 10^m`` have identical features), so
    ``phi(-3)`` would equal ``phi(10^m - 3)``. The digit head also predicts the digits of ``|x|`` plus a sign, so input
    and output share one representation. Numbers needing more than ``m`` integer places are refused upstream
    (``NumberOutOfRangeError``), never wrapped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal

import torch
import torch.nn.functional as F
from torch import nn

from numadapter.methods.base import NumberSettings
from numadapter.numbers import ExactNumber

__all__ = [
    "FoNEEmbedding",
    "digits_to_strings",
    "fone_decode",
    "fone_feature_size",
    "fone_features",
    "fone_features_from_digits",
]


def _check_layout(int_digits: int, frac_digits: int, bases: Sequence[int]) -> tuple[int, ...]:
    for name, value in (("int_digits", int_digits), ("frac_digits", frac_digits)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"`{name}` must be a non-negative integer, got {value!r}.")
    if int_digits + frac_digits == 0:
        raise ValueError("`int_digits` + `frac_digits` must be at least 1, got 0 + 0: set `int_digits`.")
    bases = tuple(bases)
    if not bases or any(not isinstance(b, int) or isinstance(b, bool) or b < 2 for b in bases):
        raise ValueError(
            f"`bases` must be a non-empty sequence of integers >= 2 (config `fone_bases`), got {list(bases)!r}: "
            "use e.g. [10] (the paper) or [2, 5, 10]."
        )
    return bases


def fone_feature_size(
    int_digits: int, frac_digits: int, bases: Sequence[int] = (10,), sign_feature: bool = False
) -> int:
    """Width F of the FoNE feature vector: ``2 * len(bases) * (int_digits + frac_digits)`` (+1 with a sign)."""
    bases = _check_layout(int_digits, frac_digits, bases)
    return 2 * len(bases) * (int_digits + frac_digits) + int(sign_feature)


def _float_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64


def lower_fractions(digits: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """For every place, the digits below it read as a decimal fraction: ``f_i = 0.d_{i-1} d_{i-2} ...``.

    Horner's rule from the lowest place up, ``f <- (d + f) / 10``, so earlier rounding errors shrink tenfold per step
    (~1e-16 overall in float64).

    Args:
        digits: int ``[..., P]`` place digits, most significant first (the ``num_digits`` layout).
        dtype: the float dtype to compute and return in.

    Returns:
        ``[..., P]`` in `dtype`; index ``j`` is the fraction below place ``j``, so the last (lowest) place gets 0.
    """
    places = digits.shape[-1]
    fractions = [torch.zeros(digits.shape[:-1], dtype=dtype, device=digits.device)]
    for j in range(places - 1, 0, -1):  # from the lowest place up: f_{j-1} = (d_j + f_j) / 10
        fractions.append((digits[..., j].to(dtype) + fractions[-1]) / 10)
    return torch.stack(fractions[::-1], dim=-1)  # (..., P), most significant first


def fone_features_from_digits(
    num_digits: torch.Tensor,
    int_digits: int,
    frac_digits: int,
    bases: Sequence[int] = (10,),
    num_sign: torch.Tensor | None = None,
    *,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """FoNE features (Definition 3.2, extra bases per Section 4.3) computed exactly from place digits.

    Args:
        num_digits: int64 ``[..., P]``, ``P = int_digits + frac_digits``: the place digits of ``|x|``, most significant
            first (index ``j`` is the digit of place ``10^(int_digits-1-j)``), as in the ``num_digits`` side tensor.
            Digit values are checked (0..9) for CPU tensors only: a check on an accelerator would force a sync.
        int_digits: ``m``, integer places.
        frac_digits: ``n``, fraction places.
        bases: base periods; base ``b`` gives periods ``b * 10^(i-1)``, ``i = -n+1 ... m`` (``[10]``: the paper).
        num_sign: optional ``[...]`` tensor of +1 / -1 (0 on non-number rows); when given it is appended as the last
            feature component (the sign feature, see the module docstring).
        dtype: result dtype. The computation runs in float64 (float32 on MPS) and is cast at the end.

    Returns:
        ``[..., F]`` in ``dtype`` (float32 by default) with ``F = 2 * len(bases) * P`` (+1 when ``num_sign`` is
        given), laid out as described in the module docstring.
    """
    bases = _check_layout(int_digits, frac_digits, bases)
    places = int_digits + frac_digits
    if num_digits.dtype.is_floating_point or num_digits.dtype.is_complex or num_digits.dtype == torch.bool:
        raise TypeError(f"`num_digits` must be an integer tensor of place digits, got dtype {num_digits.dtype}.")
    if num_digits.dim() == 0 or num_digits.shape[-1] != places:
        raise ValueError(
            f"`num_digits` must have a last dimension of int_digits + frac_digits = {int_digits} + {frac_digits} = "
            f"{places}, got shape {tuple(num_digits.shape)}: build it with the same config."
        )
    if num_sign is not None and num_sign.shape != num_digits.shape[:-1]:
        raise ValueError(
            f"`num_sign` must have shape {tuple(num_digits.shape[:-1])} (num_digits without its last dim), "
            f"got {tuple(num_sign.shape)}."
        )
    digits = num_digits.long()
    if digits.device.type == "cpu" and digits.numel() and bool(((digits < 0) | (digits > 9)).any()):
        bad = digits[(digits < 0) | (digits > 9)][0].item()
        raise ValueError(f"`num_digits` must hold decimal digits 0..9, got {bad}.")
    ftype = _float_dtype(digits.device)
    low = digits.flip(-1).to(ftype)  # (..., P): least significant first, index q is place 10^(q-n)
    lower = lower_fractions(digits, ftype).flip(-1)  # (..., P): index k is (x mod 10^(k-n)) / 10^(k-n)
    blocks = []
    for base in bases:
        if 10 % base == 0:  # b in {2, 5, 10}: Y mod b depends only on the digit at place 10^(k-n)
            residue = torch.remainder(low, base)  # (..., P)
        else:  # Y_k = 10 * Y_{k+1} + d_k from the most significant place down, exact in integers modulo b
            residues = [torch.zeros_like(digits[..., 0])]
            for q in range(places - 1, -1, -1):
                residues.append(torch.remainder(10 * residues[-1] + digits[..., places - 1 - q], base))
            residue = torch.stack(residues[:0:-1], dim=-1).to(ftype)  # (..., P): index q is Y_q mod b
        frac = (residue + lower) / base  # (..., P): frac(x / (b * 10^(k-n))) in [0, 1)
        angle = (2 * math.pi) * frac
        pairs = torch.stack((torch.cos(angle), torch.sin(angle)), dim=-1)  # (..., P, 2)
        blocks.append(pairs.flatten(-2))  # (..., 2P): cos, sin interleaved
    if num_sign is not None:
        blocks.append(num_sign.to(ftype).unsqueeze(-1))  # (..., 1)
    return torch.cat(blocks, dim=-1).to(dtype)  # (..., F)


def _parse_all(numbers: Sequence[str | int | float | Decimal | ExactNumber]) -> list[ExactNumber]:
    if isinstance(numbers, (str, bytes, int, float, Decimal, ExactNumber)):
        raise TypeError(
            f"`numbers` must be a sequence of numbers, got a single {type(numbers).__name__}: wrap it in []."
        )
    return [ExactNumber.parse(value) for value in numbers]


def fone_features(
    numbers: Sequence[str | int | float | Decimal | ExactNumber],
    int_digits: int,
    frac_digits: int,
    bases: Sequence[int] = (10,),
    dtype: torch.dtype = torch.float32,
    sign_feature: bool = False,
) -> torch.Tensor:
    """FoNE (Algorithm 1 without padding) of a list of numbers, exact from their digits.

    Args:
        numbers: N numbers as ``str``, ``int``, ``float`` (via ``repr``), ``Decimal`` or ``ExactNumber``.
        int_digits: ``m``; a number needing more integer places raises ``NumberOutOfRangeError``.
        frac_digits: ``n``; a number needing more fraction places raises ``NumberOutOfRangeError`` (never rounded).
        bases: base periods (see the module docstring).
        dtype: dtype of the result (computed in float64, cast at the end).
        sign_feature: append the sign component (``sign_policy="feature"``). Without it a negative number raises
            ``ValueError``: the features would silently describe ``|x|``.

    Returns:
        ``[N, F]`` with ``F = fone_feature_size(int_digits, frac_digits, bases, sign_feature)``.
    """
    bases = _check_layout(int_digits, frac_digits, bases)
    exact = _parse_all(numbers)
    for value in exact:
        if value.sign < 0 and not sign_feature:
            raise ValueError(
                f"FoNE features without a sign component cannot represent the negative number {value}: pass "
                "sign_feature=True (config sign_policy='feature') or encode its absolute value (sign_policy='text')."
            )
    places = int_digits + frac_digits
    digits = torch.tensor([value.place_digits(int_digits, frac_digits) for value in exact], dtype=torch.long)
    digits = digits.reshape(len(exact), places)  # (N, P), also for N = 0
    sign = torch.tensor([value.sign for value in exact], dtype=torch.long) if sign_feature else None
    return fone_features_from_digits(digits, int_digits, frac_digits, bases, sign, dtype=dtype)


def fone_decode(features: torch.Tensor, int_digits: int, frac_digits: int, bases: Sequence[int] = (10,)) -> list[str]:
    """Inverts FoNE features exactly (Lemmas 3.3 / 3.4, carry-aware), returning canonical number text.

    Definition 3.8's per-pair argmax over digit angles does not invert clean features: pair ``i`` encodes
    ``(x mod 10^i) / 10^i = (d_{i-1} + f) / 10`` where ``f`` is the fraction formed by the lower digits, so
    ``phi(4.7, 10)`` lies nearest the angle of digit 5. This decoder reads the lowest period first (its angle is a
    multiple of ``2*pi/10`` up to noise), then for each higher place picks the digit ``d`` whose predicted angle
    ``2*pi * ((d mod b) + f) / b``, with ``f`` known exactly from the digits already decoded, best matches the measured
    pair (summed dot products over the bases). Only bases dividing 10 (2, 5, 10) are used, since for other bases
    ``Y mod b`` depends on higher digits not yet decoded; they must determine a digit (10, or both 2 and 5).
    Tolerates angle noise up to ``pi/10`` per pair with base 10 alone. FoNE only determines ``x mod 10^m``: the
    result is the representative in ``[0, 10^m)`` (numbers beyond are refused upstream, never encoded).

    Args:
        features: ``[N, F]`` or ``[N, F + 1]`` (last column the sign feature: negative means a minus sign).
        int_digits: ``m``. frac_digits: ``n``. bases: as used for encoding.

    Returns:
        N canonical number strings (``ExactNumber`` text, e.g. ``"4.17"``, ``"-12"``, ``"0"``).

    Raises:
        ValueError: a wrong feature shape, bases without 10 (or 2 and 5), or a row with NaN / infinite values.
    """
    bases = _check_layout(int_digits, frac_digits, bases)
    places = int_digits + frac_digits
    width = fone_feature_size(int_digits, frac_digits, bases)
    if features.dim() != 2 or features.shape[-1] not in (width, width + 1):
        raise ValueError(
            f"`features` must have shape [N, {width}] or [N, {width + 1}] (with the sign feature) for "
            f"int_digits={int_digits}, frac_digits={frac_digits}, bases={list(bases)}, got {tuple(features.shape)}."
        )
    usable = [(slot, base) for slot, base in enumerate(bases) if 10 % base == 0]
    if math.lcm(1, *(base for _, base in usable)) != 10:
        raise ValueError(
            f"fone_decode needs base 10, or both 2 and 5, among `bases` to read digits, got {list(bases)}: "
            "add 10 to `fone_bases`."
        )
    feats = features.detach().to("cpu", torch.float64)
    finite = torch.isfinite(feats).all(-1)  # (N,)
    if not bool(finite.all()):
        rows = (~finite).nonzero().flatten().tolist()
        raise ValueError(
            f"`features` rows {rows[:10]} hold NaN or infinite values, which encode no number: fone_decode needs "
            "finite features (check the model output that produced them, e.g. a diverged head)."
        )
    count = feats.shape[0]
    candidates = torch.arange(10, dtype=torch.float64)  # (10,)
    known = torch.zeros(count, dtype=torch.float64)  # (N,): f = (x mod 10^(k-n)) / 10^(k-n) of decoded digits
    low = torch.zeros(count, places, dtype=torch.long)  # (N, P): least significant first
    blocks = [feats[:, slot * 2 * places : (slot + 1) * 2 * places].reshape(count, places, 2) for slot, _ in usable]
    for k in range(places):
        score = torch.zeros(count, 10, dtype=torch.float64)  # (N, 10)
        for (_, base), pairs in zip(usable, blocks):
            angle = (2 * math.pi / base) * (torch.remainder(candidates, base) + known.unsqueeze(-1))  # (N, 10)
            score += pairs[:, k, 0:1] * torch.cos(angle) + pairs[:, k, 1:2] * torch.sin(angle)
        digit = score.argmax(-1)  # (N,)
        low[:, k] = digit
        known = (digit.to(torch.float64) + known) / 10
    sign = torch.ones(count, dtype=torch.long)
    if feats.shape[-1] == width + 1:
        sign = torch.where(feats[:, -1] < 0, -1, 1)
    return digits_to_strings(low.flip(-1), sign, int_digits, frac_digits)


def digits_to_strings(
    digits: torch.Tensor | Sequence[Sequence[int]],
    sign: torch.Tensor | Sequence[int] | None,
    int_digits: int,
    frac_digits: int,
) -> list[str]:
    """Exact canonical text of place digits (``[N, P]``, most significant first) and signs (``[N]`` of +1 / -1)."""
    rows = digits.tolist() if isinstance(digits, torch.Tensor) else [list(row) for row in digits]
    places = int_digits + frac_digits
    if any(len(row) != places for row in rows):
        raise ValueError(
            f"each digit row must have int_digits + frac_digits = {places} digits, got lengths "
            f"{sorted({len(row) for row in rows})}."
        )
    signs = [1] * len(rows) if sign is None else (sign.tolist() if isinstance(sign, torch.Tensor) else list(sign))
    if len(signs) != len(rows):
        raise ValueError(f"`sign` must have one entry per digit row ({len(rows)}), got {len(signs)}.")
    # A zero is always written without a sign, whatever sign was predicted for it.
    return [
        str(ExactNumber.from_place_digits(row, int_digits, frac_digits, sign=-1 if s < 0 and any(row) else 1))
        for row, s in zip(rows, signs)
    ]


class FoNEEmbedding(nn.Module):
    """Adds FoNE features to the [NUM] token embeddings (FoNE Section 3.3, steps 3-4; Section 3.1 width mapping).

    ``fone_projection="pad"``: the features are zero-padded to the model width H and added as they are (Algorithm 1,
    lines 9-11); no parameters, ``fone_init_scale`` and `reset_scale` do not apply. ``fone_projection="linear"``
    (default): a learned ``W in R^{H x F}`` without bias (Section 3.1, option 1), initialised as a scaled
    semi-orthogonal matrix so that the projected features of every number have RMS (over H) equal to
    ``fone_init_scale * reference_rms`` (exactly when ``H >= F``: ``||W phi|| = g ||phi||`` and ``||phi||^2`` is the
    number of (cos, sin) pairs, +1 with the sign, the same for every number; in expectation when ``H < F``). The
    constructor uses ``reference_rms = 1.0``; the adapter calls ``reset_scale(rms of the [NUM] embedding row)`` once,
    before training (and before ZeRO-3 partitioning).

    Features are computed in float32 from the exact digits; the sum is cast to ``embeds.dtype``. Rows where
    ``num_mask == 0`` are returned bit-exactly unchanged.
    """

    def __init__(self, hidden_size: int, config: NumberSettings) -> None:
        super().__init__()
        if not isinstance(hidden_size, int) or hidden_size < 1:
            raise ValueError(f"`hidden_size` must be a positive integer, got {hidden_size!r}.")
        self.hidden_size = hidden_size
        self.int_digits = config.int_digits
        self.frac_digits = config.frac_digits
        self.bases = _check_layout(config.int_digits, config.frac_digits, config.fone_bases)
        self.sign_feature = config.sign_policy == "feature"
        self.projection = config.fone_projection
        self.init_scale = float(config.fone_init_scale)
        self.num_features = fone_feature_size(self.int_digits, self.frac_digits, self.bases, self.sign_feature)
        self.reference_rms = 1.0
        self.proj: nn.Linear | None = None
        if self.projection == "pad":
            if self.num_features > hidden_size:
                raise ValueError(
                    f"fone_projection='pad' needs F <= H, but the FoNE features have F = {self.num_features} dims "
                    f"(2 * {len(self.bases)} base(s) * ({self.int_digits} + {self.frac_digits}) places"
                    f"{' + 1 sign' if self.sign_feature else ''}) and the model width is H = {hidden_size}: set "
                    "fone_projection='linear', or reduce int_digits / frac_digits / fone_bases."
                )
        elif self.projection == "linear":
            self.proj = nn.Linear(self.num_features, hidden_size, bias=False)
            self.reset_scale(1.0)
        else:
            raise ValueError(f"`fone_projection` must be 'linear' or 'pad', got {self.projection!r}.")

    def extra_repr(self) -> str:
        return (
            f"hidden_size={self.hidden_size}, num_features={self.num_features}, int_digits={self.int_digits}, "
            f"frac_digits={self.frac_digits}, bases={list(self.bases)}, sign_feature={self.sign_feature}, "
            f"projection={self.projection!r}"
        )

    @torch.no_grad()
    def reset_scale(self, reference_rms: float) -> None:
        """Re-initialises the projection so projected features have RMS ``fone_init_scale * reference_rms``.

        Args:
            reference_rms: the RMS of the [NUM] embedding row (positive, finite). No-op with ``fone_projection="pad"``.
        """
        value = float(reference_rms)
        if not math.isfinite(value) or value <= 0:
            raise ValueError(
                f"`reference_rms` must be a positive finite float (the RMS of the [NUM] embedding row), "
                f"got {reference_rms!r}."
            )
        self.reference_rms = value
        if self.proj is None:
            return
        fan_out, fan_in = self.proj.weight.shape  # (H, F)
        weight = torch.empty(fan_out, fan_in, dtype=torch.float32)
        nn.init.orthogonal_(weight)  # orthonormal columns when H >= F, orthonormal rows otherwise
        norm = math.sqrt(fone_feature_size(self.int_digits, self.frac_digits, self.bases) / 2 + self.sign_feature)
        gain = self.init_scale * value * math.sqrt(max(fan_out, fan_in)) / norm
        self.proj.weight.copy_(weight * gain)

    def forward(
        self,
        embeds: torch.Tensor,
        num_mask: torch.Tensor,
        num_digits: torch.Tensor,
        num_sign: torch.Tensor | None = None,
        num_values: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Adds the features at number rows.

        Args:
            embeds: ``[B, T, H]`` token embeddings (any float dtype).
            num_mask: ``[B, T]``, 1 at [NUM] rows (2, a number left in digits with fone_numbers="answers", is
                left alone).
            num_digits: int64 ``[B, T, P]`` place digits of ``|x|`` (zeros elsewhere).
            num_sign: int64 ``[B, T]`` of +1 / -1 (0 elsewhere); required with ``sign_policy="feature"``.
            num_values: unused (FoNE never reads float values); accepted for the common input-module signature.

        Returns:
            ``[B, T, H]`` in ``embeds.dtype``: ``embeds + proj(FoNE)`` at number rows, ``embeds`` elsewhere.
        """
        del num_values
        if embeds.dim() != 3 or embeds.shape[-1] != self.hidden_size:
            raise ValueError(f"`embeds` must have shape [B, T, {self.hidden_size}], got {tuple(embeds.shape)}.")
        batch_time = tuple(embeds.shape[:2])
        if tuple(num_mask.shape) != batch_time:
            raise ValueError(f"`num_mask` must have shape {list(batch_time)}, got {tuple(num_mask.shape)}.")
        if self.sign_feature and num_sign is None:
            raise ValueError("sign_policy='feature' needs `num_sign` ([B, T] of +1 / -1), got None.")
        if num_digits.dim() != 3 or tuple(num_digits.shape[:2]) != batch_time:
            raise ValueError(
                f"`num_digits` must have shape {[*batch_time, self.int_digits + self.frac_digits]}, "
                f"got {tuple(num_digits.shape)}."
            )
        sign = num_sign if self.sign_feature else None
        feats = fone_features_from_digits(num_digits, self.int_digits, self.frac_digits, self.bases, sign)  # (B, T, F)
        if self.proj is None:
            delta = F.pad(feats, (0, self.hidden_size - self.num_features))  # (B, T, H): zero-padded
        else:
            delta = F.linear(feats, self.proj.weight.float())  # (B, T, H), float32 whatever the weight dtype
        mixed = (embeds.float() + delta).to(embeds.dtype)
        return torch.where((num_mask == 1).unsqueeze(-1), mixed, embeds)  # (B, T, H): 2 marks a number in digits
