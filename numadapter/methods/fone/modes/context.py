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
import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from numadapter.methods.context import ContextNumbers, fixed_point_values
from numadapter.methods.fone.context_settings import context_count, products_for_head
from numadapter.methods.fone.embedding import fone_features_from_digits, lower_fractions
from numadapter.methods.fone.modes.base import complex_product, shifted_digit_logits
from numadapter.methods.fone.modes.linear import LinearReadout
from numadapter.methods.fone.pair_ops import pair_count, pair_formable, pair_results
from numadapter.methods.fone.pointer import PointerScores, exact_log_likelihood, likeliest_combination

__all__ = [
    "MODE", "SUM_PRIOR", "ContextCombination", "combination_of", "formable", "most_likely_coefficients",
]  # fmt: skip

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


def _pick(powers: Tensor, choice: Tensor) -> Tensor:
    """``powers [..., K, 3, P, 2]`` at one coefficient per slot (``choice [..., K]``): ``[..., K, P, 2]``."""
    index = choice[..., None, None, None].expand(*choice.shape, 1, *powers.shape[-2:])  # (..., K, 1, P, 2)
    return torch.gather(powers, -3, index).squeeze(-3)


def most_likely_coefficients(log_p: Tensor) -> Tensor:
    """The most likely coefficient of every slot, index 0 / 1 / 2 for ``-1 / 0 / +1`` (``log_p [..., K, 3]`` ->
    int64 ``[..., K]``), a tie going to 0, then +1.

    A slot that never held a number in training keeps its initial logits, exactly equal (its weights got an exact
    zero gradient), and so does every slot of a fresh head: a plain ``argmax`` would break that tie to index 0,
    coefficient -1, so "Q3. a + b =" after training on "a + b =" subtracted the 3 and a fresh head wrote minus the
    sum of the prompt's numbers. Here such a slot leaves its number out.
    """
    preference = torch.tensor([1, 2, 0], device=log_p.device)  # coefficient 0 first, then +1, then -1
    return preference[log_p.index_select(-1, preference).argmax(-1)]  # (..., K)


def _product(factors: Tensor) -> Tensor:
    """The complex product over the slot dim of ``[..., K, P, 2]`` -> ``[..., P, 2]``."""
    product = factors[..., 0, :, :]
    for slot in range(1, factors.shape[-3]):
        product = complex_product(product, factors[..., slot, :, :])
    return product


def _target_log_likelihood(logits: Tensor, target_digits: Tensor) -> Tensor:
    """``sum_places log p(target digit)`` per candidate: ``[N, C, P, 10]``, ``[N, P]`` -> ``[N, C]``."""
    index = target_digits.long().unsqueeze(-2).expand(*logits.shape[:-1]).unsqueeze(-1)  # (N, C, P, 1)
    return torch.log_softmax(logits, -1).gather(-1, index).squeeze(-1).sum(-1)


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
        head.products = products_for_head(config, self.reads_context)
        if head.products:  # operation logits: the signed sum, then each product / quotient of two numbers
            head.operations = nn.Linear(hidden_size, 1 + pair_count(count))
            with torch.no_grad():  # a fresh head prefers the sum (its combination of nothing: the read-out)
                head.operations.weight.zero_()
                head.operations.bias.zero_()
                head.operations.bias[0] = SUM_PRIOR

    def combine(
        self, head: nn.Module, h: Tensor, pairs: Tensor, context: ContextNumbers | None
    ) -> tuple[Tensor, dict[str, Any]]:
        """The read-out ``u`` (`pairs`, ``[N, P, 2]``) times the likeliest signed combination of the context numbers,
        or with ``fone_context_products`` the likeliest pair operation's result; the `DigitHeadOutput` fields
        ``readout``, ``coefficient_log_probs [N, K, 3]``, ``powers [N, K, 3, P, 2]``, ``context`` (and
        ``operation_log_probs``, ``pair_powers``, ``pair_combined`` with products)."""
        readout, powers = pairs, self._powers(head, context, tuple(h.shape[:-1]))  # (N, P, 2), (N, K, 3, P, 2)
        if head.pointer is not None:  # each slot's logits from its number's key and this state
            if context.keys is None:
                raise ValueError(
                    "fone_context_pointer=True chooses each number by its key: pass `context` with keys "
                    "(numadapter.methods.context.last_numbers(..., keys=head.number_keys(hidden)))."
                )
            log_p = torch.log_softmax(head.pointer(h, context.keys), -1)  # (N, K, 3)
        else:
            logits = F.linear(h, head.coefficients.weight.float(), head.coefficients.bias.float())  # (N, 3K)
            log_p = torch.log_softmax(logits.unflatten(-1, (head.context_numbers, 3)), -1)  # (N, K, 3)
        # an empty slot multiplies by 1 whatever its coefficient: give it coefficient 0 for sure, so its logits
        # get an exact zero gradient (not rounding noise, which Adam would scale up to full steps)
        empty = log_p.new_tensor([-math.inf, 0.0, -math.inf])
        log_p = torch.where(context.valid[..., None], log_p, empty)
        pairs = complex_product(pairs, _product(_pick(powers, most_likely_coefficients(log_p))))
        fields = {"readout": readout, "coefficient_log_probs": log_p, "powers": powers, "context": context}
        if head.products:
            op_log_p, pair_powers, pair_combined = self._pair_operations(head, h, context)
            op = op_log_p.argmax(-1)  # (N,): 0 the sum (first among equals), k > 0 the pair k - 1
            index = (op - 1).clamp(min=0)[..., None, None, None].expand(*op.shape, 1, *pair_powers.shape[-2:])
            chosen = torch.gather(pair_powers, -3, index).squeeze(-3)  # (N, P, 2)
            pairs = torch.where((op > 0)[..., None, None], complex_product(readout, chosen), pairs)
            fields.update(operation_log_probs=op_log_p, pair_powers=pair_powers, pair_combined=pair_combined)
        return pairs, fields

    def number_loss(self, head: nn.Module, out: Any, target_digits: Tensor) -> Tensor | None:
        """The pointer's loss (`_pointer_loss`) or the mixture over all combinations (`_mixture_loss`), float32
        ``[N]``."""
        if out.powers is None:
            return None
        if head.pointer is not None:
            return self._pointer_loss(head, out, target_digits)
        return self._mixture_loss(head, out, target_digits)

    def choice(self, head: nn.Module, out: Any) -> tuple[Tensor | None, Tensor | None]:
        """The likeliest coefficients (int64 ``[N, K]`` of -1, 0, +1; all 0 where a pair operation is chosen) and
        ``log P(c* | h)``, with products ``log P(operation)`` plus, for the sum, the coefficients'."""
        if out.coefficient_log_probs is None:
            return None, None
        choice = most_likely_coefficients(out.coefficient_log_probs)  # (N, K) of 0, 1, 2
        combination, operation = choice - 1, None
        if out.operation_log_probs is not None:  # a pair operation combines no number with a coefficient
            operation = out.operation_log_probs.argmax(-1)  # (N,)
            combination = torch.where((operation > 0)[..., None], 0, combination)
        chosen = out.coefficient_log_probs.gather(-1, choice.unsqueeze(-1)).squeeze(-1).sum(-1)  # (N,)
        if operation is not None:  # P(operation), times P(coefficients) for the sum
            op_log_p = out.operation_log_probs.gather(-1, operation.unsqueeze(-1)).squeeze(-1)  # (N,)
            chosen = op_log_p + torch.where(operation > 0, 0.0, chosen)
        return combination, chosen

    def number_keys(self, head: nn.Module, hidden: Tensor) -> Tensor | None:
        """With ``fone_context_pointer``: every position's key (`PointerScores.keys`), ``[..., D]``."""
        return None if head.pointer is None else head.pointer.keys(hidden)

    def _pair_operations(self, head: nn.Module, h: Tensor, context: ContextNumbers) -> tuple[Tensor, Tensor, Tensor]:
        """``fone_context_products``: the operation log-probabilities ``[N, 1 + C]`` (a pair whose result is not exact
        or does not fit is impossible), the pair results' features ``[N, C, P, 2]`` (low place first) and their
        `combine_exactly` rows ``[N, C, 2 + P]``."""
        results = pair_results(context, head.frac_digits)
        logits = F.linear(h, head.operations.weight.float(), head.operations.bias.float())  # (N, 1 + C)
        allowed = torch.cat([torch.ones_like(results.valid[..., :1]), results.valid], -1)
        op_log_p = torch.log_softmax(logits.masked_fill(~allowed, -math.inf), -1)
        features = fone_features_from_digits(results.digits, head.int_digits, head.frac_digits)  # (N, C, 2P)
        return op_log_p, features.unflatten(-1, (head.num_places, 2)), results.combined

    def _powers(self, head: nn.Module, context: ContextNumbers | None, leading: tuple[int, ...]) -> Tensor:
        """Each context number raised to the coefficients ``(-1, 0, +1)``: ``conj(z), 1, z`` per place, float32
        ``[N, K, 3, P, 2]`` (low place first; an empty slot's coefficient is fixed at 0 in `forward`)."""
        count = head.context_numbers
        if context is None:
            raise ValueError(
                "fone_head_input='context' builds the answer from the numbers before it: pass `context` (the last "
                f"{count} numbers at each position, numadapter.methods.context.last_numbers), or read the head's "
                "outputs from the model's forward (`number_logits`), which passes them, also with past_key_values "
                '(docs/guide.md, "Which forwards are number-aware").'
            )
        expected = (*leading, count)
        if tuple(context.valid.shape) != expected or tuple(context.digits.shape) != (*expected, head.num_places):
            raise ValueError(
                f"`context` must hold {count} numbers of {head.num_places} places for each of the {list(leading)} "
                f"positions (digits {list(expected) + [head.num_places]}, valid {list(expected)}), got digits "
                f"{list(context.digits.shape)} and valid {list(context.valid.shape)}."
            )
        features = fone_features_from_digits(context.digits, head.int_digits, head.frac_digits)  # (N, K, 2P)
        z = features.unflatten(-1, (head.num_places, 2))  # (N, K, P, 2), low place first
        flip = z.new_tensor([1.0, -1.0])
        z = torch.where((context.sign < 0)[..., None, None], z * flip, z)  # a negative number: the conjugate
        one = torch.zeros_like(z)
        one[..., 0] = 1.0
        return torch.stack((z * flip, one, z), dim=-3)  # (N, K, 3, P, 2)

    def _mixture_loss(self, head: nn.Module, out: Any, target_digits: Tensor) -> Tensor:
        """Context head: ``-log sum_c P(c | h) prod_places p(y_place | c)``, divided by the places (so it reads like
        the other heads' mean digit cross-entropy), float32 ``[N]``.

        The coefficients are latent: the likelihood of the answer under every combination is scored, so the one that
        explains it gets the credit at once. A single coefficient alone carries no signal (with one operand right
        and the other left out, the angles of the lower places are off by a uniformly random amount), which is why
        a soft mixture of the coefficients inside one product does not learn."""
        combo_log_p, logits = self.combination_logits(head, out, target_digits)  # (N, C), (N, C, P, 10)
        per_combo = _target_log_likelihood(logits, target_digits)  # (N, C)
        sums = torch.logsumexp(combo_log_p + per_combo, -1)  # (N,)
        if out.operation_log_probs is None:
            return -sums / head.num_places  # (N,)
        # with pair operations: the sum is one operation among them, each pair's result another explanation
        pair_pairs = complex_product(out.readout.unsqueeze(-3), out.pair_powers).flip(-2)  # (N, C2, P, 2)
        lower = lower_fractions(target_digits, torch.float32).unsqueeze(-2)  # (N, 1, P)
        per_pair = _target_log_likelihood(shifted_digit_logits(pair_pairs, lower), target_digits)  # (N, C2)
        op_log_p = out.operation_log_probs
        terms = torch.cat([op_log_p[..., :1] + sums[..., None], op_log_p[..., 1:] + per_pair], -1)  # (N, 1 + C2)
        return -torch.logsumexp(terms, -1) / head.num_places  # (N,)

    def _pointer_loss(self, head: nn.Module, out: Any, target_digits: Tensor) -> Tensor:
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
        return (choice_nll + digit_nll) / head.num_places

    def combination_logits(self, head: nn.Module, out: Any, target_digits: Tensor) -> tuple[Tensor, Tensor]:
        """Context head: every one of the ``C = 3^K`` combinations on the target rows, with its log-probability
        ``log P(c | h)`` (float32 ``[N, C]``) and the digit logits it gives, shifted by the target's lower digits
        (teacher forcing, as `target_logits`): float32 ``[N, C, P, 10]``, most significant place first."""
        if out.powers is None:
            raise ValueError("`combination_logits` needs the context head's output (fone_head_input='context').")
        if head.pointer is not None:
            raise ValueError(
                "`combination_logits` scores all 3^K combinations, which the pointer form (fone_context_pointer=True) "
                "does not: its loss teaches the fewest-terms combination (`FoNEDigitHead.loss`)."
            )
        combos = head.combinations.to(out.powers.device)  # (C, K) of 0, 1, 2 (coefficients -1, 0, +1)
        slots = torch.arange(head.context_numbers, device=combos.device)
        combo_log_p = out.coefficient_log_probs[..., slots, combos].sum(-1)  # (N, C)
        products = _product(out.powers[..., slots, combos, :, :])  # (N, C, P, 2)
        combo_pairs = complex_product(out.readout.unsqueeze(-3), products).flip(-2)  # (N, C, P, 2), high place first
        lower = lower_fractions(target_digits, torch.float32).unsqueeze(-2)  # (N, 1, P)
        return combo_log_p, shifted_digit_logits(combo_pairs, lower)  # (N, C), (N, C, P, 10)

    def forms(self, context: Sequence[int], value: int, config: Any) -> bool:
        """A signed sum of the `context` values with at least one term, or with ``fone_context_products`` the
        magnitude of a product / exact quotient of two of them."""
        if formable(context, value):
            return True
        products = products_for_head(config, self.reads_context)
        return products and pair_formable(list(context), value, config.frac_digits)


MODE = ContextCombination()
