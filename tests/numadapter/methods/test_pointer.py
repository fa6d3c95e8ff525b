"""The pointer form of the FoNE context head (``fone_context_pointer=True``): the fewest-terms search that teaches
its coefficients, the keys carried beside each context number, the loss, and the config's limits."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

from numadapter.config import NumberAdapterConfig
from numadapter.data.head_coverage import combination_of
from numadapter.methods.context import ContextMemory, ContextNumbers, fixed_point_values, last_numbers
from numadapter.methods.fone.head import FoNEDigitHead
from numadapter.methods.fone.modes.context import most_likely_coefficients
from numadapter.methods.fone.pointer import exact_log_likelihood, fewest_terms, likeliest_combination


def brute_force(values: list[int], valid: list[bool], target: int) -> int | None:
    """The fewest nonzero terms (at least one) of a signed combination of the valid values that gives target."""
    slots = [k for k, ok in enumerate(valid) if ok]
    for terms in range(1, len(slots) + 1):
        for chosen in itertools.combinations(slots, terms):
            for signs in itertools.product((1, -1), repeat=terms):
                if sum(s * values[k] for s, k in zip(signs, chosen)) == target:
                    return terms
    return None


@pytest.mark.parametrize("count", [1, 2, 5, 8])
def test_fewest_terms_finds_the_smallest_exact_combination(count):
    rng = random.Random(count)
    rows = []
    for _ in range(150):
        filled = rng.randint(0, count)
        values = [rng.randint(-40, 40) for _ in range(count)]
        target = rng.randint(-60, 60)
        if rng.random() < 0.5:  # half of the targets a combination of the filled slots
            target = sum(rng.choice((-1, 0, 1)) * v for v in values[:filled])
        rows.append((values, [k < filled for k in range(count)], target))
    got = fewest_terms(
        torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows]), torch.tensor([r[2] for r in rows])
    ).tolist()
    formed = 0
    for (values, valid, target), coefficients in zip(rows, got):
        best = brute_force(values, valid, target)
        if best is None:
            assert coefficients == [0] * count
            continue
        formed += 1
        assert sum(c * v for c, v in zip(coefficients, values)) == target
        assert sum(c != 0 for c in coefficients) == best
        assert all(c == 0 for c, ok in zip(coefficients, valid) if not ok)  # never an empty slot
    assert 20 < formed < len(rows)  # both kinds of rows were checked


def test_long_contexts_are_searched_by_halves():
    """A balance among 14 numbers (most recent first), as the tokenizer checks an answer in answers mode."""
    context = [85, 2, 120, 1, 5210, 7, 3, 2019, 40213, 11, 12, 13, 14, 15]
    coefficients = combination_of(context, 5210 + 120 - 85, min_terms=1)
    assert coefficients is not None and sum(c * v for c, v in zip(coefficients, context)) == 5245
    assert sum(c != 0 for c in coefficients) == 3
    assert combination_of(context, 10**9, min_terms=1) is None
    assert combination_of(context, 0) == (0,) * len(context)  # the empty sum, as the direct search gives it


def pointer_config(**overrides) -> NumberAdapterConfig:
    settings = dict(encoding="fone", int_digits=5, frac_digits=0, fone_context_pointer=True, fone_context_numbers=16)
    return NumberAdapterConfig(**{**settings, **overrides})


def test_config_limits_name_the_field_and_the_fix():
    with pytest.raises(ValueError, match=r"from 1 to 6 .*up to 16 with fone_context_pointer=True.*got 16"):
        NumberAdapterConfig(encoding="fone", fone_context_numbers=16)
    with pytest.raises(ValueError, match=r"from 1 to 16 .*got 17"):
        pointer_config(fone_context_numbers=17)
    with pytest.raises(ValueError, match=r"fone_context_pointer=True .*encoding='xval'"):
        NumberAdapterConfig(encoding="xval", fone_context_pointer=True)
    with pytest.raises(ValueError, match=r"fone_context_products=True"):
        pointer_config(fone_context_products=True)
    with pytest.raises(ValueError, match=r"True, False or None .*got 'yes'"):
        pointer_config(fone_context_pointer="yes")
    assert pointer_config().fone_context_numbers == 16


def test_keys_travel_with_their_numbers():
    """`last_numbers` gathers each number's key from its own position, like its digits; the decode loop's memory
    shifts them with the numbers and takes a fed [NUM]'s key one step later."""
    mask = torch.tensor([[0, 1, 0, 1, 1, 0]])
    digits = torch.arange(6).repeat_interleave(2).reshape(1, 6, 2)  # place digits t, t at position t
    keys = torch.arange(6, dtype=torch.float32).reshape(1, 6, 1).expand(1, 6, 3) * 10  # key 10 t at position t
    numbers = last_numbers(mask, digits, None, count=3, keys=keys)
    assert numbers.keys[0, 5, :, 0].tolist() == [40.0, 30.0, 10.0]  # positions 4, 3, 1: the latest first
    assert numbers.keys[0, 2, :, 0].tolist() == [10.0, 0.0, 0.0]  # one number so far, empty slots zero
    assert torch.equal(numbers.digits[0, 5, :, 0], torch.tensor([4, 3, 1]))
    memory = ContextMemory(mask, digits, None, 3, keys)
    memory.push([0], torch.tensor([[9, 9]]), torch.tensor([1]))  # a [NUM]: its key not known yet
    assert memory.numbers.keys[0, :, 0].tolist() == [0.0, 40.0, 30.0]
    memory.set_latest_keys([0], torch.full((1, 3), 70.0))
    assert memory.numbers.keys[0, :, 0].tolist() == [70.0, 40.0, 30.0]
    assert memory.numbers.digits[0, :, 0].tolist() == [9, 4, 3]


def ledger_batch(head: FoNEDigitHead, rows: int = 64, seed: int = 0):
    """16 context numbers, three of them with a role (+1, +1 or -1; the others 0) that their keys say, and the
    balance the roles form: the fewest-terms combination is the roles' on nearly every row."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randint(100, 3000, (rows, 16), generator=generator)
    values[:, 0] += 5000  # the balance stays positive
    roles = torch.zeros(rows, 16, dtype=torch.long)
    picked = torch.rand(rows, 16, generator=generator).argsort(-1)[:, :2] + 0  # two other slots
    roles[:, 0] = 1
    roles.scatter_(1, (picked % 15) + 1, torch.tensor([[1, -1]]).expand(rows, 2))
    balance = (roles * values).sum(-1)
    places = head.num_places
    digits = torch.stack([values // 10 ** (places - 1 - p) % 10 for p in range(places)], -1)  # (N, 16, P)
    states = torch.randn(rows, 16, 8, generator=generator) * 0.1  # the hidden state at each number: its role
    states[..., :3] += torch.nn.functional.one_hot(roles + 1, 3).float()
    target = torch.stack([balance // 10 ** (places - 1 - p) % 10 for p in range(places)], -1)
    context = ContextNumbers(digits, torch.ones_like(values), torch.ones_like(values, dtype=torch.bool), None)
    return context, states, target, roles


def with_keys(head: FoNEDigitHead, context: ContextNumbers, states: torch.Tensor) -> ContextNumbers:
    return context._replace(keys=head.number_keys(states))


def test_the_pointer_learns_each_numbers_role_from_its_key():
    """A fresh pointer leaves every number out; trained on the fewest-terms coefficients it writes held-out balances
    of 16 numbers exactly (the K-slot head scores 3^16 combinations and cannot)."""
    torch.manual_seed(0)
    head = FoNEDigitHead(8, pointer_config())
    hidden = torch.zeros(32, 8)
    context, states, target, roles = ledger_batch(head, rows=32)
    fresh = head(hidden, with_keys(head, context, states))
    assert (most_likely_coefficients(fresh.coefficient_log_probs) == 1).all()  # coefficient 0 everywhere
    optimizer = torch.optim.Adam(head.parameters(), lr=0.05)
    for _ in range(30):
        optimizer.zero_grad()
        head.loss(head(hidden, with_keys(head, context, states)), target).backward()
        optimizer.step()
    held, held_states, held_target, held_roles = ledger_batch(head, rows=32, seed=1)
    out = head(hidden, with_keys(head, held, held_states))
    ones = torch.ones(32, dtype=torch.long)
    assert torch.equal(fixed_point_values(out.digit_logits.argmax(-1), ones), fixed_point_values(held_target, ones))
    assert torch.equal(most_likely_coefficients(out.coefficient_log_probs) - 1, held_roles)


def test_pointer_loss_is_the_choice_and_the_digits():
    """A row's loss is (-log P(any exact combination) + the digit NLL under the likeliest one) / places: at least the
    first term, which is at most the likeliest combination's own cross-entropy; its gradient is finite, also on a
    row that no combination forms (there the read-out alone is taught)."""
    torch.manual_seed(0)
    head = FoNEDigitHead(8, pointer_config(int_digits=4))
    with torch.no_grad():
        head.pointer.slot.normal_()
    context, states, target, _ = ledger_batch(head, rows=4)
    target[3] = torch.tensor([9, 9, 9, 9])  # 9999, and only one number before it: nothing forms it
    context = with_keys(head, context, states)
    context = context._replace(valid=context.valid.index_fill(0, torch.tensor([3]), False))
    context.valid[3, 0] = True
    out = head(torch.randn(4, 8), context)
    values = fixed_point_values(context.digits, context.sign)
    answers = fixed_point_values(target, torch.ones(4, dtype=torch.long))
    wanted = likeliest_combination(values, context.valid, answers, out.coefficient_log_probs)
    hard = -out.coefficient_log_probs.gather(-1, (wanted + 1)[..., None]).sum((-1, -2))
    exact = exact_log_likelihood(values, context.valid, answers, out.coefficient_log_probs)
    per_row = head.loss(out, target, reduction="none")
    assert torch.isinf(exact[3]) and (wanted[3] == 0).all()
    assert (per_row[:3] * head.num_places >= -exact[:3] - 1e-4).all() and (-exact[:3] <= hard[:3] + 1e-4).all()
    per_row.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in head.parameters() if p.grad is not None)


def test_the_likeliest_exact_combination_is_taught_not_the_fewest_terms():
    """5 = 2 + 3 = 10 - 5 ... : with no preference the fewest terms (one: the 5 itself); where the head prefers the
    first two numbers, those; a preference for a combination that does not give the target is never taught."""
    values, valid, target = torch.tensor([[2, 3, 5, 10]]), torch.ones(1, 4, dtype=torch.bool), torch.tensor([5])
    assert fewest_terms(values, valid, target).tolist() == [[0, 0, 1, 0]]
    prefer = torch.log(torch.tensor([[[0.1, 0.1, 0.8], [0.1, 0.1, 0.8], [0.1, 0.8, 0.1], [0.1, 0.8, 0.1]]]))
    assert likeliest_combination(values, valid, target, prefer).tolist() == [[1, 1, 0, 0]]
    wrong = torch.log(torch.tensor([[[0.1, 0.1, 0.8]] * 4]))  # all +1: 20, not 5
    assert (likeliest_combination(values, valid, target, wrong) * values).sum().item() == 5


def test_a_tokenizer_without_the_pointer_does_not_match_an_adapter_with_it():
    """The pointer decides which answers are [NUM] (any of 16 numbers, not the last 4): a tokenizer that was not told
    marks others, and the mismatch is named (None and False agree: both are the K-slot head)."""
    from types import SimpleNamespace

    from numadapter.tokenization.matching import tokenizer_mismatches

    plain = NumberAdapterConfig(encoding="fone", int_digits=5, frac_digits=0, fone_context_numbers=4)
    differ = tokenizer_mismatches(SimpleNamespace(config=plain), pointer_config())
    assert differ["fone_context_pointer"] == (False, True) and differ["fone_context_numbers"] == (4, 16)
    unset = NumberAdapterConfig(encoding="fone", int_digits=5, frac_digits=0, fone_context_pointer=False)
    assert "fone_context_pointer" not in tokenizer_mismatches(SimpleNamespace(config=unset), plain)


@pytest.mark.parametrize("count", [1, 3, 6])
def test_the_exact_likelihood_sums_every_exact_combination(count):
    """Against the sum over all 3^K combinations (an empty slot's coefficient 0 with probability 1, as the head
    masks it), the empty combination left out."""
    generator = torch.Generator().manual_seed(count)
    formed = 0
    for _ in range(40):
        values = torch.randint(-6, 7, (1, count), generator=generator)
        valid = torch.rand(1, count, generator=generator) < 0.8
        log_p = torch.log_softmax(torch.randn(1, count, 3, generator=generator), -1)
        target = int(torch.randint(-8, 9, (1,), generator=generator))
        expected = 0.0
        for c in itertools.product((-1, 0, 1), repeat=count):
            used = [k for k, x in enumerate(c) if x]
            total = sum(x * int(v) for x, v in zip(c, values[0]))
            if not used or any(not valid[0, k] for k in used) or total != target:
                continue
            expected += math.exp(sum(float(log_p[0, k, x + 1]) for k, x in enumerate(c) if valid[0, k]))
        got = float(exact_log_likelihood(values, valid, torch.tensor([target]), log_p)[0].exp())
        assert got == pytest.approx(expected, abs=1e-6)
        formed += expected > 0
    assert formed > 5
