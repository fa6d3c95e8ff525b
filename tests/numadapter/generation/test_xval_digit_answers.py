"""xVal trained with ``xval_digit_answers`` (the LM writes answers both ways): where the LM starts a number in digits
and gives [NUM] some probability, the head writes it as [NUM] when a number comes before it; with none before, or
inside a number, the LM's digits stay."""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import build, num_first, output_rows

from numadapter.config import NumberAdapterConfig
from numadapter.generation import generate
from numadapter.generation.readout import NumberReader
from numadapter.tuner.patches import base_weight

PROMPTS = ["Convert 12.5 miles to km:", "Paris is a city in France"]  # a number before the answer; none


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("xval-digit-answers")))


def five_just_wins(model, ntok) -> int:
    """Makes '5' the LM's choice where [NUM] led, [NUM] a close second; returns the id of '5'."""
    five = ntok.tokenizer.convert_tokens_to_ids("5")
    num_first(model, ntok, PROMPTS)
    with torch.no_grad():
        base_weight(model.base_model.model.get_output_embeddings())[five] = output_rows(model)[0] * 1.001
        assert all(model(**ntok(p, return_tensors="pt")).logits[0, -1].argmax() == five for p in PROMPTS)
    return five


def test_a_number_started_in_digits_is_the_heads_where_a_number_comes_before(store):
    torch.manual_seed(0)
    model, ntok = build(store, "llama", "xval", xval_context_numbers=4, xval_scale=100.0, xval_digit_answers=0.5)
    five, num = five_just_wins(model, ntok), ntok.num_token_id
    out = generate(model, ntok, PROMPTS, max_new_tokens=4, return_dict=True)
    assert out.token_ids[0][0] == num and out.numbers[0][0] is not None, out.completions  # the head's value
    assert out.token_ids[1][0] == five and num not in out.token_ids[1], out.completions  # nothing to read: digits
    uncached = generate(model, ntok, PROMPTS, max_new_tokens=4, return_dict=True, use_cache=False)
    assert uncached.token_ids == out.token_ids
    model.peft_config["default"].xval_digit_answers = 0.0  # trained with every answer a [NUM]: the LM's choice stays
    out = generate(model, ntok, PROMPTS, max_new_tokens=4, return_dict=True)
    assert [ids[0] for ids in out.token_ids] == [five, five], out.completions


def test_a_digit_after_a_digit_continues_its_number():
    digits = list(range(10, 20))
    config = NumberAdapterConfig(encoding="xval", xval_digit_answers=0.5, digit_token_ids=digits, xval_scale=100.0)
    reader = NumberReader(config, head=None)
    zeros = torch.zeros(2, 3, dtype=torch.long)
    reader.begin({"num_mask": zeros, "num_digits": torch.zeros(2, 3, 6, dtype=torch.long), "num_sign": zeros + 1})
    assert reader.head_first and reader.starts_number(0, 15) and not reader.starts_number(0, 3)
    reader.observe([15, 3], [0, 1])  # row 0 wrote "5", row 1 a word
    assert not reader.starts_number(0, 12) and reader.starts_number(1, 12)
    reader.observe([4, 12], [0, 1])  # row 0: "5." (a point after a digit), row 1 "2"
    assert not reader.starts_number(0, 12) and not reader.starts_number(1, 12)
    reader.observe([4, 4], [0, 1])
    assert reader.starts_number(0, 12)  # two tokens since the last digit: a new number
    reader.replace_last([1], [17, 17])  # the loop chose row 1's token again: a digit
    assert not reader.starts_number(1, 12)
