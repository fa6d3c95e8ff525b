"""eval_harness.suite.facts: the hand-written facts, the base-known filter and its cache, the retention score."""

from __future__ import annotations

import json
from decimal import Decimal

import numadapter.evaluation
from eval_harness.suite import facts


def test_the_list_holds_enough_distinct_numeric_facts():
    prompts = [p for p, _ in facts.FACTS]
    assert len(prompts) >= 80 and len(set(prompts)) == len(prompts)
    for prompt, answer in facts.FACTS:
        assert Decimal(answer) == facts.first_number(f" {answer}") and not facts.first_number(prompt.split()[-1])


def test_only_facts_the_base_answers_right_are_kept_and_cached(tmp_path):
    listed = [("Minutes in an hour:", "60"), ("Hours in a day:", "24"), ("Pi to two places:", "3.14")]
    calls = []

    def complete(base, prompts):  # a stand-in base: right, wrong, right with more text after
        calls.append(list(prompts))
        return [" 60 minutes, and", " 12 hours", " 3.14, then 2.72"]

    known = facts.base_known("base-dir", tmp_path, listed, complete)
    assert [k["prompt"] for k in known] == ["Minutes in an hour:", "Pi to two places:"]
    assert known[1]["base_answer"] == " 3.14, then 2.72"
    cached = json.loads((tmp_path / "facts" / "base_known.json").read_text())
    assert cached["known"] == 2 and [f["known"] for f in cached["facts"]] == [True, False, True]
    assert facts.base_known("base-dir", tmp_path, listed, complete) == known and len(calls) == 1
    facts.base_known("other-base", tmp_path, listed, complete)  # another base: asked again
    assert len(calls) == 2


def test_fact_rows_are_disjoint_seeded_halves_and_retention_reads_the_first_number(monkeypatch):
    known = [{"prompt": f"Fact {i}:", "answer": str(i * 7), "base_answer": ""} for i in range(10)]
    train, held = facts.fact_rows(known, seed=3)
    assert (train, held) == facts.fact_rows(known, seed=3) and len(train) == len(held) == 5
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in held}
    assert all(r["completion"] == f" {int(r['prompt'][5:-1]) * 7}" for r in train + held)

    def answers(model, ntok, prompts, max_new_tokens, batch_size, progress=True):
        return [f" {int(p[5:-1]) * 7} and 1" if i % 2 == 0 else " 5" for i, p in enumerate(prompts)]

    monkeypatch.setattr(numadapter.evaluation, "generate_answers", answers)
    scored = facts.score_facts(None, None, held)
    assert scored["facts"] == 5 and scored["facts_retained"] == 3 / 5
    assert scored["fact_answers"] == answers(None, None, [r["prompt"] for r in held], 8, 32)
