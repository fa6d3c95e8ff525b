"""XValMethod through NumberTokenizer (on the real checkpoint's tokenizer): a scale that leaves most numbers of a batch
as text warns, once per tokenizer, naming the settings and the values they admit; a batch in range does not warn."""

from __future__ import annotations

import warnings

import pytest
from helpers.real import real_tokenizer

from numadapter.config import NumberAdapterConfig
from numadapter.tokenization import NumberTokenizer

# 250000, 1999 and 12 are beyond the default range |x| <= 5 (xval_scale=1, xval_clip=5); 3 is inside it
TEXTS = ["The house cost 250000 dollars in 1999.", "It is 12 km away, at 3 pm."]


@pytest.fixture(scope="module")
def base():
    return real_tokenizer()


def xval(base, **settings) -> NumberTokenizer:
    return NumberTokenizer(base, NumberAdapterConfig(encoding="xval", int_digits=6, frac_digits=2, **settings))


def xval_warnings(call) -> tuple[list[str], object]:
    """The xVal range warnings `call()` emitted, and its result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return [str(w.message) for w in caught if str(w.message).startswith("xVal left")], result


def test_default_scale_warns_once_when_most_numbers_stay_text(base):
    ntok = xval(base)
    found, batch = xval_warnings(lambda: ntok(TEXTS))
    assert batch["number_texts"] == [[], ["3"]]  # three of the four numbers stayed text
    assert len(found) == 1
    message = found[0]
    assert message.startswith("xVal left 3 of the 4 numbers of a batch as text (e.g. '250000'): with xval_center=0, ")
    assert "xval_scale=1, xval_clip=5 a [NUM] carries only" in message and "in [-5, 5]" in message
    assert "fit_normalization" in message and "raise xval_scale" in message
    assert xval_warnings(lambda: ntok(TEXTS))[0] == []  # once per tokenizer, not once per batch
    assert len(xval_warnings(lambda: xval(base)(TEXTS))[0]) == 1  # a new tokenizer warns again


def test_a_batch_mostly_in_range_does_not_warn(base):
    wide = xval(base, xval_scale=1e5)  # admits |x| <= 500000
    found, batch = xval_warnings(lambda: wide(TEXTS))
    assert found == [] and batch["number_texts"] == [["250000", "1999"], ["12", "3"]]
    found, batch = xval_warnings(lambda: xval(base)(["3 apples, 4 pears and 1000 grams of flour"]))
    assert found == [] and batch["number_texts"] == [["3", "4"]]  # one of three left as text: not most


def test_numbers_beyond_the_digit_places_are_not_the_scales_doing(base):
    narrow = xval(base, xval_scale=100.0)  # int_digits=6: 1234567 stays text because of its places, not the scale
    found, batch = xval_warnings(lambda: narrow(["1234567 and 7654321 and 42"]))
    assert found == [] and batch["number_texts"] == [["42"]]
