"""Scoring generated answers: the last number of each answer against the reference's, exactly.

- `last_number`: the exact value (``Decimal``) of the last number `numadapter.numbers.find_numbers` finds in a text.
- `answer_metrics`: exact match and mean absolute error of the last number of each prediction against its reference.
- `AnswerMetrics`: the same as a trainer's ``compute_metrics`` (`numadapter.AnswerMetrics`; the trainers generate the
  answers for the eval prompts).
- `generate_answers`: greedy completions of many prompts with `numadapter.generate`, in batches.
- `facts_kept`: how many facts a base knew (`numadapter.data.known_facts`) a trained adapter still answers.
- `equations_in`, `equation_score`, `Equation`: the ``expression = number`` equations a worked solution writes and
  whether each is right, exactly (`numadapter.tokenization.expressions`).

Used by the trainers' evaluation, ``numadapter eval`` (`numadapter.app.commands`) and the quick start. torch and the
generation code are imported only inside `generate_answers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on first use (`__getattr__`)
    from numadapter.tokenization.expressions import Equation, equation_score, equations_in

__all__ = [
    "AnswerMetrics", "Equation", "answer_metrics", "equation_score", "equations_in", "generate_answers", "last_number",
]  # fmt: skip
# the equation checker's names, re-exported from numadapter.tokenization.expressions on first use (`__getattr__`)
_EQUATION_NAMES = ("Equation", "equation_score", "equations_in")


def __getattr__(name: str) -> Any:
    """PEP 562: the equation checker's names, imported when first asked for (its package imports transformers)."""
    if name in _EQUATION_NAMES:
        from numadapter.tokenization import expressions

        return getattr(expressions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def last_number(text: str) -> Decimal | None:
    """The value of the last number `find_numbers` finds in `text` (exact), or None."""
    from numadapter.numbers import find_numbers

    spans = find_numbers(text)
    return spans[-1].exact.to_decimal() if spans else None


def answer_metrics(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float | int]:
    """Exact match and mean absolute error of the last number of each prediction against its reference.

    A prediction without a number counts as wrong for exact match and is left out of the mean absolute error
    (``answered`` says how many had one). References without a number are skipped.

    Returns:
        ``{"examples", "answered", "exact_match", "mae"}`` (``mae`` is NaN when nothing was answered).
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references.")
    total = answered = correct = 0
    errors = Decimal(0)
    for prediction, reference in zip(predictions, references):
        want = last_number(reference)
        if want is None:
            continue
        total += 1
        got = last_number(prediction)
        if got is None:
            continue
        answered += 1
        correct += got == want
        errors += abs(got - want)
    return {
        "examples": total,
        "answered": answered,
        "exact_match": correct / total if total else float("nan"),
        "mae": float(errors / answered) if answered else float("nan"),
    }


class AnswerMetrics:
    """A ready ``compute_metrics`` for `NumberSFTTrainer` / `NumberSeq2SeqTrainer`: `answer_metrics` of the answers.

    ``generates = True`` tells the trainers to generate (``numadapter.generate``, greedy, the number head decoding
    every number) an answer for each ``prompt`` of the eval set (prompt/completion text) during ``evaluate`` and
    ``predict``, and to call this with a `numadapter.training.base.NumberEvalPrediction`; the result (``examples``,
    ``answered``, ``exact_match``, ``mae`` of the last number against the ``completion``'s) is logged with the
    eval loss (``eval_exact_match``, ...). ``numadapter eval`` computes its metrics with it too.

    Args:
        max_new_tokens: the most tokens generated per answer (a Seq2Seq ``generation_max_length`` or
            ``evaluate(max_new_tokens=...)`` takes precedence).
        batch_size: prompts per generate call (None: the trainer's eval batch size).
    """

    generates = True

    def __init__(self, max_new_tokens: int = 64, batch_size: int | None = None) -> None:
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size

    def __call__(self, prediction: Any) -> dict[str, float | int]:
        """`answer_metrics` of ``prediction.texts`` (generated answers) against ``prediction.references``."""
        texts, references = getattr(prediction, "texts", None), getattr(prediction, "references", None)
        if texts is None or references is None:
            raise TypeError(
                f"AnswerMetrics takes the generated answers (texts and references), got {type(prediction).__name__}: "
                "pass it as compute_metrics to a numadapter trainer, which generates them."
            )
        return answer_metrics(texts, references)


def generate_answers(
    model: Any, ntok: Any, prompts: Sequence[str], max_new_tokens: int, batch_size: int, progress: bool = True
) -> list[str]:
    """Greedy completions of `prompts` with `numadapter.generate`, in batches, with a progress bar."""
    from tqdm.auto import tqdm

    from numadapter.generation import generate

    model.eval()
    out: list[str] = []
    starts = range(0, len(prompts), batch_size)
    for start in tqdm(starts, desc="generating", unit="batch", disable=not progress):
        chunk = list(prompts[start : start + batch_size])
        result = generate(model, ntok, chunk, max_new_tokens=max_new_tokens, return_dict=True)
        out.extend(result.completions)
    return out


def facts_kept(model: Any, ntok: Any, known: Sequence[tuple[str, str]], batch_size: int = 32) -> tuple[int, list[str]]:
    """How many of the `known` facts a trained adapter still answers (first generated number == the answer), with
    its greedy continuation of each prompt (`generate_answers`, 8 new tokens)."""
    from numadapter.data.known_facts import first_number

    if not known:
        return 0, []
    answers = generate_answers(model, ntok, [p for p, _ in known], 8, batch_size, progress=False)
    kept = sum(first_number(got) == Decimal(answer) for got, (_, answer) in zip(answers, known))
    return kept, answers
