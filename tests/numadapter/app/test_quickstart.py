"""numadapter.app.quickstart: the addition data, and the whole quick start in its --tiny mode (a smoke run, < 60 s)."""

from __future__ import annotations

import os
import re

import pytest

from numadapter.app import cli
from numadapter.app.quickstart import addition_examples, run_quickstart


def test_addition_examples_are_exact_and_cover_the_digit_range():
    rows = addition_examples(400, 3, 4, seed=7)
    lengths = set()
    for row in rows:
        match = re.fullmatch(r"(\d+) \+ (\d+) =", row["prompt"])
        a, b = int(match.group(1)), int(match.group(2))
        assert row["completion"] == " " + str(a + b)
        lengths.update({len(match.group(1)), len(match.group(2))})
    assert lengths == {3, 4}
    assert addition_examples(400, 3, 4, seed=7) == rows and addition_examples(400, 3, 4, seed=8) != rows
    seen = {row["prompt"] for row in rows[:200]}
    held_out = addition_examples(50, 3, 4, seed=7, exclude=seen)
    assert not seen & {row["prompt"] for row in held_out}
    with pytest.raises(ValueError, match="min_digits=5, max_digits=4"):
        addition_examples(1, 5, 4)


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
            assert f"[{r.name}] step {step}: exact match {em:.1%}" in text
    fone, lora = result["results"][1], result["results"][0]
    assert fone.trainable > lora.trainable  # FoNE adds the [NUM] rows and the number modules to the same LoRA
    export = result["export"]
    assert export["same_answers"] and export["max_logit_diff"] < 1e-5
    assert os.path.isfile(os.path.join(export["path"], "number_config.json"))
    assert "same answers: True" in text and "quickstart finished" in text


def test_cli_quickstart_passes_its_options(monkeypatch):
    seen = {}

    def fake(**kwargs):
        seen.update(kwargs)
        return {}

    monkeypatch.setattr("numadapter.app.quickstart.run_quickstart", fake)
    assert cli.main(["quickstart", "--tiny", "--model", "some/model", "--steps", "7", "--seed", "3"]) == 0
    assert seen == {"model": "some/model", "out": None, "tiny": True, "steps": 7, "seed": 3}


def test_bad_steps_are_refused():
    with pytest.raises(ValueError, match="`steps` must be a positive number of fine-tuning steps, got 0"):
        run_quickstart(tiny=True, steps=0)


def test_summary_reads_the_measured_numbers():
    from numadapter.app.quickstart import FULL, Result, summary

    def result(name, seconds, em, mae):
        return Result(name, 100, seconds, {"exact_match": 0.0, "mae": 5000.0}, {"exact_match": em, "mae": mae})

    lines = summary([result("LoRA only", 60.0, 0.0, 300.0), result("FoNE + LoRA", 40.0, 0.01, 250.0)], FULL, None)
    assert f"took 40 s for its {FULL.finetune_steps} steps against 60 s" in lines[0]
    assert "sequences are shorter" in lines[0]
    same = summary([result("LoRA only", 84.0, 0.0, 300.0), result("FoNE + LoRA", 82.0, 0.01, 25.0)], FULL, None)
    assert "sequences are shorter" not in same[0]  # no speed explanation when it was not faster
    assert lines[1] == "Lower mean absolute error after fine-tuning: FoNE + LoRA."
    assert f"Neither adapter answers most problems exactly after {FULL.finetune_steps} steps on this tiny" in lines[2]
    assert lines[3].startswith("FoNE + LoRA ends at 1.0% exact match, below the quick start's goal of 95%. What")
    lines = summary([result("LoRA only", 60.0, 0.9, 1.0), result("FoNE + LoRA", 40.0, 0.2, 9.0)], FULL, "m")
    assert lines[1] == "Lower mean absolute error after fine-tuning: LoRA only." and len(lines) == 3
    fone = result("FoNE + LoRA", 40.0, 0.4, 9.0)
    fone.curve = [(500, 0.0), (1000, 0.125), (2000, 0.4)]
    assert (
        "goal of 95% (after steps 500, 1000, 2000: 0.0% -> 12.5% -> 40.0%)." in summary([fone, fone], FULL, None)[-1]
    )
    fone.after["exact_match"] = 0.95  # the goal met: no remark
    assert not any("goal" in line for line in summary([fone, fone], FULL, None))
