"""Metrics on hand-computed examples (the arithmetic is written next to each expectation)."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from eval_harness.metrics import (
    METRICS,
    cer,
    compute_metrics,
    exact_match,
    levenshtein,
    mae,
    mape,
    parse_number,
    r2,
    string_exact_match,
    target_value,
    tokens_per_number,
)


# ----------------------------------------------------------------------------------------------------------
# Parsing predictions.
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("579.123", ("579.123", "579.123"), ("579.123", "579.123")),
        ("579.123\n12+7=19", ("579.123", "579.123"), ("19", "19")),  # model kept generating
        ("The answer is -42.", ("-42", "-42"), ("-42", "-42")),  # sentence point not part of it
        ("12-5", ("12", "12"), ("5", "5")),  # binary minus, not a sign
        ("x=-5", ("-5", "-5"), ("-5", "-5")),
        ("1,234,567 apples", ("1,234,567", "1234567"), ("1,234,567", "1234567")),
        ("1,2345", ("1", "1"), ("2345", "2345")),  # not a thousands grouping
        (".5", (".5", "0.5"), (".5", "0.5")),
        ("1.5e3", ("1.5e3", "1500"), ("1.5e3", "1500")),
        ("\u22123", ("\u22123", "-3"), ("\u22123", "-3")),  # unicode minus
        ("+7", ("+7", "7"), ("+7", "7")),
        ("abc123 then 8", ("8", "8"), ("8", "8")),  # digits glued to letters are no number
        ("3eggs", ("3", "3"), ("3", "3")),
    ],
)
def test_parse_number_first_and_last(text, first, last):
    for which, (surface, value) in (("first", first), ("last", last)):
        parsed = parse_number(text, which)
        assert parsed is not None and parsed.text == surface and parsed.value == Decimal(value)
        assert text[parsed.start : parsed.end] == surface


def test_parse_number_none_and_errors():
    assert parse_number("no number here") is None
    assert parse_number("") is None
    with pytest.raises(TypeError, match="expects a str, got int"):
        parse_number(5)
    with pytest.raises(ValueError, match="`which` must be 'first' or 'last', got 'middle'"):
        parse_number("1", "middle")


def test_target_value_requires_the_whole_text_to_be_a_number():
    assert target_value(" 579.120 ") == Decimal("579.12")
    assert target_value("19 apples") is None
    assert target_value(7) == 7 and target_value(0.1) == Decimal("0.1")  # float via repr, not its binary value
    with pytest.raises(TypeError, match="bool"):
        target_value(True)


# ----------------------------------------------------------------------------------------------------------
# Exact match.
# ----------------------------------------------------------------------------------------------------------
def test_exact_match_compares_exact_numbers():
    # "579.120" == "579.12" (right), 12 != 13 (wrong), "abc" has no number (wrong, unparsed), "7" (right) -> 2/4
    result = exact_match(["579.120", "12", "abc", " 7 "], ["579.12", "13", "5", "7"])
    assert (result.value, result.n_total, result.n_scored, result.n_unparsed) == (0.5, 4, 4, 1)


def test_exact_match_is_exact_not_float_tolerant():
    # 0.1 + 0.2 in float64 prints 0.30000000000000004: not the answer 0.3
    assert exact_match(["0.30000000000000004"], ["0.3"]).value == 0.0
    # 31 digits: 123...890 vs 123...891 differ by 1, equal in float64 but not here
    assert exact_match(["1234567890123456789012345678901"], ["1234567890123456789012345678900"]).value == 0.0
    assert exact_match(["1.5e3", "1,500"], ["1500", "1500"]).value == 1.0


def test_exact_match_non_numeric_targets_fall_back_to_text():
    # "yes" == " yes " after stripping; "no" != "No"
    assert exact_match([" yes ", "no"], ["yes", "No"]).value == 0.5


def test_exact_match_rounding_for_regression_outputs():
    # 579.1234 rounded to the target's 3 decimals -> 579.123 (right); 2.5 -> 3 with half-up (right)
    assert exact_match([579.1234, 2.5], ["579.123", "3"], round_to="target").value == 1.0
    # round_to=1: 0.25 -> 0.3 (half up), target 0.2 -> wrong; 0.24 -> 0.2 -> right
    assert exact_match(["0.25", "0.24"], ["0.2", "0.2"], round_to=1).value == 0.5
    # without rounding both are wrong
    assert exact_match([579.1234, 2.5], ["579.123", "3"]).value == 0.0
    with pytest.raises(ValueError, match="`round_to` must be None, an int number of decimals or 'target', got 'x'"):
        exact_match(["1"], ["1"], round_to="x")


def test_exact_match_which_last():
    assert exact_match(["3 + 4 = 7"], ["7"], which="last").value == 1.0
    assert exact_match(["3 + 4 = 7"], ["7"]).value == 0.0  # first number is 3


def test_string_exact_match_compares_text():
    # "579.120" vs "579.12" differ as text; " 7" vs "7" equal after stripping -> 1/2
    assert string_exact_match(["579.120", " 7"], ["579.12", "7"]).value == 0.5


# ----------------------------------------------------------------------------------------------------------
# MAE, R^2, MAPE.
# ----------------------------------------------------------------------------------------------------------
def test_mae_over_parseable_predictions_with_count():
    # |10 - 12| = 2, "x" unparsed, |7.5 - 7| = 0.5 -> (2 + 0.5) / 2 = 1.25 over 2 scored
    result = mae(["10", "x", "7.5"], ["12", "3", "7"])
    assert (result.value, result.n_scored, result.n_unparsed, result.n_total) == (1.25, 2, 1, 3)


def test_mae_is_exact_for_long_numbers_and_accepts_floats():
    # 31-digit integers differing by 1: float64 would give 0
    assert mae(["1234567890123456789012345678901"], ["1234567890123456789012345678900"]).value == 1.0
    assert mae([0.1, 3], ["0.1", "5"]).value == 1.0  # |0.1 - 0.1| = 0, |3 - 5| = 2 -> 1


def test_mae_with_no_parseable_prediction_is_nan_with_counts():
    result = mae(["none", "nan"], ["1", "2"])
    assert math.isnan(result.value) and result.n_scored == 0 and result.n_unparsed == 2
    assert mae([float("nan")], ["1"]).n_unparsed == 1  # NaN predictions count as unparsed


def test_r2_hand_computed():
    # targets 1, 2, 3, 4 (mean 2.5): SS_tot = 2.25 + 0.25 + 0.25 + 2.25 = 5; predictions 1, 2, 3, 5: SS_res = 1
    # R^2 = 1 - 1/5 = 0.8
    result = r2(["1", "2", "3", "5"], ["1", "2", "3", "4"])
    assert result.value == pytest.approx(0.8, abs=1e-15)
    # perfect predictions -> 1; predicting the mean 2.5 everywhere -> 1 - 5/5 = 0
    assert r2(["1", "2", "3", "4"], ["1", "2", "3", "4"]).value == 1.0
    assert r2(["2.5"] * 4, ["1", "2", "3", "4"]).value == 0.0


def test_r2_unparsed_and_undefined_cases():
    # only "1" and "3" are scored: targets 1, 3 (mean 2), SS_tot = 2, SS_res = 0 -> 1
    result = r2(["1", "?", "3"], ["1", "2", "3"])
    assert (result.value, result.n_scored, result.n_unparsed) == (1.0, 2, 1)
    assert math.isnan(r2(["1", "?", "?"], ["1", "2", "3"]).value)  # one scored example: undefined
    with pytest.raises(ValueError, match=r"all 3 targets equal 5, so R\^2 is undefined"):
        r2(["1", "2", "3"], ["5", "5", "5"])


def test_mape_percent_with_zero_targets_excluded():
    # |110 - 100| / 100 = 0.1, |45 - 50| / 50 = 0.1, target 0 excluded, "q" unparsed -> 100 * 0.2 / 2 = 10 %
    result = mape(["110", "45", "3", "q"], ["100", "50", "0", "8"])
    assert result.value == pytest.approx(10.0, abs=1e-12)
    assert (result.n_scored, result.n_excluded, result.n_unparsed, result.n_total) == (2, 1, 1, 4)
    # negative target: |-90 - (-100)| / |-100| = 0.1 -> 10 %
    assert mape(["-90"], ["-100"]).value == pytest.approx(10.0, abs=1e-12)


@pytest.mark.parametrize("metric", [mae, r2, mape])
def test_numeric_metrics_reject_non_numeric_targets(metric):
    with pytest.raises(ValueError, match=r"target 1 \('Paris'\) is not a number"):
        metric(["1", "2"], ["1", "Paris"])


# ----------------------------------------------------------------------------------------------------------
# CER and Levenshtein.
# ----------------------------------------------------------------------------------------------------------
def test_levenshtein_hand_computed():
    assert levenshtein("kitten", "sitting") == 3  # k->s, e->i, +g
    assert levenshtein("1234", "1243") == 2  # two substitutions
    assert levenshtein("", "42") == 2 and levenshtein("42", "") == 2 and levenshtein("42", "42") == 0


def test_cer_hand_computed():
    # "579.12" vs "579.120": 1 insertion / 7 characters = 14.2857 %
    assert cer(["579.12"], ["579.120"]).value == pytest.approx(100 / 7)
    # "1234" vs "1243": 2 / 4 = 50 %; "12345" vs "123": 2 deletions / 3 = 66.67 %
    # "no idea" has no number -> "" vs "42": 2 insertions / 2 = 100 %
    result = cer(["1234", "The answer is 12345", "no idea"], ["1243", "123", "42"])
    assert result.value == pytest.approx((50 + 200 / 3 + 100) / 3)
    assert result.n_unparsed == 1
    assert cer([12], ["12"]).value == 0.0
    with pytest.raises(ValueError, match="target 0 is empty"):
        cer(["1"], [" "])


# ----------------------------------------------------------------------------------------------------------
# Tokens per number, the metric table, input checks.
# ----------------------------------------------------------------------------------------------------------
def test_tokens_per_number_with_callables():
    # characters: "12345.6789" -> 10 tokens, "7" -> 1 token: (10 + 1) / 2 = 5.5
    assert tokens_per_number(["12345.6789", "7"], list) == 5.5

    # groups of up to 3 digits like Llama-3: "12345" -> "123","45" (2); "7" -> 1 -> 1.5
    def llama_like(text):
        return {"input_ids": [text[i : i + 3] for i in range(0, len(text), 3)]}

    assert tokens_per_number(["12345", "7"], llama_like) == 1.5
    with pytest.raises(ValueError, match="got no numbers"):
        tokens_per_number([], list)


def test_compute_metrics_and_registry():
    results = compute_metrics(["exact_match", "mae"], ["3", "5"], ["3", "4"])
    assert results["exact_match"].value == 0.5 and results["mae"].value == 0.5  # (0 + 1) / 2
    assert results["mae"].as_dict()["n_scored"] == 2
    assert set(METRICS) == {"exact_match", "string_exact_match", "mae", "r2", "mape", "cer"}
    with pytest.raises(ValueError, match=r"Unknown metric 'accuracy'; valid metrics: \['cer', "):
        compute_metrics(["accuracy"], ["1"], ["1"])


@pytest.mark.parametrize("metric", list(METRICS.values()))
def test_metrics_reject_mismatched_or_empty_inputs(metric):
    with pytest.raises(ValueError, match="got 1 predictions for 2 targets"):
        metric(["1"], ["1", "2"])
    with pytest.raises(ValueError, match="got no examples"):
        metric([], [])
