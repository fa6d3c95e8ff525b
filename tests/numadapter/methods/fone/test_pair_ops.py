"""`fone_context_products`: products and exact quotients of two context numbers, formed exactly by the head."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from numadapter.config import NumberAdapterConfig
from numadapter.methods.context import ContextNumbers, last_numbers
from numadapter.methods.fone.head import FoNEDigitHead
from numadapter.methods.fone.pair_ops import pair_count, pair_formable, pair_list, pair_results
from numadapter.numbers import ExactNumber

INT, FRAC = 6, 2


def _context(values: list[str | None]) -> ContextNumbers:
    """One position whose K slots hold `values` (most recent first; None: empty)."""
    digits, sign, valid = [], [], []
    for value in values:
        exact = ExactNumber.parse(value) if value is not None else None
        digits.append(list(exact.place_digits(INT, FRAC)) if exact else [0] * (INT + FRAC))
        sign.append(exact.sign if exact else 1)
        valid.append(exact is not None)
    return ContextNumbers(torch.tensor([digits]), torch.tensor([sign]), torch.tensor([valid]))


def _as_decimal(digits: list[int]) -> float:
    return int("".join(map(str, digits))) / 10**FRAC


def test_every_result_is_the_exact_product_or_quotient_and_only_exact_fitting_ones_are_valid():
    rng = random.Random(0)
    for _ in range(200):
        values = [rng.choice([None, str(rng.randint(0, 999)), f"{rng.randint(0, 99)}.{rng.randint(0, 99):02d}",
                              f"-{rng.randint(1, 999)}", "0", "1000", "0.01"]) for _ in range(3)]  # fmt: skip
        results = pair_results(_context(values), FRAC)
        for k, (op, i, j) in enumerate(pair_list(3)):
            a, b = values[i], values[j]
            want = None
            if a is not None and b is not None:
                x, y = ExactNumber.parse(a).to_decimal(), ExactNumber.parse(b).to_decimal()
                exact = x * y if op == "*" else (x / y if y != 0 else None)
                if exact is not None and exact == exact.quantize(type(exact)("0.01")) and abs(exact) < 10**INT:
                    want = abs(exact)
            assert bool(results.valid[0, k]) == (want is not None), (op, a, b)
            if want is not None:
                assert _as_decimal(results.digits[0, k].tolist()) == float(want), (op, a, b)
                assert results.combined[0, k, :2].tolist() == [2, 0]


def test_pair_formable_agrees_with_pair_results():
    rng = random.Random(1)
    for _ in range(300):
        context = [rng.randint(-3000, 30000) for _ in range(3)]
        numbers = [f"{v / 100:.2f}" for v in context]
        results = pair_results(_context(numbers), FRAC)
        reachable = {int("".join(map(str, d))) for d, ok in zip(results.digits[0].tolist(), results.valid[0]) if ok}
        for target in list(reachable)[:3] + [rng.randint(0, 10**6)]:
            assert pair_formable(context, target, FRAC) == (target in reachable), (context, target)


def test_pair_count_and_order():
    assert pair_count(4) == 6 + 12 == len(pair_list(4))
    assert pair_list(2) == [("*", 0, 1), ("/", 0, 1), ("/", 1, 0)]


def _head(**overrides) -> FoNEDigitHead:
    config = NumberAdapterConfig(int_digits=INT, frac_digits=FRAC, fone_context_numbers=3, fone_context_products=True,
                                 **overrides)  # fmt: skip
    return FoNEDigitHead(16, config)


def test_a_fresh_head_writes_its_read_out_and_a_chosen_pair_writes_the_exact_result():
    torch.manual_seed(0)
    head = _head()
    context = _context(["7", "431", "12.5"])
    out = head(torch.randn(1, 16), context)
    assert out.operation_log_probs.argmax(-1).item() == 0  # the sum, with a fresh tie: nothing combined
    assert head.predict(out)[0].tolist() == [[0] * (INT + FRAC)]
    for k, (op, i, j) in enumerate(pair_list(3)):
        with torch.no_grad():
            head.operations.bias.zero_()
            head.operations.bias[1 + k] = 20.0
        out = head(torch.randn(1, 16), context)
        valid = bool(pair_results(context, FRAC).valid[0, k])
        digits = head.predict(out)[0][0].tolist()
        if valid:
            x, y = [float(v) for v in ("7", "431", "12.5")][i], [7.0, 431.0, 12.5][j]
            assert _as_decimal(digits) == pytest.approx(abs(x * y if op == "*" else x / y)), (op, i, j)
        else:  # 431 / 7 is no exact 2-place decimal: impossible, the sum (read-out) is written
            assert out.operation_log_probs[0, 1 + k].item() == float("-inf")


def test_training_finds_the_operation_from_the_mixture_alone():
    """Targets that are products of two slots: the mixture loss credits the product, and a few hundred Adam steps
    make the head choose it (the hidden state says which slots; the answer's digits come from the numbers)."""
    torch.manual_seed(0)
    head = _head()
    rng = random.Random(2)
    rows = []
    for _ in range(64):
        a, b, c = rng.randint(2, 9), rng.randint(10, 999), rng.randint(1, 99)
        rows.append(([str(c), str(a), str(b)], a * b))  # slots: c latest, then a, then b: answer a * b
    mask = torch.ones(len(rows), 3, dtype=torch.long)
    digits = torch.stack([_context(values).digits[0] for values, _ in rows])  # (N, K, P)
    context = ContextNumbers(digits, torch.ones(len(rows), 3, dtype=torch.long), mask.bool())
    target = torch.tensor([list(ExactNumber.parse(str(v)).place_digits(INT, FRAC)) for _, v in rows])
    hidden = torch.randn(1, 16).expand(len(rows), 16)  # the same state everywhere: the operation is constant
    optimizer = torch.optim.Adam(head.parameters(), lr=0.05)
    for _ in range(60):
        loss = head.loss(head(hidden, context), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    out = head(hidden, context)
    assert pair_list(3)[out.operation_log_probs[0].argmax().item() - 1] == ("*", 1, 2)
    assert torch.equal(head.predict(out)[0], target)


def test_the_config_refuses_products_without_the_context_head():
    with pytest.raises(ValueError, match="fone_context_products=True.*fone_head_input='context'"):
        NumberAdapterConfig(fone_context_products=True, fone_head_input="linear", fone_head_target="feature")
    with pytest.raises(ValueError, match="True, False or None"):
        NumberAdapterConfig(fone_context_products="yes")


def test_last_numbers_feed_the_pairs():
    """Through `last_numbers` (the training forward's context): the pair of the two numbers before a position."""
    mask = torch.tensor([[1, 0, 1, 0]])
    digits = torch.tensor([[list(ExactNumber.parse(v).place_digits(INT, FRAC)) for v in ("12", "0", "3", "0")]])
    numbers = last_numbers(mask, digits, None, 3)
    results = pair_results(numbers.select((slice(None), -1)), FRAC)
    product = pair_list(3).index(("*", 0, 1))
    assert _as_decimal(results.digits[0, product].tolist()) == 36.0
    # 3 * 12, 3 / 12 and 12 / 3; none with the empty third slot
    assert list(itertools.compress(range(pair_count(3)), results.valid[0].tolist())) == [0, 3, 5]
