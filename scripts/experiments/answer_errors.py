"""Answer errors and made-up operands of suite records (`eval_harness.suite run --answers`).

For each record given: how many answers end in "#### N", the mean and median absolute error of each answer's last
number (`numadapter.evaluation.last_number`) and how many are off by more than 10^6, the mean without the worst
answer, and the operands of the written equations (`numadapter.evaluation.equations_in`) that appear nowhere in the
text before them (question or solution): numbers a solution made up rather than restated, in the completions and in
the reference solutions. Prints one line a record.

Usage: python scripts/experiments/answer_errors.py RECORD.json [RECORD.json ...]
"""

from __future__ import annotations

import json
import re
import statistics
import sys

from numadapter.evaluation import equations_in, last_number

NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?")


def numbers(text: str) -> set[float]:
    """The values of the numbers written in `text` (separators dropped)."""
    return {float(found.replace(",", "")) for found in NUMBER.findall(text)}


def made_up(prompt: str, completion: str) -> tuple[int, int]:
    """(operands written, operands in no text before them) over the equations of `completion`."""
    seen, written, new, start = numbers(prompt), 0, 0, 0
    for equation in equations_in(completion):
        at = completion.find(equation.expression, start)
        before = seen | numbers(completion[: max(at, 0)])
        for value in NUMBER.findall(equation.expression):
            written += 1
            new += float(value.replace(",", "")) not in before
        start = at + len(equation.expression) if at >= 0 else start
    return written, new


def summary(path: str) -> str:
    answers = json.loads(open(path, encoding="utf-8").read())["answers"]
    errors = sorted(abs(last_number(a["completion"]) - last_number(a["reference"])) for a in answers)
    operands = [made_up(a["prompt"], a["completion"]) for a in answers]
    reference = [made_up(a["prompt"], a["reference"]) for a in answers]
    return (
        f"{path}: {len(answers)} answers, finished {sum('####' in a['completion'] for a in answers)}, "
        f"MAE {statistics.mean(errors):.4g} (median {statistics.median(errors):.4g}), "
        f"without the worst {statistics.mean(errors[:-1]):.4g}, off by > 10^6 {sum(e > 1e6 for e in errors)}, "
        f"operands made up {sum(n for _, n in operands)} of {sum(w for w, _ in operands)} "
        f"(references: {sum(n for _, n in reference)} of {sum(w for w, _ in reference)})"
    )


if __name__ == "__main__":
    for record in sys.argv[1:]:
        print(summary(record))
