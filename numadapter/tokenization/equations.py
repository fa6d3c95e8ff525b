"""Which numbers of an answer are its results, for FoNE's answers mode (``fone_numbers="answers"``).

An answer written as equations (a worked solution: ``48/2 = 24 clips, then 48 + 24 = 72.``) holds three kinds of
numbers: the results of the expressions just before them (24, 72), the operands (48, 2, 24 again) and numbers
restated in prose. Only a result is something the context head computes from the numbers before it; an operand is
context, and a restated number is a copy the LM writes in digits. So in an answer range that holds an "=" sign, the
answers are the numbers right after an "=" (a currency sign and spaces between them allowed) that do not go on as
the first operand of a longer expression (``= 3 * 4 = 12``: only 12); in an answer without "=" (a prompt/completion
pair whose completion is the number, a chat reply) every number stays an answer, as before.
"""

from __future__ import annotations

import re

__all__ = ["EquationAnswers"]

# an equals sign that is not part of "==", "<=", ">=", "!=" or "=>"
_EQUALS = re.compile(r"(?<![<>!=])=(?![=>])")
# what may stand between "=" and its result: spaces and a currency sign
_BETWEEN = " \t\u00a0$€£¥"
# after a number: an operator and a further operand, so the number starts an expression rather than ending one
_GOES_ON = re.compile(
    r"[ \t\u00a0]*(?:[-+*/×÷^]|x(?=[ \t\u00a0]*[$€£¥(]?[ \t\u00a0]*\d))[ \t\u00a0]*[$€£¥(]?[ \t\u00a0]*[\d.(]"
)


class EquationAnswers:
    """For one text and its answer ranges, whether the number at a span is an answer.

    Args:
        text: the whole text (prompt and answer: an "=" at the end of the prompt counts for the answer's first
            number).
        ranges: the answer ranges, ``[start, end)`` character offsets (`numadapter.tokenization.encoding`'s
            ``AnswerRanges``; None: the text has no answer).
    """

    def __init__(self, text: str, ranges: tuple[tuple[int, int], ...] | None) -> None:
        self.text = text
        self.ranges = ranges or ()
        self.equations = tuple(_EQUALS.search(text, first, stop) is not None for first, stop in self.ranges)

    def in_ranges(self, start: int) -> bool:
        """Whether a number starting at character `start` is in one of the answer ranges (a result or not)."""
        return any(first <= start < stop for first, stop in self.ranges)

    def __call__(self, start: int, end: int) -> bool:
        """Whether the number ``text[start:end]`` (its sign included) is an answer: it starts in an answer range,
        and where that range holds an "=", it is an equation's result (`is_result`)."""
        for (first, stop), equations in zip(self.ranges, self.equations):
            if first <= start < stop:
                return not equations or is_result(self.text, start, end)
        return False


def is_result(text: str, start: int, end: int) -> bool:
    """Whether the number ``text[start:end]`` follows an "=" (spaces and a currency sign between them allowed) and
    is not followed by an operator and another operand (where it begins an expression: ``= 3 * 4 = 12``)."""
    before = text[:start].rstrip(_BETWEEN)
    if not before.endswith("=") or _EQUALS.match(before, len(before) - 1) is None:
        return False
    return _GOES_ON.match(text, end) is None
