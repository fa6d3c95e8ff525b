"""Answers mode (``fone_numbers="answers"``) as round 5 built it: sums only, every formable answer a [NUM], copies
written by the head, every number the head's own choice (no expression check). Most answers-mode tests set it up so
that each of the later settings (the defaults since: products, digit answers, copies left to the LM, the expression
check) changes one thing at a time in its own test."""

from __future__ import annotations

import torch

from helpers.generation_cases import PROMPTS
from numadapter.generation import generate
from numadapter.numbers import ExactNumber, find_numbers

SUMS_ONLY = {
    "fone_numbers": "answers",
    "fone_context_products": False,
    "fone_digit_answers": 0.0,
    "fone_head_copies": True,
    "fone_expression_check": False,
}


PLACES = (4, 2)  # the generation cases' int_digits, frac_digits (`helpers.generation_cases.build`)


def _digit_rows(ntok, generated: list[int], marker: int) -> dict[int, ExactNumber]:
    """Token index -> number for each number the generated ids write in digits, found on the whole text at once
    (an independent reading of what `DigitNumbers` follows step by step): the token holding its last character."""
    pieces = ["\x00" if i == marker else ntok.tokenizer.decode([i], skip_special_tokens=True) for i in generated]
    ends, total = [], 0
    for piece in pieces:
        total += len(piece)
        ends.append(total)
    text = "".join(pieces)
    rows = {}
    for span in find_numbers(text):
        if span.end == len(text):  # still open at the end: no later token reads it
            continue
        token = next(t for t, end in enumerate(ends) if end >= span.end)
        rows[token] = span.exact
    return rows


def agrees_with_the_training_forward(model, ntok, use_cache: bool, sample: bool) -> None:
    """Generates from `PROMPTS[:6]` and checks each row against the public forward on prompt + generated ids, with
    the prompt's numbers, the generated [NUM]s and the numbers generated in digits (num_mask 2 at their last token,
    as the tokenizer marks them) as side tensors: it predicts every generated [NUM]'s number (and, greedy, picks
    every generated token)."""
    marker = ntok.num_token_id
    options = {"do_sample": True, "top_k": 2, "seed": 0} if sample else {}
    out = generate(model, ntok, PROMPTS[:6] * (4 if sample else 1), max_new_tokens=12, min_new_tokens=12,
                   use_cache=use_cache, return_dict=True, **options)  # fmt: skip
    digit_numbers = 0
    checked = 0
    for row, prompt in enumerate(PROMPTS[:6] * (4 if sample else 1)):
        enc = ntok(prompt, return_tensors="pt")
        generated = out.token_ids[row][:-1]
        heads = [n for n, c in zip(out.numbers[row], out.confidences[row]) if c is not None]
        length = len(generated)
        mask = torch.zeros(1, length, dtype=torch.long)
        digits = torch.zeros(1, length, sum(PLACES), dtype=torch.long)
        sign = torch.zeros(1, length, dtype=torch.long)
        at = [t for t, i in enumerate(generated) if i == marker]
        for t, number in zip(at, heads):
            mask[0, t], digits[0, t], sign[0, t] = 1, torch.tensor(number.place_digits(*PLACES)), number.sign
        for t, number in _digit_rows(ntok, generated, marker).items():
            if number.fits(*PLACES):
                mask[0, t], digits[0, t], sign[0, t] = 2, torch.tensor(number.place_digits(*PLACES)), number.sign
                digit_numbers += 1
        kwargs = {
            "input_ids": torch.cat((enc["input_ids"], torch.tensor([generated])), 1),
            "num_mask": torch.cat((enc["num_mask"], mask), 1),
            "num_digits": torch.cat((enc["num_digits"], digits), 1),
            "num_sign": torch.cat((enc["num_sign"], sign), 1),
            "num_values": torch.zeros(1, enc["input_ids"].shape[1] + length),
        }
        with torch.no_grad():
            forced = model(**kwargs)
        offset = enc["input_ids"].shape[1] - 1
        if not sample:  # the LM's greedy token at every step, or where it chose a [NUM] the head cannot write (a
            # combination beyond the places, a copy of digits), its likeliest digit token instead
            logits = forced.logits[0, offset:]
            digits_only = torch.full_like(logits, float("-inf"))
            digits_only[:, ntok.digit_token_ids] = logits[:, ntok.digit_token_ids]
            for step, (token, wanted, digit) in enumerate(
                zip(out.token_ids[row], logits.argmax(-1).tolist(), digits_only.argmax(-1).tolist())
            ):
                assert token == wanted or (wanted == marker and token == digit), (row, step, token, wanted)
        targets = [offset + t for t in at]
        got = forced.number_logits[0, targets].argmax(-1).tolist()
        signs = torch.where(forced.number_sign_logits[0, targets].argmax(-1) == 1, -1, 1).tolist()
        assert [ExactNumber.from_place_digits(d, *PLACES, s) for d, s in zip(got, signs)] == heads[: len(at)]
        checked += len(at)
    assert checked >= 2 and (digit_numbers >= 1 or not sample), out.completions
