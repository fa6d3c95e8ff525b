"""`DigitNumbers`: numbers generated in digit tokens join the context once the next character completes them."""

from __future__ import annotations

from numadapter.generation.digit_numbers import DigitNumbers
from numadapter.numbers import ExactNumber

NUM = 99  # the [NUM] id of the fake vocabulary: every other id is one character


def _row(span, surface: str, after: str = ""):
    """`NumberTokenizer._context_row` for int_digits=4, frac_digits=1 (no shares: `after` unread): None beyond the
    range."""
    exact = span.exact if surface == span.text else ExactNumber(1, span.exact.int_digits, span.exact.frac_digits)
    if not exact.fits(4, 1):
        return None
    return tuple(exact.place_digits(4, 1)), exact.sign, exact.to_float()


def _follower(rows: int = 1, text_sign: bool = False) -> DigitNumbers:
    return DigitNumbers(rows, lambda ids: "".join(chr(i) for i in ids), _row, text_sign, NUM)


def _feed(follower: DigitNumbers, text: str, row: int = 0, rows: int = 1) -> list[tuple[int, list]]:
    """Feeds `text` one character a step to `row`; returns (step, numbers completed) for each step that gave some."""
    out = []
    for step, char in enumerate(text):
        tokens = [0] * rows
        tokens[row] = NUM if char == "#" else ord(char)
        got = follower.observe(tokens, [row])
        if got:
            out.append((step, got[row]))
    return out


def test_a_number_completes_at_the_next_character_not_before():
    got = _feed(_follower(), "x 12 and 345.5!")
    assert got == [(4, [((0, 0, 1, 2, 0), 1)]), (14, [((0, 3, 4, 5, 5), 1)])]


def test_a_number_before_a_generated_num_completes_at_it_and_the_num_is_not_read_twice():
    got = _feed(_follower(), "7#, 8 ")
    assert got == [(1, [((0, 0, 0, 7, 0), 1)]), (5, [((0, 0, 0, 8, 0), 1)])]


def test_a_comma_or_point_waits_for_one_more_character():
    assert _feed(_follower(), "5,00") == []  # may become "5,000": nothing known yet
    assert _feed(_follower(), "5,000 ") == [(5, [((5, 0, 0, 0, 0), 1)])]
    assert _feed(_follower(), "5, x") == [(2, [((0, 0, 0, 5, 0), 1)])]
    assert _feed(_follower(), "2.5.") == []
    assert _feed(_follower(), "2.5. ") == [(4, [((0, 0, 0, 2, 5), 1)])]


def test_out_of_range_numbers_are_skipped_and_signs_follow_the_policy():
    assert _feed(_follower(), "123456 ") == []  # 6 integer places > 4: the tokenizer leaves it out too
    assert _feed(_follower(), "-3 ") == [(2, [((0, 0, 0, 3, 0), -1)])]
    assert _feed(_follower(text_sign=True), "-3 ") == [(2, [((0, 0, 0, 3, 0), 1)])]


def test_rows_are_followed_apart_and_only_active_rows_advance():
    follower = _follower(rows=2)
    follower.observe([ord("4"), ord("9")], [0, 1])
    got = follower.observe([ord(" "), ord("9")], [0, 1])
    assert got == {0: [((0, 0, 0, 4, 0), 1)]}
    got = follower.observe([0, ord(" ")], [1])
    assert got == {1: [((0, 0, 9, 9, 0), 1)]}
    assert follower.observe([ord(" "), 0], [0], final=True) == {}


def test_final_completes_a_number_at_the_very_end():
    follower = _follower()
    follower.observe([ord("6")], [0])
    assert follower.observe([ord("2")], [0], final=True) == {0: [((0, 0, 6, 2, 0), 1)]}
