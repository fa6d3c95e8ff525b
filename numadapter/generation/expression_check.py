"""Generation's expression check (``fone_expression_check``, answers mode): the number after "expression =" is the
expression's value.

A whole worked solution is a chain of equations the model writes itself (``48/2 = 24 clips, then 48 + 24 = 72``). The
context head writes an equation's result as the likeliest combination of the numbers before it, and its likeliest
combination can be another one than the expression the text just wrote (``$12 + $8 = $4``, docs/results.md). Here the
text decides instead: where the text so far (the prompt's end and the model's own words, each [NUM] as the number the
head wrote there, `numadapter.generation.digit_numbers.DigitNumbers.text_so_far`) ends in an expression and "="
(`numadapter.tokenization.expressions.value_before_equals`), and the step's token is a [NUM] or starts a number in
digits:

- where the head forms the expression's value from the numbers before it (its head mode's `forms`, the same test
  that made such results [NUM] in training: a signed sum of the last K numbers, a product or exact quotient of two),
  the head writes that value, as a [NUM] (its combination is the one the expression names);
- where it does not (a product of three numbers, a quotient that does not terminate, a negative result), a [NUM] is
  written in the LM's digits instead: the head's number could only be another value than the expression's.

The value is exact (`fractions.Fraction`, never a float), so every equation the head writes this way is right.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction

import torch

from numadapter.methods.base import Prediction
from numadapter.methods.context import fixed_point_values
from numadapter.methods.fone.answer_mode import head_left_out
from numadapter.methods.fone.modes import get_head_mode
from numadapter.numbers import ExactNumber
from numadapter.tokenization.expressions import value_before_equals

__all__ = ["ExpressionCheck", "check_expressions", "checks_expressions", "with_values"]


@dataclass
class ExpressionCheck:
    """What the check decided for one step.

    Attributes:
        values: row -> the expression's value, on the rows where the head writes it (their token becomes [NUM]).
        in_digits: the rows whose [NUM] the LM writes in digits instead (the head does not form the value).
    """

    values: dict[int, ExactNumber] = field(default_factory=dict)
    in_digits: list[int] = field(default_factory=list)


def checks_expressions(reader: object) -> bool:
    """Whether generation with this `NumberReader` runs the check: answers mode (the reader follows the numbers
    written in digits) with a head that reads the numbers before it and is in use (not left out by the trainer:
    ``fone_head_in_use`` False writes every number in digits), and ``fone_expression_check`` on."""
    memory, digit_numbers = getattr(reader, "memory", None), getattr(reader, "digit_numbers", None)
    config = getattr(reader, "config", None)
    if memory is None or digit_numbers is None or head_left_out(config):
        return False
    return bool(getattr(config, "fone_expression_check", True))


def head_value(reader: object, row: int, value: Fraction) -> ExactNumber | None:
    """`value` as the number the head writes on `row`, or None where the head does not form it: negative, not exact
    at ``frac_digits`` places, more than ``int_digits`` integer places, or no combination of the row's context
    numbers (``reader.memory``, most recent first) gives it."""
    config = reader.config
    scaled = value * 10**config.frac_digits
    if value < 0 or scaled.denominator != 1 or value >= 10**config.int_digits:
        return None
    numbers = reader.memory.numbers
    values = fixed_point_values(numbers.digits[row], numbers.sign[row]).tolist()  # (K,)
    context = [v for v, valid in zip(values, numbers.valid[row].tolist()) if valid]
    if not context or not get_head_mode(config).forms(context, int(scaled), config):
        return None
    return ExactNumber.parse(Decimal(int(scaled)).scaleb(-config.frac_digits))


def check_expressions(reader: object, tokens: list[int], active: list[int], num_id: int) -> ExpressionCheck:
    """The check on the `active` rows whose chosen token (`tokens`, every row's) is [NUM] (`num_id`) or starts a
    number in digits (see the module docstring). Reads the text before this step's token: call it before the
    reader observes the step."""
    check = ExpressionCheck()
    digit_numbers = reader.digit_numbers
    for row in active:
        token = tokens[row]
        if token != num_id and not digit_numbers.starts_number(row, token):
            continue
        value = value_before_equals(digit_numbers.text_so_far(row))
        if value is None:
            continue
        number = head_value(reader, row, value)
        if number is not None:
            check.values[row] = number
        elif token == num_id:
            check.in_digits.append(row)
    return check


def with_values(
    prediction: Prediction, values: dict[int, ExactNumber], int_digits: int, frac_digits: int
) -> Prediction:
    """`prediction` with the head's number on each row of `values` replaced by that value: its place digits
    (``digits [B, P]``), sign +1, value, and (where the prediction has it) its exact combination row
    ``combined [B, 2 + P]`` as one number's, which needs no unwrapping (`numadapter.methods.fone.wrapping`)."""
    if not values:
        return prediction
    rows = sorted(values)
    device = prediction.sign.device
    index = torch.tensor(rows, dtype=torch.long, device=device)
    places = torch.tensor([values[r].place_digits(int_digits, frac_digits) for r in rows], dtype=torch.long,
                          device=device)  # fmt: skip
    digits = prediction.digits.index_copy(0, index, places)
    sign = prediction.sign.index_fill(0, index, 1)
    exact = torch.tensor([values[r].to_float() for r in rows], dtype=prediction.values.dtype, device=device)
    combined = prediction.combined
    if combined is not None:
        head = torch.tensor([[1, 0]] * len(rows), dtype=combined.dtype, device=device)
        combined = combined.index_copy(0, index, torch.cat((head, places.to(combined.dtype)), 1))
    return replace(prediction, digits=digits, sign=sign, values=prediction.values.index_copy(0, index, exact),
                   combined=combined)  # fmt: skip
