"""A copy of a number the head wrote is the head's to write (answers mode, ``fone_head_copies=False``): that number
is a [NUM] in the text, with no digits for the LM to copy, so training writes its restatement as [NUM] too (the final
answer after a worked solution), and generation keeps the head's copy there; a copy of a number in digits stays the
LM's."""

from __future__ import annotations

import torch

from numadapter.config import NumberAdapterConfig
from numadapter.generation.readout import NumberReader
from numadapter.methods.base import Prediction
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer

PLACES = 4


def reader_with(written: list[list[bool]]) -> NumberReader:
    config = NumberAdapterConfig(encoding="fone", fone_numbers="answers", int_digits=PLACES, frac_digits=0)
    reader = NumberReader(config, head=None)
    reader.head_written = [list(row) for row in written]
    return reader


def prediction(combinations: list[list[int]], value: int = 72) -> Prediction:
    rows = len(combinations)
    digits = torch.tensor([[int(c) for c in f"{value:0{PLACES}d}"]] * rows)
    terms = [sum(c != 0 for c in row) for row in combinations]
    combined = torch.cat((torch.tensor(terms)[:, None], torch.zeros(rows, 1, dtype=torch.long), digits), 1)
    return Prediction(digits, torch.ones(rows, dtype=torch.long), torch.full((rows,), float(value)),
                      combination=torch.tensor(combinations), combined=combined)  # fmt: skip


def test_generation_keeps_a_copy_of_a_head_number_and_leaves_a_copy_of_digits_to_the_lm():
    # row 0: the latest number is a [NUM] the head wrote; row 1: it was written in digits; row 2: a sum, not a copy
    reader = reader_with([[True, False, False, False], [False, True, False, False], [False, False, False, False]])
    combos = [[1, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0]]
    assert reader.unformed(prediction(combos), [0, 1, 2]) == [1]
    # the same copy of the older [NUM] slot on row 1 is the head's
    assert reader.unformed(prediction([[0, 1, 0, 0]] * 2), [0, 1]) == [0]


def test_the_reader_follows_which_context_numbers_the_head_wrote():
    reader = reader_with([[False] * 4, [False] * 4])
    reader._written([1], True)
    reader._written([0, 1], False)
    assert reader.head_written == [[False] * 4, [False, True, False, False]]


def test_training_writes_a_restated_head_number_as_num_and_leaves_restated_digits(tmp_path):
    tok = toy.build_tokenizer("llama3", tmp_path / "tok")
    ntok = NumberTokenizer(tok, NumberAdapterConfig(encoding="fone", fone_numbers="answers", int_digits=5,
                                                    frac_digits=0, fone_digit_answers=0.0))  # fmt: skip
    prompt = "Question: 19 weeks at 360 a week, and 15 more?\nAnswer:"
    completion = " 19 * 360 = 6840 in all, 6840 + 15 = 6855.\nShe has 360 a week.\n#### 6855"
    enc = ntok(prompt + completion, answer_start=len(prompt))
    # 6840 and 6855 are results; the operand 6840 and the final 6855 repeat [NUM]s (copies the head writes); the
    # restated 360 and the operands 19, 360 and 15 repeat numbers in digits (the LM copies those)
    assert enc["number_texts"] == ["6840", "6840", "6855", "6855"]
