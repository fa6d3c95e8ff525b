"""The suite's public worked solutions (GSM8K slice shipped under eval_harness/suite/data/gsm8k): rows as people
fine-tune on them, a disjoint held-out split, and references whose equations the checker reads as right."""

from __future__ import annotations

import json

from eval_harness.suite.families import DATA, FAMILIES, family_rows
from numadapter.evaluation import equation_score, last_number


def test_rows_are_whole_solutions_without_calculator_notes():
    train, held = family_rows("gsm8k", 2000, 150, 0)
    assert len(train) == 2000 and len(held) == 150
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in held}
    source = json.loads((DATA / "gsm8k" / "test.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert held[0]["prompt"] == f"Question: {source['question']}\nAnswer:"
    for row in train + held:
        assert row["prompt"].startswith("Question: ") and row["prompt"].endswith("\nAnswer:")
        assert "<<" not in row["completion"] and "\n#### " in row["completion"]
        final = row["completion"].rsplit("#### ", 1)[1]
        assert last_number(row["completion"]) == last_number(final)  # the suite scores the final answer


def test_the_seed_orders_the_train_rows_and_the_held_out_rows_stay():
    a, held_a = family_rows("gsm8k", 50, 10, 0)
    b, held_b = family_rows("gsm8k", 50, 10, 1)
    assert [r["prompt"] for r in a] != [r["prompt"] for r in b] and held_a == held_b


def test_the_references_equations_are_right_as_published():
    train, held = family_rows("gsm8k", 2000, 150, 0)
    score = equation_score(r["completion"] for r in train + held)
    # people's solutions hold a few slips ("4/5 = 240" for 4/5 of 300): most, not all, are right
    assert score["equations_written"] > 5000 and 0.95 < score["equations_share"] < 1.0


def test_asking_for_more_rows_than_shipped_gives_them_all_and_says_so(capsys):
    train, held = family_rows("gsm8k", 8000, 200, 0)  # the suite's defaults
    assert (len(train), len(held)) == (2000, 150)
    assert (
        "ships 2000 train and 150 held-out rows: using 2000 / 150 of the 8000 / 200 asked" in capsys.readouterr().out
    )


def test_the_family_fits_the_library_default_places_and_scores_equations():
    found = FAMILIES["gsm8k"]
    assert (found.int_digits, found.frac_digits) == (8, 2) and found.equations and found.draw is None


def test_lines_end_at_an_equations_result_and_complete_it():
    train, held = family_rows("gsm8k_line", 2000, 200, 0)
    assert len(held) == 200 and len(train) > 1900  # one line from each train solution that has an equation
    solutions = [r["prompt"] + r["completion"] for r in family_rows("gsm8k", 2000, 150, 0)[1]]
    for row in held:
        assert row["prompt"].rstrip().endswith("=") and row["prompt"].startswith("Question: ")
        assert last_number(row["completion"]) is not None and "\n" not in row["completion"]
        assert any(text.startswith(row["prompt"] + row["completion"]) for text in solutions)
    # the first held-out solution, "... 16 - 3 - 4 = 9 duck eggs ... 9 * 2 = $18 ...", gives its two results in order
    assert [row["completion"] for row in held[:2]] == [" 9", " $18"]
