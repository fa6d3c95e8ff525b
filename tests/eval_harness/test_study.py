"""eval_harness.study: the pretrained-base study's rows, one arm through the product path, and its report."""

from __future__ import annotations

import json
import re

import pytest

from eval_harness import study
from numadapter.testing.tiny_base import TINY, build_tiny_base


def test_subtraction_rows_are_exact_non_negative_and_held_out():
    rows = study.task_rows("subtraction", 300, seed=3)
    for row in rows:
        a, b = map(int, re.fullmatch(r"(\d+) - (\d+) =", row["prompt"]).groups())
        assert a >= b and row["completion"] == f" {a - b}" and 100 <= b <= 9999
    held = study.task_rows("subtraction", 50, seed=4, exclude={r["prompt"] for r in rows})
    assert not {r["prompt"] for r in held} & {r["prompt"] for r in rows}
    assert study.task_rows("addition", 5, seed=0)[0]["prompt"].endswith(" =")
    with pytest.raises(ValueError, match="unknown task 'division'"):
        study.task_rows("division", 1, seed=0)


def test_an_arm_trains_scores_its_curve_and_reports(tmp_path):
    base = tmp_path / "base"
    build_tiny_base(str(base), TINY, seed=0, print_fn=lambda line: None)
    record = study.run_arm("fone_rotation", "addition", steps=2, eval_every=1, n_train=16, n_eval=4, batch=4,
                           seed=0, base=str(base), out=tmp_path / "out", note="test", lr=None)  # fmt: skip
    saved = json.loads((tmp_path / "out" / "addition" / "fone_rotation.json").read_text())
    assert saved["complete"] and [p["step"] for p in saved["curve"]] == [0, 1, 2]
    assert saved["config"]["fone_head_input"] == "rotation" and saved["config"]["number_lr_ratio"] == 10.0
    assert record["final"] == saved["curve"][-1] and 0.0 <= record["final"]["exact_match"] <= 1.0
    assert saved["curve"][0]["seconds"] == 0.0 < saved["curve"][-1]["seconds"]
    text = study.report(tmp_path / "out")
    row = next(line for line in text.splitlines() if line.startswith("| fone_rotation |"))
    assert f"{saved['final']['mae']:.1f}" in row and (tmp_path / "out" / "curves.png").is_file()


def test_a_time_budget_stops_training_and_given_rows_and_fields_reach_the_adapter(tmp_path):
    base = tmp_path / "base"
    build_tiny_base(str(base), TINY, seed=0, print_fn=lambda line: None)
    train = [{"prompt": f"{a} + 1 =", "completion": f" {a + 1}"} for a in range(100, 116)]
    held = [{"prompt": "7 + 1 =", "completion": " 8"}, {"prompt": "9 + 1 =", "completion": " 10"}]
    record = study.run_arm(
        "xval", "plus_one", steps=50, eval_every=100, n_train=0, n_eval=0, batch=4, seed=0, base=str(base),
        out=tmp_path / "out", note="", lr=None, rows=(train, held), config={"xval_scale": 200.0, "int_digits": 3},
        seconds=0.0, max_new_tokens=4, after_training=lambda model, ntok: {"scale": ntok.config.xval_scale},
    )  # fmt: skip
    assert record["steps_done"] == 1 and [p["step"] for p in record["curve"]] == [0, 1]
    assert record["seconds_budget"] == 0.0 and record["n_train"] == 16 and record["n_eval"] == 2
    assert record["config"]["xval_scale"] == 200.0 == record["scale"] and record["config"]["int_digits"] == 3
    assert "mape" in record["final"] and record["max_new_tokens"] == 4
    assert (tmp_path / "out" / "plus_one" / "xval.json").is_file()
