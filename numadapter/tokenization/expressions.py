"""The arithmetic a text writes: ``48/2 = 24`` is right, ``720 * 60 = 4800`` is not.

A worked solution is scored by its last number (`numadapter.evaluation.last_number`); that number can be right by
luck and wrong steps before it go unseen. `equations_in` reads every ``expression = number`` a solution writes, as
grade-school solutions write them (``$1,234.50``, ``30%``, ``3 x 4``, ``1/2 * 50``), evaluates the expression exactly
and compares it with the number written after ``=``; `equation_score` sums that over many texts (public through
`numadapter.evaluation`; the suite records it for families of worked solutions). `open_expression` reads a text that
ends in ``expression =`` (a decode loop's text so far) for generation's expression check
(`numadapter.generation.expression_check`): the expression's value, the numbers and operations it is made of, a minus
written after the "=", a sum of shares.

Rules:

- The expression is the longest run just before ``=`` of numbers, operators (``+ - * / x × ÷``), parentheses and
  spaces that parses as arithmetic, with at least one operator between two numbers (``x = 5``, ``Answer = 72`` and
  ``-5 = -5`` are no equations). A number may carry a leading currency sign and thousands separators; ``30%`` is a
  share, its value over 100. A ``-`` glued to a word (``COVID-19 + 1``) is a hyphen, not a sign.
- The number after ``=`` may carry a sign, a currency sign, separators, ``%`` and any text after it (units, a full
  stop). ``a = <<a=b>>b`` (GSM8K's calculator notes) counts once: the outer ``=`` is followed by no number.
- Right: the exact value (rationals, no float) equals the written number, or rounds to it half-up at the decimals
  the written number shows, where it shows some (``10/3 = 3.33`` and ``10/3 = 3.3`` are right, ``7/2 = 3`` and
  ``7/2 = 4`` are not). An expression that
  cannot be evaluated (a division by zero) is written but not right.

Evaluation parses tokens with a small recursive-descent parser (numbers, ``+ - * /``, unary minus, parentheses);
nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Context, Decimal
from fractions import Fraction
from typing import NamedTuple

__all__ = ["Equation", "OpenExpression", "equation_score", "equations_in", "open_expression", "operand_follows"]

CURRENCY = "$€£"
_NUMBER = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?"
# one token of the run before "=": a number (currency sign, separators, decimals, percent), an operator, a bracket
_TOKEN = re.compile(rf"\s*(?:(?P<number>[{CURRENCY}]?{_NUMBER}%?)|(?P<op>[-+*/x×÷()])|(?P<other>\S))")
_RUN_CHARS = frozenset(f"0123456789.,{CURRENCY}%+-*/x×÷() \t")  # what the run before "=" may hold
_WRITTEN = re.compile(rf"[ \t]*(?P<sign>-?)[{CURRENCY}]?(?P<number>{_NUMBER})(?P<percent>%?)")
_OPERATORS = {"+": "+", "-": "-", "*": "*", "x": "*", "×": "*", "/": "/", "÷": "/"}
_PLACES = Context(prec=60)  # a non-terminating quotient as a Decimal: 60 significant digits
# an "=" (not part of "==", "<=", ">=", "!=") and what may follow it before its result: spaces, a currency sign and a
# minus sign (``= -``, ``= $-``: the result's sign written already)
# a number, then an operator, at the end of a text (an operand is written next): the operator right after the number
# (``25 *``, ``12-``), or after up to three words of its unit and a space (``240 miles +``; not ``x``, not a hyphen)
_OPEN_OPERAND = re.compile(
    rf"[{CURRENCY}]?{_NUMBER}%?(?:[ \t]*[-+*/x×÷]|(?:[ \t]+[A-Za-z']+){{1,3}}[ \t]+[-+*/×÷])[ \t]*[{CURRENCY}]?[ \t]*$"
)
_OPEN_EQUALS = re.compile(rf"(?<![=<>!])=[ \t]*[{CURRENCY}]?[ \t]*(?P<minus>-?)[ \t]*[{CURRENCY}]?[ \t]*$")


class Equation(NamedTuple):
    """One ``expression = number`` of a text.

    Attributes:
        expression: the expression as written (stripped), e.g. ``"25% * $80"``.
        written: the number after ``=`` (a share for ``25%``: 0.25).
        value: the expression's value (exact where it terminates, else to 60 digits); None if it cannot be
            evaluated (a division by zero).
        right: the value equals `written`, or rounds to it at the decimals `written` shows.
    """

    expression: str
    written: Decimal
    value: Decimal | None
    right: bool


class OpenExpression(NamedTuple):
    """The expression a text ends with, followed by ``=`` (`open_expression`): what the number written next is.

    Attributes:
        value: the expression's exact value.
        numbers: the magnitude of each number it is made of, as the expression reads it (``30%`` -> 0.3,
            ``$1,234.50`` -> 1234.5).
        written: the same numbers as written (``30%`` -> 30).
        operations: the operations it uses, of ``+ - * /`` (``x``, ``×`` and ``÷`` as ``*`` and ``/``; a unary minus
            as ``-``).
        minus: the text writes a minus sign after the ``=`` already (``12 - 20 = -``).
        percent: every number is a share written with ``%`` and the expression only adds and subtracts them
            (``3.7% + 2.5% =``): the result is written as a share too (``6.2%``).
    """

    value: Fraction
    numbers: tuple[Fraction, ...]
    written: tuple[Fraction, ...]
    operations: frozenset[str]
    minus: bool
    percent: bool

    @property
    def target(self) -> Fraction:
        """The number to write next, as the text shows it: the value (in percent for a sum of shares), negated
        where the minus sign is written already (then a negative target means the written sign is wrong)."""
        shown = self.value * 100 if self.percent else self.value
        return -shown if self.minus else shown


class _Unreadable(ValueError):
    """The tokens are no arithmetic expression."""


def _number(token: str) -> Fraction:
    """The value of a number token: currency sign and separators dropped, ``30%`` -> 3/10."""
    digits = token.lstrip(CURRENCY).rstrip("%").replace(",", "")
    value = Fraction(Decimal(digits))
    return value / 100 if token.endswith("%") else value


class _Parser:
    """Recursive descent over ``(kind, text)`` tokens: sums of products of (signed) numbers and brackets.

    `whole` gives None after a division by zero (the expression is still read to its end) and keeps its result as
    `value`."""

    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens, self.at, self.binary, self.undefined = tokens, 0, 0, False
        self.value: Fraction | None = None  # the result of `whole`
        self.numbers: list[str] = []  # the number tokens read, in order
        self.operations: set[str] = set()  # the operations applied, of "+ - * /"

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise _Unreadable("the expression ends early")
        self.at += 1
        return self.tokens[self.at - 1]

    def whole(self) -> Fraction | None:
        value = self.sum()
        if self.at != len(self.tokens):
            raise _Unreadable(f"unexpected {self.peek()!r}")
        self.value = None if self.undefined else value
        return self.value

    def sum(self) -> Fraction:
        value = self.product()
        while self.peek() in ("+", "-"):
            operator = self.take()[1]
            right = self.product()
            value = value + right if operator == "+" else value - right
            self.binary += 1
            self.operations.add(operator)
        return value

    def product(self) -> Fraction:
        value = self.factor()
        while self.peek() in ("*", "x", "×", "/", "÷"):
            operator = _OPERATORS[self.take()[1]]
            right = self.factor()
            self.binary += 1
            self.operations.add(operator)
            if operator == "*":
                value *= right
            elif right == 0:
                self.undefined, value = True, Fraction(0)
            else:
                value /= right
        return value

    def factor(self) -> Fraction:
        kind, text = self.take()
        if kind == "number":
            self.numbers.append(text)
            return _number(text)
        if text == "-":
            self.operations.add("-")
            return -self.factor()
        if text == "(":
            value = self.sum()
            if self.take()[1] != ")":
                raise _Unreadable("a bracket is not closed")
            return value
        raise _Unreadable(f"unexpected {text!r}")


def _tokens(run: str) -> list[tuple[str, str, int]]:
    """``(kind, text, start)`` of every token of `run` (``other`` for a character no expression holds)."""
    found = []
    for match in _TOKEN.finditer(run):
        kind = match.lastgroup or "other"
        found.append((kind, match.group(kind), match.start(kind)))
    return found


def _expression(run: str) -> tuple[str, _Parser] | None:
    """The longest suffix of `run` that parses as an expression with a binary operator: its text and its parser
    (read to the end: ``parser.whole()`` is its value)."""
    tokens = _tokens(run)
    for first in range(len(tokens)):
        part = tokens[first:]
        if any(kind == "other" for kind, _, _ in part):
            continue
        parser = _Parser([(kind, text) for kind, text, _ in part])
        try:
            parser.whole()
        except _Unreadable:
            continue
        if parser.binary:
            return run[part[0][2] :].strip(), parser
        return None  # a longer suffix without an operator: shorter ones have none either
    return None


def _decimal(value: Fraction) -> Decimal:
    """`value` as a Decimal: exact where its expansion terminates within 60 digits."""
    return _PLACES.divide(Decimal(value.numerator), Decimal(value.denominator))


def _right(value: Fraction, written: Decimal) -> bool:
    """`value` equals `written` or, where `written` shows decimals, rounds to it half-up at those decimals."""
    if value == Fraction(written):
        return True
    places = max(0, -written.as_tuple().exponent)  # type: ignore[operator]
    if not places:  # an integer is right only when exact: 7/2 = 4 is wrong
        return False
    scaled = value * 10**places
    rounded = (abs(scaled) * 2 + 1) // 2  # half-up on the magnitude
    return Fraction(rounded if scaled >= 0 else -rounded, 10**places) == Fraction(written)


def _before(text: str, equals: int) -> tuple[str, _Parser] | None:
    """The expression written just before the "=" at offset `equals` of `text` (the rules of the module docstring):
    its text and its parser (``parser.whole()``: its value, None after a division by zero), or None where no
    expression with an operator is there."""
    start = equals
    while start > 0 and text[start - 1] in _RUN_CHARS:
        start -= 1
    run = text[start:equals]
    if run.startswith("-") and start > 0 and text[start - 1].isalnum():
        run = " " + run[1:]  # a hyphen glued to a word, not a sign
    return _expression(run)


def open_expression(text: str) -> OpenExpression | None:
    """The expression `text` ends with, followed by ``=`` (spaces, a currency sign and a minus sign after it allowed:
    ``"... 48 + 24 = $"``, ``"12 - 20 = -"``), or None: no such expression (``"x ="``, ``"Answer ="``, a plain
    ``"5 ="``), a division by zero, or other text after the "=" already."""
    match = _OPEN_EQUALS.search(text)
    if match is None:
        return None
    parsed = _before(text, match.start())
    if parsed is None:
        return None
    parser = parsed[1]
    value = parser.value
    if value is None:
        return None
    shares = all(number.endswith("%") for number in parser.numbers) and parser.operations <= {"+", "-"}
    numbers = tuple(_number(number) for number in parser.numbers)
    written = tuple(_number(number.rstrip("%")) for number in parser.numbers)
    minus = bool(match.group("minus"))
    return OpenExpression(value, numbers, written, frozenset(parser.operations), minus, shares)


def operand_follows(text: str) -> bool:
    """Whether `text` ends in a number and an operator, so that the number written next is an operand of an
    expression (``"... 25 * "``, ``"She walked 240 miles + "``, ``"$12-"``), not a result: generation's
    expression check lets the head write only a copy there (`numadapter.generation.expression_check`)."""
    return _OPEN_OPERAND.search(text) is not None


def equations_in(text: str) -> list[Equation]:
    """Every ``expression = number`` written in `text`, in order (see the module docstring for the rules)."""
    found = []
    for match in re.finditer(r"(?<![=<>!])=(?!=)", text):
        after = _WRITTEN.match(text, match.end())
        if after is None:
            continue
        parsed = _before(text, match.start())
        if parsed is None:
            continue
        expression, value = parsed[0], parsed[1].value
        written = Decimal(after.group("number").replace(",", ""))
        if after.group("percent"):
            written = written.scaleb(-2)
        if after.group("sign"):
            written = -written
        right = value is not None and _right(value, written)
        found.append(Equation(expression, written, None if value is None else _decimal(value), right))
    return found


def equation_score(texts: Iterable[str]) -> dict[str, float | int]:
    """How many equations `texts` write and how many are right.

    Returns:
        ``{"equations_written", "equations_right", "equations_share"}`` (right / written, 0.0 if none) and
        ``"equations_per_text"`` (written / texts, 0.0 if no text).
    """
    texts = list(texts)
    written = right = 0
    for text in texts:
        equations = equations_in(text)
        written += len(equations)
        right += sum(e.right for e in equations)
    return {
        "equations_written": written,
        "equations_right": right,
        "equations_share": right / written if written else 0.0,
        "equations_per_text": written / len(texts) if texts else 0.0,
    }
