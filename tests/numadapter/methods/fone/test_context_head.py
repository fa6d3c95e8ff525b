"""fone_head_input="context": the answer as a signed combination of the exact features of the numbers before it.

The mechanism at toy size: hidden states that say only *which* operation is asked (a + b or a - b, plus noise), and
the two operands as context numbers. The context head learns the sums and differences exactly; a linear read-out of
states that even hold both operands' features side by side cannot (it would have to multiply them).
"""

from __future__ import annotations

import math
import random
import warnings

import pytest
import torch

from numadapter.config import NumberAdapterConfig
from numadapter.methods.context import ContextMemory, last_numbers
from numadapter.methods.fone.embedding import fone_features
from numadapter.methods.fone.head import FoNEDigitHead

PLACES = 5


def digits_of(values: list[int]) -> torch.Tensor:
    return torch.tensor([[int(c) for c in f"{v:0{PLACES}d}"] for v in values])  # (N, P)


def problems(n: int, seed: int) -> tuple[torch.Tensor, list[int], list[int], list[int]]:
    """``[n, 16]`` states (operation flag + noise), operands a >= b (3-4 digits), the operation (+1 / -1) per row."""
    rng = random.Random(seed)
    a, b, op = [], [], []
    for _ in range(n):
        x, y = rng.randrange(100, 10000), rng.randrange(100, 10000)
        a.append(max(x, y))
        b.append(min(x, y))
        op.append(rng.choice((1, -1)))
    noise = torch.randn(n, 15, generator=torch.Generator().manual_seed(seed))
    return torch.cat([torch.tensor(op, dtype=torch.float32)[:, None], noise], -1), a, b, op


def context_of(a: list[int], b: list[int], count: int = 4):
    """The two operands as the last two numbers (b the latest) of each of N positions, K = `count` slots."""
    n = len(a)
    mask = torch.ones(n, 2, dtype=torch.long)
    digits = torch.stack([digits_of(a), digits_of(b)], 1)  # (N, 2, P)
    return last_numbers(mask, digits, None, count).select((slice(None), -1))  # (N, K, ...)


def exact_match(head: FoNEDigitHead, mode: str) -> float:
    """Exact match of a fitted head (`fitted_head`) on 1,000 held-out problems."""
    held, a, b, op = problems(1000, seed=1)
    if mode != "context":
        held = torch.cat([held, *[fone_features([str(v) for v in xs], PLACES, 0) for xs in (a, b)]], -1)
    with torch.no_grad():
        predicted, _ = head.predict(head(held, context_of(a, b) if mode == "context" else None))
    return (predicted == digits_of([x + s * y for x, y, s in zip(a, b, op)])).all(-1).float().mean().item()


def fitted_head(mode: str, steps: int) -> FoNEDigitHead:
    """The head alone fitted to a + b / a - b with the two operands as its only context numbers."""
    torch.manual_seed(0)
    config = NumberAdapterConfig(
        encoding="fone", fone_numbers="all", int_digits=PLACES, frac_digits=0, fone_head_input=mode
    )
    states, a, b, op = problems(2048, seed=0)
    if mode != "context":  # give the linear head both operands' features in its state
        features = [fone_features([str(v) for v in xs], PLACES, 0) for xs in (a, b)]
        states = torch.cat([states, *features], -1)
    head = FoNEDigitHead(states.shape[-1], config)
    context = context_of(a, b) if mode == "context" else None
    answers = digits_of([x + s * y for x, y, s in zip(a, b, op)])
    optimizer = torch.optim.Adam(head.parameters(), lr=3e-2)
    for step in range(steps):
        rows = slice((step * 256) % 2048, (step * 256) % 2048 + 256)
        out = head(states[rows], None if context is None else context.select(rows))
        loss = head.loss(out, answers[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return head


@pytest.fixture(scope="module")
def context_head() -> FoNEDigitHead:
    """The context head fitted once (Adam, 200 steps of 256) for the two tests below, which only read it: frozen, so
    that a test that tried to train it would fail instead of changing it for the other."""
    return fitted_head("context", steps=200).requires_grad_(False)


def test_context_head_adds_and_subtracts_the_numbers_before_it_exactly(context_head):
    assert exact_match(context_head, "context") > 0.98
    assert exact_match(fitted_head("linear", steps=200), "linear") < 0.05


def test_a_slot_training_never_filled_leaves_its_number_out(context_head):
    """Trained with two numbers in the text, then asked with an older third one ("Q3. a + b ="): the third slot's
    coefficient logits never got a gradient and stay exactly tied; the tie must leave the number out (a plain argmax
    chose coefficient -1 and wrote a + b - 3)."""
    head = context_head
    held, a, b, op = problems(200, seed=1)
    older = [3] * len(a)
    mask = torch.ones(len(a), 3, dtype=torch.long)
    digits = torch.stack([digits_of(older), digits_of(a), digits_of(b)], 1)  # (N, 3, P): 3, then a, then b
    context = last_numbers(mask, digits, None, 4).select((slice(None), -1))
    logits = torch.nn.functional.linear(held, head.coefficients.weight, head.coefficients.bias).view(-1, 4, 3)
    assert torch.equal(logits[:, 2], logits[:, 2, :1].expand(-1, 3))  # slot 2 is exactly tied, as described
    with torch.no_grad():
        predicted, _ = head.predict(head(held, context))
    expected = digits_of([x + s * y for x, y, s in zip(a, b, op)])
    assert (predicted == expected).all(-1).float().mean().item() >= 0.98


def test_a_fresh_head_writes_its_plain_read_out_whatever_the_numbers_before_it():
    """Every coefficient of a fresh head is tied: it writes its read-out u (1 + 0i: the digits 0), not minus the sum
    of the prompt's numbers."""
    torch.manual_seed(0)
    config = NumberAdapterConfig(
        encoding="fone", fone_numbers="all", int_digits=PLACES, frac_digits=0, fone_head_input="context"
    )
    head = FoNEDigitHead(16, config)
    mask = torch.ones(2, 3, dtype=torch.long)
    digits = torch.stack([digits_of([7, 12]), digits_of([5, 30]), digits_of([12, 40])], 1)  # (2, 3, P)
    context = last_numbers(mask, digits, None, 4).select((slice(None), -1))
    with torch.no_grad():
        predicted, _ = head.predict(head(torch.randn(2, 16), context))
    assert predicted.tolist() == [[0] * PLACES] * 2


def reference_last_numbers(mask: list[list[int]], values: list[list[int]], count: int, starts=None) -> list:
    """For every (row, position): the values of the last `count` numbers at or before it (and after the latest
    example start, with `starts`), latest first."""
    out = []
    for r, (row_mask, row_values) in enumerate(zip(mask, values)):
        seen: list[int] = []
        row = []
        for t, (is_number, value) in enumerate(zip(row_mask, row_values)):
            if starts is not None and starts[r][t]:
                seen = []
            if is_number:
                seen.append(value)
            row.append(list(reversed(seen[-count:])))
        out.append(row)
    return out


def as_values(numbers, count: int) -> list:
    """`ContextNumbers` ``[B, T, K, P]`` -> nested lists of the valid slots' integer values."""
    place_values = torch.tensor([10 ** (PLACES - 1 - j) for j in range(PLACES)])
    values = (numbers.digits * place_values).sum(-1)  # (B, T, K)
    return [
        [[int(v) for v, ok in zip(slots, valid) if ok] for slots, valid in zip(row, row_valid)]
        for row, row_valid in zip(values.tolist(), numbers.valid.tolist())
    ]


def test_last_numbers_matches_a_plain_scan():
    rng = random.Random(3)
    mask = [[int(rng.random() < 0.4) for _ in range(11)] for _ in range(6)]
    values = [[rng.randrange(10**PLACES) if m else 0 for m in row] for row in mask]
    digits = torch.stack([digits_of(row) for row in values])  # (B, T, P)
    got = last_numbers(torch.tensor(mask), digits, None, 3)
    assert as_values(got, 3) == reference_last_numbers(mask, values, 3)


def test_last_numbers_never_crosses_into_another_packed_example():
    rng = random.Random(4)
    mask = [[int(rng.random() < 0.5) for _ in range(14)] for _ in range(3)]
    values = [[rng.randrange(10**PLACES) if m else 0 for m in row] for row in mask]
    starts = [[t == 0 or rng.random() < 0.25 for t in range(14)] for _ in range(3)]
    digits = torch.stack([digits_of(row) for row in values])
    got = last_numbers(torch.tensor(mask), digits, None, 3, torch.tensor(starts))
    assert as_values(got, 3) == reference_last_numbers(mask, values, 3, starts)
    assert as_values(got, 3) != reference_last_numbers(mask, values, 3)  # the case does cross examples


def test_memory_after_pushes_equals_the_scan_of_the_whole_sequence():
    mask = [[0, 1, 0, 1], [1, 0, 0, 0], [0, 0, 0, 0]]
    values = [[0, 12, 0, 345], [9, 0, 0, 0], [0, 0, 0, 0]]
    memory = ContextMemory(torch.tensor(mask), torch.stack([digits_of(r) for r in values]), None, 2)
    fed = digits_of([777, 888, 999])  # (B, P); only rows 0 and 2 feed a number
    memory.push([0, 2], fed, torch.ones(3, dtype=torch.long))
    whole_mask = [row + [int(r in (0, 2))] for r, row in enumerate(mask)]
    whole_values = [row + [v] for row, v in zip(values, (777, 888, 999))]
    expected = [row[-1] for row in reference_last_numbers(whole_mask, whole_values, 2)]
    got = as_values(memory.rows([0, 1, 2]), 2)
    assert [row[0] for row in got] == expected


def test_negative_context_number_is_conjugated():
    config = NumberAdapterConfig(
        encoding="fone",
        fone_numbers="all",
        int_digits=PLACES,
        frac_digits=0,
        fone_head_input="context",
        sign_policy="feature",
    )
    head = FoNEDigitHead(4, config)
    with torch.no_grad():  # read-out u = 1 + 0i; coefficient +1 on the latest number, 0 elsewhere
        head.proj.weight.zero_()
        head.proj.bias.copy_(torch.tensor([1.0, 0.0]).repeat(PLACES))
        head.coefficients.bias.copy_(torch.tensor([-30.0, -30.0, 30.0] + [-30.0, 30.0, -30.0] * 3))
    mask = torch.ones(1, 1, dtype=torch.long)
    numbers = last_numbers(mask, digits_of([123])[None], torch.tensor([[-1]]), 4).select((slice(None), -1))
    digits, _ = head.predict(head(torch.zeros(1, 4), numbers))
    assert digits.tolist() == digits_of([10**PLACES - 123]).tolist()  # -123 mod 10^5: the conjugate's angle


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"fone_context_numbers": 0}, "fone_context_numbers"),
        ({"fone_context_numbers": 2.5}, "fone_context_numbers"),
    ],
)
def test_bad_context_settings_are_refused(fields, match):
    with pytest.raises(ValueError, match=match):
        NumberAdapterConfig(encoding="fone", fone_numbers="all", fone_head_input="context", **fields)


def test_context_head_needs_the_feature_target_and_the_context():
    with pytest.raises(ValueError, match="fone_head_input='linear'"):
        NumberAdapterConfig(
            encoding="fone", fone_numbers="all", fone_head_target="digit"
        )  # the paper's head needs the linear read-out
    head = FoNEDigitHead(8, NumberAdapterConfig(encoding="fone", fone_numbers="all", fone_head_input="context"))
    with pytest.raises(ValueError, match="pass `context`"):
        head(torch.zeros(2, 8))


def test_mixture_loss_matches_a_plain_sum_over_the_combinations():
    """-log sum_c P(c | h) prod_places p(y | c), written out with Python complex numbers over the 3^K combinations."""
    import cmath
    import itertools
    import math

    torch.manual_seed(1)
    config = NumberAdapterConfig(
        encoding="fone",
        fone_numbers="all",
        int_digits=PLACES,
        frac_digits=0,
        fone_head_input="context",
        fone_context_numbers=2,
    )
    head = FoNEDigitHead(6, config)
    with torch.no_grad():
        for parameter in head.parameters():
            parameter.normal_()
    hidden = torch.randn(3, 6)
    a, b, y = [812, 45, 9999], [77, 3021, 1], [889, 3000, 12345]
    numbers = context_of(a, b, count=2)
    target = digits_of(y)
    got = head.loss(head(hidden, numbers), target, reduction="none")
    for n in range(3):
        u = torch.nn.functional.linear(hidden[n], head.proj.weight, head.proj.bias).tolist()  # (2P,), low first
        logits = torch.nn.functional.linear(hidden[n], head.coefficients.weight, head.coefficients.bias)
        log_p = torch.log_softmax(logits.view(2, 3), -1).tolist()  # slot 0: b (the latest), slot 1: a
        terms = []
        for combo in itertools.product((-1, 0, 1), repeat=2):
            log_prior = sum(log_p[k][c + 1] for k, c in enumerate(combo))
            log_like = 0.0
            for q in range(PLACES):  # q: place 10^q, pair q of the read-out
                period = 10 ** (q + 1)
                z = complex(u[2 * q], u[2 * q + 1])
                for c, value in zip(combo, (b[n], a[n])):
                    z *= cmath.exp(1j * 2 * math.pi * c * value / period)
                lower = (y[n] % 10**q) / 10**q
                scores = [(z * cmath.exp(-1j * 2 * math.pi * (d + lower) / 10)).real for d in range(10)]
                digit = (y[n] // 10**q) % 10
                log_like += scores[digit] - math.log(sum(math.exp(s) for s in scores))
            terms.append(log_prior + log_like)
        top = max(terms)
        expected = -(top + math.log(sum(math.exp(t - top) for t in terms))) / PLACES
        assert got[n].item() == pytest.approx(expected, rel=1e-4, abs=1e-4)


def test_empty_slots_get_an_exactly_zero_gradient():
    """An empty slot multiplies by 1 whatever its coefficient; rounding noise in its gradient would be scaled up to
    full steps by Adam (and differ between 1 and 2 processes), so its coefficient is fixed at 0, not learned."""
    torch.manual_seed(2)
    head = FoNEDigitHead(
        16, NumberAdapterConfig(encoding="fone", fone_numbers="all", int_digits=PLACES, frac_digits=0)
    )
    states, a, b, op = problems(64, seed=2)
    numbers = context_of(a, b)  # slots 0 and 1 hold the operands, slots 2 and 3 are empty
    head.loss(head(states, numbers), digits_of([x + s * y for x, y, s in zip(a, b, op)])).backward()
    grad = head.coefficients.bias.grad.view(4, 3)
    assert grad[2:].abs().max().item() == 0.0
    assert grad[:2].abs().max().item() > 1e-4


def copy_head(angle: float = 0.0, plus_logit: float = 30.0) -> FoNEDigitHead:
    """A context head that copies the latest number: slot 0's coefficient logits (0, 0, `plus_logit`) for
    (-1, 0, +1), the other slots' coefficient 0 for sure, read-out u = (cos, sin)(angle) at every place."""
    config = NumberAdapterConfig(
        encoding="fone", fone_numbers="all", int_digits=PLACES, frac_digits=0, fone_head_input="context"
    )
    head = FoNEDigitHead(4, config)
    with torch.no_grad():
        head.proj.weight.zero_()
        head.proj.bias.copy_(torch.tensor([math.cos(angle), math.sin(angle)]).repeat(PLACES))
        head.coefficients.bias.copy_(torch.tensor([0.0, 0.0, plus_logit] + [-30.0, 30.0, -30.0] * 3))
    return head


@pytest.mark.parametrize(
    "angle, plus_logit, expected",
    [
        (0.0, 30.0, 1.0),  # the latest number exactly: every place on a digit, the combination certain
        (math.pi / 20, 30.0, 0.5),  # a quarter of a digit off at every place: half way to the sector's edge
        (0.0, math.log(3.0), 0.6),  # on the digits, but P(+1 on the latest) = 3 / (1 + 1 + 3)
    ],
)
def test_confidence_reads_how_well_the_output_fits_the_number(angle, plus_logit, expected):
    head = copy_head(angle, plus_logit)
    mask = torch.ones(2, 2, dtype=torch.long)
    digits = torch.stack([digits_of([5, 40]), digits_of([1234, 98765])], 1)  # (2, 2, P): latest 1234 and 98765
    context = last_numbers(mask, digits, None, 4).select((slice(None), -1))
    out = head(torch.zeros(2, 4), context)
    predicted, _ = head.predict(out)
    confidence, combination = head.confidence(out)
    assert predicted.tolist() == digits_of([1234, 98765]).tolist()
    assert combination.tolist() == [[1, 0, 0, 0]] * 2
    assert confidence.tolist() == pytest.approx([expected] * 2, abs=1e-3)


def test_the_context_head_gets_no_ntl_and_the_trainers_say_so():
    """NTL added nothing to the context head and cost its top place at weight 1 on SmolLM2
    (eval_harness/results/pretrained_study/ntl_context): the head gets none, and training with ntl_weight > 0 warns."""
    from types import SimpleNamespace

    from numadapter.methods.fone.method import FoNEMethod
    from numadapter.training.binding import warn_untrained_settings

    context = NumberAdapterConfig(
        encoding="fone", fone_numbers="all", int_digits=PLACES, frac_digits=0, ntl_weight=0.3
    )
    assert FoNEMethod().head_ntl(SimpleNamespace(config=context)) is None
    with pytest.warns(UserWarning, match=r"ntl_weight=0.3 is not applied with FoNE's context head.*'linear'"):
        warn_untrained_settings(context)
    for quiet in (
        NumberAdapterConfig(encoding="fone", fone_numbers="all", int_digits=PLACES, frac_digits=0),
        NumberAdapterConfig(
            encoding="fone",
            fone_numbers="all",
            int_digits=PLACES,
            frac_digits=0,
            ntl_weight=0.3,
            fone_head_input="linear",
        ),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warn_untrained_settings(quiet)
