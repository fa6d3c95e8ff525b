"""Numbers a model writes in digit tokens during generation, for the context head (``fone_numbers="answers"``).

With ``fone_numbers="answers"`` the text keeps its numbers as the base's digit tokens and the tokenizer marks each
one at its last token (``num_mask`` 2), so that the context head can combine it later. Training sees that mark at
the number's last token; a decode loop only knows the number is complete once the model writes the next character
(a digit could still follow). `DigitNumbers` follows each row's generated text and reports every number as soon as
the character after it shows it is complete: the loop then records it as the row's latest context number
(`numadapter.methods.context.ContextMemory.push`) before the head reads that step, which is what the training
forward computed at the same position (the number is in the context from its last token on).

The numbers are found and ranged exactly as `NumberTokenizer` finds them in a text (`find_numbers`, the digit
places, ``sign_policy``); a number out of range is not a context number there, and is skipped here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from numadapter.numbers import find_numbers
from numadapter.tokenization.expressions import CURRENCY, equations_in

# characters that may continue a number just written ("1," -> "1,000", "2." -> "2.5", "3e" -> "3e5", "4-" -> a date)
_MAY_CONTINUE = frozenset(",._'eE+-")
# stands for a generated [NUM] in the text searched for digit numbers: never part of a number, so a digit number
# right before a [NUM] is complete, and the [NUM]'s own number (already in the context) is not found twice
_NUM_PLACEHOLDER = "\x00"
# the characters of a prompt's end that `DigitNumbers.text_so_far` keeps (an expression before "=" is far shorter)
PROMPT_TAIL = 400


def _glued(text: str) -> bool:
    """Whether what is written after `text` needs no space of its own: `text` ends in a space or a currency sign."""
    return text[-1:].isspace() or text[-1:] in CURRENCY


def _stops(char: str) -> bool:
    """Whether `char` ends every number before it for good: neither a digit nor a character that may continue one
    (a number's span, once such a character follows it, no longer changes as text is appended)."""
    return not char.isdigit() and char not in _MAY_CONTINUE


class DigitNumbers:
    """Per row, the digit-written numbers of the generated text, reported once each as they complete.

    Args:
        rows: B, the rows of the batch.
        decode: ``decode(ids) -> str`` the base tokenizer's text of some generated ids (special tokens skipped).
        number_row: ``number_row(span, surface, after) -> (place digits, sign, value) | None | False`` as
            `NumberTokenizer._context_row` gives it for a number in digits followed by the text `after` (None /
            False: not a number the tokenizer would mark).
        text_sign: ``sign_policy == "text"`` (the sign stays text, the number is its magnitude).
        num_token_id: the [NUM] id (its tokens are the head's numbers, recorded by the loop already).
        prompts: the prompt ids of each row, or None: only `text_so_far` reads them (an expression may start in the
            prompt: ``"12 + 7 ="``).
        marks: the token ids of ``"-"``, ``" -"`` and ``"%"`` (a mark the tokenizer has as no single token left
            out), which the expression check writes around a value (`minus_id`, `percent_id`).
        encode: ``encode(text) -> ids`` the base tokenizer's ids of a text (no special tokens), or None: only
            `spell` uses it (a value the expression check writes as text).
    """

    def __init__(
        self,
        rows: int,
        decode: Callable[[list[int]], str],
        number_row: Callable,
        text_sign: bool,
        num_token_id: int,
        prompts: Sequence[Sequence[int]] | None = None,
        marks: dict[str, int] | None = None,
        encode: Callable[[str], list[int]] | None = None,
    ) -> None:
        self.decode = decode
        self.number_row = number_row
        self.text_sign = text_sign
        self.num_token_id = num_token_id
        self.prompts = [list(ids) for ids in prompts] if prompts is not None else [[] for _ in range(rows)]
        self.marks = dict(marks or {})
        self.encode = encode
        self.then: dict[int, list[int]] = {}  # row -> the tokens its next steps write, in order (`write_next`)
        self.closes: set[int] = set()  # rows whose queued tokens end a number (`write_next(closes=True)`)
        self.closed: set[int] = set()  # rows that wrote the last of those tokens at the latest step
        self.prompt_texts: dict[int, str] = {}  # row -> the end of its prompt's text (decoded once, when first read)
        self.head_texts: list[list[str]] = [[] for _ in range(rows)]  # per row, the text of each [NUM] it wrote
        self.with_equation: set[int] = set()  # rows whose generated text holds an equation (it only grows)
        self.ids: list[list[int]] = [[] for _ in range(rows)]
        self.done: list[int] = [0] * rows  # per row: the text offset up to which numbers were reported
        # per row, the generated-token index of the last token of each number the latest `observe` reported
        self.ends: dict[int, list[int]] = {}

    def _text(self, ids: list[int], written: Sequence[str] = ()) -> str:
        """The generated text with each [NUM] as the next of the `written` texts, or once they run out (by default
        at once) as one placeholder character."""
        parts, run, texts = [], [], iter(written)
        for token in ids:
            if token == self.num_token_id:
                parts.append(self.decode(run) if run else "")
                parts.append(next(texts, _NUM_PLACEHOLDER))
                run = []
            else:
                run.append(token)
        parts.append(self.decode(run) if run else "")
        return "".join(parts)

    def wrote(self, texts: dict[int, str]) -> None:
        """Records the text of the number the head wrote at each row's latest [NUM] (``{row: text}``)."""
        for row, text in texts.items():
            self.head_texts[row].append(text)

    def text_so_far(self, row: int) -> str:
        """The end of `row`'s prompt (up to `PROMPT_TAIL` characters) and its generated text, each [NUM] as the text
        of the number the head wrote there (`wrote`): the text a reader of the output sees."""
        if row not in self.prompt_texts:
            self.prompt_texts[row] = self.decode(self.prompts[row])[-PROMPT_TAIL:] if self.prompts[row] else ""
        return self.prompt_texts[row] + self.generated_text(row)

    def generated_text(self, row: int) -> str:
        """`row`'s generated text alone (`text_so_far` without the prompt's end)."""
        return self._text(self.ids[row], self.head_texts[row])

    def wrote_equation(self, row: int) -> bool:
        """Whether `row`'s generated text holds an ``expression = number`` (`equations_in`); once it does it always
        will, so the text is read again only until then."""
        if row not in self.with_equation and equations_in(self.generated_text(row)):
            self.with_equation.add(row)
        return row in self.with_equation

    def minus_id(self, text: str) -> int | None:
        """The token that writes a minus sign after `text`: ``"-"`` after a space or a currency sign, else ``" -"``
        (as the tokenizer splits ``"= -8"``); None where the tokenizer has no such token."""
        return self.marks.get("-" if _glued(text) else " -")

    @property
    def percent_id(self) -> int | None:
        """The token of ``"%"`` (None where the tokenizer has no such token)."""
        return self.marks.get("%")

    def write_next(self, row: int, *tokens: int, closes: bool = False) -> None:
        """Makes `row`'s next steps write `tokens`, one a step, whatever the model chooses (`take_next`). With
        `closes` they end a number (a value written as text): the step after the last of them may not continue
        it (`take_closed`)."""
        self.then.setdefault(row, []).extend(tokens)
        if closes:
            self.closes.add(row)
        if not self.then[row]:  # nothing queued: what it closes ended at this step's token
            self._emptied(row)

    def take_next(self, rows: Sequence[int]) -> dict[int, int]:
        """The next token `write_next` set for each of `rows` that has one (``{row: token}``), taken off its queue."""
        taken = {}
        for row in rows:
            queue = self.then.get(row)
            if queue:
                taken[row] = queue.pop(0)
                if not queue:
                    self._emptied(row)
        return taken

    def _emptied(self, row: int) -> None:
        """`row`'s queue is spent: it goes, and a number it was closing is marked ended (`take_closed`)."""
        del self.then[row]
        if row in self.closes:
            self.closes.discard(row)
            self.closed.add(row)

    def take_closed(self, rows: Sequence[int]) -> list[int]:
        """Those of `rows` whose latest token ended a number `write_next` wrote (``closes``), known no more: call it
        before `take_next` at each step."""
        closed = [row for row in rows if row in self.closed]
        self.closed.difference_update(closed)
        return closed

    def continues(self, token: int) -> bool:
        """Whether `token` written right after a number would continue it: its text starts with a digit (``"0"``
        after ``"174254976"``; a [NUM]'s number is written apart)."""
        return token != self.num_token_id and self.decode([token])[:1].isdigit()

    def spell(self, before: str, number: str, token: int) -> list[int] | None:
        """The base tokenizer's ids of `number` (its text) written after the text `before` where the model chose
        `token` ([NUM] or a token that starts a number), with the space the text would have there: a [NUM] after
        neither a space nor a currency sign gets one (``"= " + "203297472"``, as the tokenizer splits ``"= 2"``), a
        digit token keeps what its text has before its first digit. None without `encode`."""
        if self.encode is None:
            return None
        if token == self.num_token_id:
            lead = "" if _glued(before) else " "
        else:
            piece = self.decode([token])
            lead = piece[: len(piece) - len(piece.lstrip(" "))]
        return self.encode(lead + number) or None

    def starts_number(self, row: int, token: int) -> bool:
        """Whether `token` would start a new number in digits on `row`: its text begins with a digit (after spaces)
        and the row's text so far does not end in a digit or a number's point (it would continue that number)."""
        if token == self.num_token_id:
            return False
        piece = self.decode([token]).lstrip(" ")
        if not piece[:1].isdigit():
            return False
        text = self._text(self.ids[row])
        return not (text[-1:].isdigit() or (text[-1:] in ".," and text[-2:-1].isdigit()))

    def replace_last(self, rows: Sequence[int], tokens: Sequence[int]) -> None:
        """Replaces the last token observed on `rows` by its entry in `tokens` (a [NUM] the loop chose again in
        digits); a number its [NUM] completed stays reported (a number is rarely written right against a [NUM])."""
        for row in rows:
            self.ids[row][-1] = int(tokens[row])

    def observe(self, tokens: Sequence[int], rows: Sequence[int], final: bool = False) -> dict[int, list[tuple]]:
        """Appends this step's chosen token of each of `rows`; returns the numbers that completed, per row.

        Args:
            tokens: the chosen token of every row (``[B]`` as a list).
            rows: the rows still generating.
            final: the text ends here (the last step): a number at its very end is complete too.

        Returns:
            row -> ``[(place digits, sign), ...]`` in text order, for the rows where some number completed.
        """
        found: dict[int, list[tuple]] = {}
        self.ends = {}
        for row in rows:
            self.ids[row].append(int(tokens[row]))
            text = self._text(self.ids[row])
            new = []
            for span in find_numbers(text):
                if span.start < self.done[row]:
                    continue
                if not final and not any(_stops(char) for char in text[span.end :]):
                    break  # not known to be complete yet ("5,00" may become "5,000"): later numbers neither
                self.done[row] = span.end
                start = span.start + (len(span.sign_text) if self.text_sign and span.sign_text else 0)
                number = self.number_row(span, text[start : span.end], text[span.end : span.end + 1])
                if number:
                    digits, sign, _ = number
                    new.append((tuple(digits), int(sign)))
                    self.ends.setdefault(row, []).append(self._token_ending(row, span.end))
            if new:
                found[row] = new
        return found

    def _token_ending(self, row: int, offset: int) -> int:
        """The index of the generated token of `row` whose text reaches character `offset` (a number's end)."""
        ids = self.ids[row]
        for index in range(len(ids)):
            if len(self._text(ids[: index + 1])) >= offset:
                return index
        return len(ids) - 1
