"""Products and exact quotients of two numbers before the answer, for the context head (``fone_context_products``).

A signed sum of the numbers in the text (`numadapter.methods.fone.head`, ``fone_head_input="context"``) covers sums,
differences and copies; ``a * b``, ``x * 1000``, ``x / 100`` or ``7 * 431`` it cannot form, and without products those
fall back to the read-out, which does not learn exact numbers on a pretrained base. With ``fone_context_products=True``
the head may also choose one *pair operation* on two of its K context numbers: their product, or the quotient of one by
the other where it is exact. The result is computed here exactly, in integers on the fixed-point values (value *
``10^frac_digits``), and written through its FoNE features like a sum: the model only chooses the operation and the two
numbers. A result is a candidate only when it is exact and fits the digit places (``|r| < 10^int_digits``, no fraction
digit beyond ``frac_digits``); the head writes its magnitude, and the sign comes from the sign head or the text, as for
every number.

Shapes: N positions, K = ``fone_context_numbers``, C = `pair_count` (K), P = ``int_digits + frac_digits``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from numadapter.methods.context import ContextNumbers, fixed_point_values


def pair_list(count: int) -> list[tuple[str, int, int]]:
    """The pair operations on K slots, in a fixed order: every product ``("*", i, j)`` with ``i < j``, then every
    quotient ``("/", i, j)`` (slot i divided by slot j) with ``i != j``; slot 0 is the latest number."""
    products = [("*", i, j) for i in range(count) for j in range(i + 1, count)]
    quotients = [("/", i, j) for i in range(count) for j in range(count) if i != j]
    return products + quotients


def pair_count(count: int) -> int:
    """C, the number of pair operations on K slots: ``K (K - 1) / 2`` products and ``K (K - 1)`` quotients."""
    return len(pair_list(count))


class PairResults(NamedTuple):
    """The pair operations' exact results at N positions.

    Attributes:
        digits: int64 ``[N, C, P]`` place digits of ``|r|``, most significant first (zeros where not valid).
        valid: bool ``[N, C]``: both slots hold numbers, the result is exact and fits the places.
        combined: int64 ``[N, C, 2 + P]`` rows as `numadapter.methods.context.combine_exactly` gives them for the
            magnitude the head writes: 2 numbers combined, overflow 0, the P digits.
    """

    digits: torch.Tensor
    valid: torch.Tensor
    combined: torch.Tensor


def pair_results(numbers: ContextNumbers, frac_digits: int) -> PairResults:
    """Every pair operation's exact result on `numbers` (``digits [N, K, P]``, ``sign`` / ``valid [N, K]``).

    Products and quotients are taken in int64 on the fixed-point values; a product whose operands' magnitudes
    multiply beyond 9e18 (more than 18 places in all) is not a candidate rather than a wrapped one.
    """
    places = numbers.digits.shape[-1]
    count = numbers.valid.shape[-1]
    ops = pair_list(count)
    values = fixed_point_values(numbers.digits, numbers.sign, numbers.valid)  # (N, K), 0 in empty slots
    scale = 10**frac_digits
    limit = 10**places  # |r| * 10^frac must stay below 10^P
    left = torch.tensor([i for _, i, _ in ops], dtype=torch.long, device=values.device)
    right = torch.tensor([j for _, _, j in ops], dtype=torch.long, device=values.device)
    is_product = torch.tensor([op == "*" for op, _, _ in ops], device=values.device)
    a, b = values[..., left], values[..., right]  # (N, C)
    both = numbers.valid[..., left] & numbers.valid[..., right]
    # products: a * b / 10^f, exact when 10^f divides a * b; guarded against int64 overflow
    safe = a.abs().double() * b.abs().double() < 9e18
    raw = torch.where(safe, a * b, 0)
    product_ok = safe & (torch.remainder(raw, scale) == 0)
    product = torch.div(raw, scale, rounding_mode="floor")
    # quotients: a * 10^f / b, exact when b divides it
    numer_safe = a.abs().double() * scale < 9e18
    numer = torch.where(numer_safe, a * scale, 0)
    nonzero = b != 0
    divisor = torch.where(nonzero, b, 1)
    quotient_ok = numer_safe & nonzero & (torch.remainder(numer, divisor) == 0)
    quotient = torch.div(numer, divisor, rounding_mode="floor")
    result = torch.where(is_product, product, quotient).abs()  # (N, C): the magnitude the head writes
    valid = both & torch.where(is_product, product_ok, quotient_ok) & (result < limit)
    result = torch.where(valid, result, 0)
    weights = torch.pow(10, torch.arange(places - 1, -1, -1, device=values.device))  # (P,)
    digits = torch.remainder(torch.div(result[..., None], weights, rounding_mode="floor"), 10)  # (N, C, P)
    terms = torch.where(valid, 2, 0)
    combined = torch.cat([terms[..., None], torch.zeros_like(terms)[..., None], digits], -1)  # (N, C, 2 + P)
    return PairResults(digits, valid, combined)


def pair_formable(context: list[int], target: int, frac_digits: int) -> bool:
    """Whether a product or exact quotient of two of the `context` values (fixed-point ints, most recent first) has
    the magnitude of `target` (same scale), as the head with ``fone_context_products`` forms it."""
    scale = 10**frac_digits
    goal = abs(target)
    for i, a in enumerate(context):
        for j, b in enumerate(context):
            if i == j:
                continue
            if i < j and (a * b) % scale == 0 and abs(a * b) // scale == goal:
                return True
            if b != 0 and (a * scale) % b == 0 and abs(a * scale) // abs(b) == goal:
                return True
    return False
