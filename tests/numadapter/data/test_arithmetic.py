"""numadapter.data.arithmetic: the generated addition / subtraction rows of the quick start and eval_harness."""

from __future__ import annotations

import re

import pytest

from numadapter.data.arithmetic import addition_examples, arithmetic_examples


def test_addition_examples_are_exact_and_cover_the_digit_range():
    rows = addition_examples(400, 3, 4, seed=7)
    lengths = set()
    for row in rows:
        match = re.fullmatch(r"(\d+) \+ (\d+) =", row["prompt"])
        a, b = int(match.group(1)), int(match.group(2))
        assert row["completion"] == " " + str(a + b)
        lengths.update({len(match.group(1)), len(match.group(2))})
    assert lengths == {3, 4}
    assert addition_examples(400, 3, 4, seed=7) == rows and addition_examples(400, 3, 4, seed=8) != rows
    seen = {row["prompt"] for row in rows[:200]}
    held_out = addition_examples(50, 3, 4, seed=7, exclude=seen)
    assert not seen & {row["prompt"] for row in held_out}
    with pytest.raises(ValueError, match="min_digits=5, max_digits=4"):
        addition_examples(1, 5, 4)
    with pytest.raises(ValueError, match="`operator` must be '\\+' or '-', got '\\*'"):
        arithmetic_examples(1, "*")
