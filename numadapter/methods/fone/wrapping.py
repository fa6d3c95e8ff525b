"""Sums the context head would write wrapped: compare the digits it wrote with the exact combination it chose.

The context head (`numadapter.methods.fone.head`, ``fone_head_input="context"``) writes ``u * prod_k z_k^(c_k)``
on FoNE angles, so its digits hold a number only modulo ``10^int_digits``: ``600000 + 500000`` with
``int_digits=6`` reads ``100000``, ``3 - 5`` reads ``999998``. The combination's exact value ``S`` is known
(`numadapter.methods.context.combine_exactly`, integer arithmetic on the context digits), and the written digits
``D`` are ``S + R`` modulo ``10^int_digits``, where ``R`` is what the read-out ``u`` adds (0 when ``u`` is the
constant ``1 + 0i`` it starts at; ``u`` is a learned rotation near it, not exact in general).

`unwrapped` takes the number whose digits the head wrote that lies nearest to ``S`` (``R`` in
``[-10^m / 2, 10^m / 2)``): when it is outside ``[0, 10^int_digits)``, the digits are that number wrapped and the
magnitude itself is returned. Then:

- it needs more than ``int_digits`` integer places (``999999 + 1``): generation writes it in full, as text (a [NUM]
  cannot carry it), and stops that sequence with a warning naming it, the limit and the fix (`overflow_reason`), or
  raises;
- it is below zero (the head gave the numbers the wrong signs, ``3 - 5`` where a [NUM]'s digits hold a magnitude,
  under either ``sign_policy``): its digits are never written. With ``fone_numbers="answers"`` the row writes the
  number in the LM's digit tokens instead (`numadapter.generation.readout`); otherwise the number the head computed
  (its sign times the combination) is written in full, as text, and stops that sequence with a warning
  (`negative_reason`).

With every coefficient 0 the read-out alone wrote the number, with no combination to compare it with, and nothing is
checked.

Units: values are integers in units of the lowest place, ``10^-frac_digits``; ``10^P`` of them (``P =
int_digits + frac_digits``) make ``10^int_digits``.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from numadapter.numbers import ExactNumber, fixed_point


def unwrapped(digits: Sequence[int], combination: Sequence[int], int_digits: int, frac_digits: int) -> Decimal | None:
    """The magnitude the head computed when its digits are it wrapped modulo ``10^int_digits``, else None.

    Args:
        digits: the P place digits the head wrote (``|x|``, most significant first).
        combination: ``2 + P`` ints, a row of `combine_exactly`: the numbers combined, the overflow, the P digits
            of the combination modulo ``10^P``.
        int_digits: m.
        frac_digits: n.

    Returns:
        ``S + R`` (see the module docstring), exact, when it is negative or needs more than `int_digits` integer
        places; None when it fits (the written digits are the number) or no number was combined.
    """
    terms, overflow, *places = combination
    if terms == 0:
        return None
    modulus = 10 ** (int_digits + frac_digits)
    exact = overflow * modulus + fixed_point(places)  # S
    half = modulus // 2
    offset = (fixed_point(digits) - exact + half) % modulus - half  # R, in [-modulus / 2, modulus / 2)
    value = exact + offset
    if 0 <= value < modulus:
        return None
    return Decimal(value).scaleb(-frac_digits)


def overflow_reason(value: ExactNumber, written: str, int_digits: int) -> str:
    """Why the context head's number `value` (`unwrapped`, with the sign the head wrote) is written in full as text
    and stops the sequence, and the fix; `written` is the text of the wrapped digits."""
    needed = len(value.int_digits)
    return (
        f"the context head (fone_head_input='context') combined the numbers before it into {value}, which needs "
        f"{needed} integer places, but int_digits={int_digits}: its digits hold it only modulo 10^{int_digits} (they "
        f"read {written}), so it is written in full, as text, and cannot be fed back as a [NUM]. Train the adapter "
        f"with int_digits of at least {needed} (the places are part of the adapter) for numbers this large."
    )


def negative_reason(value: ExactNumber | Decimal, written: str, int_digits: int) -> str:
    """Why the context head's combination `value` (`unwrapped`, with the sign the head wrote), a negative magnitude,
    is written in full as text and stops the sequence; `written` is the text of its wrapped digits."""
    return (
        f"the context head (fone_head_input='context') combined the numbers before it into a negative magnitude "
        f"({ExactNumber.parse(value)}), which the digits of a [NUM] cannot hold: they read {written}, that number "
        f"modulo 10^{int_digits}. It is written in full, as text, and cannot be fed back as a [NUM]. The head's "
        "coefficients (the signs it gives the numbers before it) are wrong here: train it on more such differences, "
        "or use fone_numbers='answers' (the default), which writes such a number in digit tokens."
    )
