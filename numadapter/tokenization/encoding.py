"""Encoding for `NumberTokenizer`: numbers in the text -> marker tokens and their side tensors.

`NumberEncoding` is a mixin: the class using it provides ``config`` (`NumberAdapterConfig`), ``tokenizer`` (the
wrapped fast tokenizer), ``_method`` (the encoding's `NumberMethod`), ``_marker`` (the marker string put in the text,
None when numbers stay ordinary tokens), ``marker_token_id`` and ``_cache`` (a dict, surface string -> number row).

- `_substitute`: each in-range number of a text (found with `find_numbers`) is replaced by the marker (or, for
  ``encoding="digits"`` with ``aggregate``, the marker is put before it); the numbers come back as `EncodedNumber`
  in text order. Out-of-range numbers stay text or raise, as ``out_of_range`` says.
- `_warn_mostly_text`: when the method's own range (`NumberMethod.accepts`, xVal's ``xval_scale``) left most numbers
  of a batch that fit the digit places as text, one warning per tokenizer (`NumberMethod.mostly_text_warning`).
- `_warn_not_context`: when a number left as text because of the digit places would have been a context number (a
  head that combines the numbers before it, `NumberMethod.context_size` > 0), one warning per tokenizer.
- `_kept_numbers`, `_side_tensors`, `_side_lists`: after the backend tokenized the batch, the numbers whose markers
  survived truncation are written at the marker positions: ``num_mask`` ``[B, T]``, ``num_digits`` ``[B, T, P]``,
  ``num_sign`` ``[B, T]``, ``num_values`` ``[B, T]``.

``fone_numbers="answers"`` (``encoding="fone"``; `numadapter.methods.fone.answer_mode.answers_mode`):
`_substitute_answers` writes as [NUM] only the numbers at or after the text's ``answer_start`` that the context head
can form from the last ``fone_context_numbers`` numbers before them, and leaves every other number in the base
tokenizer's own tokens.
`_placed_rows` finds each number's token with the backend's offsets (``char_to_token``, which counts padding and
special tokens): ``num_mask`` is 1 (`MARKER_KIND`) at a marker and 2 (`CONTEXT_KIND`) at the token holding the last
character of a number left in digits (context only, with its exact digits, sign and value); a number whose token the
truncation cut has no row. Two numbers whose last characters share one token keep the later one's row.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np
import torch

from numadapter.methods.fone.answer_mode import context_count
from numadapter.methods.fone.modes import get_head_mode
from numadapter.numbers import ExactNumber, NumberOutOfRangeError, NumberSpan, find_numbers, fixed_point
from numadapter.schema import CONTEXT_KIND, MARKER_KIND, EncodedNumber
from numadapter.schema import SIDE_FIELDS as SIDE_KEYS
from numadapter.tokenization.equations import EquationAnswers

ASCII_DIGITS = "0123456789"
_CACHE_LIMIT = 200_000


class PlacedNumber(NamedTuple):
    """A number that gets a side row with ``fone_numbers="answers"``, placed in the text the backend encodes.

    Attributes:
        number: its `EncodedNumber` (surface text, place digits, sign, value).
        kind: `MARKER_KIND` (written as [NUM]) or `CONTEXT_KIND` (left in the base tokenizer's digit tokens).
        first: character offset of its first character (a sign kept as text included; the marker's otherwise).
        last: character offset of its last character (the marker's first character for a marker); the row goes on
            the token that holds it.
    """

    number: EncodedNumber
    kind: int
    first: int
    last: int


class NumberRow(NamedTuple):
    """A side row of one encoded text: the token ``position`` that carries it, its ``kind`` (the ``num_mask``
    value), the `EncodedNumber` and ``first``, the first token of the number (for ``number_group``)."""

    position: int
    kind: int
    number: EncodedNumber
    first: int


# a text's answers: None (none), or the ``[start, end)`` character ranges whose numbers are answers
AnswerRanges = tuple[tuple[int, int], ...] | None


def check_answer_start(answer_start: Any, texts: Sequence[str], name: str = "answer_start") -> list[AnswerRanges]:
    """The answer ranges of each text from `NumberTokenizer`'s ``answer_start`` (or ``digits_in``, named `name` in
    the errors: the same format).

    Args:
        answer_start: None, an int (for every text) or a sequence with one entry per text, each an int (the answers
            run from there to the end), None (no answer) or a sequence of ``(start, end)`` character ranges (the
            assistant's turns of a chat: numbers starting in a range are answers, the others context).
        texts: the batch.

    Returns:
        Per text, None or its ranges, each within ``[0, len(text)]``.

    Raises:
        TypeError: another type, or an entry that is none of these.
        ValueError: a sequence whose length is not the batch size, or an offset outside ``[0, len(text)]``.
    """
    if answer_start is None or _is_int(answer_start):
        starts = [answer_start] * len(texts)
    elif isinstance(answer_start, Sequence) and not isinstance(answer_start, (str, bytes)):
        starts = list(answer_start)
        if len(starts) != len(texts):
            raise ValueError(
                f"`{name}` has {len(starts)} entries for a batch of {len(texts)} texts: give one offset (or "
                "None) per text, or a list of (start, end) ranges, or one int for every text."
            )
    else:
        raise TypeError(
            f"`{name}` must be None, an int or a list of int / None / (start, end) ranges (one per text), got "
            f"{type(answer_start).__name__} ({answer_start!r:.80})."
        )
    return [_answer_ranges(index, start, text, name) for index, (start, text) in enumerate(zip(starts, texts))]


def _answer_ranges(index: int, start: Any, text: str, name: str) -> AnswerRanges:
    """One text's `AnswerRanges` from its ``answer_start`` entry (see `check_answer_start`)."""
    if start is None:
        return None
    if _is_int(start):
        if not 0 <= start <= len(text):
            raise ValueError(
                f"`{name}` for text {index} is {start}, outside [0, {len(text)}] (the text's length): give the "
                "character offset where its answer begins (len(prompt) for prompt + completion), or None for none."
            )
        ranges = [(start, len(text))]
    elif (
        isinstance(start, Sequence)
        and not isinstance(start, (str, bytes))
        and all(isinstance(r, Sequence) and len(r) == 2 and all(map(_is_int, r)) for r in start)
    ):
        ranges = [tuple(r) for r in start]
    else:
        raise TypeError(
            f"`{name}` for text {index} must be an int (a character offset), None or a list of (start, end) "
            f"character ranges, got {type(start).__name__} ({start!r:.80})."
        )
    for first, stop in ranges:
        if not 0 <= first <= stop <= len(text):
            raise ValueError(
                f"`{name}` for text {index} holds the range [{first}, {stop}), outside [0, {len(text)}] (the "
                "text's length) or reversed: give (start, end) character ranges within the text, an offset, or None "
                "for none."
            )
    return tuple((int(a), int(b)) for a, b in ranges)


def _copies_a_num(context: Sequence[int], by_head: Sequence[bool], value: int) -> bool:
    """Whether `value` repeats the latest of the `context` values (most recent first) that holds it, and that one
    was written as [NUM] (`by_head`, aligned): a number the head wrote is not in the text as digits, so the LM has
    nothing to copy, and a restatement of it (the final answer after a worked solution, a result named again in
    prose) is the head's copy (one coefficient +1) in any answer, not only after "="."""
    return value in context and by_head[list(context).index(value)]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_ascii_number(span: NumberSpan) -> bool:
    """Whether the number is written with ASCII digits (one script per number, so the first digit decides)."""
    for char in span.text:
        if char.isdigit():
            return char in ASCII_DIGITS
    return True


class NumberEncoding:
    """Number substitution and side tensors for `NumberTokenizer` (see the module docstring)."""

    config: Any
    tokenizer: Any
    marker_token_id: int | None
    _marker: str | None
    _cache: dict[str, Any]
    _method: Any

    def _current_cache(self) -> dict[str, Any]:
        """`_cache`, emptied when the settings its rows depend on changed since it was filled (a trainer fits xVal's
        normalisation after the tokenizer was built; a measuring copy with other settings shares the dict): a new
        dict then, so a copy never empties the original's."""
        cfg = self.config
        key = (cfg.encoding, cfg.int_digits, cfg.frac_digits, cfg.sign_policy, cfg.xval_center, cfg.xval_scale,
               cfg.xval_clip)  # fmt: skip
        if self.__dict__.get("_cache_key") != key:
            self._cache, self._cache_key = {}, key
        return self._cache

    def _number_row(self, span: NumberSpan, surface: str) -> tuple[tuple[int, ...], int, float] | None | bool:
        """(place digits of |x|, sign, signed float value) of the number [NUM]/[AGG] carries for `surface`.

        Returns None when the number is out of range and False when it stays ordinary text in digits mode (another
        digit script). Cached by surface string (its value does not depend on the context).
        """
        row = self._cache.get(surface)
        if row is not None or surface in self._cache:
            return row
        cfg = self.config
        exact = span.exact
        if len(surface) < len(span.text) and exact.sign < 0:  # sign_policy="text": the sign stays text
            exact = ExactNumber(1, exact.int_digits, exact.frac_digits)
        row = None
        if not self._method.replaces_numbers(cfg) and not _is_ascii_number(span):  # digit tokens: ASCII only
            row = False
        elif exact.fits(cfg.int_digits, cfg.frac_digits):
            value = exact.to_float()
            if self._method.accepts(value, cfg):
                row = (tuple(exact.place_digits(cfg.int_digits, cfg.frac_digits)), exact.sign, value)
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
        self._cache[surface] = row
        return row

    def _context_row(self, span: NumberSpan, surface: str, after: str) -> tuple[tuple[int, ...], int, float] | None:
        """The side row of a number the context head reads in digits (``number_kind`` 2): `_number_row`'s, except
        that a share written with a percent sign (`after`, the text right after the number, starts with "%") is
        its value over 100 ("30%" -> 0.3) where that fits the places, so that ``x * 30%`` is a product the head
        forms. None / False as `_number_row` gives them."""
        row = self._number_row(span, surface)
        if not row or not after.startswith("%"):
            return row
        cfg = self.config
        share = ExactNumber.from_place_digits(row[0], cfg.int_digits, cfg.frac_digits, row[1]).to_decimal() / 100
        exact = ExactNumber.parse(share)
        if not exact.fits(cfg.int_digits, cfg.frac_digits):
            return row
        return tuple(exact.place_digits(cfg.int_digits, cfg.frac_digits)), exact.sign, exact.to_float()

    def _out_of_range(self, index: int, text: str, start: int, end: int, span: NumberSpan) -> None:
        cfg = self.config
        exact = span.exact if start == span.start else ExactNumber(1, span.exact.int_digits, span.exact.frac_digits)
        where = f"Text {index}: the number {text[start:end]!r} (characters {start}-{end}, value {exact})"
        if not exact.fits(cfg.int_digits, cfg.frac_digits):
            raise NumberOutOfRangeError(
                f"{where} needs {len(exact.int_digits)} integer and {len(exact.frac_digits)} fraction places, but "
                f"int_digits={cfg.int_digits}, frac_digits={cfg.frac_digits}: raise `int_digits`/`frac_digits`, or "
                "set out_of_range='text' to keep such numbers as text."
            )
        raise NumberOutOfRangeError(f"{where} {self._method.range_error(exact.to_float(), cfg)}")

    def _warn_mostly_text(self, left: Sequence[NumberSpan], kept: int) -> None:
        """Warns (once per tokenizer) when the method's range left most numbers of a batch that fit the digit places
        as text: `left` are the numbers a batch left as text, `kept` the count it encoded."""
        if len(left) <= kept or self.__dict__.get("_range_warned"):
            return
        cfg = self.config
        refused = [span.text for span in left if span.exact.fits(cfg.int_digits, cfg.frac_digits)]
        if len(refused) <= kept:
            return
        message = self._method.mostly_text_warning(cfg, refused, kept + len(refused))
        if message is not None:
            self._range_warned = True
            warnings.warn(message, UserWarning, stacklevel=3)

    def _warn_not_context(self, left: Sequence[NumberSpan]) -> None:
        """Warns (once per tokenizer) when a number left as text because it needs more digit places than the config
        has would have been a context number: a head that combines the numbers before it
        (`NumberMethod.context_size` > 0, FoNE's ``fone_head_input="context"``) only sees [NUM]s, so a sum with it
        silently leaves it out (``1234567 + 1`` with int_digits=6 reads as 1)."""
        if self.__dict__.get("_context_warned") or not self._method.context_size(self.config):
            return
        cfg = self.config
        span = next((span for span in left if not span.exact.fits(cfg.int_digits, cfg.frac_digits)), None)
        if span is None:
            return
        ints, fracs = len(span.exact.int_digits), len(span.exact.frac_digits)
        needs, fixes = [], []
        if ints > cfg.int_digits:
            needs.append(f"{ints} integer places (int_digits={cfg.int_digits})")
            fixes.append(f"int_digits to at least {ints}")
        if fracs > cfg.frac_digits:
            needs.append(f"{fracs} fraction places (frac_digits={cfg.frac_digits})")
            fixes.append(f"frac_digits to at least {fracs}")
        self._context_warned = True
        warnings.warn(
            f"NumberTokenizer left the number {span.text!r} as text: it needs {' and '.join(needs)}, and "
            f"out_of_range='text'. The context head (fone_head_input='context') combines only the numbers written as "
            f"[NUM], so a sum or difference with this number leaves it out. Raise {' and '.join(fixes)} (a new "
            "adapter: the places are part of it), or set out_of_range='error' to raise instead. This warning is shown "
            "once per NumberTokenizer.",
            UserWarning,
            stacklevel=3,
        )

    def _check_text(self, index: int, text: Any) -> None:
        """Refuses a text that is not a str or that holds a marker string literally."""
        if not isinstance(text, str):
            raise TypeError(f"NumberTokenizer: text {index} must be a str, got {type(text).__name__} ({text!r:.80}).")
        for name in ("num_token", "agg_token"):
            reserved = getattr(self.config, name)
            found = text.find(reserved)
            if found >= 0:
                raise ValueError(
                    f"Text {index} contains the literal string {reserved!r} (config.{name}) at character {found}: "
                    "NumberTokenizer reserves the [NUM] and [AGG] marker strings in every encoding, since a literal "
                    "one could not be told apart from a number's marker. Remove or rewrite it in the text (e.g. "
                    f"{reserved.replace('[', '(').replace(']', ')')!r}), or choose another `{name}` in "
                    "NumberAdapterConfig."
                )

    def _rows_of(
        self, index: int, text: str, left: list[NumberSpan] | None
    ) -> Iterator[tuple[NumberSpan, int, str, tuple[tuple[int, ...], int, float]]]:
        """``(span, start, surface, row)`` of each number of `text` that gets a side row, in text order.

        ``start`` is where the number's surface begins (after a sign that stays text with ``sign_policy="text"``),
        ``row`` is `_number_row`'s. Out-of-range numbers raise (``out_of_range="error"``) or are appended to `left`.
        """
        text_sign = self.config.sign_policy == "text"
        raise_out = self.config.out_of_range == "error"
        cache_get = self._current_cache().get
        for span in find_numbers(text):
            start, end = span.start, span.end
            if text_sign and span.sign_text:
                start += len(span.sign_text)
            surface = text[start:end]
            row = cache_get(surface)
            if row is None:
                row = self._number_row(span, surface)
                if row is None:
                    if raise_out:
                        self._out_of_range(index, text, start, end, span)
                    if left is not None:
                        left.append(span)
                    continue
            if row is False:
                continue
            yield span, start, surface, row

    def _substitute(
        self, index: int, text: str, left: list[NumberSpan] | None = None, digits_in: AnswerRanges = None
    ) -> tuple[str, list[EncodedNumber]]:
        """Puts the marker into `text` for each in-range number; returns the new text and the numbers in order.

        With `left` given, the numbers left as text because they are out of range are appended to it. A number that
        starts in one of the `digits_in` character ranges stays the base tokenizer's tokens, with no row."""
        self._check_text(index, text)
        marker = self._marker
        if marker is None:
            return text, []
        replace = self._method.replaces_numbers(self.config)
        parts: list[str] = []
        numbers: list[EncodedNumber] = []
        pos = 0
        for span, start, surface, row in self._rows_of(index, text, left):
            if digits_in and any(first <= span.start < stop for first, stop in digits_in):
                continue
            parts.append(text[pos:start])
            parts.append(marker)
            pos = span.end if replace else start
            numbers.append(EncodedNumber(surface, *row))
        if not numbers:
            return text, numbers
        parts.append(text[pos:])
        return "".join(parts), numbers

    def _formable(self, context: list[int], value: int) -> bool:
        """Whether the head forms `value` from `context` (fixed-point, most recent first), as its mode says
        (`HeadMode.forms`; the context mode: a signed sum with a term, or with ``fone_context_products`` a product /
        exact quotient of two of them); with ``fone_head_copies=False`` not a value that repeats a context number (the
        LM copies it in digits)."""
        cfg = self.config
        if self.__dict__.get("_every_answer"):  # `numadapter.data.head_share` counting the answers
            return True
        if getattr(cfg, "fone_head_in_use", None) is False:  # the trainer left the head out: every answer in digits
            return False
        if not getattr(cfg, "fone_head_copies", True) and value in context:
            return False
        return get_head_mode(cfg).forms(context, value, cfg)

    def _substitute_answers(
        self, index: int, text: str, answers: AnswerRanges, left: list[NumberSpan] | None = None
    ) -> tuple[str, list[PlacedNumber]]:
        """``fone_numbers="answers"``: [NUM] only for the answers the context head can form, the rest stays text.

        Walks the in-range numbers in text order; one whose span starts in one of the `answers` ranges (None: the
        text has no answer), and is an equation's result where that range is written as equations
        (`numadapter.tokenization.equations`: only the number after "=" in a worked solution), becomes the marker
        when a signed combination (at least one term) of the fixed-point values of the last ``fone_context_numbers``
        numbers before it forms its value (`_formable`); every number, marker or digits, is context for the numbers
        after it (one in digits with its `_context_row`: "30%" is 0.3).

        Returns:
            The text with the markers, and every in-range number as a `PlacedNumber` (kind 1: a marker, 2: left in
            digits), with its character offsets in the returned text.
        """
        self._check_text(index, text)
        marker, count = self._marker, context_count(self.config)
        parts: list[str] = []
        placed: list[PlacedNumber] = []
        values: list[int] = []  # fixed-point values of the numbers so far, in text order
        by_head: list[bool] = []  # per number so far: written as [NUM]
        is_answer = EquationAnswers(text, answers)
        pos = written = 0  # consumed characters of `text`; characters of the result written to `parts`
        for span, start, surface, row in self._rows_of(index, text, left):
            value = fixed_point(row[0], row[1])
            context = values[::-1][:count]  # the last K, most recent first
            if (is_answer(span.start, span.end) and self._formable(context, value)) or (
                is_answer.in_ranges(span.start) and _copies_a_num(context, by_head[::-1][:count], value)
            ):
                values.append(value)
                by_head.append(True)
                first = written + span.start - pos  # the sign that stays text, or the marker itself
                written += start - pos
                parts += [text[pos:start], marker]
                placed.append(PlacedNumber(EncodedNumber(surface, *row), MARKER_KIND, first, written))
                written += len(marker)
                pos = span.end
            else:  # in digits: context, a share its value over 100
                row = self._context_row(span, surface, text[span.end : span.end + 1]) or row
                values.append(fixed_point(row[0], row[1]))
                by_head.append(False)
                shift = written - pos  # offset of text[pos:] in the result
                placed.append(
                    PlacedNumber(EncodedNumber(surface, *row), CONTEXT_KIND, span.start + shift, span.end - 1 + shift)
                )
        parts.append(text[pos:])
        return "".join(parts), placed

    # -- encoding ------------------------------------------------------------------------------------------------
    def _kept_numbers(
        self, ids: list[list[int]], numbers: list[list[EncodedNumber]], truncated: bool
    ) -> list[list[EncodedNumber]]:
        """The numbers of each row whose marker survived truncation (all of them without truncation)."""
        if self.marker_token_id is None:
            return numbers
        left = self.tokenizer.truncation_side == "left"
        kept_numbers = []
        for row, nums in zip(ids, numbers):
            if nums:
                kept = row.count(self.marker_token_id)
                if kept != len(nums):
                    if not truncated or kept > len(nums):
                        raise RuntimeError(f"NumberTokenizer: found {kept} markers for {len(nums)} numbers (bug).")
                    nums = nums[len(nums) - kept :] if left else nums[:kept]
            kept_numbers.append(nums)
        return kept_numbers

    def _placed_rows(self, encoding: Any, placed: Sequence[PlacedNumber]) -> list[NumberRow]:
        """The side rows of one encoded text with ``fone_numbers="answers"``, in token order.

        Args:
            encoding: the backend's ``tokenizers.Encoding`` of the text from `_substitute_answers` (padded and
                truncated as returned: its positions count padding and special tokens).
            placed: that text's numbers (`PlacedNumber`).

        Returns:
            One `NumberRow` per number whose last character's token survived truncation; of two numbers whose last
            characters share a token, the later one.
        """
        rows: dict[int, NumberRow] = {}
        for item in placed:
            position = encoding.char_to_token(item.last)
            if position is None:  # its last token was truncated away
                continue
            tokens = (encoding.char_to_token(c) for c in range(item.first, item.last + 1))
            first = next((t for t in tokens if t is not None), position)  # left truncation may cut its start
            rows[position] = NumberRow(position, item.kind, item.number, first)
        return [rows[t] for t in sorted(rows)]

    def _marker_numbers(self, ids: list[list[int]], rows: list[list[NumberRow]]) -> list[list[EncodedNumber]]:
        """The [NUM] numbers of each text (what ``number_texts`` lists), checked against the marker ids."""
        numbers = [[r.number for r in row if r.kind == MARKER_KIND] for row in rows]
        for index, (row_ids, nums) in enumerate(zip(ids, numbers)):
            found = row_ids.count(self.marker_token_id)
            if found != len(nums):
                raise RuntimeError(
                    f"NumberTokenizer: text {index} has {found} markers for {len(nums)} numbers put as [NUM] (bug)."
                )
        return numbers

    @staticmethod
    def _group_lists(ids: list[list[int]], rows: list[list[NumberRow]]) -> list[list[int]]:
        """``number_group`` ``[B][T]``: k on every token of the k-th row's number (from its first token to its row),
        0 elsewhere; a later number wins a token two share."""
        groups = []
        for row_ids, row in zip(ids, rows):
            group = [0] * len(row_ids)
            for k, r in enumerate(row, 1):
                group[r.first : r.position + 1] = [k] * (r.position + 1 - r.first)
            groups.append(group)
        return groups

    def _side_tensors(
        self, input_ids: np.ndarray, numbers: list[list[EncodedNumber]], rows: list[list[NumberRow]] | None = None
    ) -> dict[str, torch.Tensor]:
        """Side tensors for a rectangular batch: num_mask [B, T], num_digits [B, T, P], num_sign [B, T], num_values.

        Without `rows` the numbers go to the marker positions (mask 1); with `rows` (``fone_numbers="answers"``) each
        `NumberRow` goes to its position with its kind as the mask."""
        batch, length = input_ids.shape
        num_mask = np.zeros((batch, length), dtype=np.int64)
        num_digits = np.zeros((batch, length, self.config.num_places), dtype=np.int64)
        num_sign = np.zeros((batch, length), dtype=np.int64)
        num_values = np.zeros((batch, length), dtype=np.float32)
        flat = [n for nums in numbers for n in nums]
        if rows is not None:
            placed = [(b, r) for b, row in enumerate(rows) for r in row]
            if placed:
                batch_index = [b for b, _ in placed]
                position = [r.position for _, r in placed]
                _, digits, signs, values = zip(*(r.number for _, r in placed))
                num_mask[batch_index, position] = [r.kind for _, r in placed]
                num_digits[batch_index, position] = digits  # (N, P)
                num_sign[batch_index, position] = signs
                num_values[batch_index, position] = values
        elif flat:
            batch_index, cols = np.nonzero(input_ids == self.marker_token_id)  # row-major: numbers in text order
            _, digits, signs, values = zip(*flat)
            num_mask[batch_index, cols] = 1
            num_digits[batch_index, cols] = digits  # (N, P)
            num_sign[batch_index, cols] = signs
            num_values[batch_index, cols] = values
        out = {"num_mask": num_mask, "num_digits": num_digits, "num_sign": num_sign, "num_values": num_values}
        return {key: torch.from_numpy(value) for key, value in out.items()}

    def _side_lists(
        self, ids: list[list[int]], numbers: list[list[EncodedNumber]], rows: list[list[NumberRow]] | None = None
    ) -> dict[str, list]:
        """Side tensors as Python lists (one list per row, rows may differ in length); `rows` as in `_side_tensors`."""
        places = self.config.num_places
        marker = self.marker_token_id
        out: dict[str, list] = {k: [] for k in SIDE_KEYS}
        zero_row = [0] * places
        for b, (row, nums) in enumerate(zip(ids, numbers)):
            length = len(row)
            num_mask, num_sign, num_values = [0] * length, [0] * length, [0.0] * length
            num_digits = list(map(list.copy, repeat(zero_row, length)))  # (T, P), distinct lists
            if rows is not None:
                for t, kind, (_, digits, sign, value), _ in rows[b]:
                    num_mask[t], num_digits[t], num_sign[t], num_values[t] = kind, list(digits), sign, value
            elif nums:
                t = -1
                for _, digits, sign, value in nums:
                    t = row.index(marker, t + 1)
                    num_mask[t], num_digits[t], num_sign[t], num_values[t] = 1, list(digits), sign, value
            out["num_mask"].append(num_mask)
            out["num_digits"].append(num_digits)
            out["num_sign"].append(num_sign)
            out["num_values"].append(num_values)
        return out
