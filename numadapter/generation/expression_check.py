"""Generation's expression check (``fone_expression_check``, answers mode): the number after "expression =" is the
expression's value.

A whole worked solution is a chain of equations the model writes itself (``48/2 = 24 clips, then 48 + 24 = 72``). The
context head writes an equation's result as the likeliest combination of the numbers before it, and its likeliest
combination can be another one than the expression the text just wrote (``$12 + $8 = $4``, docs/results.md). Here the
text decides instead: where the text so far (the prompt's end and the model's own words, each [NUM] as the number the
head wrote there, `numadapter.generation.digit_numbers.DigitNumbers.text_so_far`) ends in an expression and "="
(`numadapter.tokenization.expressions.open_expression`), and the step's token is a [NUM] or starts a number in
digits, the head writes the expression's value as a [NUM] where it forms it from the numbers before it:

- its head mode `forms` the value (the same test that made such results [NUM] in training: a signed sum of the last K
  numbers, a product or exact quotient of two), or
- the expression is a chain of the head's operations on them: every number it is made of is one of the numbers
  before it, and it only adds and subtracts, or also multiplies and divides where the head forms products
  (``fone_context_products``): ``11 * 60 * 60`` is two of the head's products in a row.

The value the head writes is exact (`fractions.Fraction`, never a float) and has at most ``frac_digits`` decimals: one
with more (``$13 / 8``, ``10 / 3``) is written rounded half-up at ``frac_digits``, as a text writes it (``1.63``); a
sum of shares (``3.7% + 2.5% =``) is written as a share: its number, then a ``%`` the check writes at the next step
(``6.2%``; where the tokenizer has no ``%`` token, the value itself: ``0.062``). A negative value with
``sign_policy="text"`` is written as the text writes it: the check writes the minus sign first (the step's token
becomes "-"), then the magnitude at the next [NUM] (``12 - 20 = -8``); with ``sign_policy="feature"`` the [NUM] carries
the sign. A value the head forms that needs more than ``int_digits`` integer places (``6 * 33882912 =`` with
``int_digits=8``) cannot be a [NUM]; it is written as text, as the tokenizer keeps such a number in training
(``out_of_range="text"``): its digits in the base's tokens, the first at this step and the others forced at the next
ones (`numadapter.generation.digit_numbers.DigitNumbers.spell`). Where the head does not form the value (a number of
the expression that is not in its context, a product where the head forms none), a [NUM] is written in the LM's
digits instead: the head's number could only be another value than the expression's.

Anywhere else the head writes only a copy of one of the numbers before it (`not_copies`), and the LM writes any other
number in digits, where the text ends in a number and an operator (``25 *``, ``240 miles +``: `operand_follows`), or
where the model's own text already holds an equation (``expression = number``): there the number is an operand, which a
solution restates from before (or writes as a constant it knows, ``* 60``), or a number of its prose, and training
marked only the results after "=" and the restatements of the head's own numbers as [NUM]
(`numadapter.tokenization.equations`). Without this, the head's likeliest combination becomes the operand
(``25 * 829440000`` after ``28800 mugs``: 28800 squared), and each line of a loop grows the numbers the next one reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction

import torch

from numadapter.methods.base import Prediction
from numadapter.methods.context import fixed_point_values
from numadapter.methods.fone.answer_mode import head_left_out
from numadapter.methods.fone.context_settings import products_for_head
from numadapter.methods.fone.modes import get_head_mode
from numadapter.numbers import ExactNumber
from numadapter.tokenization.expressions import OpenExpression, open_expression, operand_follows

__all__ = ["ExpressionCheck", "check_expressions", "checks_expressions", "not_copies", "with_values"]


@dataclass
class ExpressionCheck:
    """What the check decided for one step.

    Attributes:
        values: row -> the expression's value, on the rows where the head writes it (their token becomes [NUM]).
        in_digits: the rows whose [NUM] the LM writes in digits instead (the head does not form the value).
        minus: row -> the minus sign's token id, on the rows where the check writes a negative value's sign first
            (``sign_policy="text"``; their token becomes that one).
        then: row -> the token the row writes right after its value (the ``%`` of a sum of shares).
        text: row -> the token ids of a value past ``int_digits`` written as text: the first is this step's token,
            the others the row's next steps'.
        copies_only: the rows whose [NUM] is an operand (`operand_follows`) or follows an equation the model wrote,
            not after "expression =": the head writes a copy there or the LM writes it in digits (`not_copies`).
    """

    values: dict[int, ExactNumber] = field(default_factory=dict)
    in_digits: list[int] = field(default_factory=list)
    minus: dict[int, int] = field(default_factory=dict)
    then: dict[int, int] = field(default_factory=dict)
    text: dict[int, list[int]] = field(default_factory=dict)
    copies_only: list[int] = field(default_factory=list)


def checks_expressions(reader: object) -> bool:
    """Whether generation with this `NumberReader` runs the check: answers mode (the reader follows the numbers
    written in digits) with a head that reads the numbers before it and is in use (not left out by the trainer:
    ``fone_head_in_use`` False writes every number in digits), and ``fone_expression_check`` on."""
    memory, digit_numbers = getattr(reader, "memory", None), getattr(reader, "digit_numbers", None)
    config = getattr(reader, "config", None)
    if memory is None or digit_numbers is None or head_left_out(config):
        return False
    return bool(getattr(config, "fone_expression_check", True))


def _chain(context: list[int], expression: OpenExpression, config: object) -> bool:
    """Whether `expression` is a chain of the head's operations on the `context` values (fixed-point ints): each of
    its numbers is one of them (a share as the tokenizer reads it: over 100 where that fits the places), and its
    operations are sums and differences, or products and quotients too where the head forms products."""
    scale = 10**config.frac_digits
    held = {Fraction(abs(value), scale) for value in context}
    for number, written in zip(expression.numbers, expression.written):
        if number not in held and written not in held:  # "30%": 0.3 where that fits the places, else 30
            return False
    operations = {"+", "-"} | ({"*", "/"} if products_for_head(config, True) else set())
    return expression.operations <= operations


def formed_value(reader: object, row: int, expression: OpenExpression) -> ExactNumber | None:
    """The value the head forms on `row` for `expression` (its `OpenExpression.target`, rounded half-up at
    ``frac_digits`` decimals, however many integer places it needs), or None where it forms none: a minus written
    before a positive value, or neither its head mode's `forms` nor `_chain` over the row's context numbers
    (``reader.memory``, most recent first) gives it (see the module docstring). A negative value keeps its sign."""
    config = reader.config
    target = expression.target
    if expression.minus and target < 0:
        return None
    scaled = abs(target) * 10**config.frac_digits
    places = math.floor(scaled + Fraction(1, 2))  # half-up on the magnitude; exact where it terminates
    numbers = reader.memory.numbers
    values = fixed_point_values(numbers.digits[row], numbers.sign[row]).tolist()  # (K,)
    context = [v for v, valid in zip(values, numbers.valid[row].tolist()) if valid]
    mode = get_head_mode(config)
    if not context or not mode.reads_context:
        return None
    formed = scaled.denominator == 1 and mode.forms(context, places, config)
    if not (formed or _chain(context, expression, config)):
        return None
    magnitude = Decimal(places).scaleb(-config.frac_digits)
    return ExactNumber.parse(-magnitude if target < 0 else magnitude)


def check_expressions(reader: object, tokens: list[int], active: list[int], num_id: int) -> ExpressionCheck:
    """The check on the `active` rows whose chosen token (`tokens`, every row's) is [NUM] (`num_id`) or starts a
    number in digits (see the module docstring). Reads the text before this step's token: call it before the
    reader observes the step, and not on a row whose token was forced (`DigitNumbers.take_next`)."""
    check = ExpressionCheck()
    digit_numbers = reader.digit_numbers
    for row in active:
        token = tokens[row]
        if token != num_id and not digit_numbers.starts_number(row, token):
            continue
        text = digit_numbers.text_so_far(row)
        expression = open_expression(text)
        if expression is None:
            if token == num_id and (operand_follows(text) or digit_numbers.wrote_equation(row)):
                check.copies_only.append(row)
            continue
        percent = digit_numbers.percent_id
        if expression.percent and percent is None:  # no "%" to write after it: the value itself
            expression = expression._replace(percent=False)
        number = formed_value(reader, row, expression)
        if number is not None and not number.fits(reader.config.int_digits, reader.config.frac_digits):
            ids = digit_numbers.spell(text, f"{number}{'%' if expression.percent else ''}", token)
            if ids:
                check.text[row] = ids
                continue
            number = None
        if number is not None and number.sign < 0 and digit_numbers.text_sign:
            minus = digit_numbers.minus_id(text)
            if minus is not None:
                check.minus[row] = minus
                continue
            number = None
        if number is not None:
            check.values[row] = number
            if expression.percent:
                check.then[row] = percent
        elif token == num_id:
            check.in_digits.append(row)
    return check


def not_copies(reader: object, prediction: Prediction, rows: list[int]) -> list[int]:
    """The `rows` (`ExpressionCheck.copies_only`) where the number the head would write (``prediction.digits
    [B, P]`` and ``sign [B]``) is none of the row's numbers before it (``reader.memory``: ``[B, K, P]`` place digits,
    empty slots left out): the LM writes those in digits instead."""
    if not rows:
        return []
    numbers = reader.memory.numbers
    index = torch.tensor(rows, dtype=torch.long, device=numbers.digits.device)
    digits = prediction.digits.index_select(0, index).to(numbers.digits.device)  # (N, P)
    sign = prediction.sign.index_select(0, index).to(numbers.sign.device)  # (N,)
    same = (numbers.digits[index] == digits[:, None]).all(-1) & numbers.valid[index]  # (N, K)
    same &= numbers.sign[index] == sign[:, None]
    return [row for row, copied in zip(rows, same.any(-1).tolist()) if not copied]


def with_values(
    prediction: Prediction, values: dict[int, ExactNumber], int_digits: int, frac_digits: int
) -> Prediction:
    """`prediction` with the head's number on each row of `values` replaced by that value: its place digits
    (``digits [B, P]`` of its magnitude), sign, value, and (where the prediction has it) its exact combination row
    ``combined [B, 2 + P]`` as one number's, which needs no unwrapping (`numadapter.methods.fone.wrapping`)."""
    if not values:
        return prediction
    rows = sorted(values)
    device = prediction.sign.device
    index = torch.tensor(rows, dtype=torch.long, device=device)
    places = torch.tensor([values[r].place_digits(int_digits, frac_digits) for r in rows], dtype=torch.long,
                          device=device)  # fmt: skip
    digits = prediction.digits.index_copy(0, index, places)
    signs = torch.tensor([values[r].sign for r in rows], dtype=prediction.sign.dtype, device=device)
    sign = prediction.sign.index_copy(0, index, signs)
    exact = torch.tensor([values[r].to_float() for r in rows], dtype=prediction.values.dtype, device=device)
    combined = prediction.combined
    if combined is not None:
        head = torch.tensor([[1, 0]] * len(rows), dtype=combined.dtype, device=device)
        combined = combined.index_copy(0, index, torch.cat((head, places.to(combined.dtype)), 1))
    return replace(prediction, digits=digits, sign=sign, values=prediction.values.index_copy(0, index, exact),
                   combined=combined)  # fmt: skip
