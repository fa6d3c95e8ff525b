"""Tests for numadapter.numbers: find_numbers, ExactNumber, NumberSpan.

Every expected value below is written by hand or computed by an independent reference (Decimal / Python int
arithmetic), never by the code under test.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numadapter import numbers
from numadapter.numbers import (
    MAX_EXPONENT,
    ExactNumber,
    NumberOutOfRangeError,
    NumberSpan,
    find_numbers,
)

SETTINGS = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])

# (input, [(start, text, sign_text, int_part, frac_part, exponent, canonical value), ...]); the same rows as the
# table in the module docstring.
TABLE: list[tuple[str, list[tuple[int, str, str, str, str, int, str]]]] = [
    ("42", [(0, "42", "", "42", "", 0, "42")]),
    ("3.14", [(0, "3.14", "", "3", "14", 0, "3.14")]),
    (".5", [(0, ".5", "", "", "5", 0, "0.5")]),
    ("x.5", [(2, "5", "", "5", "", 0, "5")]),
    ("...5", [(3, "5", "", "5", "", 0, "5")]),
    ("007", [(0, "007", "", "007", "", 0, "7")]),
    ("0.0", [(0, "0.0", "", "0", "0", 0, "0")]),
    ("1.50", [(0, "1.50", "", "1", "50", 0, "1.5")]),
    ("I have 5.", [(7, "5", "", "5", "", 0, "5")]),
    ("1,234,567.89", [(0, "1,234,567.89", "", "1234567", "89", 0, "1234567.89")]),
    ("12,345", [(0, "12,345", "", "12345", "", 0, "12345")]),
    ("1,2", [(0, "1", "", "1", "", 0, "1"), (2, "2", "", "2", "", 0, "2")]),
    ("1,23", [(0, "1", "", "1", "", 0, "1"), (2, "23", "", "23", "", 0, "23")]),
    ("1,2,3", [(0, "1", "", "1", "", 0, "1"), (2, "2", "", "2", "", 0, "2"), (4, "3", "", "3", "", 0, "3")]),
    (
        "1,234,56",
        [(0, "1", "", "1", "", 0, "1"), (2, "234", "", "234", "", 0, "234"), (6, "56", "", "56", "", 0, "56")],
    ),
    ("1,2345", [(0, "1", "", "1", "", 0, "1"), (2, "2345", "", "2345", "", 0, "2345")]),
    ("5,1,234", [(0, "5", "", "5", "", 0, "5"), (2, "1", "", "1", "", 0, "1"), (4, "234", "", "234", "", 0, "234")]),
    ("0,001", [(0, "0", "", "0", "", 0, "0"), (2, "001", "", "001", "", 0, "1")]),
    ("6.02e23", [(0, "6.02e23", "", "6", "02", 23, "602" + "0" * 21)]),
    ("1E-5", [(0, "1E-5", "", "1", "", -5, "0.00001")]),
    ("1e+5", [(0, "1e+5", "", "1", "", 5, "100000")]),
    ("2e", [(0, "2", "", "2", "", 0, "2")]),
    ("e5", [(1, "5", "", "5", "", 0, "5")]),
    ("0x3e5", [(0, "0", "", "0", "", 0, "0"), (2, "3", "", "3", "", 0, "3"), (4, "5", "", "5", "", 0, "5")]),
    ("1e999999999", []),
    ("-3", [(0, "-3", "-", "3", "", 0, "-3")]),
    ("x=-3", [(2, "-3", "-", "3", "", 0, "-3")]),
    ("(-4)", [(1, "-4", "-", "4", "", 0, "-4")]),
    ("3-2", [(0, "3", "", "3", "", 0, "3"), (2, "2", "", "2", "", 0, "2")]),
    ("a-3", [(2, "3", "", "3", "", 0, "3")]),
    ("(1)-2", [(1, "1", "", "1", "", 0, "1"), (4, "2", "", "2", "", 0, "2")]),
    ("--3", [(1, "-3", "-", "3", "", 0, "-3")]),
    ("+3", [(0, "+3", "+", "3", "", 0, "3")]),
    ("\u22123", [(0, "\u22123", "\u2212", "3", "", 0, "-3")]),
    ("5 -3", [(0, "5", "", "5", "", 0, "5"), (2, "-3", "-", "3", "", 0, "-3")]),
    ("-0", [(0, "-0", "-", "0", "", 0, "0")]),
    ("-.5", [(0, "-.5", "-", "", "5", 0, "-0.5")]),
    ("1e-5", [(0, "1e-5", "", "1", "", -5, "0.00001")]),
    ("$5", [(1, "5", "", "5", "", 0, "5")]),
    ("12%", [(0, "12", "", "12", "", 0, "12")]),
    ("€3.50", [(1, "3.50", "", "3", "50", 0, "3.5")]),
    ("50%-60%", [(0, "50", "", "50", "", 0, "50"), (4, "60", "", "60", "", 0, "60")]),
    ("COVID-19", [(6, "19", "", "19", "", 0, "19")]),
    ("H2O", [(1, "2", "", "2", "", 0, "2")]),
    ("3rd", [(0, "3", "", "3", "", 0, "3")]),
    ("v1.2", [(1, "1.2", "", "1", "2", 0, "1.2")]),
    ("v1.2.3", [(1, "1", "", "1", "", 0, "1"), (3, "2", "", "2", "", 0, "2"), (5, "3", "", "3", "", 0, "3")]),
    ("1.2.3", [(0, "1", "", "1", "", 0, "1"), (2, "2", "", "2", "", 0, "2"), (4, "3", "", "3", "", 0, "3")]),
    (
        "192.168.0.1",
        [
            (0, "192", "", "192", "", 0, "192"),
            (4, "168", "", "168", "", 0, "168"),
            (8, "0", "", "0", "", 0, "0"),
            (10, "1", "", "1", "", 0, "1"),
        ],
    ),
    ("-1.2.3", [(1, "1", "", "1", "", 0, "1"), (3, "2", "", "2", "", 0, "2"), (5, "3", "", "3", "", 0, "3")]),
    (".5.6", [(1, "5.6", "", "5", "6", 0, "5.6")]),
    (
        "2024-01-05",
        [(0, "2024", "", "2024", "", 0, "2024"), (5, "01", "", "01", "", 0, "1"), (8, "05", "", "05", "", 0, "5")],
    ),
    ("12:30", [(0, "12", "", "12", "", 0, "12"), (3, "30", "", "30", "", 0, "30")]),
    ("1_000", [(0, "1", "", "1", "", 0, "1"), (2, "000", "", "000", "", 0, "0")]),
    ("\u0663\u0664\u0665", [(0, "\u0663\u0664\u0665", "", "345", "", 0, "345")]),
    ("\uff11\uff12\uff13", [(0, "\uff11\uff12\uff13", "", "123", "", 0, "123")]),
    ("\u0967\u0968.\u096b", [(0, "\u0967\u0968.\u096b", "", "12", "5", 0, "12.5")]),
    ("1\u0663", [(0, "1", "", "1", "", 0, "1"), (1, "\u0663", "", "3", "", 0, "3")]),
    ("\u0663\u066b\u0665", [(0, "\u0663", "", "3", "", 0, "3"), (2, "\u0665", "", "5", "", 0, "5")]),
]

# Extra pinned cases that are not in the docstring table.
EXTRA: list[tuple[str, list[tuple[int, str, str, str, str, int, str]]]] = [
    ("3e5f", [(0, "3", "", "3", "", 0, "3"), (2, "5", "", "5", "", 0, "5")]),
    ("x3e5", [(1, "3", "", "3", "", 0, "3"), (3, "5", "", "5", "", 0, "5")]),
    ("1e\u22125", [(0, "1e\u22125", "", "1", "", -5, "0.00001")]),
    ("-1.5e3", [(0, "-1.5e3", "-", "1", "5", 3, "-1500")]),
    (".25E2", [(0, ".25E2", "", "", "25", 2, "25")]),
    ("123.456e-2", [(0, "123.456e-2", "", "123", "456", -2, "1.23456")]),
    ("0.0e5", [(0, "0.0e5", "", "0", "0", 5, "0")]),
    ("-0.000", [(0, "-0.000", "-", "0", "000", 0, "0")]),
    ("3--2", [(0, "3", "", "3", "", 0, "3"), (2, "-2", "-", "2", "", 0, "-2")]),
    ("$-5", [(1, "-5", "-", "5", "", 0, "-5")]),
    ("-1,234.5", [(0, "-1,234.5", "-", "1234", "5", 0, "-1234.5")]),
    ("1,234.", [(0, "1,234", "", "1234", "", 0, "1234")]),
    ("5 - 3", [(0, "5", "", "5", "", 0, "5"), (4, "3", "", "3", "", 0, "3")]),
    ("a, 1,234, b", [(3, "1,234", "", "1234", "", 0, "1234")]),
    ("no numbers here", []),
    ("", []),
    ("x\u00b2", []),  # superscript two is not a decimal digit
    ("\u0661\u0662 and 34 and \uff15\uff16", [(0, "\u0661\u0662", "", "12", "", 0, "12"),
                                              (7, "34", "", "34", "", 0, "34"),
                                              (14, "\uff15\uff16", "", "56", "", 0, "56")]),
]  # fmt: skip


def _rows(text: str) -> list[tuple[int, str, str, str, str, int, str]]:
    return [
        (s.start, s.text, s.sign_text, s.int_part, s.frac_part, s.exponent, str(s.exact)) for s in find_numbers(text)
    ]


@pytest.mark.parametrize("text,expected", TABLE + EXTRA, ids=[repr(t) for t, _ in TABLE + EXTRA])
def test_find_numbers_documented_outcomes(text, expected):
    assert _rows(text) == expected
    for span in find_numbers(text):
        assert text[span.start : span.end] == span.text
        assert span.end == span.start + len(span.text)


@pytest.mark.parametrize("text", [t for t, _ in TABLE])
def test_docstring_table_lists_every_case(text):
    # Keeps the documented table and the pinned tests in sync.
    assert f"``{text}``" in numbers.__doc__


def test_span_value_and_sign():
    (span,) = find_numbers("x = -.5")
    assert span.value == -0.5 and span.sign == -1
    (span,) = find_numbers("-0")
    assert span.value == 0.0 and span.sign == 1 and span.sign_text == "-"
    (span,) = find_numbers("6.02e23")
    assert span.value == 6.02e23 and span.sign == 1
    (span,) = find_numbers("\u22122.5")
    assert span.value == -2.5 and span.sign == -1


def test_400_digit_integer_is_exact():
    digits = "9" + "".join(str(i % 10) for i in range(399))  # 400 digits
    text = f"big: -{digits}, small: 7"
    big, small = find_numbers(text)
    assert big.text == f"-{digits}" and big.start == 5
    assert big.exact == ExactNumber(-1, digits, "")
    assert big.exact.to_decimal() == Decimal("-" + digits)  # (unary minus on Decimal would round to 28 digits)
    assert int(big.exact.to_decimal()) == -int(digits)
    assert big.value == float("-inf")  # beyond float64; documented in ExactNumber.to_float
    assert small.exact == ExactNumber(1, "7", "")


def test_very_long_fraction_is_exact():
    frac = "0" * 150 + "123456789" * 30 + "0"
    (span,) = find_numbers(f"pi-ish 3.{frac} done")
    assert span.frac_part == frac
    assert span.exact.frac_digits == frac.rstrip("0")
    assert span.exact.to_decimal() == Decimal("3." + frac)


def test_exponent_limit_in_find_numbers_and_parse():
    (span,) = find_numbers(f"1e{MAX_EXPONENT}")
    assert span.exact.int_digits == "1" + "0" * MAX_EXPONENT
    (span,) = find_numbers(f"1e-{MAX_EXPONENT}")
    assert span.exact.frac_digits == "0" * (MAX_EXPONENT - 1) + "1"
    for literal in (f"1e{MAX_EXPONENT + 1}", "2.5E-99999", "0e99999", "1e" + "9" * 5000):
        text = f"a {literal} b 7"
        seven = NumberSpan(len(text) - 1, len(text), "7", "", "7", "", 0, ExactNumber(1, "7", ""))
        assert find_numbers(text) == [seven]  # the literal is left entirely as text
        with pytest.raises(ValueError, match=r"exponent .*\|exponent\| <= 10000"):
            ExactNumber.parse(literal)
    with pytest.raises(ValueError, match="1e10001"):
        ExactNumber.parse("1e10001")


def test_find_numbers_rejects_non_str():
    with pytest.raises(TypeError, match="bytes"):
        find_numbers(b"12")


# ---------------------------------------------------------------- ExactNumber


@pytest.mark.parametrize(
    "value,expected",
    [
        ("-12.5", "-12.5"),
        ("  1,234  ", "1234"),
        ("6.02e23", "602" + "0" * 21),
        ("\u22123", "-3"),
        ("+3", "3"),
        ("\u0663\u0664\u0665", "345"),
        (".5", "0.5"),
        ("-0", "0"),
        ("007.500", "7.5"),
        ("1E-5", "0.00001"),
        (0, "0"),
        (-17, "-17"),
        (10**40, "1" + "0" * 40),
        (0.1, "0.1"),
        (1e-7, "0.0000001"),
        (-0.0, "0"),
        (1.5e16, "15000000000000000"),
        (5e-324, "0." + "0" * 323 + "5"),
        (Decimal("1.50"), "1.5"),
        (Decimal("-0"), "0"),
        (Decimal("1E+5"), "100000"),
        (Decimal("0E-8"), "0"),
        (Decimal("-0.00120"), "-0.0012"),
    ],
)
def test_parse_accepted_forms(value, expected):
    assert str(ExactNumber.parse(value)) == expected


def test_parse_huge_int_beyond_str_conversion_limit():
    value = -(10**5000) - 7
    exact = ExactNumber.parse(value)
    assert exact.sign == -1 and len(exact.int_digits) == 5001
    assert exact.int_digits[0] == "1" and exact.int_digits[-4:] == "0007"
    assert exact.to_decimal() == Decimal(value)


def test_parse_decimal_long_coefficient_and_exponent_limit():
    long = Decimal("1." + "0" * 20000)  # exponent -20000 but trailing zeros only: exactly 1
    assert str(ExactNumber.parse(long)) == "1"
    with pytest.raises(ValueError, match=r"exponent -20000.*10000"):
        ExactNumber.parse(Decimal("1E-20000"))


def test_parse_identity():
    exact = ExactNumber(1, "5", "")
    assert ExactNumber.parse(exact) is exact


@pytest.mark.parametrize(
    "text", ["1,2", "1.2.3", "abc", "", "5.", "--3", "1\u0663", "3e5f", "nan", "inf", "1 2", "12%", "$5", "e5"]
)
def test_parse_rejects_non_single_literal(text):
    with pytest.raises(ValueError, match="not a single number literal") as info:
        ExactNumber.parse(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), Decimal("nan"), Decimal("-Infinity"),
                                   Decimal("sNaN")])  # fmt: skip
def test_parse_rejects_non_finite(value):
    with pytest.raises(ValueError, match="cannot represent"):
        ExactNumber.parse(value)


@pytest.mark.parametrize("value", [True, False, None, [1], 1 + 2j, b"12"])
def test_parse_rejects_other_types(value):
    with pytest.raises(TypeError, match="bool|expected str, int"):
        ExactNumber.parse(value)


@pytest.mark.parametrize(
    "args,match",
    [
        ((1, "012", ""), "leading zeros"),
        ((1, "12", "50"), "trailing zeros"),
        ((-1, "", ""), "zero must have sign"),
        ((0, "1", ""), "sign"),
        ((True, "1", ""), "sign"),
        ((1, "1a", ""), "ASCII digits"),
        ((1, "\u0663", ""), "ASCII digits"),
        ((1, 12, ""), "ASCII digits"),
    ],
)
def test_exact_number_validates(args, match):
    with pytest.raises(ValueError, match=match):
        ExactNumber(*args)


def test_str_to_decimal_to_float():
    assert str(ExactNumber(-1, "12", "5")) == "-12.5"
    assert str(ExactNumber(1, "", "")) == "0"
    assert str(ExactNumber(1, "", "001")) == "0.001"
    assert str(ExactNumber(1, "1000", "")) == "1000"
    assert ExactNumber(-1, "", "25").to_decimal() == Decimal("-0.25")
    assert ExactNumber(-1, "", "25").to_float() == -0.25
    # 0.1 + 2**-60 is not a float; to_float rounds once, correctly.
    assert ExactNumber(1, "", "1" + "0" * 30 + "1").to_float() == 0.1


# ---------------------------------------------------------------- place digits


@pytest.mark.parametrize(
    "value,m,n,expected",
    [
        ("12.5", 3, 2, [0, 1, 2, 5, 0]),
        ("-7.25", 2, 2, [0, 7, 2, 5]),
        ("0.001", 2, 3, [0, 0, 0, 0, 1]),
        ("1000", 4, 0, [1, 0, 0, 0]),
        ("0", 2, 1, [0, 0, 0]),
        ("99999999.9999", 8, 4, [9] * 12),
        ("0.5", 0, 1, [5]),
    ],
)
def test_place_digits(value, m, n, expected):
    exact = ExactNumber.parse(value)
    assert exact.fits(m, n)
    assert exact.place_digits(m, n) == expected
    assert ExactNumber.from_place_digits(expected, m, n, sign=exact.sign) == exact


def test_place_digits_out_of_range_messages():
    exact = ExactNumber.parse("123456789")
    assert not exact.fits(8, 4)
    with pytest.raises(NumberOutOfRangeError) as info:
        exact.place_digits(8, 4)
    message = str(info.value)
    for part in ("123456789", "needs 9 integer places", "int_digits=8", "`int_digits`", "out_of_range='text'"):
        assert part in message
    assert isinstance(info.value, ValueError)
    with pytest.raises(NumberOutOfRangeError, match=r"-0\.12345 needs 5 fraction places.*frac_digits=4"):
        ExactNumber.parse("-0.12345").place_digits(8, 4)
    assert not ExactNumber.parse("0.12345").fits(8, 4)
    with pytest.raises(NumberOutOfRangeError, match=r"characters\) needs 400 integer places"):
        ExactNumber.parse("9" * 400).place_digits(8, 4)


@pytest.mark.parametrize("m,n", [(-1, 4), (8, -1), (8.0, 4), (True, 4), (8, "4")])
def test_place_settings_validated(m, n):
    with pytest.raises(ValueError, match="must be a non-negative int"):
        ExactNumber.parse("1").place_digits(m, n)
    with pytest.raises(ValueError, match="must be a non-negative int"):
        ExactNumber.parse("1").fits(m, n)


def test_from_place_digits_canonical_and_errors():
    assert ExactNumber.from_place_digits([0, 0, 0], 2, 1, sign=-1) == ExactNumber(1, "", "")
    assert ExactNumber.from_place_digits([0, 4, 0, 5, 0], 2, 3, sign=-1) == ExactNumber(-1, "4", "05")
    with pytest.raises(ValueError, match=r"got 3 digits, expected int_digits \+ frac_digits = 2 \+ 2 = 4"):
        ExactNumber.from_place_digits([1, 2, 3], 2, 2)
    with pytest.raises(ValueError, match="digit 1 is 10"):
        ExactNumber.from_place_digits([1, 10], 1, 1)
    with pytest.raises(ValueError, match="digit 0 is -1"):
        ExactNumber.from_place_digits([-1, 0], 1, 1)
    with pytest.raises(ValueError, match="digit 0 is 1.5"):
        ExactNumber.from_place_digits([1.5, 0], 1, 1)
    with pytest.raises(ValueError, match="digit 1 is the bool"):
        ExactNumber.from_place_digits([1, True], 1, 1)
    with pytest.raises(ValueError, match="`sign` must be"):
        ExactNumber.from_place_digits([1, 0], 1, 1, sign=0)


def test_from_place_digits_accepts_tensor_scalars():
    torch = pytest.importorskip("torch")
    digits = torch.tensor([0, 1, 2, 5], dtype=torch.int64)  # (P,)
    assert ExactNumber.from_place_digits(digits, 2, 2) == ExactNumber(1, "1", "25")


# ---------------------------------------------------------------- properties

_TEXT_ALPHABET = st.sampled_from(list("0123456789.,eE+-\u2212()%$ ax_:") + ["\u0663", "\u0665", "\uff11", "\u00b2"])


def _check_invariants(text: str, spans: list[NumberSpan]) -> None:
    previous_end = 0
    for span in spans:
        assert text[span.start : span.end] == span.text
        assert span.start >= previous_end
        assert span.end > span.start
        previous_end = span.end
        for part in (span.int_part, span.frac_part):
            assert part == "" or (part.isascii() and part.isdigit())
        # Independent reference: Decimal of the written parts.
        sign = "-" if span.sign_text in ("-", "\u2212") else ""
        reference = Decimal(f"{sign}{span.int_part or '0'}.{span.frac_part or '0'}e{span.exponent}")
        assert span.exact.to_decimal() == reference
        # Canonical form: the validating constructor accepts it.
        assert ExactNumber(span.exact.sign, span.exact.int_digits, span.exact.frac_digits) == span.exact
        # parse accepts exactly the forms find_numbers reads as one whole span.
        assert ExactNumber.parse(span.text) == span.exact


@SETTINGS
@given(st.text(_TEXT_ALPHABET, max_size=40))
def test_property_spans_on_number_like_text(text):
    _check_invariants(text, find_numbers(text))


@SETTINGS
@given(st.text(max_size=60))
def test_property_never_raises_on_any_text(text):
    _check_invariants(text, find_numbers(text))


@SETTINGS
@given(st.integers() | st.integers(min_value=-(10**400), max_value=10**400))
def test_property_int_round_trip(value):
    exact = ExactNumber.parse(value)
    assert exact.to_decimal() == Decimal(value)
    assert ExactNumber.parse(str(exact)) == exact
    assert str(exact) == str(value)


@SETTINGS
@given(st.decimals(allow_nan=False, allow_infinity=False).filter(lambda d: abs(d.as_tuple().exponent) <= 1000))
def test_property_decimal_round_trip(value):
    exact = ExactNumber.parse(value)
    assert exact.to_decimal() == value
    assert ExactNumber.parse(str(exact)) == exact


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_property_float_round_trip(value):
    exact = ExactNumber.parse(value)
    assert exact.to_decimal() == Decimal(repr(value))
    assert exact.to_float() == value
    assert ExactNumber.parse(str(exact)) == exact


@st.composite
def _fitting(draw) -> tuple[ExactNumber, int, int]:
    m = draw(st.integers(0, 12))
    n = draw(st.integers(0 if m else 1, 8))
    int_digits = draw(st.text("0123456789", max_size=m))
    frac_digits = draw(st.text("0123456789", max_size=n))
    sign = draw(st.sampled_from(["", "-"]))
    literal = f"{sign}{int_digits or '0'}" + (f".{frac_digits}" if frac_digits else "")
    return ExactNumber.parse(literal), m, n


@SETTINGS
@given(_fitting())
def test_property_place_digits_round_trip(case):
    exact, m, n = case
    assert exact.fits(m, n)
    digits = exact.place_digits(m, n)
    # Independent reference: |x| * 10**n as a Python int, zero-padded to m + n digits (m + n <= 20 digits, within
    # the default 28-digit Decimal precision, so scaleb is exact).
    scaled = int(abs(exact.to_decimal()).scaleb(n))
    assert digits == [int(c) for c in str(scaled).zfill(m + n)]
    assert ExactNumber.from_place_digits(digits, m, n, sign=exact.sign) == exact


_WORDS = ["the", "price", "rose", "by", "Total:", "and", "x", "=", "of"]
_SCRIPTS = [0x30, 0x660, 0xFF10, 0x966]  # ASCII, Arabic-Indic, fullwidth, Devanagari zeros


@st.composite
def _formatted_number(draw) -> tuple[str, Decimal, str, str, int]:
    """A number literal in one of the accepted forms, with its value computed independently."""
    int_part = draw(st.text("0123456789", min_size=0, max_size=30))
    frac_part = draw(st.text("0123456789", max_size=30))
    if not int_part and not frac_part:
        int_part = "0"
    grouped = draw(st.booleans()) and len(int_part) >= 4 and not int_part.startswith("0")
    written_int = f"{int(int_part):,}" if grouped else int_part
    body = written_int + (f".{frac_part}" if frac_part else "")
    exponent = 0
    if draw(st.booleans()):
        exponent = draw(st.integers(-60, 60))
        marker = draw(st.sampled_from(["e", "E"]))
        exp_sign = "-" if exponent < 0 else draw(st.sampled_from(["", "+"]))
        body += f"{marker}{exp_sign}{abs(exponent)}"
    sign = draw(st.sampled_from(["", "", "-", "+", "\u2212"]))
    zero = draw(st.sampled_from(_SCRIPTS))
    body = body.translate({48 + k: zero + k for k in range(10)})
    negative = sign in ("-", "\u2212")
    value = Decimal(f"{'-' if negative else ''}{int_part or '0'}.{frac_part or '0'}e{exponent}")
    return sign + body, value, int_part, frac_part, exponent


@SETTINGS
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_WORDS).map(lambda w: (w, None)),
            st.tuples(_formatted_number(), st.sampled_from(["", "$", "(", "\u20ac"]), st.sampled_from(
                ["", "%", ")", ".", ","])).map(lambda t: (t[1] + t[0][0] + t[2], t)),
        ),
        max_size=12,
    )
)  # fmt: skip
def test_property_recovers_formatted_numbers(items):
    text = " ".join(piece for piece, _ in items)
    spans = find_numbers(text)
    expected = [info for _, info in items if info is not None]
    assert len(spans) == len(expected)
    for span, ((literal, value, int_part, frac_part, exponent), _, _) in zip(spans, expected):
        assert span.text == literal
        assert span.exact.to_decimal() == value
        assert (span.int_part, span.frac_part, span.exponent) == (int_part, frac_part, exponent)
    _check_invariants(text, spans)


def test_long_number_heavy_text():
    chunk = "On 2024-01-05 the price rose 12.5% to $1,234,567.89 (x=-3, 6.02e23, v1.2.3, 007). "
    text = chunk * (200_000 // len(chunk))  # ~200 KB
    spans = find_numbers(text)
    assert len(spans) == 11 * (200_000 // len(chunk))
    _check_invariants(text, spans)


@pytest.mark.parametrize("text", ["42.5", "-0.07", "0", "1234567.8", "-999"])
def test_fixed_point_inverts_place_digits_on_lists_and_tensors(text):
    """One fixed point for every side: `fixed_point` (Python: the tokenizer, the coverage count, the wrap check) and
    `fixed_point_values` (tensors: the pointer's loss, the pair operations) give the value in units of the lowest
    place, and `ExactNumber.from_place_digits` reads the same number back."""
    import torch

    from numadapter.methods.context import fixed_point_values
    from numadapter.numbers import fixed_point

    exact = ExactNumber.parse(text)
    digits = exact.place_digits(8, 2)
    units = fixed_point(digits, exact.sign)
    assert Decimal(units).scaleb(-2) == Decimal(text)
    assert ExactNumber.from_place_digits(digits, 8, 2, exact.sign) == exact
    rows = torch.tensor([digits, digits]), torch.tensor([exact.sign, exact.sign]), torch.tensor([True, False])
    assert fixed_point_values(*rows).tolist() == [units, 0]
    assert fixed_point_values(*rows[:2]).tolist() == [units, units]
