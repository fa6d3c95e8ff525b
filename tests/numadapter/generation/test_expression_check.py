"""Generation's expression check (``fone_expression_check``): after "expression =" the number written is the
expression's value, through the head where it forms it, else in the LM's digits; never a head number that differs."""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.answers_cases import SUMS_ONLY
from helpers.generation_cases import copy_latest_number, num_first, number_writer, output_rows, sum_latest_two

from numadapter.config import NumberAdapterConfig
from numadapter.evaluation import equations_in
from numadapter.generation import generate
from numadapter.generation.digit_numbers import DigitNumbers
from numadapter.generation.expression_check import check_expressions, checks_expressions, not_copies
from numadapter.generation.readout import NumberReader
from numadapter.methods.base import Prediction
from numadapter.numbers import ExactNumber
from numadapter.tuner.patches import base_weight

PROMPTS = ["What is 7 + 8 =", "Then 9 - 4 =", "What is 7 * 8 ="]
NUM = 99  # the [NUM] id of a fake vocabulary whose other ids are one character each


def _row(span, surface: str, after: str = ""):
    """`NumberTokenizer._context_row` for int_digits=4, frac_digits=1: None beyond the range; a share written with
    "%" over 100 where that fits."""
    exact = span.exact
    if after.startswith("%") and ExactNumber.parse(exact.to_decimal() / 100).fits(4, 1):
        exact = ExactNumber.parse(exact.to_decimal() / 100)
    if not exact.fits(4, 1):
        return None
    return tuple(exact.place_digits(4, 1)), exact.sign, exact.to_float()


MINUS = {"-": ord("-")}  # the fake vocabulary's "-" (it has no " -")


def _reader(
    prompt: str, written: str, products: bool, text_sign: bool = True, marks: dict | None = None, spells: bool = False
) -> NumberReader:
    """A reader (no head: the check reads only the text and the context) that has followed `prompt` and the
    characters of `written`, a [NUM] written as '#' (the head's number 24 there); `marks`: the "-" / " -" / "%"
    ids; `spells`: the fake vocabulary's encoder is given (a value past int_digits may be written as text)."""
    config = NumberAdapterConfig(
        encoding="fone", fone_numbers="answers", int_digits=4, frac_digits=1, fone_context_products=products,
        sign_policy="text" if text_sign else "feature",
    )  # fmt: skip
    reader = NumberReader(config, None)
    prompt_ids = [list(map(ord, prompt))]
    encode = (lambda text: list(map(ord, text))) if spells else None
    decode = lambda ids: "".join(map(chr, ids))  # noqa: E731
    digit_numbers = DigitNumbers(1, decode, _row, text_sign, NUM, prompt_ids, marks, encode)
    empty = {"num_mask": torch.zeros(1, 1, dtype=torch.long), "num_digits": torch.zeros(1, 1, 5, dtype=torch.long)}
    reader.begin(empty, digit_numbers)
    for char in written:
        token = NUM if char == "#" else ord(char)
        reader.observe([token], [0])
        if token == NUM:
            digits = torch.tensor([ExactNumber.parse(24).place_digits(4, 1)])
            reader.memory.push([0], digits, torch.ones(1, dtype=torch.long))
            digit_numbers.wrote({0: "24"})
    return reader


@pytest.mark.parametrize("token", [NUM, ord("5"), ord(" ")])
def test_a_formable_expression_is_the_heads_whatever_the_lm_starts(token):
    """A [NUM], or a digit starting a number (taken over), after "48 + # =" (# the head's 24) is 72 from the head;
    a token that starts no number leaves the step alone."""
    reader = _reader("Q: a sum.", "so 48 + # = ", products=False)
    assert reader.digit_numbers.text_so_far(0) == "Q: a sum.so 48 + 24 = "
    check = check_expressions(reader, [token], [0], NUM)
    if token == ord(" "):
        assert not check.values and not check.in_digits
    else:
        assert check.values == {0: ExactNumber.parse(72)} and not check.in_digits


def test_an_expression_the_head_does_not_form_is_left_to_the_lms_digits():
    """Without products the head forms no 7 x 8: a [NUM] there is written in digits; a digit the LM starts stays."""
    reader = _reader("", "7 x 8 = ", products=False)
    assert check_expressions(reader, [NUM], [0], NUM).in_digits == [0]
    assert not check_expressions(reader, [ord("5")], [0], NUM).values
    with_products = _reader("", "7 x 8 = ", products=True)
    assert check_expressions(with_products, [NUM], [0], NUM).values == {0: ExactNumber.parse(56)}
    # products in a chain without products; past int_digits=4; a negative value with no minus token to write it;
    # a minus the LM wrote before a positive value
    for written, products in (("2 x 3 x 4 = ", False), ("9000 + 2000 = ", True), ("3 - 8 = ", True),
                              ("8 - 3 = -", True)):  # fmt: skip
        check = check_expressions(_reader("", written, products=products), [NUM], [0], NUM)
        assert check.in_digits == [0] and not check.values and not check.minus, written


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("2 x 3 x 4 = ", "24"),  # two of the head's products in a row
        ("12 + 3 - 5 x 2 = ", "5"),
        ("10 / 3 = ", "3.3"),  # past frac_digits=1: rounded half-up, as a text writes it
        ("7 / 4 = ", "1.8"),
        ("13 / 8 = $", "1.6"),
        ("50% x 30 = ", "15"),  # 50% is 0.5 in the context (over 100 where that fits the places)
        ("20% x 7.5 + 1 = ", "2.5"),
    ],
)
def test_chains_rounded_quotients_and_shares_are_the_heads(written, value):
    check = check_expressions(_reader("", written, products=True), [NUM], [0], NUM)
    assert check.values == {0: ExactNumber.parse(value)} and not check.in_digits, written


def test_a_sum_of_shares_is_written_as_a_share_then_its_percent_sign():
    """With a "%" token the check writes 6.2 and then "%" (`ExpressionCheck.then`); without one, the value 0.062
    (rounded at frac_digits=1: 0.1); either way the equation reads right."""
    check = check_expressions(_reader("", "3.7% + 2.5% = ", True, marks={"%": ord("%")}), [NUM], [0], NUM)
    assert check.values == {0: ExactNumber.parse("6.2")} and check.then == {0: ord("%")}
    assert [e.right for e in equations_in("3.7% + 2.5% = 6.2%")] == [True]
    plain = check_expressions(_reader("", "3.7% + 2.5% = ", True), [NUM], [0], NUM)
    assert plain.values == {0: ExactNumber.parse("0.1")} and not plain.then
    assert [e.right for e in equations_in("3.7% + 2.5% = 0.1")] == [True]


def test_a_negative_value_is_written_with_its_sign():
    """sign_policy="text": the check writes the minus token first, then the magnitude after it; "feature": the
    [NUM] carries the sign."""
    check = check_expressions(_reader("", "3 - 8 = ", True, marks=MINUS), [NUM], [0], NUM)
    assert check.minus == {0: ord("-")} and not check.values and not check.in_digits
    check = check_expressions(_reader("", "3 - 8 = ", True, marks=MINUS), [ord("4")], [0], NUM)
    assert check.minus == {0: ord("-")}  # a digit the LM starts too
    after = check_expressions(_reader("", "3 - 8 = -", True, marks=MINUS), [NUM], [0], NUM)
    assert after.values == {0: ExactNumber.parse(5)} and not after.minus
    featured = check_expressions(_reader("", "3 - 8 = ", True, text_sign=False), [NUM], [0], NUM)
    assert featured.values == {0: ExactNumber.parse(-5)} and not featured.minus


@pytest.mark.parametrize(
    ("written", "token", "text"),
    [
        ("9000 + 2000 = ", NUM, "11000"),  # after a space: none added
        ("9000 + 2000 =", NUM, " 11000"),  # a [NUM] right after "=": the space a text has there
        ("9000 + 2000 = ", ord("5"), "11000"),  # a digit the LM starts
        ("90 x 900 = $", NUM, "81000"),
        ("3 - 9000 x 2 = ", NUM, "-17997"),
        ("9999 + 0.5 = ", NUM, "9999.5"),  # fits: a [NUM]
    ],
)
def test_a_value_past_int_digits_is_written_as_text(written, token, text):
    """int_digits=4: the value the head forms but cannot hold as a [NUM] is the text's tokens, the first at this step
    (`ExpressionCheck.text`); a value that fits stays the head's [NUM]."""
    check = check_expressions(_reader("", written, products=True, marks=MINUS, spells=True), [token], [0], NUM)
    if ExactNumber.parse(text).fits(4, 1):
        assert check.values == {0: ExactNumber.parse(text)} and not check.text
    else:
        assert check.text == {0: list(map(ord, text))} and not check.values and not check.in_digits
        assert not check.minus, "a negative value past the places is one text, its sign included"
        assert [e.right for e in equations_in(written + text)] == [True]


def test_forced_tokens_queue_one_a_step():
    """`DigitNumbers.write_next` queues tokens; `take_next` hands out one per step per row, then none."""
    numbers = DigitNumbers(2, lambda ids: "".join(map(chr, ids)), _row, True, NUM)
    numbers.write_next(0, 1, 2)
    numbers.write_next(0, 3)
    numbers.write_next(1)
    assert [numbers.take_next([0, 1]) for _ in range(4)] == [{0: 1}, {0: 2}, {0: 3}, {}]


def test_the_expression_may_start_in_the_prompt():
    reader = _reader("What is 7 + 8 =", "", products=False)
    for char in "What is 7 + 8 =":  # the prompt's numbers are context (the loop reads them from the prompt batch)
        if char.isdigit():
            digits = torch.tensor([ExactNumber.parse(int(char)).place_digits(4, 1)])
            reader.memory.push([0], digits, torch.ones(1, dtype=torch.long))
    assert check_expressions(reader, [NUM], [0], NUM).values == {0: ExactNumber.parse(15)}


@pytest.fixture(scope="module")
def copier(tmp_path_factory):
    """A random llama whose context head writes the latest number before it (so it writes 8 for "7 + 8 =")."""
    store = Store(str(tmp_path_factory.mktemp("expressions")))
    model, ntok = number_writer(store, copy_latest_number, False, **{**SUMS_ONLY, "fone_expression_check": True})
    num_first(model, ntok, PROMPTS)  # [NUM] right after each prompt's "="
    return model, ntok


def _first_head_number(out, row: int):
    return next((n for n, c in zip(out.numbers[row], out.confidences[row]) if c is not None), None)


def test_generation_writes_the_expressions_value_not_the_heads_choice(copier):
    """Through `generate`: the copier's head would write the prompt's latest number (8) after "7 + 8 ="; with the
    check the [NUM] holds 15, every equation of the text is right, and the check off gives the copy back."""
    model, ntok = copier
    prompts = PROMPTS[:2]
    config = model.peft_config["default"]
    assert config.fone_expression_check
    out = generate(model, ntok, prompts, max_new_tokens=4, return_dict=True)
    first = [_first_head_number(out, row) for row in range(2)]
    assert [n and float(n.to_float()) for n in first] == [15.0, 5.0], out.completions
    for prompt, completion in zip(prompts, out.completions):
        assert all(e.right for e in equations_in(prompt + completion)), completion
    config.fone_expression_check = ntok.config.fone_expression_check = False
    try:
        off = generate(model, ntok, prompts, max_new_tokens=4, return_dict=True)
    finally:
        config.fone_expression_check = ntok.config.fone_expression_check = True
    assert off.token_ids[0][0] == ntok.num_token_id and float(_first_head_number(off, 0).to_float()) == 8.0


def test_generation_writes_an_unformable_expression_in_digits(copier):
    """The copier forms no product (products off): after "7 * 8 =" the LM's [NUM] is written in digits, where the
    check off lets the head write its copy (8)."""
    model, ntok = copier
    out = generate(model, ntok, ["What is 7 * 8 ="], max_new_tokens=3, return_dict=True)
    first = out.token_ids[0][0]
    assert first != ntok.num_token_id and ntok.tokenizer.decode([first]).strip().isdigit(), out.completions
    config = model.peft_config["default"]
    config.fone_expression_check = ntok.config.fone_expression_check = False
    try:
        off = generate(model, ntok, ["What is 7 * 8 ="], max_new_tokens=3, return_dict=True)
    finally:
        config.fone_expression_check = ntok.config.fone_expression_check = True
    assert off.token_ids[0][0] == ntok.num_token_id and float(_first_head_number(off, 0).to_float()) == 8.0


def test_a_head_the_trainer_left_out_writes_no_expression_either():
    """fone_head_in_use=False (the trainer chose LoRA on digits): the check writes no [NUM]: every number is the
    LM's."""
    reader = _reader("", "7 + 8 = ", products=False)
    assert check_expressions(reader, [NUM], [0], NUM).values
    reader.config.fone_head_in_use = False
    assert not checks_expressions(reader)
    reader.config.fone_head_in_use, reader.config.fone_expression_check = True, False
    assert not checks_expressions(reader)


def test_every_num_of_a_step_checked_with_copies_left_to_the_lm(copier):
    """fone_head_copies=False (the default) and a step whose every [NUM] the check wrote: the remaining gates run on
    no row (they failed on an empty row list, a float tensor put into a bool mask)."""
    model, ntok = copier
    configs = (model.peft_config["default"], ntok.config)
    for config in configs:
        config.fone_head_copies = False
    try:
        out = generate(model, ntok, PROMPTS[:1], max_new_tokens=2, return_dict=True)
    finally:
        for config in configs:
            config.fone_head_copies = True
    assert float(_first_head_number(out, 0).to_float()) == 15.0, out.completions


def test_generation_writes_a_share_then_its_percent_sign(tmp_path):
    """Through `generate`: after "25% + 5% =" the [NUM] holds 30 and the next token is "%", whatever the LM chose."""
    store = Store(str(tmp_path))
    model, ntok = number_writer(store, copy_latest_number, False, **{**SUMS_ONLY, "fone_expression_check": True})
    num_first(model, ntok, ["Then 25% + 5% ="])
    out = generate(model, ntok, ["Then 25% + 5% ="], max_new_tokens=3, return_dict=True)
    percent = ntok.tokenizer.encode("%", add_special_tokens=False)
    assert out.token_ids[0][:2] == [ntok.num_token_id, *percent], out.completions
    assert out.completions[0].lstrip().startswith("30%"), out.completions
    assert [e.right for e in equations_in("Then 25% + 5% =" + out.completions[0])] == [True], out.completions


def test_generation_writes_a_value_past_int_digits_as_text(tmp_path):
    """Through `generate` with int_digits=4: after "9000 + 2000 =" the check writes " 11000" in the tokenizer's own
    tokens, one a step, whatever the LM chooses at the later steps; the equation is right."""
    store = Store(str(tmp_path))
    settings = {**SUMS_ONLY, "fone_expression_check": True, "int_digits": 4}
    model, ntok = number_writer(store, copy_latest_number, False, **settings)
    prompt = "Then 9000 + 2000 ="
    num_first(model, ntok, [prompt])
    text = ntok.tokenizer.encode(" 11000", add_special_tokens=False)
    out = generate(model, ntok, [prompt], max_new_tokens=len(text) + 1, return_dict=True)
    assert out.token_ids[0][: len(text)] == text, out.completions
    assert out.completions[0].startswith(" 11000"), out.completions
    assert [e.right for e in equations_in(prompt + out.completions[0])] == [True], out.completions


def test_the_token_after_a_value_written_as_text_does_not_continue_it(tmp_path):
    """Through `generate`, with an LM whose first choice is the digit '5' wherever it would write [NUM]: the check
    writes "11000" (the LM's '5' started it), and the next token is not '5' (that would write 110005, a wrong
    equation) but the LM's best token that does not start with a digit."""
    store = Store(str(tmp_path))
    settings = {**SUMS_ONLY, "fone_expression_check": True, "int_digits": 4}
    model, ntok = number_writer(store, copy_latest_number, False, **settings)
    prompt = "Then 9000 + 2000 ="
    num_first(model, ntok, [prompt])
    five = ntok.tokenizer.convert_tokens_to_ids("5")
    with torch.no_grad():
        base_weight(model.base_model.model.get_output_embeddings())[five] = output_rows(model)[0] * 1.05
    text = ntok.tokenizer.encode("11000", add_special_tokens=False)
    out = generate(model, ntok, [prompt], max_new_tokens=len(text) + 3, return_dict=True)
    ids = out.token_ids[0]
    assert ids[: len(text)] == text and five in ids[len(text) + 1 :], out.completions  # '5' is still its choice
    assert ids[len(text)] != five and not ntok.tokenizer.decode([ids[len(text)]])[:1].isdigit(), out.completions
    assert equations_in(prompt + out.completions[0])[0].right, out.completions


def test_a_closing_value_marks_the_step_after_its_last_token():
    """`write_next(closes=True)`: `take_closed` names the row at the step after the queue's last token, once."""
    numbers = DigitNumbers(1, lambda ids: "".join(map(chr, ids)), _row, True, NUM)
    numbers.write_next(0, ord("1"), ord("2"), closes=True)
    steps = []
    for _ in range(4):
        steps.append((numbers.take_closed([0]), numbers.take_next([0])))
    assert steps == [([], {0: ord("1")}), ([], {0: ord("2")}), ([0], {}), ([], {})]
    assert numbers.continues(ord("7")) and not numbers.continues(ord(" ")) and not numbers.continues(NUM)


@pytest.mark.parametrize("sign_policy", ["text", "feature"])
def test_generation_writes_a_negative_value_with_its_sign(tmp_path, sign_policy):
    """Through `generate`: after "3 - 8 =", sign_policy="text" writes " -" where the LM chose [NUM], then the head's
    5 (the tokenizer's own split of "= -5"); "feature" writes one [NUM] of -5. Either way the equation is right."""
    store = Store(str(tmp_path))
    settings = {**SUMS_ONLY, "fone_expression_check": True, "sign_policy": sign_policy}
    model, ntok = number_writer(store, copy_latest_number, False, **settings)
    num_first(model, ntok, ["Then 3 - 8 =", "Then 3 - 8 = -"])
    out = generate(model, ntok, ["Then 3 - 8 ="], max_new_tokens=2, return_dict=True)
    if sign_policy == "text":
        minus = ntok.tokenizer.encode(" -", add_special_tokens=False)
        assert out.token_ids[0][:2] == [*minus, ntok.num_token_id], out.completions
    else:
        assert out.token_ids[0][0] == ntok.num_token_id, out.completions
    assert out.completions[0].lstrip().startswith("-5"), out.completions
    assert [e.right for e in equations_in("Then 3 - 8 =" + out.completions[0])] == [True], out.completions


def _head_number(value: int) -> Prediction:
    """A one-row head prediction that writes `value` (int_digits=4, frac_digits=1)."""
    digits = torch.tensor([ExactNumber.parse(value).place_digits(4, 1)])
    return Prediction(digits, torch.ones(1, dtype=torch.long), torch.tensor([float(value)], dtype=torch.float64))


def test_an_operand_is_a_copy_of_a_number_before_it_or_the_lms_digits():
    """After "48 + # *" (# the head's 24) a [NUM] is an operand: the head may write 48 or 24 there (copies), not 72
    (their sum) nor 7 (no number before it); a digit the LM starts, or a [NUM] after no operator, is no operand; after
    an equation the model wrote, every [NUM] not after "expression =" is a copy or the LM's."""
    reader = _reader("Q: 48 pens.", "so 48 + # * ", products=False)
    check = check_expressions(reader, [NUM], [0], NUM)
    assert check.copies_only == [0] and not check.values and not check.in_digits
    assert [not_copies(reader, _head_number(value), [0]) for value in (48, 24, 72, 7)] == [[], [], [0], [0]]
    assert not check_expressions(reader, [ord("5")], [0], NUM).copies_only
    prose = _reader("Q: 48 pens.", "so 48 pens and ", products=False)
    assert not check_expressions(prose, [NUM], [0], NUM).copies_only
    # after an equation of its own (not one of the prompt's), any [NUM] but a result
    after = _reader("Q: 48 pens.", "so 48 + 2 = 50. She has ", products=False)
    assert check_expressions(after, [NUM], [0], NUM).copies_only == [0]
    assert not check_expressions(_reader("Q: 48 + 2 = 50.", "She has ", products=False), [NUM], [0], NUM).copies_only


@pytest.mark.parametrize(("choose", "head_writes"), [(copy_latest_number, True), (sum_latest_two, False)])
def test_generation_writes_an_operand_only_as_a_copy(tmp_path, choose, head_writes):
    """Through `generate`, after "3 apples and 8 pears, so 3 +": a head that copies the latest number writes the
    operand (3); one that sums the two latest would write 11, a number the text never had, so the LM writes the
    operand in digits instead (with the check off, the head's 11)."""
    store = Store(str(tmp_path))
    model, ntok = number_writer(store, choose, False, **{**SUMS_ONLY, "fone_expression_check": True})
    prompt = "She has 3 apples and 8 pears, so 3 +"
    num_first(model, ntok, [prompt])
    out = generate(model, ntok, [prompt], max_new_tokens=2, return_dict=True)
    first = out.token_ids[0][0]
    if head_writes:
        assert first == ntok.num_token_id and float(_first_head_number(out, 0).to_float()) == 3.0, out.completions
    else:
        assert first != ntok.num_token_id and ntok.tokenizer.decode([first]).strip().isdigit(), out.completions
        config = model.peft_config["default"]
        config.fone_expression_check = ntok.config.fone_expression_check = False
        try:
            off = generate(model, ntok, [prompt], max_new_tokens=2, return_dict=True)
        finally:
            config.fone_expression_check = ntok.config.fone_expression_check = True
        assert off.token_ids[0][0] == ntok.num_token_id and float(_first_head_number(off, 0).to_float()) == 11.0
