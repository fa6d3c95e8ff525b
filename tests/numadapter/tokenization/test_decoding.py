"""`NumberTokenizer.decode` of adjacent numbers (`numadapter/tokenization/decoding.py`, issue 28 item 4).

A model can generate [NUM][NUM]. Spliced side by side, "12" and "34" read back as the one number 1234, so the decoded
text would re-encode to other numbers than were generated: decode puts a space between two adjacent numbers whose
texts would merge, and nothing where they stay apart anyway (digits of two scripts), which keeps
``decode(ntok(text)) == text``.
"""

from __future__ import annotations

import pytest

from numadapter.config import NumberAdapterConfig
from numadapter.numbers import ExactNumber
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer


@pytest.fixture(scope="module", params=["text", "feature"])
def ntok(request, tmp_path_factory) -> NumberTokenizer:
    config = NumberAdapterConfig(
        encoding="fone", fone_numbers="all", int_digits=6, frac_digits=3, sign_policy=request.param
    )
    return NumberTokenizer(toy.build_tokenizer("digits", tmp_path_factory.mktemp("decoding")), config)


def values(ntok: NumberTokenizer, text: str) -> list[ExactNumber]:
    """The numbers `ntok` encodes `text` to, read from its place digits and signs (one per [NUM])."""
    enc = ntok(text, add_special_tokens=False)
    rows = [t for t, i in enumerate(enc["input_ids"]) if i == ntok.num_token_id]
    config = ntok.config
    return [
        ExactNumber.from_place_digits(enc["num_digits"][t], config.int_digits, config.frac_digits, enc["num_sign"][t])
        for t in rows
    ]


@pytest.mark.parametrize(
    "texts,expected",
    [
        (["12", "34"], ["12", "34"]),
        (["1.5", "0.25"], ["1.5", "0.25"]),
        (["7", "8", "9"], ["7", "8", "9"]),
        (["12", "-34"], ["12", "-34"]),
    ],
)
def test_adjacent_numbers_decode_to_text_that_re_encodes_to_them(ntok, texts, expected):
    before = ntok("What is", add_special_tokens=False)["input_ids"]
    after = ntok(" so", add_special_tokens=False)["input_ids"]
    ids = before + [ntok.num_token_id] * len(texts) + after  # as a model would generate them
    text = ntok.decode(ids, number_texts=texts)
    assert text.startswith("What is") and text.endswith(" so")
    got = values(ntok, text)
    if ntok.config.sign_policy == "text":  # the minus is a text token, [NUM] carries |x|
        expected = [e.lstrip("-") for e in expected]
    assert got == [ExactNumber.parse(e) for e in expected]


def test_numbers_that_stay_apart_are_not_separated(ntok):
    text = "12\u0663\u0664 and 5"  # ASCII 12 then Arabic-Indic 34: digits of two scripts are two numbers
    enc = ntok(text, add_special_tokens=False)
    assert enc["input_ids"].count(ntok.num_token_id) == 3
    assert ntok.decode(enc) == text
