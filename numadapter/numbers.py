"""Exact numbers in text: ``find_numbers``, ``ExactNumber`` and ``NumberSpan``.

Every number is kept as digit strings (sign, integer digits, fraction digits) from the moment it is read until the
encodings turn it into features, so a 400-digit integer or a 30-digit fraction is never rounded through float64
(docs/DESIGN.md, "Numbers are exact until the last moment"). Exponents are applied by shifting the decimal point in the
digit string. ``Decimal`` is used only by ``ExactNumber.to_decimal`` and to read ``Decimal`` inputs.

``find_numbers`` is one pass of one compiled regular expression (``_NUMBER_RE``) plus cheap post-processing
per match; text with non-ASCII digits gets one more pass per digit script present. It never raises on a ``str``.
It pauses the cycle collector while it builds the spans (they hold no cycles) and restores its previous state;
about 0.2 s of CPU per MB of number-heavy text (100k numbers per MB) on a 2-core CI machine.

Rules (choices marked *arbitrary* could reasonably have gone the other way; they are pinned by tests):

- **Digits.** A number is written in one script: ASCII ``0-9`` or any other Unicode decimal-digit block
  (category Nd: Arabic-Indic, fullwidth, Devanagari, ...). Its ``int_part`` / ``frac_part`` are given in ASCII
  digits. Digits of two scripts are never joined into one number. Only the ASCII ``.``, ``,``, ``e``/``E`` and
  sign characters act as point, separator and exponent marker, for every script (*arbitrary*: the Arabic
  decimal separator U+066B and the fullwidth full stop are text). Superscripts and other non-Nd digits are text.
- **Point.** ``.`` belongs to a number only when a digit follows it: ``5.`` is 5 followed by the text ``.``.
  A leading-dot decimal (``.5``) needs the dot not to follow a word character or another dot (``x.5`` and
  ``...5`` give 5). Two or more dots between digit runs (``1.2.3``, ``192.168.0.1``) make a version / address:
  each dot-separated run is its own integer, unsigned.
- **Thousands separators.** ``,`` joins digits only in a valid grouping: a first group of 1-3 digits not
  starting with 0, then groups of exactly 3, and the whole run of comma-separated digit groups must be valid
  (``1,234,56`` is the list 1, 234, 56; ``5,1,234`` is 5, 1, 234). A valid grouping is always one number, even
  inside a list (``1,234`` is 1234, *arbitrary*). Spaces, apostrophes and underscores never separate thousands.
  Decimal commas (``3,5``) are not supported: two numbers.
- **Exponent.** ``e``/``E``, an optional sign (``+``, ``-``, U+2212) and digits, directly after the mantissa.
  It is taken only when no letter touches the number on either side (``0x3e5`` is 0, 3, 5 and ``3e5f`` is 3,
  5: hex and hashes are not scientific notation; *arbitrary*: ``3e8m`` is also 3, 8). A literal whose exponent is
  above ``MAX_EXPONENT`` in absolute value is left entirely as text by ``find_numbers`` (no span for any part
  of it), and refused by ``ExactNumber.parse``, so that ``1e999999999`` never builds a gigantic digit string.
- **Signs.** ``+``, ``-`` or U+2212 directly before the digits (or before ``.5``) is the number's sign when the
  character before it is not a word character, ``)``, ``]``, ``}`` or ``%`` (those end an operand, so the sign
  is an operator or a hyphen there). At most one sign character belongs to a number. *Arbitrary*: ``5 -3`` is
  5 and -3 (spacing decides). En/em dashes are never signs. ``-0`` has the canonical zero sign +1 in ``exact``
  (the ``-`` stays in ``text`` and ``sign_text``).
- **Words.** Letters around digits end the number but do not prevent it (*arbitrary*; units and ordinals are
  common in number-heavy text): ``H2O`` gives 2, ``3rd`` gives 3, ``COVID-19`` gives 19.
- **Symbols.** Currency and percent signs are never part of a span: ``$5``, ``12%``, ``€3.50``.

Documented outcomes (input -> spans as ``text=value``; each row is a test in ``tests/numadapter/test_numbers.py``):

=========================  ==================================================  ==================================
input                      spans                                               why
=========================  ==================================================  ==================================
``42``                     ``42``                                              integer
``3.14``                   ``3.14``                                            decimal
``.5``                     ``.5=0.5``                                          leading-dot decimal
``x.5``                    ``5``                                               dot after a word char is text
``...5``                   ``5``                                               dot after a dot is text
``007``                    ``007=7`` (int_part ``007``)                        leading zeros kept in int_part
``0.0``                    ``0.0=0``                                           zero
``1.50``                   ``1.50=1.5`` (frac_part ``50``)                     trailing zeros kept in frac_part
``I have 5.``              ``5``                                               trailing dot is text
``1,234,567.89``           ``1,234,567.89=1234567.89``                         valid grouping
``12,345``                 ``12,345=12345``                                    valid grouping (arbitrary)
``1,2``                    ``1``, ``2``                                        invalid grouping: a list
``1,23``                   ``1``, ``23``
``1,2,3``                  ``1``, ``2``, ``3``
``1,234,56``               ``1``, ``234``, ``56``                              one bad group spoils the run
``1,2345``                 ``1``, ``2345``
``5,1,234``                ``5``, ``1``, ``234``
``0,001``                  ``0``, ``001=1``                                    first group may not start with 0
``6.02e23``                ``6.02e23=602000000000000000000000``                exponent applied exactly
``1E-5``                   ``1E-5=0.00001``
``1e+5``                   ``1e+5=100000``
``2e``                     ``2``                                               no exponent digits: text
``e5``                     ``5``                                               no mantissa
``0x3e5``                  ``0``, ``3``, ``5``                                 glued to letters: no exponent
``1e999999999``            (none)                                              exponent above MAX_EXPONENT
``-3``                     ``-3``                                              sign at start
``x=-3``                   ``-3``                                              sign after an operator
``(-4)``                   ``-4``                                              sign after an opening bracket
``3-2``                    ``3``, ``2``                                        minus is an operator
``a-3``                    ``3``                                               hyphen after a word
``(1)-2``                  ``1``, ``2``                                        minus after ``)`` is an operator
``--3``                    ``-3`` (from offset 1)                              one sign character at most
``+3``                     ``+3=3``                                            plus sign, sign_text ``+``
``−3`` (U+2212)            ``−3=-3``                                           unicode minus
``5 -3``                   ``5``, ``-3``                                       spacing decides (arbitrary)
``-0``                     ``-0=0``                                            canonical zero sign +1
``-.5``                    ``-.5=-0.5``
``1e-5``                   ``1e-5=0.00001``                                    exponent sign, number unsigned
``$5``                     ``5``                                               symbol excluded
``12%``                    ``12``
``€3.50``                  ``3.50=3.5``
``50%-60%``                ``50``, ``60``                                      minus after ``%`` is an operator
``COVID-19``               ``19``
``H2O``                    ``2``
``3rd``                    ``3``
``v1.2``                   ``1.2``                                             one dot: a decimal (arbitrary)
``v1.2.3``                 ``1``, ``2``, ``3``                                 several dots: a version
``1.2.3``                  ``1``, ``2``, ``3``
``192.168.0.1``            ``192``, ``168``, ``0``, ``1``
``-1.2.3``                 ``1``, ``2``, ``3``                                 versions never take a sign
``.5.6``                   ``5.6``                                             (arbitrary)
``2024-01-05``             ``2024``, ``01=1``, ``05=5``                        date: hyphens after digits
``12:30``                  ``12``, ``30``                                      time
``1_000``                  ``1``, ``000=0``                                    underscore is not a separator
``٣٤٥``                    ``٣٤٥=345`` (int_part ``345``)                      Arabic-Indic digits
``１２３``                 ``１２３=123``                                      fullwidth digits
``१२.५``                   ``१२.५=12.5``                                       Devanagari with ASCII point
``1٣``                     ``1``, ``٣=3``                                      scripts are not joined
``٣٫٥``                    ``٣=3``, ``٥=5``                                    U+066B is text
=========================  ==================================================  ==================================
"""

from __future__ import annotations

import operator
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["MAX_EXPONENT", "ExactNumber", "NumberOutOfRangeError", "NumberSpan", "find_numbers"]

MAX_EXPONENT = 10000
"""Largest ``|exponent|`` applied when reading ``1e5``-style literals (and ``Decimal`` exponents)."""

_MINUS = ("-", "\u2212")
_MAX_EXPONENT_LEN = len(str(MAX_EXPONENT))

_NUMBER_RE = re.compile(
    r"""
    (?=[0-9.+\-\u2212])                                      # cheap first-character test (speed only)
    (?:
    (?P<dotted>[0-9]+(?:\.[0-9]+){2,})                      # version / address: 1.2.3, 192.168.0.1
    |
    (?:(?<=[^\W\d_])(?P<glued>))?                           # a letter touches the start: no exponent
    (?P<sign>(?<![\w)\]}%])[+\-\u2212])?                    # sign unless it follows the end of an operand
    (?:
        (?P<grouped>(?<![0-9],)[1-9][0-9]{0,2}(?:,[0-9]{3}(?![0-9]))+(?!,[0-9]))   # 1,234,567
      | (?P<int>[0-9]+(?![0-9]))
      | (?<![\w.])(?=\.[0-9])                               # leading-dot decimal: .5
    )
    (?:\.(?P<frac>[0-9]+)(?![0-9]))?
    (?!\.[0-9])                                             # not part of a version
    (?(glued)|(?:[eE](?P<exp>[+\-\u2212]?[0-9]+)(?![^\W_]))?)   # exponent unless a letter touches either end
    )
    """,
    re.VERBOSE,
)
_OTHER_DIGIT_RE = re.compile(r"[^\D0-9]")


def fixed_point(digits: Sequence[int], sign: int = 1) -> int:
    """The fixed-point integer of place digits (most significant first) and a sign, in units of the lowest place
    (``value * 10^frac_digits``): ``[0, 4, 2, 5]`` with one fraction place is 42.5 -> 425; ``[]`` -> 0. The inverse
    of `ExactNumber.place_digits`; `numadapter.methods.context.fixed_point_values` is the same on tensors."""
    magnitude = int("".join(map(str, digits)) or "0")
    return -magnitude if sign < 0 else magnitude


class NumberOutOfRangeError(ValueError):
    """A number does not fit the configured digit places.

    The message names the number, the places it needs, the configured limit and the setting to change
    (``int_digits`` / ``frac_digits``), or suggests ``out_of_range="text"`` to keep such numbers as text.
    """


def _short(digits: str) -> str:
    """Abbreviate a very long number for error messages."""
    if len(digits) <= 60:
        return digits
    return f"{digits[:30]}...{digits[-20:]} ({len(digits)} characters)"


def _check_places(int_digits: int, frac_digits: int) -> None:
    for name, places in (("int_digits", int_digits), ("frac_digits", frac_digits)):
        if isinstance(places, bool) or not isinstance(places, int) or places < 0:
            raise ValueError(f"`{name}` must be a non-negative int, got {places!r}.")


def _new_exact(sign: int, int_digits: str, frac_digits: str) -> ExactNumber:
    """Build an already canonical ExactNumber without re-validating it (hot path of find_numbers)."""
    obj = object.__new__(ExactNumber)
    obj.__dict__.update(sign=sign, int_digits=int_digits, frac_digits=frac_digits)
    return obj


def _from_digits(negative: bool, int_part: str, frac_part: str, exponent: int) -> ExactNumber:
    """Canonical ExactNumber of ``(-1 if negative) * int_part.frac_part * 10**exponent`` (ASCII digits)."""
    if exponent:
        digits = int_part + frac_part
        point = len(int_part) + exponent  # digits before the point
        if point <= 0:
            int_part, frac_part = "", "0" * -point + digits
        elif point >= len(digits):
            int_part, frac_part = digits + "0" * (point - len(digits)), ""
        else:
            int_part, frac_part = digits[:point], digits[point:]
    int_part = int_part.lstrip("0")
    frac_part = frac_part.rstrip("0")
    return _new_exact(-1 if negative and (int_part or frac_part) else 1, int_part, frac_part)


@dataclass(frozen=True)
class ExactNumber:
    """A canonical, exact decimal number; never passes through float64.

    Attributes:
        sign: +1 or -1 (zero is always +1).
        int_digits: ASCII digits of the integer part without leading zeros ("" when the integer part is 0).
        frac_digits: ASCII digits of the fraction part without trailing zeros ("" when there is none).
    """

    sign: int
    int_digits: str
    frac_digits: str

    def __post_init__(self) -> None:
        if self.sign not in (1, -1) or isinstance(self.sign, bool):
            raise ValueError(f"ExactNumber: `sign` must be +1 or -1, got {self.sign!r}.")
        for name, digits in (("int_digits", self.int_digits), ("frac_digits", self.frac_digits)):
            if not isinstance(digits, str) or not (digits == "" or (digits.isascii() and digits.isdigit())):
                raise ValueError(f"ExactNumber: `{name}` must be a string of ASCII digits, got {digits!r}.")
        if self.int_digits.startswith("0"):
            raise ValueError(
                f"ExactNumber: `int_digits` must have no leading zeros, got {self.int_digits!r}; "
                "use ExactNumber.parse() to canonicalise."
            )
        if self.frac_digits.endswith("0"):
            raise ValueError(
                f"ExactNumber: `frac_digits` must have no trailing zeros, got {self.frac_digits!r}; "
                "use ExactNumber.parse() to canonicalise."
            )
        if self.sign == -1 and not (self.int_digits or self.frac_digits):
            raise ValueError("ExactNumber: zero must have sign +1, got sign=-1.")

    @classmethod
    def parse(cls, value: str | int | float | Decimal | ExactNumber) -> ExactNumber:
        """Read an exact number.

        Args:
            value: a ``str`` holding exactly one number literal in a form ``find_numbers`` reads as one whole
                span (sign, thousands separators, exponent and non-ASCII digits allowed; surrounding whitespace
                ignored), an ``int`` of any size, a finite ``float`` (read through ``repr``, i.e. the shortest
                decimal that round-trips), a finite ``Decimal`` or an ``ExactNumber`` (returned as is).

        Returns:
            The canonical ExactNumber.

        Raises:
            TypeError: for ``bool`` and any other type.
            ValueError: for nan/inf, text that is not exactly one number literal, or an exponent above
                ``MAX_EXPONENT``.
        """
        if isinstance(value, ExactNumber):
            return value
        if isinstance(value, bool):
            raise TypeError(f"ExactNumber.parse: got the bool {value!r}; pass an int, float, Decimal or str number.")
        if isinstance(value, int):
            try:
                digits = str(abs(value))
            except ValueError:  # above sys.get_int_max_str_digits(); Decimal has no such limit
                digits = str(Decimal(abs(value)))
            return _from_digits(value < 0, digits, "", 0)
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(f"ExactNumber.parse: cannot represent the float {value!r} as an exact number.")
            return cls._parse_str(repr(value))
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError(f"ExactNumber.parse: cannot represent the Decimal {value!r} as an exact number.")
            sign, digit_tuple, exponent = value.as_tuple()
            digits = "".join(map(str, digit_tuple)).rstrip("0")
            if not digits:
                return _new_exact(1, "", "")
            exponent += len(digit_tuple) - len(digits)
            if abs(exponent) > MAX_EXPONENT:
                raise ValueError(
                    f"ExactNumber.parse: the Decimal {_short(str(value))} has exponent {exponent}, above the limit "
                    f"|exponent| <= {MAX_EXPONENT} (numadapter.numbers.MAX_EXPONENT)."
                )
            return _from_digits(bool(sign), digits, "", exponent)
        if isinstance(value, str):
            return cls._parse_str(value)
        raise TypeError(
            f"ExactNumber.parse: expected str, int, float, Decimal or ExactNumber, got {type(value).__name__} "
            f"({value!r:.80}); convert it first, e.g. with int(...) or str(...)."
        )

    @classmethod
    def _parse_str(cls, value: str) -> ExactNumber:
        text = value.strip()
        spans = _find(text, strict=True)
        if len(spans) != 1 or spans[0].start != 0 or spans[0].end != len(text):
            found = ", ".join(repr(s.text) for s in spans[:5]) or "no number"
            raise ValueError(
                f"ExactNumber.parse: {_short(value)!r} is not a single number literal (find_numbers reads "
                f"{found}); pass one number such as '-12.5', '1,234', '6.02e23'."
            )
        return spans[0].exact

    def to_decimal(self) -> Decimal:
        """The exact value as a ``Decimal`` (no rounding: construction ignores the context precision)."""
        return Decimal(str(self))

    def to_float(self) -> float:
        """The value rounded once (correctly) to float64.

        Values above the float64 range give ``inf`` / ``-inf`` and tiny ones underflow to ``0.0``, as
        ``float(Decimal)`` does; use the digit strings where exactness matters.
        """
        return float(str(self))

    def __str__(self) -> str:
        text = self.int_digits or "0"
        if self.frac_digits:
            text = f"{text}.{self.frac_digits}"
        return f"-{text}" if self.sign < 0 else text

    def fits(self, int_digits: int, frac_digits: int) -> bool:
        """Whether ``|self|`` is exactly representable with ``int_digits`` + ``frac_digits`` decimal places."""
        _check_places(int_digits, frac_digits)
        return len(self.int_digits) <= int_digits and len(self.frac_digits) <= frac_digits

    def place_digits(self, int_digits: int, frac_digits: int) -> list[int]:
        """The digits of ``|self|`` at fixed places, most significant first.

        Args:
            int_digits: m, number of integer places.
            frac_digits: n, number of fraction places.

        Returns:
            A list of length m + n (P); index j is the digit of place ``10**(m - 1 - j)``. The sign is not
            included.

        Raises:
            NumberOutOfRangeError: if the number needs more integer or fraction places (never wraps or rounds).
        """
        _check_places(int_digits, frac_digits)
        ni, nf = len(self.int_digits), len(self.frac_digits)
        if ni > int_digits:
            raise NumberOutOfRangeError(
                f"Number {_short(str(self))} needs {ni} integer places, but int_digits={int_digits}: raise "
                f"`int_digits` to at least {ni}, or set out_of_range='text' to keep such numbers as text."
            )
        if nf > frac_digits:
            raise NumberOutOfRangeError(
                f"Number {_short(str(self))} needs {nf} fraction places, but frac_digits={frac_digits}: raise "
                f"`frac_digits` to at least {nf}, or set out_of_range='text' to keep such numbers as text."
            )
        padded = "0" * (int_digits - ni) + self.int_digits + self.frac_digits + "0" * (frac_digits - nf)
        return [byte - 48 for byte in padded.encode("ascii")]

    @classmethod
    def from_place_digits(cls, digits: Sequence[int], int_digits: int, frac_digits: int, sign: int = 1) -> ExactNumber:
        """Inverse of ``place_digits``: digits at fixed places (most significant first) -> ExactNumber.

        Args:
            digits: int_digits + frac_digits (P) integers in 0..9 (Python or NumPy/PyTorch integer scalars).
            int_digits: m, number of integer places.
            frac_digits: n, number of fraction places.
            sign: +1 or -1; a zero result always gets +1.

        Raises:
            ValueError: on a wrong length, a digit outside 0..9, or a sign other than +1/-1.
        """
        _check_places(int_digits, frac_digits)
        if isinstance(sign, bool) or sign not in (1, -1):
            raise ValueError(f"from_place_digits: `sign` must be +1 or -1, got {sign!r}.")
        values = list(digits)
        if len(values) != int_digits + frac_digits:
            raise ValueError(
                f"from_place_digits: got {len(values)} digits, expected int_digits + frac_digits = "
                f"{int_digits} + {frac_digits} = {int_digits + frac_digits}."
            )
        chars = []
        for j, d in enumerate(values):
            if isinstance(d, bool):
                raise ValueError(f"from_place_digits: digit {j} is the bool {d!r}; expected an int in 0..9.")
            try:
                d = operator.index(d)
            except TypeError:
                raise ValueError(f"from_place_digits: digit {j} is {d!r}; expected an int in 0..9.") from None
            if not 0 <= d <= 9:
                raise ValueError(f"from_place_digits: digit {j} is {d}; expected an int in 0..9.")
            chars.append(chr(48 + d))
        text = "".join(chars)
        return _from_digits(sign < 0, text[:int_digits], text[int_digits:], 0)


@dataclass(frozen=True)
class NumberSpan:
    """One number found in a text by ``find_numbers``.

    Attributes:
        start: offset of the first character (the sign character when there is one).
        end: offset one past the last character; ``source[start:end] == text``.
        text: the surface form exactly as in the source (sign, separators, exponent, original digit script).
        sign_text: "" or the sign character at the start of ``text`` ("-", "+" or "\\u2212").
        int_part: ASCII digits before the point as written (leading zeros kept, separators removed).
        frac_part: ASCII digits after the point as written (trailing zeros kept).
        exponent: the written exponent, 0 when there is none.
        exact: the value with the exponent applied, canonical.
    """

    start: int
    end: int
    text: str
    sign_text: str
    int_part: str
    frac_part: str
    exponent: int
    exact: ExactNumber

    @property
    def value(self) -> float:
        """The signed value as float64 (see ``ExactNumber.to_float``)."""
        return self.exact.to_float()

    @property
    def sign(self) -> int:
        """+1 or -1 of the exact value (+1 for zero, also for ``-0``)."""
        return self.exact.sign


def _scan(text: str, source: str, spans: list[NumberSpan], strict: bool) -> None:
    """Append the spans of one digit script; ``source`` is ``text`` with that script's digits mapped to ASCII.

    Objects are built with ``object.__new__`` + ``__dict__.update``, which skips the frozen-dataclass ``__init__``
    (one ``object.__setattr__`` per field) on this hot path; the values are canonical by construction.
    """
    new = object.__new__
    append = spans.append
    for m in _NUMBER_RE.finditer(source):
        dotted, _, sign, grouped, int_part, frac_part, exp = m.groups("")
        start, end = m.span()
        if dotted:
            for part in dotted.split("."):
                end = start + len(part)
                exact = new(ExactNumber)
                exact.__dict__.update(sign=1, int_digits=part.lstrip("0"), frac_digits="")
                span = new(NumberSpan)
                span.__dict__.update(
                    start=start, end=end, text=text[start:end], sign_text="", int_part=part, frac_part="",
                    exponent=0, exact=exact,
                )  # fmt: skip
                append(span)
                start = end + 1
            continue
        if grouped:
            int_part = grouped.replace(",", "")
        exponent = 0
        if exp:
            magnitude = exp.lstrip("+-\u2212").lstrip("0") or "0"
            if len(magnitude) > _MAX_EXPONENT_LEN or int(magnitude) > MAX_EXPONENT:
                if strict:
                    raise ValueError(
                        f"ExactNumber.parse: the exponent of {_short(m.group())!r} is above the limit "
                        f"|exponent| <= {MAX_EXPONENT} (numadapter.numbers.MAX_EXPONENT)."
                    )
                continue  # left as text: see the module docstring
            exponent = -int(magnitude) if exp[0] in _MINUS else int(magnitude)
            exact = _from_digits(sign in _MINUS, int_part, frac_part, exponent)
        else:
            i = int_part.lstrip("0")
            f = frac_part.rstrip("0")
            exact = new(ExactNumber)
            exact.__dict__.update(sign=-1 if sign and sign != "+" and (i or f) else 1, int_digits=i, frac_digits=f)
        span = new(NumberSpan)
        span.__dict__.update(
            start=start, end=end, text=text[start:end], sign_text=sign, int_part=int_part, frac_part=frac_part,
            exponent=exponent, exact=exact,
        )  # fmt: skip
        append(span)


def _find(text: str, strict: bool) -> list[NumberSpan]:
    spans: list[NumberSpan] = []
    _scan(text, text, spans, strict)
    if text.isascii():
        return spans
    zeros = {ord(c) - unicodedata.decimal(c) for c in set(_OTHER_DIGIT_RE.findall(text))}
    if not zeros:
        return spans
    for zero in sorted(zeros):
        swap = {zero + k: 48 + k for k in range(10)}
        swap.update({48 + k: zero + k for k in range(10)})  # ASCII digits become digits of another script
        _scan(text, text.translate(swap), spans, strict)
    spans.sort(key=operator.attrgetter("start"))
    return spans


def find_numbers(text: str) -> list[NumberSpan]:
    """Find the numbers in ``text``; see the module docstring for the rules and a table of outcomes.

    Args:
        text: any string.

    Returns:
        Non-overlapping spans sorted by ``start``, with ``text[span.start:span.end] == span.text``.

    Raises:
        TypeError: if ``text`` is not a ``str`` (never raises for a ``str``).
    """
    if not isinstance(text, str):
        raise TypeError(f"find_numbers expects a str, got {type(text).__name__} ({text!r:.80}).")
    return _find(text, strict=False)
