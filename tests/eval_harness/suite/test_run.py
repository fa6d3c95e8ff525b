"""eval_harness.suite.run and .report: the command line, the family x arm loop's wiring, the report from JSONs."""

from __future__ import annotations

import json

import pytest

import eval_harness.study
import eval_harness.suite.facts
from eval_harness.suite import report, run
from eval_harness.suite.families import FAMILIES


def test_arguments_name_families_and_arms_and_a_budget(capsys):
    args = run.parse_args(["run", "--families", "copy,maxmin", "--arms", "lora_digits,xval"])
    assert args.families == ["copy", "maxmin"] and args.arms == ["lora_digits", "xval"]
    assert args.seconds == 300.0 and args.steps is None and args.retention
    args = run.parse_args(["run", "--steps", "40", "--no-retention"])
    assert args.families == list(FAMILIES) and args.arms == list(run.DEFAULT_ARMS)
    assert args.steps == 40 and args.seconds is None and not args.retention
    assert args.schedule == "constant_with_warmup"  # flat: a time budget is not cut short by a decay
    assert run.parse_args(["run", "--steps", "57", "--seconds", "540", "--schedule", "linear"]).schedule == "linear"
    for bad, message in ((["--families", "copy,tot"], "unknown family 'tot'"), (["--arms", "bert"], "unknown arm"),
                         (["--seconds", "0"], "--seconds must be positive, got 0.0"),
                         (["--schedule", "step"], "invalid choice: 'step'")):  # fmt: skip
        with pytest.raises(SystemExit):
            run.parse_args(["run", *bad])
        assert message in capsys.readouterr().err


def test_run_trains_every_family_x_arm_with_the_family_settings(monkeypatch, tmp_path):
    calls = []

    def fake_arm(name, task, steps, eval_every, n_train, n_eval, batch, seed, base, out, note, lr, **extra):
        calls.append({"arm": name, "task": task, "steps": steps, **extra})
        return {"arm": name}

    known = [{"prompt": f"Fact {i}:", "answer": str(i), "base_answer": f" {i}"} for i in range(6)]
    monkeypatch.setattr(eval_harness.study, "run_arm", fake_arm)
    monkeypatch.setattr(eval_harness.suite.facts, "base_known", lambda base, out: known)
    args = run.parse_args(["run", "--families", "percent,facts", "--arms", "fone_context,xval", "--seconds", "20",
                           "--n-train", "30", "--n-eval", "7", "--out", str(tmp_path)])  # fmt: skip
    args.base = "base-dir"
    run.run(args)
    assert [(c["task"], c["arm"]) for c in calls] == [("percent", "fone_context"), ("percent", "xval"),
                                                      ("facts", "fone_context"), ("facts", "xval")]  # fmt: skip
    percent, percent_xval, fact = calls[0], calls[1], calls[2]
    assert percent["seconds"] == 20.0 and percent["steps"] == run.STEP_CAP
    assert percent["schedule"] == "constant_with_warmup"
    assert percent["config"] == {"int_digits": 4, "frac_digits": 2} and percent_xval["config"]["xval_scale"] == 2000
    assert len(percent["rows"][0]) == 30 and len(percent["rows"][1]) == 7
    assert [len(split) for split in fact["rows"]] == [3, 3] and fact["max_new_tokens"] == FAMILIES[
        "facts"
    ].max_new_tokens
    scored = []
    monkeypatch.setattr(eval_harness.suite.facts, "score_facts", lambda model, ntok, rows: scored.append(rows) or {})
    percent["after_training"](None, None)
    fact["after_training"](None, None)
    # a task family trains on no fact: retention over all 6 known; the facts family: over its held-out 3
    assert [len(rows) for rows in scored] == [6, 3]
    assert {r["prompt"] for r in scored[1]} == {r["prompt"] for r in fact["rows"][1]}


def _record(arm, task, exact, mae, mape, retained, seconds_budget=30.0):
    curve = [{"step": 0, "exact_match": 0.0, "mae": 90.0, "mape": 80.0, "seconds": 0.0},
             {"step": 12, "exact_match": exact, "mae": mae, "mape": mape, "seconds": 31.0}]  # fmt: skip
    return {"arm": arm, "task": task, "steps": 100000, "seconds_budget": seconds_budget, "curve": curve,
            "final": curve[-1], "steps_done": 12, "facts_retained": retained}  # fmt: skip


def write_records(out) -> None:
    """Four fake arm records: copy (lora_digits, fone_context) and miles_km (xval, lora_digits)."""
    records = [
        _record("lora_digits", "copy", 0.25, 10.0, 5.0, 0.5),
        _record("fone_context", "copy", 0.75, 3.0, 1.0, 1.0),
        _record("xval", "miles_km", 0.0, 2.5, 0.4, 0.0),
        _record("lora_digits", "miles_km", 0.5, 9.0, 3.0, 0.25),
    ]
    for r in records:
        (out / r["task"]).mkdir(exist_ok=True)
        (out / r["task"] / f"{r['arm']}.json").write_text(json.dumps(r))


def test_report_tables_every_family_and_ranks_the_regression_family_by_error(tmp_path):
    write_records(tmp_path)
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "base_known.json").write_text(json.dumps({"facts": []}))  # not an arm record
    text = report.report(tmp_path)
    lines = text.splitlines()
    assert lines.index("## copy") < lines.index("## miles_km")
    table = [line for line in lines if line.startswith("| fone_context") or line.startswith("| lora_digits")
             or line.startswith("| xval")]  # fmt: skip
    assert table[0] == "| fone_context | 75.0% | 3 | 1.00 | 100% | 12 | 31 | 30 s | 0% / 75% |"
    assert table[1].startswith("| lora_digits | 25.0% | 10 | 5.00 | 50% |")
    assert table[2].startswith("| xval | 0.0% | 2.5 | 0.40 | 0% |")  # lower MAPE first, despite no exact match
    assert (tmp_path / "README.md").read_text() == text
    assert (tmp_path / "bars.png").stat().st_size > 0 and (tmp_path / "curves.png").stat().st_size > 0


def test_the_overview_shows_the_heads_coverage_and_bolds_each_familys_best(tmp_path):
    write_records(tmp_path)
    (tmp_path / "coverage.json").write_text(json.dumps({"copy": {"share": 1.0}, "miles_km": {"share": 0.0}}))
    lines = report.report(tmp_path).splitlines()
    shares = "the context head can form (sums / with products / by pointer)"
    assert f"| family | {shares} | fone_context | lora_digits | xval |" in lines
    assert "| copy | 100% | **75.0%** | 25.0% | - |" in lines
    assert "| miles_km | 0% | - | 3.00 MAPE | **0.40 MAPE** |" in lines  # the regression family: lower is better


def test_coverage_counts_what_the_context_head_can_form_per_family():
    from helpers.real import real_tokenizer

    from eval_harness.suite.coverage import family_coverage

    tokenizer = real_tokenizer()
    every = {"answers": 20, "formed": 20, "share": 1.0, "share_with_products": 1.0, "share_by_pointer": 1.0}
    assert family_coverage("copy", tokenizer, n=20) == every
    products = family_coverage("times_one_digit", tokenizer, n=20)
    assert products["formed"] == 0 and products["share_with_products"] == 1.0  # a product of the two numbers
    assert family_coverage("units", tokenizer, n=20)["share_with_products"] < 0.5  # the factor is not in the text
    ledger = family_coverage("ledger", tokenizer, n=20)
    assert ledger["share"] < 0.5 and ledger["share_by_pointer"] == 1.0  # the opening balance lies further back


def test_gate_sweep_answers_again_under_each_setting_and_puts_the_config_back(monkeypatch):
    import types

    import numadapter
    from eval_harness.suite import gates

    args = run.parse_args(["run", "--gate-sweep", "fone_head_digit_check=0; fone_head_digit_check=2,"
                           "fone_head_min_confidence=0.5,fone_expression_check=False"])  # fmt: skip
    assert args.gate_sweep == [
        {"fone_head_min_confidence": 0, "fone_head_digit_check": 0, "fone_expression_check": True},
        {"fone_head_min_confidence": 0.5, "fone_head_digit_check": 2, "fone_expression_check": False},
    ]
    for bad in ("fone_head_digit=2", "fone_head_digit_check=two", "fone_expression_check=maybe"):
        with pytest.raises(SystemExit):
            run.parse_args(["run", "--gate-sweep", bad])
    config = types.SimpleNamespace(fone_head_min_confidence=0.0, fone_head_digit_check=0, fone_expression_check=True)
    model = types.SimpleNamespace(peft_config={"default": config}, eval=lambda: None)
    ntok = types.SimpleNamespace(config=config)
    seen = []

    def fake_generate(model, ntok, prompts, max_new_tokens, return_dict):
        check = config.fone_head_digit_check
        seen.append((config.fone_head_min_confidence, check))
        assert config.fone_expression_check == (not check)
        completions = [" 12", " 7"] if check else [" 12", " 3 + 4 = 99"]  # the check sends the second to digits
        return types.SimpleNamespace(completions=completions, confidences=[[0.9], [] if check else [0.4]])

    monkeypatch.setattr(numadapter, "generate", fake_generate)
    after = gates.sweep(["a =", "b ="], [" 12", " 7"], 4, args.gate_sweep)
    points = after(model, ntok)["gate_sweep"]
    assert seen == [(0, 0), (0.5, 2)]
    assert [(p["exact_match"], p["mae"], p["head_written"]) for p in points] == [(0.5, 46.0, 2), (1.0, 0.0, 1)]
    assert [(p["equations_written"], p["equations_right"]) for p in points] == [(1, 0), (0, 0)]
    assert points[1]["answers"][1] == {"completion": " 7", "reference": " 7", "confidences": []}
    gates_now = (config.fone_head_min_confidence, config.fone_head_digit_check, config.fone_expression_check)
    assert gates_now == (0, 0, True)
