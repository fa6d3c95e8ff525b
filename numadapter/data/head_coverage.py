"""Which training answers the FoNE context head can form: a signed sum of the numbers before them.

The context head (``fone_head_input="context"``, `numadapter.methods.fone.head`) writes a number as
``u * prod_k z_k^(c_k)`` over the last K numbers before it, with ``c`` in ``{-1, 0, +1}^K``: exactly a sum or
difference of some of them (a copy is one term), or else its linear read-out ``u``, which does not learn exact numbers
on a pretrained base (docs/results.md). So the share of a data set's answers that are such a combination says, before
any training, whether the head can help: it does where answers are sums of numbers in the text, and not where no
combination forms them (a x1000 unit conversion).

- `combination_of`, `formable` (the context mode's own, `numadapter.methods.fone.modes.context`, named here for the
  callers of this module): the coefficients that form a target from context values, and whether a combination with
  at least one term does.
- `head_share`, `count_answers`: over a sample of raw training data, how many answers the tokenizer writes as [NUM]
  in answers mode, and how many answers there are (where they are written as equations, each equation's result:
  `numadapter.tokenization.equations`), with those the config's number places cannot hold.
- `head_coverage`: over a prepared data set (`numadapter.data.prepare_dataset` rows), how many completion numbers
  a combination of the K numbers before them forms, with a few that none does.
- `warn_uncovered`: the warning `NumberSFTTrainer` gives when the head cannot form a large share of the answers.
"""

from __future__ import annotations

import copy
import random
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from numadapter.methods.fone.modes.context import combination_of, formable
from numadapter.numbers import ExactNumber, fixed_point
from numadapter.schema import KIND_FIELD, LABEL_PREFIX, MARKER_KIND, POSITIONS_FIELD

__all__ = [
    "Answers", "Coverage", "combination_of", "count_answers", "fixed_point", "formable", "head_coverage", "head_share",
    "measuring_copy", "sample_rows", "warn_uncovered",
]  # fmt: skip

# the places answers are counted at (`count_answers`): every number a text is likely to write
WIDE_PLACES = (40, 20)
# the share of answers the head may fail to form before the trainer warns
UNCOVERED_WARNING_SHARE = 0.1


@dataclass
class Coverage:
    """How many completion numbers of a data set the context head can form.

    Attributes:
        answers: completion numbers looked at.
        formed: those a combination of the K numbers before them forms.
        examples: up to 3 that none forms, as ``(context values, answer value)`` on the fixed-point scale.
    """

    answers: int = 0
    formed: int = 0
    examples: list[tuple[tuple[int, ...], int]] = field(default_factory=list)

    @property
    def share(self) -> float:
        """``formed / answers`` (1.0 when there are none)."""
        return self.formed / self.answers if self.answers else 1.0


def head_coverage(dataset: Any, count: int, limit: int = 2000) -> Coverage:
    """Counts the answers of the first `limit` examples that the context head can form.

    Args:
        dataset: prepared rows (`numadapter.data.prepare_dataset`). Causal rows: the answers are the numbers under
            ``completion_mask`` (prompt/completion data); rows without it train every token, so every number counts
            as an answer (one with no number before it is formed only when it is 0). With ``fone_numbers="answers"``
            the numbers left in digits (``number_kind`` 2) have rows too: they are context like the [NUM]s, and in
            a completion they count as answers (none is a combination with a term, or it would be a [NUM]).
            Sequence-to-sequence rows (``labels_number_*``): the answers are the target's numbers, whose context is
            the source's numbers, then the target's before them (the encoder's, then the decoder's).
        count: K, ``fone_context_numbers``.
        limit: examples to look at.

    Returns:
        `Coverage`.
    """
    coverage = Coverage()
    for index, row in enumerate(dataset):
        if index >= limit:
            break
        values, answers = _values_and_answers(row)
        for n, answer in enumerate(answers):
            if not answer:
                continue
            context = tuple(values[max(0, n - count) : n][::-1])  # the last K before it, most recent first
            coverage.answers += 1
            if combination_of(context, values[n]) is not None:
                coverage.formed += 1
            elif len(coverage.examples) < 3:
                coverage.examples.append((context, values[n]))
    return coverage


def _values_and_answers(row: Any) -> tuple[list[int], list[bool]]:
    """A prepared row's numbers in the order the head reads them (fixed-point values) and which are answers."""
    values = [fixed_point(d, s) for d, s in zip(row["number_digits"], row["number_sign"])]
    target = LABEL_PREFIX + "number_digits"
    if row.get(target) is not None:  # sequence to sequence: the source's numbers, then the target's answers
        answers = [fixed_point(d, s) for d, s in zip(row[target], row[LABEL_PREFIX + "number_sign"])]
        return values + answers, [False] * len(values) + [True] * len(answers)
    trained = row.get("completion_mask")
    return values, [trained is None or bool(trained[p]) for p in row[POSITIONS_FIELD]]


def sample_rows(size: int, sample: int = 2000, seed: int = 0) -> list[int]:
    """The rows of a data set of `size` rows that a share is measured on: all of them up to `sample`, else `sample`
    drawn at random across it (seeded, in order), so sorted or concatenated data is read as a whole."""
    if size <= sample:
        return list(range(size))
    return sorted(random.Random(seed).sample(range(size), sample))


def head_share(
    dataset: Any, ntok: Any, prepare: Any, sample: int = 2000, settings: dict[str, Any] | None = None, seed: int = 0,
    answers: int | None = None,
) -> tuple[int, int]:  # fmt: skip
    """``(formed, answers)``: of the answers (completion numbers, a conversation's assistant-turn numbers when the
    prepared rows mark those turns, or every number of a text without either; where those are written as
    equations, only the numbers right after "=", `numadapter.tokenization.equations`) in `sample_rows` of the raw
    `dataset`, how many the tokenizer writes as [NUM] in answers mode when no answer is kept in digits on purpose
    (``fone_digit_answers=0``, the head in use), under its own rules (sums, products and quotients with
    ``fone_context_products``, copies only with ``fone_head_copies``).

    Args:
        dataset: the raw training data (a `datasets.Dataset`).
        ntok: the `NumberTokenizer` (answers mode); measured on a copy of its config.
        prepare: ``prepare(dataset, ntok) -> prepared rows`` (`numadapter.data.prepare_dataset`, or the trainer's).
        sample: the most examples to look at, drawn across the data set (`sample_rows`).
        settings: config fields to measure under instead of the tokenizer's (e.g. the pointer head's).
        seed: the draw's seed.
        answers: the sample's `count_answers` where the caller has it already (it is not counted again).
    """
    rows = dataset.select(sample_rows(len(dataset), sample, seed))
    formed = sum(1 for _ in _trained_markers(prepare(rows, measuring_copy(ntok, settings))))
    if answers is None:
        answers = count_answers(dataset, ntok, prepare, sample, seed).answers
    return formed, answers


@dataclass
class Answers:
    """The answers of a sample of a data set (`count_answers`), at any number of places.

    Attributes:
        answers: how many (each equation's result where the answers are written as equations).
        beyond: those that need more places than the config's ``int_digits`` / ``frac_digits``: they stay text, and
            the head neither reads nor writes them.
        int_digits, frac_digits: the places that hold every one of them.
    """

    answers: int
    beyond: int
    int_digits: int
    frac_digits: int


def count_answers(dataset: Any, ntok: Any, prepare: Any, sample: int = 2000, seed: int = 0) -> Answers:
    """The answers of `sample_rows` of the raw `dataset` as `head_share` counts them, each a [NUM] whether the
    head forms it or not, at `WIDE_PLACES` so that a number the config's places cannot hold is counted too
    (`Answers`). Arguments as `head_share`'s."""
    measuring = measuring_copy(
        ntok, {"int_digits": WIDE_PLACES[0], "frac_digits": WIDE_PLACES[1], "out_of_range": "text"}
    )
    measuring._every_answer = True  # every answer a [NUM], formed or not
    measuring._cache = {}  # the rows cached at the config's places do not hold at these
    rows = dataset.select(sample_rows(len(dataset), sample, seed))
    config, answers, beyond, ints, fracs = ntok.config, 0, 0, 0, 0
    for digits in _trained_markers(prepare(rows, measuring)):
        exact = ExactNumber.from_place_digits(digits, *WIDE_PLACES)
        answers += 1
        beyond += not exact.fits(config.int_digits, config.frac_digits)  # as `NumberTokenizer` ranges a number
        ints, fracs = max(ints, len(exact.int_digits)), max(fracs, len(exact.frac_digits))
    return Answers(answers, beyond, ints, fracs)


def measuring_copy(ntok: Any, settings: dict[str, Any] | None) -> Any:
    """A copy of `ntok` on a copy of its config with no answer kept in digits on purpose, the head in use and
    `settings` over it."""
    measuring = copy.copy(ntok)
    measuring.config = copy.copy(ntok.config)
    measuring.config.fone_digit_answers = 0.0
    measuring.config.fone_head_in_use = True
    for name, value in (settings or {}).items():
        setattr(measuring.config, name, value)
    return measuring


def _trained_markers(prepared: Any) -> Iterator[list[int]]:
    """The place digits of each [NUM] in the trained part of prepared rows (every token of a row without a mask)."""
    for row in prepared:
        trained = row.get("completion_mask")
        for position, kind, digits in zip(row[POSITIONS_FIELD], row[KIND_FIELD], row["number_digits"]):
            if kind == MARKER_KIND and (trained is None or trained[position]):
                yield digits


def warn_uncovered(coverage: Coverage, count: int, frac_digits: int) -> None:
    """Warns when more than `UNCOVERED_WARNING_SHARE` of the answers are no combination the context head can form."""
    missed = coverage.answers - coverage.formed
    if not coverage.answers or missed / coverage.answers <= UNCOVERED_WARNING_SHARE:
        return
    scale = 10**frac_digits

    def shown(value: int) -> str:
        return str(value / scale) if frac_digits else str(value)

    cases = "; ".join(
        f"{shown(answer)} after [{', '.join(shown(v) for v in context)}]" for context, answer in coverage.examples
    )
    warnings.warn(
        f"{missed} of {coverage.answers} training answers ({missed / coverage.answers:.0%}) are no sum or difference "
        f"of the last fone_context_numbers={count} numbers before them (e.g. {cases}; most recent first). FoNE's "
        "context head writes those through its linear read-out, which does not learn exact numbers on a pretrained "
        "base: for such data use encoding='digits' (LoRA on the base's digit tokens), and read "
        "numadapter.generate(..., return_dict=True).confidences to see which answers the head could not form.",
        stacklevel=3,
    )
