"""Number Token Loss tasks (Zausinger et al., "Regress, Don't Guess: A Regression-like Loss on Number Tokens for
Language Models"): the decoder-only multiplication task (Sec. 4.4, Table 5) and an integer-arithmetic
question-answer set in the style of the DeepMind mathematics modules it uses (Sec. 4.1, Appendix A.6).

Multiplication (Sec. 4.4): "multiplying two numbers with k and l digits, with k, l in [1..5] in training and
k, l in [1..6] in testing ... MAPE separately for unseen interpolation samples (up to 5 x 5 digits) and
extrapolation samples (at least one six-digit factor)". Our choices (the paper gives no sizes or format):
- each example draws (k, l) uniformly, then each factor uniformly among the k-digit (l-digit) numbers; 1-digit
  factors are 1..9 (0 is left out so that no product is 0, where MAPE is undefined);
- prompt ``"123*4567="``, target the exact product;
- splits: train / valid / test (interpolation, k, l <= 5) / test_extrapolation (k or l = 6, the other 1..6);
  an unordered factor pair belongs to exactly one of train / valid / test (`hash_split`, 85% / 5% / 10% of the
  pairs), so test pairs are unseen; extrapolation pairs cannot occur in training. Both factor orders occur.
  Sampling is with replacement inside a split: small digit blocks (1 x 1 digits has 45 pairs) repeat.
- default sizes: 100,000 / 5,000 / 10,000 / 10,000.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from .base import Example, Task
from .sampling import derive_key, sample_disjoint


def _factor(rng: random.Random, digits: int) -> int:
    low = 1 if digits == 1 else 10 ** (digits - 1)
    return rng.randint(low, 10**digits - 1)


@dataclass(frozen=True, eq=False)
class NtlMultiplicationTask(Task):
    """``a*b=`` with factor lengths k, l <= `max_digits` (train/valid/test) or one factor of `extra_digits`.

    Args:
        name: registry name.
        max_digits: longest factor in train/valid/test (5 in the paper).
        extra_digits: the extrapolation factor length (6 in the paper).
        n_train, n_valid, n_test, n_extrapolation: default split sizes.
    """

    name: str = "ntl_mul"
    max_digits: int = 5
    extra_digits: int = 6
    n_train: int = 100_000
    n_valid: int = 5_000
    n_test: int = 10_000
    n_extrapolation: int = 10_000
    description: str = "a*b= with 1..5-digit factors; test_extrapolation has a 6-digit factor (NTL Sec. 4.4)"
    metrics: tuple[str, ...] = ("mape", "exact_match", "mae")
    source: str = "NTL Sec. 4.4, Table 5"

    def __post_init__(self) -> None:
        if not 1 <= self.max_digits < self.extra_digits:
            raise ValueError(
                f"need 1 <= max_digits < extra_digits, got max_digits={self.max_digits}, "
                f"extra_digits={self.extra_digits}."
            )

    def _draw(self, rng: random.Random, extrapolate: bool) -> tuple[str, Example]:
        if extrapolate:
            k, m = self.extra_digits, rng.randint(1, self.extra_digits)
            if rng.random() < 0.5:
                k, m = m, k
        else:
            k, m = rng.randint(1, self.max_digits), rng.randint(1, self.max_digits)
        a, b = _factor(rng, k), _factor(rng, m)
        product = str(a * b)
        example = Example(
            prompt=f"{a}*{b}=",
            target=product,
            answer=product,
            metadata={"task": self.name, "operands": [str(a), str(b)], "digits": [k, m]},
        )
        return f"*|{min(a, b)}|{max(a, b)}", example

    def _generate(self, split: str, n: int, seed: int) -> list[Example]:
        extrapolate = split == "test_extrapolation"
        rng = random.Random(f"ntl_mul|{self.name}|{seed}|{split}")
        seed_key = derive_key("ntl_mul", self.name, seed)
        return sample_disjoint(
            lambda r: self._draw(r, extrapolate), split, n, rng, seed_key, check_split=not extrapolate
        )


# ---------------------------------------------------------------------------------------------------------------
# Question answering in words. Templates are ours, in the style of the DeepMind mathematics "arithmetic__*"
# modules the NTL paper trains on; "sym" templates write the operation as a symbol and put a negative second
# operand in parentheses ("5 - (-3)").
# ---------------------------------------------------------------------------------------------------------------

QA_TEMPLATES: dict[str, tuple[tuple[str, bool], ...]] = {
    "+": (
        ("What is {a} plus {b}?", False),
        ("What is the sum of {a} and {b}?", False),
        ("Add {a} and {b}.", False),
        ("Sum {a} and {b}.", False),
        ("Total of {a} and {b}.", False),
        ("Calculate {a} + {b}.", True),
        ("What is {a} + {b}?", True),
        ("Work out {a} + {b}.", True),
    ),
    "-": (
        ("What is {a} minus {b}?", False),
        ("Subtract {b} from {a}.", False),
        ("What is {a} take away {b}?", False),
        ("Take {b} from {a}.", False),
        ("Calculate {a} - {b}.", True),
        ("What is {a} - {b}?", True),
        ("Work out {a} - {b}.", True),
    ),
    "*": (
        ("What is {a} times {b}?", False),
        ("Calculate {a} times {b}.", False),
        ("What is the product of {a} and {b}?", False),
        ("Multiply {a} and {b}.", False),
        ("What is {a} multiplied by {b}?", False),
        ("Calculate {a}*{b}.", True),
        ("Work out {a} * {b}.", True),
    ),
    "/": (
        ("What is {a} divided by {b}?", False),
        ("Divide {a} by {b}.", False),
        ("Calculate {a} divided by {b}.", False),
        ("What is {a} / {b}?", True),
        ("Work out {a} / {b}.", True),
    ),
}


def _signed(rng: random.Random, low: int, high: int) -> int:
    """A uniform magnitude in [low, high] with a uniform sign (0 stays 0)."""
    magnitude = rng.randint(low, high)
    return -magnitude if rng.random() < 0.5 else magnitude


@dataclass(frozen=True, eq=False)
class NtlQATask(Task):
    """Integer arithmetic questions in words, e.g. ``"What is the sum of 4 and 9?"`` -> ``"13"``.

    Operands (our choice; the DeepMind modules are the model): interpolation splits draw integers with magnitude
    up to `small` (999), the second factor of a product and the divisor up to `small_factor` (99); division
    questions are built as ``(q * d) / d`` so the answer q is an integer. test_extrapolation draws the first
    operand (or quotient) with magnitude in [small + 1, big] (1,000 .. 999,999), like the "_big"/"_longer"
    modules. Operators are uniform over + - * /, templates uniform per operator. An arithmetic problem
    (operator + operands, unordered for + and *) belongs to one of train / valid / test whatever its template.

    Args:
        name: registry name.
        small, small_factor, big: operand magnitude bounds (see above).
        n_train, n_valid, n_test, n_extrapolation: default sizes (NTL Appendix A.6.2: 100,000 / 3,000 /
            10,000 / 10,000).
    """

    name: str = "ntl_qa"
    small: int = 999
    small_factor: int = 99
    big: int = 999_999
    n_train: int = 100_000
    n_valid: int = 3_000
    n_test: int = 10_000
    n_extrapolation: int = 10_000
    description: str = "integer arithmetic questions in words (+ - * /), DeepMind-mathematics style (NTL A.6)"
    metrics: tuple[str, ...] = ("exact_match", "mae", "mape")
    source: str = "NTL Sec. 4.1, Appendix A.6; templates in the style of DeepMind mathematics"

    def _operands(self, rng: random.Random, op: str, extrapolate: bool) -> tuple[int, int, int]:
        """Return (a, b, exact result) for `op`."""
        first = _signed(rng, self.small + 1, self.big) if extrapolate else _signed(rng, 0, self.small)
        if op == "/":
            divisor = _signed(rng, 1, self.small_factor)
            return first * divisor, divisor, first
        second = _signed(rng, 0, self.small_factor if op == "*" else self.small)
        if extrapolate and rng.random() < 0.5:
            first, second = second, first
        result = first + second if op == "+" else first - second if op == "-" else first * second
        return first, second, result

    def _draw(self, rng: random.Random, extrapolate: bool) -> tuple[str, Example]:
        op = rng.choice(("+", "-", "*", "/"))
        template_id = rng.randrange(len(QA_TEMPLATES[op]))
        template, symbolic = QA_TEMPLATES[op][template_id]
        a, b, result = self._operands(rng, op, extrapolate)
        b_text = f"({b})" if symbolic and b < 0 else str(b)
        answer = str(result)
        example = Example(
            prompt=template.format(a=a, b=b_text),
            target=answer,
            answer=answer,
            metadata={"task": self.name, "op": op, "operands": [str(a), str(b)], "template": template_id},
            sep=" ",
        )
        x, y = (min(a, b), max(a, b)) if op in "+*" else (a, b)
        return f"{op}|{x}|{y}", example

    def _generate(self, split: str, n: int, seed: int) -> list[Example]:
        extrapolate = split == "test_extrapolation"
        rng = random.Random(f"ntl_qa|{self.name}|{seed}|{split}")
        seed_key = derive_key("ntl_qa", self.name, seed)
        return sample_disjoint(
            lambda r: self._draw(r, extrapolate), split, n, rng, seed_key, check_split=not extrapolate
        )


def ntl_tasks() -> Sequence[Task]:
    """The NTL multiplication and question-answer tasks."""
    return [NtlMultiplicationTask(), NtlQATask()]
