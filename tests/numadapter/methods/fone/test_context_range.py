"""The context head and the digit range: no wrapped sum and no operand dropped in silence (issue 28, point 2).

The context head (``fone_head_input="context"``) writes a number as a signed combination of the numbers before it,
computed on FoNE angles, i.e. modulo 10^int_digits. A sum beyond ``int_digits`` would be written as its wrapped
digits; generation writes its exact value as text instead and stops that sequence with a warning naming the number,
the limit and the setting (or raises with ``xval_out_of_range="error"``). A negative combination is never written as
its complement: in full as text (every number a [NUM]), or in the LM's digits (answers mode). A number left as text
because of its range is not a context number; the NumberTokenizer warns about it once.

The models are the tiny random Llama of `tests/helpers/generation_cases.py`, wired by hand: "=" makes the LM head
emit [NUM], [NUM] makes it emit eos, and the head's coefficients are fixed to +1 on the two latest numbers (a + b)
with the read-out u left at its initial constant 1 + 0i.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import build, output_rows

from numadapter.config import NumberAdapterConfig
from numadapter.generation import generate
from numadapter.methods.context import combine_exactly, last_numbers
from numadapter.numbers import ExactNumber, NumberOutOfRangeError
from numadapter.tokenization import NumberTokenizer
from numadapter.tuner.patches import base_weight

SURE = 30.0  # a coefficient logit far above the others


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("context_range")))


def wire_sum(model, ntok, coefficients: tuple[int, ...]) -> None:
    """The LM emits [NUM] after "=" and eos after [NUM]; the head combines the latest numbers with `coefficients`
    (slot 0 the latest; the remaining slots 0) and reads out u = 1 + 0i, so it writes the combination's angles."""
    inner = model.base_model.model
    eq_token = ntok("1 + 2 =")["input_ids"][-1]
    with torch.no_grad():
        base_weight(inner.get_input_embeddings())[:, :14] = 0
        num_row = inner.get_input_embeddings().token_adapter.trainable_tokens_delta["default"][0]
        num_row[:14] = 0
        base_weight(inner.get_input_embeddings())[eq_token, 12] = 5.0
        num_row[13] = 5.0
        for layer in inner.model.layers:  # the residual stream is the embedding: the next token depends on the last
            base_weight(layer.self_attn.o_proj).zero_()
            base_weight(layer.mlp.down_proj).zero_()
        lm_head = base_weight(inner.get_output_embeddings())
        lm_head.zero_()
        lm_head[ntok.tokenizer.eos_token_id, 13] = 10.0
        output_rows(model)[0].zero_()
        output_rows(model)[0, 12] = 10.0
        head = model.base_model.number_modules["default"].head
        count = head.context_numbers
        logits = torch.full((count, 3), -SURE)
        for slot in range(count):
            coefficient = coefficients[slot] if slot < len(coefficients) else 0
            logits[slot, coefficient + 1] = SURE
        head.coefficients.weight.zero_()
        head.coefficients.bias.copy_(logits.flatten())


def context_model(store, int_digits: int, frac_digits: int, coefficients=(1, 1), sign_policy="text", **overrides):
    model, ntok = build(
        store, "llama", "fone", int_digits=int_digits, frac_digits=frac_digits, sign_policy=sign_policy,
        fone_projection="pad", init_lora_weights=True, train_eos_row=False, **overrides,
    )  # fmt: skip
    wire_sum(model, ntok, coefficients)
    return model, ntok


def test_a_sum_within_range_is_written_and_fed_back(store):
    model, ntok = context_model(store, 6, 0)
    out = generate(model, ntok, ["600000 + 300000 =", "12 + 30 ="], max_new_tokens=3, return_dict=True)
    assert [[str(n) for n in row] for row in out.numbers] == [["900000"], ["42"]]
    assert out.stop_reasons == ["eos", "eos"]


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize(
    "prompt, exact, places",
    [("600000 + 500000 =", "1100000", 7), ("999999 + 1 =", "1000000", 7), ("999999 + 999999 =", "1999998", 7)],
)
def test_a_sum_beyond_int_digits_is_written_exactly_and_stops_with_a_warning(store, prompt, exact, places, use_cache):
    model, ntok = context_model(store, 6, 0)
    with pytest.warns(UserWarning, match=rf"{exact}.*int_digits=6.*modulo 10\^6.*at least {places}"):
        out = generate(model, ntok, [prompt, "1 + 2 ="], max_new_tokens=3, return_dict=True, use_cache=use_cache)
    assert out.completions[0] == exact  # not its wrapped digits (100000, 0, 999998)
    assert out.numbers[0] == [ExactNumber.parse(exact)]
    assert out.stop_reasons == ["number_out_of_range", "eos"]  # the other sequence goes on
    assert out.completions[1] == "3"
    with pytest.raises(NumberOutOfRangeError, match=rf"sequence 0.*{exact}.*int_digits=6"):
        generate(model, ntok, [prompt], max_new_tokens=3, xval_out_of_range="error")


def test_a_sum_with_fraction_places_beyond_int_digits(store):
    model, ntok = context_model(store, 3, 2)
    with pytest.warns(UserWarning, match=r"1000\.49.*int_digits=3"):
        out = generate(model, ntok, ["999.5 + 0.99 ="], max_new_tokens=3, return_dict=True)
    assert out.completions == ["1000.49"]


def test_a_negative_combination_is_written_whole_never_modulo_10_to_int_digits(store):
    """b - a below zero: a [NUM]'s digits hold it only as its complement modulo 10^6 (999993 for -7), which was
    written before. Every number a [NUM] (fone_numbers="all"): the negative number is written in full, as text, and
    stops that sequence with a warning naming it and what the digits read."""
    model, ntok = context_model(store, 6, 0, coefficients=(1, -1))  # b - a
    with pytest.warns(UserWarning, match=r"negative magnitude \(-7\).*999993"):
        out = generate(model, ntok, ["10 - 3 =", "20 - 4 ="], max_new_tokens=3, return_dict=True)
    assert out.completions == ["-7", "-16"]
    assert out.numbers == [[ExactNumber.parse("-7")], [ExactNumber.parse("-16")]]
    assert out.stop_reasons == ["number_out_of_range", "number_out_of_range"]


@pytest.mark.parametrize("sign", [1, -1])
def test_a_negative_combination_with_the_sign_feature_is_never_its_complement(store, sign):
    """sign_policy="feature": the head writes a sign beside the digits, but the digits still hold a magnitude, so a
    combination below zero (b - a = -7 on "10 - 3 =") reads 999993 there. It is written whole, the head's sign times
    the combination (-7 with "+", 7 with "-"), and stops with the warning; never 999993 or -999993."""
    model, ntok = context_model(store, 6, 0, coefficients=(1, -1), sign_policy="feature")
    head = model.base_model.number_modules["default"].head
    with torch.no_grad():
        head.sign_proj.weight.zero_()
        head.sign_proj.bias.copy_(torch.tensor([SURE, 0.0] if sign > 0 else [0.0, SURE]))
    with pytest.warns(UserWarning, match=r"negative magnitude \(-7\).*999993.*written in full"):
        out = generate(model, ntok, ["10 - 3 ="], max_new_tokens=3, return_dict=True)
    assert out.numbers == [[ExactNumber.parse(str(-7 * sign))]]
    assert "999993" not in out.completions[0]
    assert out.stop_reasons == ["number_out_of_range"]


def test_a_negative_combination_in_answers_mode_is_left_to_the_lm(store):
    """fone_numbers="answers" (the default): the row writes the LM's digit tokens there instead of a [NUM], as where
    the head forms no number; a positive combination beside it is still the head's. (The expression check off: it
    would write each prompt's own value, 7 by the head and -7 by the LM: tests/numadapter/generation/
    test_expression_check.py.)"""
    model, ntok = context_model(store, 6, 0, coefficients=(1, -1), fone_numbers="answers", fone_expression_check=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = generate(model, ntok, ["10 - 3 =", "3 - 10 ="], max_new_tokens=3, return_dict=True)
    assert out.token_ids[0][0] != ntok.num_token_id and "999993" not in out.completions[0]
    assert out.token_ids[1][0] == ntok.num_token_id and out.completions[1].startswith("7")


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_sum_beyond_int_digits_in_answers_mode_is_left_to_the_lm(store, use_cache):
    """fone_numbers="answers": a combination the places cannot hold is written by the LM in digits, as training left
    such answers in digits, and the row goes on (no stop, no warning); a sum within the places is still the head's."""
    model, ntok = context_model(store, 6, 0, fone_numbers="answers")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = generate(model, ntok, ["999999 + 1 =", "10 + 3 ="], max_new_tokens=3, return_dict=True,
                       use_cache=use_cache)  # fmt: skip
    assert out.token_ids[0][0] != ntok.num_token_id and "number_out_of_range" not in out.stop_reasons
    assert out.token_ids[1][0] == ntok.num_token_id and out.completions[1].startswith("13")


def test_the_read_out_alone_is_never_flagged(store):
    """All coefficients 0: the plain linear read-out writes the number, with no combination to compare it with."""
    model, ntok = context_model(store, 6, 0, coefficients=(0, 0))
    head = model.base_model.number_modules["default"].head
    with torch.no_grad():  # u = the feature of 987654 at every place
        from numadapter.methods.fone.embedding import fone_features

        head.proj.bias.copy_(fone_features(["987654"], 6, 0)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = generate(model, ntok, ["600000 + 500000 ="], max_new_tokens=3, return_dict=True)
    assert out.completions == ["987654"]


def test_combine_exactly_matches_integer_arithmetic():
    places = 4
    values = [[9999, 1, 0], [5000, 5000, 7], [12, 9999, 3]]
    signs = [[1, 1, 1], [1, 1, -1], [-1, 1, 1]]
    digits = torch.tensor([[[int(c) for c in f"{v:0{places}d}"] for v in row] for row in values])  # (B, 3, P)
    mask = torch.ones(3, 3, dtype=torch.long)
    context = last_numbers(mask, digits, torch.tensor(signs), 3).select((slice(None), -1))  # slot 0: the latest
    coefficients = torch.tensor([[0, 1, 1], [1, 1, 1], [-1, -1, 1]])  # per slot, latest first: 10000, 9993, -10014
    got = combine_exactly(context, coefficients)  # (B, 2 + P)
    for row in range(3):
        latest_first = list(zip(reversed(values[row]), reversed(signs[row])))
        total = sum(c * s * v for c, (v, s) in zip(coefficients[row].tolist(), latest_first))
        terms, overflow, *place = got[row].tolist()
        assert terms == sum(c != 0 for c in coefficients[row].tolist())
        assert overflow * 10**places + int("".join(map(str, place))) == total


# -- an operand left as text ---------------------------------------------------------------------------------------
def context_tokenizer(store, **settings) -> NumberTokenizer:
    return NumberTokenizer(
        store.tokenizer("digits"), NumberAdapterConfig(encoding="fone", fone_numbers="all", **settings)
    )


@pytest.mark.parametrize(
    "settings, prompt, named",
    [
        (dict(int_digits=6, frac_digits=0), "1234567 + 1 =", r"'1234567'.*7 integer places \(int_digits=6\)"),
        (dict(int_digits=6, frac_digits=0), "2.5 + 300 =", r"'2\.5'.*1 fraction places \(frac_digits=0\)"),
        (
            dict(int_digits=2, frac_digits=1),
            "123.45 + 1 =",
            r"'123\.45'.*3 integer places \(int_digits=2\) and 2 fraction places \(frac_digits=1\)",
        ),
    ],
)
def test_an_operand_left_as_text_is_warned_about_once_per_tokenizer(store, settings, prompt, named):
    ntok = context_tokenizer(store, **settings)
    with pytest.warns(UserWarning, match=rf"{named}.*context head.*Raise .*_digits to at least") as caught:
        encoded = ntok([prompt, prompt])
    assert sum("context head" in str(w.message) for w in caught) == 1
    assert sum(encoded["num_mask"][0]) == 1  # the number really is left out of the context
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ntok(prompt)  # once per tokenizer
    with pytest.warns(UserWarning, match="context head"):
        context_tokenizer(store, **settings)(prompt)  # a new tokenizer warns again


def test_no_warning_without_the_context_head_or_when_every_number_fits(store):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        context_tokenizer(store, int_digits=6, frac_digits=0, fone_head_input="linear")("1234567 + 1 =")
        context_tokenizer(store, int_digits=6, frac_digits=0)("123456 + 1 =")
