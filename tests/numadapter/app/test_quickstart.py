"""numadapter.app.quickstart: the whole quick start in its --tiny mode (a smoke run, < 60 s) and its options."""

from __future__ import annotations

import os
import re

import pytest

from numadapter.app import cli
from numadapter.app.quickstart import run_quickstart


def test_tiny_quickstart_runs_end_to_end_and_prints_what_it_measured(tmp_path):
    lines: list[str] = []
    result = run_quickstart(out=str(tmp_path), tiny=True, print_fn=lines.append)
    text = "\n".join(lines)
    assert "Pretraining a tiny Llama" in text and "Task: addition of 3-4 digit numbers" in text
    names = [r.name for r in result["results"]]
    assert names == ["LoRA only", "FoNE + LoRA"]
    for r in result["results"]:  # the table shows the measured numbers, nothing else
        row = next(line for line in lines if line.startswith(r.name + " "))
        shown = re.findall(r"(\d+\.\d)%", row)
        assert shown == [f"{100 * r.before['exact_match']:.1f}", f"{100 * r.after['exact_match']:.1f}"], row
        assert f"{r.trainable:,}" in row
    for r in result["results"]:  # the curve: after each quarter of the 4 steps, then the final figure
        assert [step for step, _ in r.curve] == [1, 2, 3, 4] and r.curve[-1][1] == r.after["exact_match"]
        for step, em in r.curve[:-1]:
            assert re.search(rf"\[{re.escape(r.name)}\] step {step} \(\d+ s\): exact match {em:.1%}", text), step
    fone, lora = result["results"][1], result["results"][0]
    assert fone.trainable > lora.trainable  # FoNE adds the [NUM] rows and the number modules to the same LoRA
    export = result["export"]
    assert export["same_answers"] and export["max_logit_diff"] < 1e-5
    assert os.path.isfile(os.path.join(export["path"], "number_config.json"))
    assert "same answers: True" in text and "quickstart finished" in text
    known = re.search(r"The base answers (\d+) of (\d+) short fact prompts right", text)
    assert known, text
    for r in result["results"]:  # each adapter checked on the facts the base knew
        assert r.facts is not None and r.facts[1] == int(known.group(1)) and 0 <= r.facts[0] <= r.facts[1]


def test_cli_quickstart_passes_its_options(monkeypatch):
    seen = {}

    def fake(**kwargs):
        seen.update(kwargs)
        return {}

    monkeypatch.setattr("numadapter.app.quickstart.run_quickstart", fake)
    assert cli.main(["quickstart", "--tiny", "--model", "some/model", "--steps", "7", "--seed", "3"]) == 0
    assert seen == {"model": "some/model", "out": None, "tiny": True, "steps": 7, "seed": 3, "seconds": None}
    assert cli.main(["quickstart", "--seconds", "30"]) == 0
    assert seen["seconds"] == 30.0 and seen["model"] is None and seen["tiny"] is False


def test_bad_budgets_are_refused():
    with pytest.raises(ValueError, match="`steps` must be a positive number of fine-tuning steps, got 0"):
        run_quickstart(tiny=True, steps=0)
    with pytest.raises(ValueError, match="`seconds` must be a positive wall-time budget per adapter, got -1"):
        run_quickstart(tiny=True, seconds=-1)
    with pytest.raises(ValueError, match="either `steps` or `seconds`"):
        run_quickstart(tiny=True, steps=3, seconds=5)


def test_the_default_base_is_the_real_checkpoint(monkeypatch):
    """Without --model and --tiny the quick start fine-tunes the installed SmolLM2, not a toy."""
    from helpers.real import real_dir

    from numadapter.app import quickstart

    seen = {}
    monkeypatch.setattr(quickstart, "_run", lambda model, out, spec, seed, print_fn, start: seen.update(
        model=model, spec=spec))  # fmt: skip
    quickstart.run_quickstart()
    assert seen["model"] == real_dir() and seen["spec"].budget_seconds == quickstart.REAL.budget_seconds
    quickstart.run_quickstart(tiny=True)
    assert seen["model"] is None  # --tiny builds its toy base


def test_a_time_budget_stops_training_and_scores_quarters_of_it(tmp_path):
    """With --seconds each adapter trains until its budget is spent (steps differ), with the curve in between."""
    lines: list[str] = []
    result = run_quickstart(out=str(tmp_path), tiny=True, seconds=3.0, print_fn=lines.append)
    for r in result["results"]:
        assert 3.0 <= r.seconds < 3.0 + 15.0  # the step that crossed the budget is the last one
        assert r.steps > 1 and [step for step, _ in r.curve][-1] == r.steps
        assert len(r.curve) == 4 and [s for s, _ in r.curve] == sorted(s for s, _ in r.curve)
    text = "\n".join(lines)
    assert "Same wall time for both (3 s of training each)" in text
    assert "Won on exact match" in text or "Exact match is a tie" in text


def test_summary_reads_the_measured_numbers():
    from numadapter.app.quickstart import REAL, Result, summary
    from numadapter.testing.tiny_base import FULL

    def result(name, seconds, em, mae, steps=2000):
        before = {"exact_match": 0.0, "mae": 5000.0}
        return Result(name, 100, seconds, before, {"exact_match": em, "mae": mae}, steps=steps)

    lines = summary([result("LoRA only", 60.0, 0.0, 300.0), result("FoNE + LoRA", 40.0, 0.01, 250.0)], FULL, None)
    assert "took 40 s for its 2000 steps against 60 s" in lines[0]
    assert "sequences are shorter" in lines[0]
    same = summary([result("LoRA only", 84.0, 0.0, 300.0), result("FoNE + LoRA", 82.0, 0.01, 25.0)], FULL, None)
    assert "sequences are shorter" not in same[0]  # no speed explanation when it was not faster
    assert lines[1] == "Won on exact match: FoNE + LoRA, by 1.0 points (1.0% against 0.0%)."
    assert lines[2] == "Lower mean absolute error after fine-tuning: FoNE + LoRA."
    assert "Neither adapter answers most problems exactly in this budget on this tiny" in lines[3]
    assert lines[4].startswith("FoNE + LoRA ends at 1.0% exact match, below the quick start's goal of 95%. What")
    lines = summary([result("LoRA only", 60.0, 0.9, 1.0), result("FoNE + LoRA", 40.0, 0.2, 9.0)], FULL, "m")
    assert lines[1] == "Won on exact match: LoRA only, by 70.0 points (90.0% against 20.0%)."
    assert lines[2] == "Lower mean absolute error after fine-tuning: LoRA only." and len(lines) == 4
    timed = summary([result("LoRA only", 180.0, 0.3, 9.0, 40), result("FoNE + LoRA", 180.0, 0.3, 9.0, 100)], REAL, "m")
    budget = f"Same wall time for both ({REAL.budget_seconds:.0f} s of training each): FoNE + LoRA took 100 steps"
    assert timed[0].startswith(budget)
    assert timed[0].endswith("LoRA only 40 (a [NUM] answer is one token instead of one per digit).")
    assert timed[1] == "Exact match is a tie: 30.0% each."
    slower = summary([result("LoRA only", 180.0, 0.3, 9.0, 40), result("FoNE + LoRA", 180.0, 0.3, 9.0, 30)], REAL, "m")
    assert slower[0].endswith("LoRA only 40.")  # no speed explanation when FoNE took fewer steps
    fone = result("FoNE + LoRA", 40.0, 0.4, 9.0)
    fone.curve = [(500, 0.0), (1000, 0.125), (2000, 0.4)]
    assert (
        "goal of 95% (after steps 500, 1000, 2000: 0.0% -> 12.5% -> 40.0%)." in summary([fone, fone], FULL, None)[-1]
    )
    fone.after["exact_match"] = 0.95  # the goal met: no remark
    assert not any("goal" in line for line in summary([fone, fone], FULL, None))
    lora = result("LoRA only", 40.0, 0.1, 9.0)
    lora.facts, fone.facts = (22, 40), (19, 40)
    facts = [line for line in summary([lora, fone], FULL, None) if line.startswith("Facts the base knew")]
    assert facts == [
        "Facts the base knew (40 short prompts with a number answer, e.g. 'The number of minutes in an hour is' -> "
        "60; numadapter.data.known_facts), still answered after fine-tuning: LoRA only 22, FoNE + LoRA 19."
    ]
    lora.facts, fone.facts = (0, 0), (0, 0)  # a base that knew none: nothing to say
    assert not any(line.startswith("Facts") for line in summary([lora, fone], FULL, None))
