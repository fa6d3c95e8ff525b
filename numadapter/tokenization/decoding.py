"""Decoding for `NumberTokenizer`: ids (+ the numbers' surface forms or place digits) back to text, losslessly.

Two adjacent numbers (a model may generate ``[NUM][NUM]``) are decoded with a space between them when their texts
would otherwise merge into another number ("12" and "34" into 1234), so the text re-encodes to the numbers generated
(`number_separator`); numbers that stay apart when joined (digits of two scripts) are joined as they were written, so
``decode(ntok(text)) == text`` still holds.

`NumberDecoding` is a mixin: the class using it provides ``tokenizer`` (the wrapped fast tokenizer), ``config``
(`NumberAdapterConfig`) and ``num_token_id`` (None for ``encoding="digits"``, where numbers are ordinary tokens).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from numadapter.methods.fone.answer_mode import answers_mode
from numadapter.numbers import ExactNumber, find_numbers
from numadapter.tokenization.notes import PromptNumbers, SequenceNumbers, noted, texts_in_scope, texts_of

NO_NUMBERS = (
    "numbers are never looked up from the ids' values, and a copy of a tensor (.clone(), .to(device), .tolist(), "
    "torch.tensor(list)) carries none: decode the tensor NumberTokenizer or model.generate returned, or a row or "
    "slice of it (ntok.decode(output[0]), ntok.batch_decode(output[:, prompt_len:])); pass number_texts= (e.g. "
    "numadapter.generation.numbers_of(output).number_texts[row]) or num_digits= (+ num_sign); for pipelines use "
    "pipeline('number-text-generation', model=model, tokenizer=ntok), which carries the numbers"
)


def render_place_digits(digits: Sequence[int], sign: int, config: Any) -> str:
    """The canonical text of a number given by its place digits ``[P]`` (most significant first) and sign."""
    exact = ExactNumber.from_place_digits(list(digits), config.int_digits, config.frac_digits, -1 if sign < 0 else 1)
    return str(exact)


class NumberDecoding:
    """``decode`` / ``batch_decode`` that render each [NUM] from its surface form or its exact place digits."""

    tokenizer: Any
    config: Any
    num_token_id: int | None

    def decode(
        self,
        encoding_or_ids: Any,
        number_texts: Sequence[str] | None = None,
        num_digits: Any = None,
        num_sign: Any = None,
        skip_special_tokens: bool = True,
        clean_up_tokenization_spaces: bool | None = None,
        **kwargs: Any,
    ) -> str:
        """Turns one sequence back into text with its numbers.

        Args:
            encoding_or_ids: a `BatchEncoding`/dict of one sequence (or a batch of one), or ids (list, 1-D tensor).
                Side entries (``number_texts``, ``num_digits``, ``num_sign``) are read from it when present.
            number_texts: the surface form of each [NUM] in order (exact round trip).
            num_digits: [T, P] place digits aligned with the ids; used when `number_texts` is not given: each
                [NUM] is rendered canonically from its digits and `num_sign` ([T], default +1).
            num_sign: [T] signs aligned with the ids.
            skip_special_tokens: drop bos/eos/pad and the other special tokens (numbers are rendered and [AGG] is
                dropped either way). With False, special-token strings that were written in the encoded text come
                back: ``decode(ntok(text, add_special_tokens=False), skip_special_tokens=False) == text``.
            clean_up_tokenization_spaces, **kwargs: passed to the wrapped tokenizer's ``decode`` (transformers'
                options, as pipelines pass them).

        Without any of the number arguments, the numbers come from where numadapter noted them
        (`numadapter.tokenization.notes`): the tensor `NumberTokenizer` or ``model.generate`` returned, or a view of
        it (``enc["input_ids"][0]``, ``output[0, prompt_len:]``). Ids are never matched to numbers by value: a copy
        or a list of ids with [NUM] needs `number_texts` or `num_digits`.

        Returns:
            The text.

        Raises:
            ValueError: the ids hold [NUM] tokens whose numbers are not known.
        """
        ids, texts, digits, signs = self._unpack(encoding_or_ids, number_texts, num_digits, num_sign, batched=False)
        options = _decode_options(skip_special_tokens, clean_up_tokenization_spaces, kwargs)
        return self._decode_row(ids, texts, digits, signs, options)

    def batch_decode(
        self,
        sequences: Any,
        number_texts: Sequence[Sequence[str]] | None = None,
        num_digits: Any = None,
        num_sign: Any = None,
        skip_special_tokens: bool = True,
        clean_up_tokenization_spaces: bool | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """`decode` for a batch: a batched `BatchEncoding`/dict, a [B, T] tensor, a list of id lists, or the output
        of ``model.generate`` or a view of it (its numbers are rendered)."""
        ids, texts, digits, signs = self._unpack(sequences, number_texts, num_digits, num_sign, batched=True)
        options = _decode_options(skip_special_tokens, clean_up_tokenization_spaces, kwargs)
        return [
            self._decode_row(
                row,
                None if texts is None else texts[b],
                None if digits is None else digits[b],
                None if signs is None else signs[b],
                options,
            )
            for b, row in enumerate(ids)
        ]

    def _unpack(self, source, number_texts, num_digits, num_sign, batched: bool):
        if number_texts is None and num_digits is None:
            found = noted(source)
            if isinstance(found, (SequenceNumbers, PromptNumbers)):
                number_texts = found.number_texts
            elif isinstance(source, Mapping) and source.get("number_texts") is None and self.num_token_id is not None:
                number_texts = texts_of(source.get("input_ids", source.get("sequences")), self.num_token_id)
            elif self.num_token_id is not None:
                number_texts = texts_of(source, self.num_token_id)  # the noted tensor or a view of it
                if number_texts is not None and getattr(source, "dim", lambda: 2)() == 1:
                    number_texts = number_texts[0]
        if isinstance(source, Mapping):
            number_texts = source.get("number_texts") if number_texts is None else number_texts
            num_digits = source.get("num_digits") if num_digits is None else num_digits
            num_sign = source.get("num_sign") if num_sign is None else num_sign
            source = source["input_ids"] if "input_ids" in source or "sequences" not in source else source["sequences"]
        ids = source.tolist() if hasattr(source, "tolist") else list(source)
        nested = bool(ids) and isinstance(ids[0], list)
        num_digits = num_digits.tolist() if hasattr(num_digits, "tolist") else num_digits
        num_sign = num_sign.tolist() if hasattr(num_sign, "tolist") else num_sign
        if batched:
            if not nested:
                raise ValueError("batch_decode expects a batch of sequences [B, T]; use decode for one sequence.")
            return ids, number_texts, num_digits, num_sign
        if nested:
            if len(ids) != 1:
                raise ValueError(f"decode takes one sequence, got a batch of {len(ids)}: use batch_decode.")
            ids = ids[0]
            if number_texts is not None and number_texts and not isinstance(number_texts[0], str):
                number_texts = number_texts[0]
            num_digits = None if num_digits is None else num_digits[0]
            num_sign = None if num_sign is None else num_sign[0]
        return ids, number_texts, num_digits, num_sign

    def _special_ids(self) -> set[int]:
        ids = set(self.tokenizer.all_special_ids)
        ids.update(i for i, token in self.tokenizer.added_tokens_decoder.items() if token.special)
        return ids

    def _number_strings(self, ids: list[int], texts, digits, signs) -> list[str]:
        positions = [t for t, i in enumerate(ids) if i == self.num_token_id]
        if texts is not None:
            texts = list(texts)
            if len(texts) != len(positions):
                raise ValueError(
                    f"The ids hold {len(positions)} {self.config.num_token} tokens but {len(texts)} number_texts were "
                    "given: pass the number_texts of exactly this sequence (or num_digits instead)."
                )
            return texts
        if not positions:
            return []
        if digits is None:
            texts = texts_in_scope(ids, self.num_token_id)  # a streamer or the pipeline decoding a generation's ids
            if texts is not None:
                return texts
            raise ValueError(
                f"Decoding {len(positions)} {self.config.num_token} tokens needs their numbers, and these ids carry "
                f"none: {NO_NUMBERS}."
            )
        return [render_place_digits(digits[t], 1 if signs is None else int(signs[t]), self.config) for t in positions]

    def _decode_row(self, ids: list[int], texts, digits, signs, options: dict[str, Any]) -> str:
        ids = [int(i) for i in ids]
        options = dict(options)
        skip_special_tokens = options.pop("skip_special_tokens")
        if self.num_token_id is None:  # digits: numbers are ordinary tokens; [AGG] is a marker, never text
            agg = getattr(self, "agg_token_id", None)
            if agg is not None:
                ids = [i for i in ids if i != agg]
            return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens, **options)
        numbers = self._number_strings(ids, texts, digits, signs)
        num = self.num_token_id
        touching = [b == num for a, b in zip(ids, ids[1:]) if a == num]  # [NUM] k directly followed by [NUM] k + 1
        if skip_special_tokens:
            special = self._special_ids() - {self.num_token_id}
            ids = [i for i in ids if i not in special]
        decoded = self.tokenizer.decode(ids, skip_special_tokens=False, **options)
        pieces = decoded.split(self.config.num_token)
        if len(pieces) != len(numbers) + 1:  # ordinary tokens spelled the marker: decode the pieces one by one
            pieces, current = [], []
            for i in ids + [self.num_token_id]:
                if i == self.num_token_id:
                    pieces.append(self.tokenizer.decode(current, skip_special_tokens=False, **options))
                    current = []
                else:
                    current.append(i)
        apart = digits_apart if answers_mode(self.config) else _together
        out = [pieces[0]]
        for k, (number, piece) in enumerate(zip(numbers, pieces[1:])):
            out.append(apart(out[-1], number) + number)
            if k < len(touching) and touching[k]:
                piece = number_separator(number, numbers[k + 1])
            else:
                piece = apart(number, piece) + piece
            out.append(piece)
        return "".join(out)


def _together(left: str, right: str) -> str:
    """Text and numbers joined as they are (a [NUM] stands where its number was in the text)."""
    return ""


def digits_apart(left: str, right: str) -> str:
    """With ``fone_numbers="answers"``: a space where a [NUM] and the digit text next to it would run together ("5"
    then [NUM] 5 reads as 55), else ``""``. The model writes numbers in digit tokens and as [NUM] there, and can write
    them side by side; the text must still read as the numbers it wrote. (With ``"all"``, digits beside a [NUM] come
    from a text whose number out of range stayed text, and are joined as they were written.)"""
    left_end = left[-1:].isdigit() or (left[-1:] == "." and left[-2:-1].isdigit())
    right_start = right[:1].isdigit() or (right[:1] == "." and right[1:2].isdigit())
    return " " if left_end and right_start else ""


def number_separator(left: str, right: str) -> str:
    """What goes between two adjacent numbers (``[NUM][NUM]``, no token between them): ``""`` when ``left +
    right`` reads back as exactly these two numbers (digits of two scripts, as a text encodes), else a space, so the
    text re-encodes to the same numbers ("12" then "34" would read as 1234, "1.5" then "0.25" as 1.50 and 25)."""
    spans = find_numbers(left + right)
    if [(s.start, s.text) for s in spans] == [(0, left), (len(left), right)]:
        return ""
    return " "


def _decode_options(skip_special_tokens: bool, clean_up_tokenization_spaces: bool | None, kwargs: dict) -> dict:
    """The options for the wrapped tokenizer's ``decode`` (None values left out, so its defaults apply)."""
    options = {"skip_special_tokens": bool(skip_special_tokens)}
    if clean_up_tokenization_spaces is not None:
        options["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
    options.update({key: value for key, value in kwargs.items() if value is not None})
    return options
