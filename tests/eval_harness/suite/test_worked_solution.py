"""The worked_solution family: every reference equation right under the checker
(`numadapter.tokenization.expressions`, tested in tests/numadapter/tokenization/test_expressions.py), the places the
rows need, and the run's equation score of the answers."""

from __future__ import annotations

import json
import random
import re
import types
from decimal import Decimal

import pytest

import numadapter.generation
from eval_harness.suite import report, run
from eval_harness.suite.families import FAMILIES, family_rows, worked_solution
from numadapter.evaluation import equations_in, last_number
from numadapter.numbers import find_numbers


def _three_operands(expression: str) -> bool:
    return len(re.findall(r"\d\s*[-+*/]\s*[$\d]", expression)) >= 2


def test_every_reference_equation_is_right_and_the_mix_is_there():
    rng = random.Random(7)
    draws = [worked_solution(rng) for _ in range(2000)]
    equations, large, percent, cents = 0, False, False, False
    three = 0
    for prompt, completion in draws:
        assert prompt.startswith("Question: ") and prompt.endswith("\nAnswer:") and completion.startswith(" ")
        *steps, final = completion[1:].split("\n")
        assert re.fullmatch(r"#### \d+(\.\d{1,2})?", final), completion
        found = equations_in(completion)
        assert 2 <= len(found) <= 4 and all(e.right for e in found), (completion, [e for e in found if not e.right])
        assert len(steps) <= len(found) + 2  # at most two prose lines restating a number
        assert found[-1].written == last_number(completion) == Decimal(final[5:]), completion  # the last step's
        equations += len(found)
        three += sum(_three_operands(e.expression) for e in found)
        numbers = [span.exact.to_decimal() for span in find_numbers(prompt + completion)]
        large = large or max(numbers) >= 100_000_000
        percent = percent or "%" in completion
        cents = cents or re.search(r"\$[\d,]+\.\d\d\b", completion) is not None
    assert large and percent and cents
    assert 0.08 <= three / equations <= 0.25, three / equations  # about 10-20% of equations have three operands


def test_every_number_fits_nine_and_two_places_and_the_answer_budget():
    found = FAMILIES["worked_solution"]
    assert (found.int_digits, found.frac_digits, found.equations) == (9, 2, True)
    assert {name for name, f in FAMILIES.items() if f.equations} == {"worked_solution", "gsm8k"}
    from helpers.real import real_tokenizer

    tokenizer = real_tokenizer()
    rng = random.Random(3)
    longest = 0
    for _ in range(2000):
        prompt, completion = worked_solution(rng)
        for span in find_numbers(prompt + completion):
            assert span.exact.fits(9, 2), (span.text, prompt, completion)
        longest = max(longest, len(tokenizer(completion, add_special_tokens=False).input_ids))
    # SmolLM2 writes every digit as a token: the budget holds the longest reference with room to spare, not 3x it
    assert 1.2 * longest <= found.max_new_tokens <= 1.5 * longest


def test_eight_thousand_and_two_hundred_distinct_disjoint_rows():
    train, held = family_rows("worked_solution", 8000, 200, 0)
    prompts = [r["prompt"] for r in train], [r["prompt"] for r in held]
    assert len(set(prompts[0])) == 8000 and len(set(prompts[1])) == 200 and not set(prompts[0]) & set(prompts[1])


def _fake_generate(calls: list, completions: dict[str, str]):
    def generate(model, ntok, prompts, max_new_tokens, return_dict, batch_size=None):
        calls.append((list(prompts), max_new_tokens))
        return types.SimpleNamespace(completions=[completions.get(p, " 1") for p in prompts],
                                     confidences=[[None] for _ in prompts],
                                     combinations=[[None] for _ in prompts])  # fmt: skip

    return generate


@pytest.mark.parametrize("answers", [False, True])
def test_the_run_scores_the_answers_equations_and_generates_them_once(monkeypatch, tmp_path, answers):
    calls, arms = [], []

    def fake_arm(name, task, steps, eval_every, n_train, n_eval, batch, seed, base, out, note, lr, **extra):
        arms.append(extra)
        return {"arm": name}

    import eval_harness.study

    monkeypatch.setattr(eval_harness.study, "run_arm", fake_arm)
    args = run.parse_args(["run", "--families", "worked_solution,percent", "--arms", "lora_digits", "--steps", "2",
                           "--n-train", "4", "--n-eval", "3", "--no-retention", "--out", str(tmp_path)]
                          + (["--answers"] if answers else []))  # fmt: skip
    run.run(args)
    held = arms[0]["rows"][1]
    wrong = " 2 + 2 = 5\n3 * 3 = 9\n#### 9"
    completions = {held[0]["prompt"]: held[0]["completion"], held[1]["prompt"]: wrong, held[2]["prompt"]: " 9"}
    monkeypatch.setattr(numadapter.generation, "generate", _fake_generate(calls, completions))
    model = types.SimpleNamespace(eval=lambda: None)
    record = arms[0]["after_training"](model, None)
    assert len(calls) == 1 and calls[0] == ([r["prompt"] for r in held], FAMILIES["worked_solution"].max_new_tokens)
    reference = len(equations_in(held[0]["completion"]))
    assert record["equations_written"] == reference + 2 and record["equations_right"] == reference + 1
    assert record["equations_share"] == (reference + 1) / (reference + 2)
    assert [r["completion"] for r in record["answers"]] == [held[0]["completion"], wrong, " 9"]
    assert [(r["equations_written"], r["equations_right"]) for r in record["answers"]][1:] == [(2, 1), (0, 0)]
    # percent scores no equations: without --answers nothing runs after training, with it no equation fields
    if answers:
        assert "equations_share" not in arms[1]["after_training"](model, None)
    else:
        assert arms[1]["after_training"] is None


def _record(task: str, arm: str, **extra) -> dict:
    point = {"step": 4, "exact_match": 0.5, "mae": 1.0, "mape": 2.0, "seconds": 9.0}
    return {"arm": arm, "task": task, "steps": 4, "curve": [point], "final": point, "steps_done": 4, **extra}


def test_the_report_shows_equations_right_only_where_records_have_it(tmp_path):
    records = [_record("worked_solution", "xval", equations_share=0.25, equations_right=3, equations_written=12),
               _record("worked_solution", "lora_digits"), _record("copy", "xval")]  # fmt: skip
    for r in records:
        (tmp_path / r["task"]).mkdir(exist_ok=True)
        (tmp_path / r["task"] / f"{r['arm']}.json").write_text(json.dumps(r))
    lines = report.report(tmp_path).splitlines()
    section = lines[lines.index("## worked_solution") :]
    copy = lines[lines.index("## copy") :]
    assert any(line.startswith("| arm |") and line.endswith("| curve | equations right |") for line in section)
    assert next(line for line in section if line.startswith("| xval")).endswith("| 25% (3 / 12) |")
    assert next(line for line in section if line.startswith("| lora_digits")).endswith("| 50% | - |")
    assert next(line for line in copy if line.startswith("| arm |")).endswith("| curve |")
    assert next(line for line in copy if line.startswith("| xval")).endswith("| 50% |")
