"""`numadapter.tokenization.expressions`: the equations a text writes and whether each is right (`equations_in`,
`equation_score`, public through `numadapter.evaluation`), and the value of the expression a text ends with before
"=" (`open_expression`, generation's expression check)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from numadapter.evaluation import equation_score, equations_in
from numadapter.tokenization.expressions import open_expression, operand_follows

RIGHT = ["48/2 = 24", "720 * 60 = 43,200", "1/2 * 50 = 25", "25% * $80 = $20", "$1,200 + $300 = $1,500",
         "10/3 = 3.33", "10/3 = 3.3", "3 * 12 * 5 = 180", "6 x 7 = 42", "(3 + 4) * 2 = 14", "3 - 10 = -7",
         "$12.50 * 4 = $50.00", "90 ÷ 4 = 22.5"]  # fmt: skip
WRONG = [
    "40+8=58",
    "720*60=4800",
    "1/2*50=10",
    "7/2 = 3",
    "7/2 = 4",
    "10/3 = 3.4",
    "3 * 12 * 5 = 170",
    "$80 - 25% = $60",
]
NOT_EQUATIONS = ["x = 5", "Answer = 72", "-5 = -5", "(5) = 5", "3 + 4 = seven", "a == 3 + 4", "5 + = 5"]


@pytest.mark.parametrize("written", RIGHT)
def test_right_equations_are_read_and_right(written):
    (found,) = equations_in(written)
    assert found.right and found.value is not None
    assert found.expression == written.split("=")[0].strip()


@pytest.mark.parametrize("written", WRONG)
def test_wrong_equations_are_read_and_wrong(written):
    (found,) = equations_in(written)
    assert not found.right


@pytest.mark.parametrize("written", NOT_EQUATIONS)
def test_a_name_or_a_lone_number_before_equals_is_no_equation(written):
    assert equations_in(written) == []


def test_the_checker_reads_values_shares_and_prose_around_the_equations():
    found = equations_in("She pays 25% * $80 = $20 for it, then 1,000 + 2.5 = 1,002.50 units.\nAlso 5/0 = 3.")
    assert [e.expression for e in found] == ["25% * $80", "1,000 + 2.5", "5/0"]
    assert [e.written for e in found] == [Decimal(20), Decimal("1002.5"), Decimal(3)]
    assert found[0].value == Decimal(20) and found[1].value == Decimal("1002.5")
    assert found[2].value is None and not found[2].right  # a division by zero is written, never right
    assert [e.right for e in equations_in("1/4 = 25% and 1/3 = 33.33% and 1/3 = 30%")] == [True, True, False]
    # words and dates before the expression are not part of it; a hyphen glued to a word is no sign
    assert [e.expression for e in equations_in("In 2023 box 3 x 4 = 12, COVID-19 + 1 = 20")] == ["3 x 4", "19 + 1"]
    # GSM8K's calculator note counts once: the outer "=" is followed by no number
    assert len(equations_in("Natalia sold 48/2 = <<48/2=24>>24 clips.")) == 1


def test_equation_score_counts_written_right_and_per_text():
    score = equation_score(["48/2 = 24, 40+8=58", "7 * 6 = 42 and 2 + 2 = 4.", "no equation here"])
    assert score == {"equations_written": 4, "equations_right": 3, "equations_share": 0.75,
                     "equations_per_text": 4 / 3}  # fmt: skip
    assert equation_score([]) == {"equations_written": 0, "equations_right": 0, "equations_share": 0.0,
                                  "equations_per_text": 0.0}  # fmt: skip


@pytest.mark.parametrize(
    "text,value",
    [
        ("48 + 24 =", 72), ("so 48 + 24 = $", 72), ("1/2 * 50 =", 25), ("25% * $80 = ", 20), ("7 x 8 =", 56),
        ("(3 + 4) * 2 =", 14), ("10 / 4 =", Fraction(5, 2)), ("x =", None), ("Answer =", None), ("5 =", None),
        ("48 + 24 = 72", None), ("10 / 0 =", None), ("a == 3 + 4", None), ("3 + 4 =>", None),
    ],
)  # fmt: skip
def test_the_value_of_the_expression_a_text_ends_with(text, value):
    found = open_expression(text)
    assert (None if found is None else found.value) == value


def test_open_expression_reads_numbers_operations_a_written_minus_and_shares():
    found = open_expression("so 3 x $1,200.50 - 7 = -")
    assert found.numbers == (Fraction(3), Fraction("1200.5"), Fraction(7)) and found.operations == {"*", "-"}
    assert found.minus and found.value == Fraction("3594.5") and found.target == Fraction("-3594.5")
    assert not found.percent
    shares = open_expression("3.7% + 2.5% = ")
    assert shares.percent and shares.value == Fraction("0.062") and shares.target == Fraction("6.2")
    assert shares.written == (Fraction("3.7"), Fraction("2.5"))
    assert shares.numbers == (Fraction("0.037"), Fraction("0.025"))
    assert not open_expression("25% x 80 = ").percent and open_expression("25% x 80 = ").target == 20
    assert open_expression("-5 + 3 =").operations == {"+", "-"}  # the unary minus is a subtraction too
    for text in ("x = -", "5 = -", "4 / 0 = ", "2 + 2 = -1"):
        assert open_expression(text) is None, text


@pytest.mark.parametrize(
    ("text", "follows"),
    [
        ("In 25 days it makes 25 * ", True),
        ("She walked 240 miles + ", True),  # the number's unit between it and the operator
        ("It costs $12-", True),
        ("3 x ", True),
        ("half of it: 1/", True),
        ("costs $4.50 + $", True),  # the operand's currency sign written already
        ("is 30% * ", True),
        ("The COVID-", False),  # a hyphen glued to a word
        ("she has 3 apples", False),
        ("so 5 + 3 = ", False),  # a result follows, not an operand
        ("the box x ", False),  # "x" after a word is no operator
        ("a - ", False),  # no number before it
    ],
)
def test_operand_follows_a_number_and_an_operator(text, follows):
    assert operand_follows(text) is follows
