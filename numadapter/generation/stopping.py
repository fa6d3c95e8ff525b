"""Per-sequence bookkeeping on the host: generated ids, numbers, and when each sequence stops.

A sequence stops at the first of: an end-of-sequence token (kept in its ids, dropped from its text as a special
token), a stop string appearing in its generated text (kept in the text, as transformers' ``stop_strings`` do),
an xVal number that cannot be fed back (``"number_out_of_range"``), or `max_new_tokens`. Other sequences of the
batch go on; a stopped one is fed padding until the whole batch is done, and nothing it produces is recorded.

Stop strings are searched in the text of the last ``4 * len(longest stop string) + 4`` generated tokens only (a
token carries at least one byte and a character at most four, so a stop string ending at the newest token always
lies inside), which keeps the per-step work independent of the sequence length.
"""

from __future__ import annotations

from collections.abc import Callable

from numadapter.methods.base import GeneratedNumber

REASONS = ("eos", "stop_string", "length", "number_out_of_range")


class RowTracker:
    """What every sequence of the batch generated so far, and which are still running.

    Args:
        batch: number of sequences.
        eos_ids: token ids that end a sequence.
        stop_strings: strings that end a sequence when they appear in its generated text.
        marker: the [NUM] id (None without number tokens).
        decode: ``decode(ids, number_texts) -> str`` for the stop-string window.
    """

    def __init__(
        self,
        batch: int,
        eos_ids: list[int],
        stop_strings: list[str],
        marker: int | None,
        decode: Callable[[list[int], list[str]], str],
    ) -> None:
        self.tokens: list[list[int]] = [[] for _ in range(batch)]
        self.numbers: list[list[GeneratedNumber]] = [[] for _ in range(batch)]
        self.reasons: list[str | None] = [None] * batch
        self.active: list[int] = list(range(batch))
        self.eos = frozenset(eos_ids)
        self.stop_strings = list(stop_strings)
        self.window = 4 * max(map(len, stop_strings)) + 4 if stop_strings else 0
        self.marker = marker
        self.decode = decode

    def record(self, tokens: list[int], numbers: dict[int, GeneratedNumber]) -> list[int]:
        """Appends this step's token (and number) to every running sequence; returns the rows that stopped now."""
        stopped = []
        for row in self.active:
            token = tokens[row]
            self.tokens[row].append(token)
            number = numbers.get(row)
            if number is not None:
                self.numbers[row].append(number)
            reason = None
            if token in self.eos:
                reason = "eos"
            elif number is not None and not number.feedable:
                reason = "number_out_of_range"
            elif self.window and self._stop_string(row):
                reason = "stop_string"
            if reason is not None:
                self.reasons[row] = reason
                stopped.append(row)
        if stopped:
            done = set(stopped)
            self.active = [row for row in self.active if row not in done]
        return stopped

    def finish(self) -> None:
        """Marks the sequences still running as stopped by length."""
        for row in self.active:
            self.reasons[row] = "length"
        self.active = []

    def _stop_string(self, row: int) -> bool:
        window = self.tokens[row][-self.window :]
        count = window.count(self.marker) if self.marker is not None else 0
        texts = [n.text for n in self.numbers[row][len(self.numbers[row]) - count :]] if count else []
        text = self.decode(window, texts)
        return any(stop in text for stop in self.stop_strings)
