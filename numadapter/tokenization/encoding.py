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
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np
import torch

from numadapter.numbers import ExactNumber, NumberOutOfRangeError, NumberSpan, find_numbers
from numadapter.schema import SIDE_FIELDS as SIDE_KEYS
from numadapter.schema import EncodedNumber

ASCII_DIGITS = "0123456789"
_CACHE_LIMIT = 200_000


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

    def _substitute(
        self, index: int, text: str, left: list[NumberSpan] | None = None
    ) -> tuple[str, list[EncodedNumber]]:
        """Puts the marker into `text` for each in-range number; returns the new text and the numbers in order.

        With `left` given, the numbers left as text because they are out of range are appended to it."""
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
        marker = self._marker
        if marker is None:
            return text, []
        text_sign = self.config.sign_policy == "text"
        replace = self._method.replaces_numbers(self.config)
        raise_out = self.config.out_of_range == "error"
        parts: list[str] = []
        numbers: list[EncodedNumber] = []
        pos = 0
        cache_get = self._cache.get
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
            parts.append(text[pos:start])
            parts.append(marker)
            pos = end if replace else start
            numbers.append(EncodedNumber(surface, *row))
        if not numbers:
            return text, numbers
        parts.append(text[pos:])
        return "".join(parts), numbers

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

    def _side_tensors(self, input_ids: np.ndarray, numbers: list[list[EncodedNumber]]) -> dict[str, torch.Tensor]:
        """Side tensors for a rectangular batch: num_mask [B, T], num_digits [B, T, P], num_sign [B, T], num_values."""
        batch, length = input_ids.shape
        num_mask = np.zeros((batch, length), dtype=np.int64)
        num_digits = np.zeros((batch, length, self.config.num_places), dtype=np.int64)
        num_sign = np.zeros((batch, length), dtype=np.int64)
        num_values = np.zeros((batch, length), dtype=np.float32)
        flat = [n for nums in numbers for n in nums]
        if flat:
            rows, cols = np.nonzero(input_ids == self.marker_token_id)  # row-major: the numbers in text order
            _, digits, signs, values = zip(*flat)
            num_mask[rows, cols] = 1
            num_digits[rows, cols] = digits  # (N, P)
            num_sign[rows, cols] = signs
            num_values[rows, cols] = values
        out = {"num_mask": num_mask, "num_digits": num_digits, "num_sign": num_sign, "num_values": num_values}
        return {key: torch.from_numpy(value) for key, value in out.items()}

    def _side_lists(self, ids: list[list[int]], numbers: list[list[EncodedNumber]]) -> dict[str, list]:
        """Side tensors as Python lists (one list per row, rows may differ in length)."""
        places = self.config.num_places
        marker = self.marker_token_id
        out: dict[str, list] = {k: [] for k in SIDE_KEYS}
        zero_row = [0] * places
        for row, nums in zip(ids, numbers):
            length = len(row)
            num_mask, num_sign, num_values = [0] * length, [0] * length, [0.0] * length
            num_digits = list(map(list.copy, repeat(zero_row, length)))  # (T, P), distinct lists
            if nums:
                t = -1
                for _, digits, sign, value in nums:
                    t = row.index(marker, t + 1)
                    num_mask[t], num_digits[t], num_sign[t], num_values[t] = 1, list(digits), sign, value
            out["num_mask"].append(num_mask)
            out["num_digits"].append(num_digits)
            out["num_sign"].append(num_sign)
            out["num_values"].append(num_values)
        return out
