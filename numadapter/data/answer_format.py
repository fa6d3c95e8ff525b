"""One-number answers trained at the number head: the FoNE paper's training format, per example.

``answer_format="head"`` (`NumberDataCollator`, `numadapter.NumberSFTTrainer`, `numadapter.NumberSeq2SeqTrainer`):
when the trained part of an example is one number (optionally after a few text tokens such as a space, and followed
by nothing but EOS), the answer's [NUM] is not fed. Causal LMs are cut just before it, and the last fed position is
trained on the answer through ``shift_labels`` + ``labels_num_*`` (transformers' name for labels already aligned
with the logits; `numadapter.tuner.alignment`): the head reads the prompt's last hidden state, as the FoNE paper's
code trains its arithmetic tasks. T5 keeps its labels up to the answer's [NUM] and drops the EOS after it. Other
examples in the same batch (a completion with text after the number, or two numbers, or an answer number that
stayed text because it is out of range) are trained as sequences, so mixed batches work.

What it costs: the EOS after the answer is not trained on those examples, so a model trained only this way does not
learn to stop after its number (mix in sequence examples, or use the default ``"sequence"``, which trains the
number and then EOS). What it buys: shorter sequences (no answer token, no EOS) and no loss term asking the answer's
[NUM] position for EOS.

Every function works on one example's per-token lists (the collator pads afterwards).
"""

from __future__ import annotations

from collections.abc import Sequence

from numadapter.schema import IGNORE_INDEX, LABEL_PREFIX
from numadapter.schema import SIDE_FIELDS as NUMBER_FIELDS

ANSWER_FORMATS = ("sequence", "head")


def check_answer_format(value: str) -> str:
    """Returns `value` when it is a valid ``answer_format``; raises `ValueError` naming the choices otherwise."""
    if value not in ANSWER_FORMATS:
        raise ValueError(
            f"`answer_format` must be one of {list(ANSWER_FORMATS)}, got {value!r}: 'sequence' trains the answer "
            "and the EOS after it as tokens, 'head' trains a one-number answer at the number head without feeding it."
        )
    return value


def answer_number_position(
    labels: Sequence[int], num_mask: Sequence[int], eos_ids: Sequence[int], first: int = 1
) -> int | None:
    """The position of the answer's [NUM] when the scored labels are one number, else None.

    Qualifies: the scored labels (``!= -100``) are zero or more non-number tokens, then exactly one number token
    (``num_mask`` 1), then only EOS tokens (or nothing), and the number is at position ``>= first``. A number left in
    digit tokens (``num_mask`` 2, ``fone_numbers="answers"``) is ordinary tokens here, not a [NUM].

    Args:
        labels: the example's labels aligned with its tokens (``-100`` where not trained).
        num_mask: 1 at [NUM] tokens (2 at the last token of a number left in digits).
        eos_ids: the ids that end a sequence.
        first: the smallest position the number may have (causal LMs: 1, a position must be fed before it).
    """
    scored = [t for t, label in enumerate(labels) if label != IGNORE_INDEX]
    numbers = [t for t in scored if num_mask[t] == 1]
    if len(numbers) != 1 or numbers[0] < first:
        return None
    position = numbers[0]
    if any(labels[t] not in eos_ids for t in scored if t > position):
        return None
    return position


def shift_example(rows: dict[str, list], eos_ids: Sequence[int]) -> dict[str, list]:
    """One causal example in the shifted format: ``shift_labels`` and ``labels_num_*``, cut before a one-number answer.

    Args:
        rows: ``input_ids``, ``labels`` and the number columns (``num_mask``, ``num_digits``, ``num_sign``,
            ``num_values``; ``number_group`` optional), one entry per token.
        eos_ids: the ids that end a sequence.

    Returns:
        The same keys plus ``shift_labels`` (``shift_labels[t] = labels[t + 1]``, -100 at the end) and
        ``labels_num_*`` (the number of ``labels[t + 1]`` where that label is a [NUM], zeros elsewhere: a number left
        in digit tokens is trained as its tokens). When
        `answer_number_position` finds a one-number answer at p, every column is cut to its first p entries: the
        answer's [NUM] and what follows are not fed, and position ``p - 1`` is trained on the answer.
    """
    labels, mask = rows["labels"], rows["num_mask"]
    length = len(labels)
    shifted = labels[1:] + [IGNORE_INDEX]
    out = dict(rows)
    out["shift_labels"] = shifted
    for key in NUMBER_FIELDS:
        column = rows[key]
        empty = [0] * len(column[0]) if key == "num_digits" and column else (0.0 if key == "num_values" else 0)
        out[LABEL_PREFIX + key] = [
            column[t + 1] if t + 1 < length and shifted[t] != IGNORE_INDEX and mask[t + 1] == 1 else _copy(empty)
            for t in range(length)
        ]
    position = answer_number_position(labels, mask, eos_ids)
    if position is not None:
        out = {key: value[:position] if value else value for key, value in out.items()}
    return out


def seq2seq_answer_cut(rows: dict[str, list], eos_ids: Sequence[int]) -> dict[str, list]:
    """A T5 target that is one number keeps its labels up to that [NUM] (the EOS after it is not trained).

    Args:
        rows: the target side: ``labels`` and its number columns (``num_mask``, ...), one entry per label.
        eos_ids: the ids that end a sequence.
    """
    position = answer_number_position(rows["labels"], rows["num_mask"], eos_ids, first=0)
    if position is None:
        return rows
    return {key: value[: position + 1] if value else value for key, value in rows.items()}


def _copy(value):
    return list(value) if isinstance(value, list) else value
