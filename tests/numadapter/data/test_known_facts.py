"""numadapter.data.known_facts: the facts a base answers right (first number of its continuation) and how many of
them an adapter still answers."""

from __future__ import annotations

from decimal import Decimal

import pytest

from numadapter.data import known_facts as kf


def test_the_facts_are_prompts_whose_answer_is_one_number():
    prompts = [p for p, _ in kf.FACTS]
    assert len(prompts) == len(set(prompts)) >= 60
    for _, answer in kf.FACTS:
        assert kf.first_number(f" {answer}") == Decimal(answer)


def test_known_facts_reads_the_first_number_of_each_continuation():
    facts = [("Minutes in an hour:", "60"), ("Days in a week:", "7"), ("Hours in a day:", "24")]
    answers = {"Minutes in an hour:": " 60. There are 24 hours", "Days in a week:": " 70", "Hours in a day:": " many"}

    def complete(base, prompts):
        assert base == "the-base"
        return [answers[p] for p in prompts]

    assert kf.known_facts("the-base", facts, complete=complete) == [("Minutes in an hour:", "60")]


def test_facts_kept_counts_right_first_numbers(monkeypatch):
    import numadapter.evaluation as evaluation

    known = [("Minutes in an hour:", "60"), ("Days in a week:", "7"), ("Cents in a dollar:", "100")]
    seen = {}

    def fake(model, ntok, prompts, max_new_tokens, batch_size, progress=True):
        seen["prompts"] = list(prompts)
        return [" 60", " 6 or 7", " 100 cents"]

    monkeypatch.setattr(evaluation, "generate_answers", fake)
    kept, answers = evaluation.facts_kept("model", "ntok", known)
    assert kept == 2 and answers == [" 60", " 6 or 7", " 100 cents"]  # " 6 or 7": its first number is 6
    assert seen["prompts"] == [p for p, _ in known]
    assert evaluation.facts_kept("model", "ntok", []) == (0, [])


@pytest.mark.parametrize("text, value", [(" about 3.5 and 4", "3.5"), ("none", None), (" -12 degrees", "-12")])
def test_first_number(text, value):
    assert kf.first_number(text) == (None if value is None else Decimal(value))
