"""Answers written as equations (whole worked solutions): in answers mode only an equation's result, the number right
after "=", is an answer the head may write as [NUM]; the operands and the numbers restated in prose stay digits, as
context. An answer without "=" keeps every number an answer."""

from __future__ import annotations

import pytest

from numadapter.config import NumberAdapterConfig
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer
from numadapter.tokenization.equations import EquationAnswers, is_result

# the default rules of answers mode (products and quotients, copies left to the LM); every formed answer a [NUM]
DEFAULTS = {
    "encoding": "fone",
    "fone_numbers": "answers",
    "fone_digit_answers": 0.0,
    "int_digits": 6,
    "frac_digits": 2,
}


def make(tmp_path, **settings) -> NumberTokenizer:
    tok = toy.build_tokenizer("llama3", tmp_path / "tok")
    return NumberTokenizer(tok, NumberAdapterConfig(**{**DEFAULTS, **settings}))


def written(ntok: NumberTokenizer, prompt: str, completion: str) -> list[str]:
    """The numbers the tokenizer writes as [NUM] in prompt + completion (the completion the answer)."""
    return ntok(prompt + completion, answer_start=len(prompt))["number_texts"]


def test_a_worked_solution_writes_only_the_results_as_num(tmp_path):
    ntok = make(tmp_path)
    prompt = "Question: 3 boxes of 40 clips, and 8 more clips. She sells half. How many are left?\nAnswer:"
    # 120 (3 * 40) and 128 (120 + 8) restated in prose, 2 as an operand: numbers the head could form from the ones
    # before them, but no equation's result, so digits; so are the copies of numbers in digits (40, 3, 8, 128)
    completion = (
        " She has 120 clips in boxes, 128 in all.\nShe sells 128 / 2 = 64.\nShe keeps 128 - 64 = 64 clips.\n#### 64"
    )
    # 64 is a result; its repetitions (an operand, a result equal to it, the final answer) repeat a [NUM], whose
    # digits the LM cannot copy, so they are the head's copies
    assert written(ntok, prompt, completion) == ["64", "64", "64", "64"]


def test_an_expression_after_equals_is_not_a_result_and_a_chain_ends_in_one(tmp_path):
    ntok = make(tmp_path)
    prompt = "Question: 3 rows of 4 seats, 5 rooms.\nAnswer:"
    # "= 3 * 4 = 12": 3 is the first operand of the expression after "=", 12 its result; "x 5" multiplies
    completion = " Seats per room = 3 * 4 = 12.\nIn all 12 x 5 = 60.\n#### 60"
    # the operand 12 and the final 60 repeat [NUM]s: the head's copies
    assert written(ntok, prompt, completion) == ["12", "12", "60", "60"]


def test_currency_and_a_share_between_equals_and_its_result(tmp_path):
    ntok = make(tmp_path)
    prompt = "Question: a coat costs $80 and is 25% off.\nAnswer:"
    completion = " The discount is 25% * $80 = $20.\nShe pays $80 - $20 = $60.\n#### 60"
    assert written(ntok, prompt, completion) == ["20", "20", "60", "60"]  # with the copies of the [NUM]s


def test_an_answer_without_equals_keeps_every_number_an_answer(tmp_path):
    ntok = make(tmp_path)
    prompt = "Two numbers, 12 and 30:"
    # no "=" in the completion: both numbers are answers, as every prompt/completion pair had them
    assert written(ntok, prompt, " 42 together, 18 apart") == ["42", "18"]
    # "=" at the end of the prompt: the completion's number is its result, and a later "=" does not change that
    # (the operand 357 repeats the [NUM]: the head's copy; 345 repeats the prompt's digits: the LM's)
    assert written(ntok, "In 2024: 12 + 345 =", " 357, so 357 - 12 = 345") == ["357", "357"]


def test_comparisons_are_no_equations(tmp_path):
    ntok = make(tmp_path)
    # "<=" and "==" hold no "=" sign of an equation: the completion is read as one without equations
    assert written(ntok, "Two numbers, 12 and 30:", " 42 <= 50 and 18 == 18") == ["42", "18", "18"]


def test_text_data_counts_results_in_the_whole_text(tmp_path):
    ntok = make(tmp_path)
    text = "Question: 3 boxes of 4 pens, and she gives away 5.\nAnswer: She has 12 pens. 12 - 5 = 7.\n#### 7"
    # 12 = 3 * 4 restated in prose: digits; the final 7 repeats the [NUM] 7: the head's copy
    assert ntok(text, answer_start=0)["number_texts"] == ["7", "7"]


@pytest.mark.parametrize(
    ("text", "number", "result"),
    [
        ("a = 5 apples", "5", True),
        ("a =\u00a0$5", "5", True),
        ("a = 5 * 2 = 10", "5", False),
        ("a = 5 x 2", "5", False),
        ("a = 5 xylophones", "5", True),
        ("a == 5", "5", False),
        ("a <= 5", "5", False),
        ("a => 5", "5", False),
        ("a = 5. 2 more", "5", True),
        ("5 = a", "5", False),
    ],
)
def test_is_result(text, number, result):
    start = text.index(number)
    assert is_result(text, start, start + len(number)) is result


def test_equation_answers_reads_each_range_on_its_own():
    text = "Q: 1 + 2 = 3. A: 4 and 5. B: 6 + 7 = 13, and 9."
    first, second = text.index("A:"), text.index("B:")
    ranges = ((first, second), (second, len(text)))
    is_answer = EquationAnswers(text, ranges)
    found = [n for n in ("3", "4", "5", "13", "9") if is_answer(text.index(n), text.index(n) + len(n))]
    # the first range has no "=", so all its numbers; the second has one, so only its result; 3 is no answer
    assert found == ["4", "5", "13"]
    assert not EquationAnswers(text, None)(text.index("4"), text.index("4") + 1)
