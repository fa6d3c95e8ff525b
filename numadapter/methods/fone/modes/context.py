"""``fone_head_input="context"``: the linear read-out times a signed combination of the numbers before the position.

The read-out ``u = W_u h + b_u`` (``head.proj``) starts at the constant ``1 + 0i``, so each combination starts as its
exact sum. The coefficients of the last K numbers come from ``head.coefficients`` (``Linear(H, 3K)``, every
coefficient equally likely at first), or with ``fone_context_pointer`` from each number's own key
(``head.pointer``, `numadapter.methods.fone.pointer.PointerScores`); with ``fone_context_products`` ``head.operations``
scores the signed sum against each product / exact quotient of two of them (`numadapter.methods.fone.pair_ops`).
`numadapter.methods.fone.head.FoNEDigitHead` combines them in its forward; the head's docstring has the algebra.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from numadapter.methods.fone.answer_mode import context_count, context_products
from numadapter.methods.fone.modes.linear import LinearReadout
from numadapter.methods.fone.pair_ops import pair_count, pair_formable
from numadapter.methods.fone.pointer import PointerScores

__all__ = ["MODE", "SUM_PRIOR", "ContextCombination", "combination_of", "formable"]

# the operation logit of the signed sum in a fresh head with fone_context_products (the pairs start at 0): the sum,
# and so the plain read-out, is chosen until training says otherwise
SUM_PRIOR = 3.0
# contexts longer than this are searched by halves (`_combination_by_halves`), shorter ones term by term
SEARCHED_DIRECTLY = 6


def combination_of(context: Sequence[int], target: int, min_terms: int = 0) -> tuple[int, ...] | None:
    """Coefficients ``c`` in ``{-1, 0, +1}`` with ``sum(c_k * context[k]) == target``, the fewest terms first.

    Args:
        context: the values before the answer, most recent first (integers: fixed-point values, all scaled alike).
        target: the answer's value on the same scale.
        min_terms: the fewest nonzero coefficients allowed (1: the empty sum does not form 0).

    Returns:
        One coefficient per context value (most recent first), or None when no combination forms the target.
    """
    if len(context) > SEARCHED_DIRECTLY:  # the pointer head's long contexts: meet in the middle
        return _combination_by_halves(context, target, min_terms)
    for terms in range(min_terms, len(context) + 1):
        for chosen in itertools.combinations(range(len(context)), terms):
            for signs in itertools.product((1, -1), repeat=terms):
                if sum(s * context[k] for s, k in zip(signs, chosen)) == target:
                    coefficients = [0] * len(context)
                    for s, k in zip(signs, chosen):
                        coefficients[k] = s
                    return tuple(coefficients)
    return None


def _combination_by_halves(context: Sequence[int], target: int, min_terms: int) -> tuple[int, ...] | None:
    """`combination_of` for a long context, by `numadapter.methods.fone.pointer.fewest_terms`."""
    import torch

    from numadapter.methods.fone.pointer import fewest_terms

    if min_terms == 0 and target == 0:
        return (0,) * len(context)
    values = torch.tensor([list(context)], dtype=torch.long)
    found = fewest_terms(values, torch.ones_like(values, dtype=torch.bool), torch.tensor([target]))[0].tolist()
    return tuple(found) if any(found) else None


def formable(context: Sequence[int], target: int) -> bool:
    """Whether a signed combination of the `context` values with at least one term gives `target` (same scale).

    The context head forms exactly those; with every coefficient 0 it would write the number through its linear
    read-out alone, which is not exact (so a 0 with no 0 or pair of equal numbers before it is not formable).
    """
    return combination_of(context, target, min_terms=1) is not None


class ContextCombination(LinearReadout):
    """The linear read-out, combined by the head with the last K numbers (``reads_context``)."""

    reads_context = True

    def build(self, head: nn.Module, hidden_size: int, config: Any) -> None:
        super().build(head, hidden_size, config)
        head.context_numbers = count = context_count(config)
        head.pointer = PointerScores(hidden_size, count) if config.fone_context_pointer else None
        with torch.no_grad():  # the read-out u starts at the constant 1 + 0i: each combination its exact sum
            head.proj.weight.zero_()
            head.proj.bias.copy_(torch.tensor([1.0, 0.0]).repeat(head.num_places))
        if head.pointer is None:
            head.coefficients = nn.Linear(hidden_size, 3 * count)  # per slot, logits of the coefficients (-1, 0, +1)
            with torch.no_grad():
                head.coefficients.weight.zero_()
                head.coefficients.bias.zero_()
            grid = torch.cartesian_prod(*[torch.arange(3)] * count)  # (3^K, K)
            head.register_buffer("combinations", grid.reshape(-1, count), persistent=False)
        head.products = context_products(config)
        if head.products:  # operation logits: the signed sum, then each product / quotient of two numbers
            head.operations = nn.Linear(hidden_size, 1 + pair_count(count))
            with torch.no_grad():  # a fresh head prefers the sum (its combination of nothing: the read-out)
                head.operations.weight.zero_()
                head.operations.bias.zero_()
                head.operations.bias[0] = SUM_PRIOR

    def forms(self, context: Sequence[int], value: int, config: Any) -> bool:
        """A signed sum of the `context` values with at least one term, or with ``fone_context_products`` the
        magnitude of a product / exact quotient of two of them."""
        if formable(context, value):
            return True
        return context_products(config) and pair_formable(list(context), value, config.frac_digits)


MODE = ContextCombination()
