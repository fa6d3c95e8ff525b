"""Answers mode (``fone_numbers="answers"``) as round 5 built it: sums only, every formable answer a [NUM], copies
written by the head. Most answers-mode tests set it up so that each of the later settings (the defaults since round
6: products, digit answers, copies left to the LM) changes one thing at a time in its own test."""

SUMS_ONLY = {
    "fone_numbers": "answers",
    "fone_context_products": False,
    "fone_digit_answers": 0.0,
    "fone_head_copies": True,
}
