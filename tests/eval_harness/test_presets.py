"""Tests of the harness's seeds, mean ± std report, the ntl_mul table, the locally pretrained base and the pretrained
preset on the real checkpoint.

Expected means and standard deviations are computed by hand in the comments; runs use FoNE Table 6 model 1 and a
handful of examples, so the whole file takes seconds.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from eval_harness.cli import main
from eval_harness.presets import Experiment, expand, get_preset
from eval_harness.report import aggregate, build_report

# -- seeds -----------------------------------------------------------------------------------------------------------


def _without_seed(spec) -> dict:
    return {k: v for k, v in dataclasses.asdict(spec).items() if k != "seed"}


def test_seeds_expand_into_runs_with_distinct_seeds_and_identical_everything_else():
    table = Experiment("t", "t", "ntl_mul", ("digits", "digits_ntl_was"), (16, 32), seeds=(0, 1, 2))
    specs = table.specs("p")
    assert len(specs) == 2 * 2 * 3
    by_cell: dict[str, list[int]] = {}
    for spec in specs:
        by_cell.setdefault(json.dumps(_without_seed(spec), sort_keys=True), []).append(spec.seed)
    assert len(by_cell) == 4 and all(seeds == [0, 1, 2] for seeds in by_cell.values())
    assert [s.seed for s in specs[:4]] == [0, 0, 0, 0]  # seed by seed: seed 0's whole grid runs first
    assert len({s.run_id for s in specs}) == len(specs)  # the seed is in the file name
    assert [s.seed for s in table.specs("p", seed=7)] == [7] * 4  # one seed override replaces the tuple


def test_expand_takes_seeds_or_one_seed_and_refuses_both():
    preset = get_preset("cpu-small")
    specs = expand(preset, experiments=["data_size"], seeds=[3, 4], epochs=1)
    assert sorted({s.seed for s in specs}) == [3, 4] and len(specs) == 2 * len(
        expand(preset, experiments=["data_size"], seed=3)
    )
    assert {s.seed for s in expand(preset, experiments=["ntl_mul"], seed=5)} == {5}
    assert {s.seed for s in expand(preset, experiments=["ntl_mul"])} == {0, 1, 2}
    with pytest.raises(ValueError, match=r"both seed=1 and seeds=\[2, 3\].*--seeds 0,1,2"):
        expand(preset, seeds=[2, 3], seed=1)


def test_experiment_refuses_bad_seeds():
    with pytest.raises(ValueError, match=r"`seeds` must be a non-empty tuple of non-negative ints, got \(\)"):
        Experiment("t", "t", "ntl_mul", ("digits",), (16,), seeds=())
    with pytest.raises(ValueError, match=r"got \(0, -1\)"):
        Experiment("t", "t", "ntl_mul", ("digits",), (16,), seeds=(0, -1))
    with pytest.raises(ValueError, match="repeats a seed"):
        Experiment("t", "t", "ntl_mul", ("digits",), (16,), seeds=(1, 1))


def test_cli_seeds_option_lists_one_run_per_seed(capsys, tmp_path):
    argv = ["run", "--preset", "cpu-small", "--experiments", "ntl_mul", "--seeds", "4,5", "--dry-run"]
    assert main(argv + ["--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    n, size = _ntl_table().train_sizes[0], _ntl_table().model_sizes[0]
    expected = [f"ntl_mul/{m}-n{n}-m{size}-s{s}" for s in (4, 5) for m in ("digits", "digits_ntl_was")]
    assert [line.split()[0] for line in lines] == expected
    with pytest.raises(SystemExit):
        main(argv + ["--seed", "1"])
    assert "pass one of them" in capsys.readouterr().err


# -- mean ± std in the report ----------------------------------------------------------------------------------------


def _fake_result(method: str, seed: int, train_size: int, em: float, mape: float, extra_mape: float) -> dict:
    """A result dict with the fields the report reads (values chosen for hand computation)."""
    metrics = {
        "exact_match": {"value": em},
        "mae": {"value": 10.0 * (seed + 1)},
        "r2": {"value": None},  # e.g. constant targets: left out of the mean
        "mape": {"value": mape},
        "cer": {"value": 5.0},
    }
    return {
        "schema": "eval_harness.result/1",
        "run_id": f"{method}-n{train_size}-m1-s{seed}",
        "preset": "fake",
        "experiment": "ntl_mul",
        "task": "ntl_mul",
        "method": method,
        "regime": "scratch",
        "seed": seed,
        "config": {
            "train_size": train_size,
            "model_size": 1,
            "base": None,
            "lr": 1e-3,
            "epochs": 2,
            "batch_size": 8,
            "schedule": "cosine",
            "warmup": 0.05,
            "weight_decay": 0.0,
        },  # fmt: skip
        "model": {"params": {"total": 500_000}},
        "data": {"n_test": 8, "tokens_per_number": 3.0, "tokens_max_number": 6, "seq_len_mean": 12.0},
        "metrics": metrics,
        "extra_splits": {"test_extrapolation": {"n_test": 8, "metrics": {**metrics, "mape": {"value": extra_mape}}}},
        "prediction_path": "model.generate",
        "timing": {
            "train_s": 2.0 * (seed + 1),
            "epoch_s": [1.0, 1.0],
            "epoch_s_median": 1.0,
            "train_examples_per_s": 16.0,
            "test_s": 0.5,
            "test_examples_per_s": 16.0,
            "lockstep_with": [method],
            "load_avg_per_epoch": [1.0],
        },  # fmt: skip
        "environment": {"device": "cpu", "device_name": "x86_64", "torch_threads": 1},
    }


FAKE = [  # digits: EM 0.5 / 0.6 / 0.7, MAPE 10 / 20 / 40, extrapolation MAPE 100 / 100 / 130
    _fake_result("digits", 0, 16, 0.5, 10.0, 100.0),
    _fake_result("digits", 1, 16, 0.6, 20.0, 100.0),
    _fake_result("digits", 2, 16, 0.7, 40.0, 130.0),
    _fake_result("digits", 0, 32, 0.9, 1.0, 2.0),  # another training size: its own cell, one seed
]


def test_aggregate_mean_and_sample_std_match_hand_computation():
    cells = aggregate(FAKE)
    assert [(c["method"], c["train_size"], c["seeds"]) for c in cells] == [
        ("digits", 16, [0, 1, 2]),
        ("digits", 32, [0]),
    ]
    test = cells[0]["metrics"]["test"]
    assert test["exact_match"]["mean"] == pytest.approx(0.6)
    assert test["exact_match"]["std"] == pytest.approx(0.1)  # deviations -0.1, 0, 0.1: sqrt(0.02 / 2)
    assert test["mape"]["mean"] == pytest.approx(70 / 3)
    # deviations -40/3, -10/3, 50/3: squares 1600/9 + 100/9 + 2500/9 = 4200/9, / (3 - 1) = 700/3
    assert test["mape"]["std"] == pytest.approx(math.sqrt(700 / 3))
    assert test["mae"]["mean"] == pytest.approx(20.0) and test["mae"]["std"] == pytest.approx(10.0)
    assert test["r2"] == {"mean": None, "std": None, "n": 0}
    extra = cells[0]["metrics"]["test_extrapolation"]["mape"]
    assert extra["mean"] == pytest.approx(110.0) and extra["std"] == pytest.approx(math.sqrt(300.0))  # 100,100,130
    assert cells[0]["train_s"]["mean"] == pytest.approx(4.0)  # 2, 4, 6
    assert cells[1]["metrics"]["test"]["mape"] == {"mean": 1.0, "std": None, "n": 1}


def test_report_names_every_thread_count_of_a_table(tmp_path):
    two = {**FAKE[1], "environment": {**FAKE[1]["environment"], "torch_threads": 2}}
    for r in (FAKE[0], two):
        path = tmp_path / r["experiment"] / f"{r['run_id']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(r))
    assert "1 or 2 torch threads (per run: its `environment`)" in build_report(tmp_path).read_text()


def test_report_shows_mean_std_per_split_and_error_bars(tmp_path):
    for r in FAKE:
        path = tmp_path / r["experiment"] / f"{r['run_id']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(r))
    text = build_report(tmp_path).read_text()
    assert "Mean ± standard deviation over seeds 0, 1, 2" in text
    # EM 60.00 ± 10.00 %, MAE 20 ± 10, R^2 n/a, MAPE 23.333 ± 15.275, CER 5 ± 0; train s 4.0 ± 2.0
    row = "| digits | 16 | 1 (0.50M) | test (interpolation) | 0, 1, 2 | 60.00 ± 10.00 | 20.0000 ± 10.0000 | n/a | "
    assert row + "23.333 ± 15.275 | 5.00 ± 0.00 | 4.0 ± 2.0 |" in text
    row = "| digits | 16 | 1 (0.50M) | test_extrapolation | 0, 1, 2 | 60.00 ± 10.00 | 20.0000 ± 10.0000 | n/a | "
    assert row + "110.000 ± 17.321 |" in text  # MAPE 100, 100, 130: mean 110, std sqrt(300) = 17.3205
    assert "| digits | 32 | 1 (0.50M) | test_extrapolation | 0 | 90.00 |" in text  # one seed: no ± part
    assert "| digits | 16 | 1 (0.50M) | 2 | test_extrapolation | 8 | 70.00 |" in text  # per-seed split rows
    assert "seeds 0, 1, 2" in text and "1 torch thread, load average" in text
    png = tmp_path / "ntl_mul_accuracy_vs_train_size.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_keeps_product_runs_apart_from_the_harness_loops(tmp_path):
    """A product run of a method sits next to the harness loop's run of it: its own row, cell and mean."""
    product = [{**r, "train_path": "product", "run_id": r["run_id"] + "-product"} for r in FAKE[:2]]
    product[0]["metrics"] = {**product[0]["metrics"], "exact_match": {"value": 0.1}}  # seeds 0 / 1: EM 0.1 / 0.6
    for r in FAKE[:2] + product:
        path = tmp_path / r["experiment"] / f"{r['run_id']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(r))
    cells = aggregate(FAKE[:2] + product)
    assert [(c["method"], c["seeds"]) for c in cells] == [("digits", [0, 1]), ("digits (product)", [0, 1])]
    assert cells[0]["metrics"]["test"]["exact_match"]["mean"] == pytest.approx(0.55)  # 0.5, 0.6
    assert cells[1]["metrics"]["test"]["exact_match"]["mean"] == pytest.approx(0.35)  # 0.1, 0.6
    text = build_report(tmp_path).read_text()
    assert "| digits | 16 | 1 (0.50M) | 0 | 50.00 |" in text
    assert "| digits (product) | 16 | 1 (0.50M) | 0 | 10.00 |" in text


# -- the ntl_mul table -----------------------------------------------------------------------------------------------


def _ntl_table() -> Experiment:
    return get_preset("cpu-small").experiment("ntl_mul")


def test_ntl_mul_table_compares_ce_and_ntl_was_over_three_seeds():
    table = _ntl_table()
    assert table.task == "ntl_mul" and table.methods == ("digits", "digits_ntl_was")
    assert table.seeds == (0, 1, 2) and table.regime == "scratch"
    specs = table.specs("cpu-small")
    assert len(specs) == 6 and {s.method for s in specs} == {"digits", "digits_ntl_was"}
    assert len({json.dumps(_without_seed(s) | {"method": None}, sort_keys=True) for s in specs}) == 1  # one budget


def test_tiny_ntl_mul_run_reports_interpolation_and_extrapolation_mape(tmp_path):
    from eval_harness.runner import run_specs

    specs = expand(
        get_preset("cpu-small"), experiments=["ntl_mul"], train_sizes=[16], model_sizes=[1], epochs=1, n_test=6,
        batch_size=8, seeds=[0, 1], threads=1,
    )  # fmt: skip
    results = run_specs(specs, tmp_path, log=lambda line: None)
    assert [(r["method"], r["seed"]) for r in results] == [
        ("digits", 0), ("digits_ntl_was", 0), ("digits", 1), ("digits_ntl_was", 1),
    ]  # fmt: skip
    for r in results:
        assert r["metrics"]["mape"]["n_total"] == 6
        extra = r["extra_splits"]["test_extrapolation"]
        assert extra["n_test"] == 6 and extra["metrics"]["mape"]["n_total"] == 6
        assert set(extra["metrics"]) == {"exact_match", "mae", "r2", "mape", "cer"}
        assert all(6 in _digits(sample) for sample in extra["samples"])  # at least one 6-digit factor
        assert all(max(_digits(sample)) <= 5 for sample in r["samples"])  # interpolation: up to 5 x 5 digits
        assert r["data"]["number_places"] == [12, 0]  # a 6-digit factor times a 6-digit factor has 12 digits
    saved = json.loads((tmp_path / "ntl_mul" / "digits_ntl_was-n16-m1-s1.json").read_text())
    assert "mape" in saved["extra_splits"]["test_extrapolation"]["metrics"]
    text = build_report(tmp_path).read_text()
    assert "| digits_ntl_was | 16 | 1 (" in text and "| test (interpolation) | 0, 1 |" in text
    assert "| test_extrapolation | 0, 1 |" in text


def _digits(sample: dict) -> list[int]:
    """Digit counts of the two factors of an ``a*b=`` prompt."""
    a, b = sample["prompt"].rstrip("=").split("*")
    return [len(a), len(b)]


# -- pretrain-base ---------------------------------------------------------------------------------------------------


def test_pretrain_base_saves_a_loadable_base_that_the_adapter_table_runs_on(tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from eval_harness.runner import run_specs

    base = tmp_path / "base"
    argv = ["pretrain-base", "--out", str(base), "--hidden", "32", "--layers", "1", "--steps", "2"]
    assert main(argv + ["--batch-size", "4", "--threads", "1"]) == 0
    assert "--base " + str(base) in capsys.readouterr().out
    model = AutoModelForCausalLM.from_pretrained(base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.hidden_size == 32
    assert model.config.num_hidden_layers == 1 and model.config.num_attention_heads == 2  # hidden / 32, at least 2
    assert tokenizer.tokenize("2025") == ["2", "0", "2", "5"]  # the digit-wise toy tokenizer
    info = json.loads((base / "eval_harness_base.json").read_text())
    assert info["steps"] == 2 and info["params"] == sum(p.numel() for p in model.parameters())
    assert math.isfinite(info["heldout_loss"]) and info["heldout_loss"] > 0
    assert set(info["skills"]) == {"copy", "count", "larger"} and all(0 <= v <= 1 for v in info["skills"].values())
    specs = expand(
        get_preset("cpu-small"), experiments=["adapter"], methods=["lora", "digits_ntl_was"], base=str(base),
        train_sizes=[8], epochs=1, n_test=4, batch_size=8, threads=1,
    )  # fmt: skip
    lora, ntl = run_specs(specs, tmp_path / "out", log=lambda line: None)
    for r in (lora, ntl):  # one optimizer step each, on the frozen base
        assert r["config"]["base"] == str(base) and len(r["curve"]) == 1
        assert 0 < r["model"]["params"]["trainable"] < r["model"]["params"]["total"]
        assert r["metrics"]["exact_match"]["n_total"] == 4


def test_pretrain_base_refuses_bad_settings(capsys, tmp_path):
    from eval_harness.pretrain import BaseSettings

    with pytest.raises(ValueError, match="`heads` must be a positive divisor of hidden=32, got 3"):
        BaseSettings(hidden=32, heads=3)
    with pytest.raises(ValueError, match="`steps` must be a positive integer, got 0 .*--steps"):
        BaseSettings(steps=0)
    with pytest.raises(ValueError, match="`family` must be one of"):
        BaseSettings(family="gpt2")
    assert BaseSettings(hidden=96).num_heads == 3 and BaseSettings(hidden=32).num_heads == 2
    with pytest.raises(SystemExit) as exc:
        main(["pretrain-base", "--out", str(tmp_path / "b"), "--hidden", "30", "--heads", "4"])
    assert exc.value.code == 2 and "divisor of hidden=30" in capsys.readouterr().err


class _SkillOracle(torch.nn.Module):
    """Stands in for a causal LM: completes each probe with the right number (+ `suffix`), computed from the text."""

    def __init__(self, tokenizer, suffix: str) -> None:
        super().__init__()
        self.tokenizer, self.suffix = tokenizer, suffix

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        prompt = self.tokenizer.decode(input_ids[0], skip_special_tokens=True)
        numbers = [int(word) for word in prompt.replace("=", " ").split() if word.isdigit()]
        if prompt.startswith("Copy"):
            answer = numbers[0]
        elif prompt.startswith("Count"):
            answer = numbers[-1] + 1
        else:
            answer = max(numbers)
        new = self.tokenizer(f" {answer}{self.suffix}", add_special_tokens=False)["input_ids"]
        return torch.cat([input_ids, torch.tensor([new])], dim=1)


def test_skill_probes_count_exact_completions_only(tmp_path):
    from eval_harness.pretrain import skills
    from numadapter.testing.toy import build_tokenizer

    tokenizer = build_tokenizer("digits", tmp_path / "tok")
    assert skills(_SkillOracle(tokenizer, " and"), tokenizer, seed=0, n=5) == {
        "copy": 1.0,
        "count": 1.0,
        "larger": 1.0,
    }
    assert skills(_SkillOracle(tokenizer, "7"), tokenizer, seed=0, n=5) == {"copy": 0.0, "count": 0.0, "larger": 0.0}


def test_pretrain_base_granite_family(tmp_path):
    from transformers import AutoModelForCausalLM

    from eval_harness.pretrain import BaseSettings, pretrain_base

    info = pretrain_base(tmp_path / "g", BaseSettings("granite", hidden=32, layers=1, steps=1, batch_size=2), seed=1)
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "g")
    assert type(model).__name__ == "GraniteForCausalLM" and info["family"] == "granite" and info["seed"] == 1


def test_headline_table_gives_every_method_the_same_budget_with_weight_decay():
    specs = expand(get_preset("cpu-small"), experiments=["data_size"])
    assert {s.method for s in specs} == {"fone", "fone_feature", "digits", "subword"}
    assert {s.train_size for s in specs} == {3200, 6400}
    budgets = {(s.epochs, s.batch_size, s.lr, s.schedule, s.warmup, s.weight_decay) for s in specs}
    assert budgets == {(14, 64, 1e-3, "cosine", 0.14, 0.1)}  # one budget, with the long warmup FoNE needs
    assert {s.weight_decay for s in expand(get_preset("cpu-small"), experiments=["data_size"], weight_decay=0.0)} == {
        0.0
    }  # the CLI's --weight-decay still overrides it


# -- the paper preset ------------------------------------------------------------------------------------------------


def test_every_scratch_table_of_the_paper_preset_runs_from_the_cli_at_toy_sizes(tmp_path):
    """The paper preset is sized for GPUs; its every scratch table, method and task still runs end to end on CPU
    with the budget overridden (one epoch of 32 examples on model 1), and keeps its per-method learning rates."""
    out = tmp_path / "paper"
    argv = ["run", "--preset", "paper", "--device", "cpu", "--threads", "1", "--train-sizes", "32", "--epochs", "1",
            "--n-test", "8", "--batch-size", "16", "--model-sizes", "1", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    paper = get_preset("paper")
    for table in paper.experiments:
        if table.regime != "scratch":
            continue
        files = {p.name for p in (out / table.name).glob("*.json")}
        assert files == {f"{m}-n32-m1-s0.json" for m in table.methods}, table.name
        for method in table.methods:
            result = json.loads((out / table.name / f"{method}-n32-m1-s0.json").read_text())
            assert result["preset"] == "paper" and result["task"] == table.task
            assert result["config"]["lr"] == table.lr_by_method.get(method, table.lr)
            assert result["config"]["epochs"] == 1
            assert result["metrics"]["exact_match"]["n_total"] == 8
    assert not (out / "adapter").exists()  # needs --base
    assert (out / "report.md").read_text().count("## ") >= 6


def test_pretrained_preset_defaults_to_the_real_checkpoint_with_equal_wall_time_budgets():
    from helpers.real import real_dir

    specs = expand(get_preset("pretrained"))
    assert [s.method for s in specs] == ["lora", "fone", "digits_ntl_was", "xval"]
    assert {s.base for s in specs} == {real_dir()} and {s.regime for s in specs} == {"adapter"}
    assert {(s.task, s.train_size, s.batch_size, s.n_valid, s.eval_every_steps) for s in specs} == {
        ("quickstart_add", 8000, 32, 200, 25)
    }
    # about 10 minutes each on 2 cores: 350 x 1.7 s (one [NUM] per number) ~ 130 x 4.5 s (a token per digit)
    budgets = {s.method: s.max_steps for s in specs}
    assert budgets == {"fone": 350, "xval": 350, "lora": 130, "digits_ntl_was": 130}
    assert {s.method: s.epochs for s in specs} == {"fone": 2, "xval": 2, "lora": 1, "digits_ntl_was": 1}  # 250/epoch
    assert {s.max_steps for s in expand(get_preset("pretrained"), max_steps=40)} == {40}  # equal steps
    stepped = expand(get_preset("pretrained"), steps=500)
    assert {(s.max_steps, s.epochs) for s in stepped} == {(None, 2)}  # --steps: whole epochs, as for other presets
    other = expand(get_preset("pretrained"), base="/elsewhere", methods=["fone"])
    assert [(s.method, s.base) for s in other] == [("fone", "/elsewhere")]


def test_pretrained_preset_runs_end_to_end_on_the_real_base(tmp_path, capsys):
    from helpers.real import real_dir

    out = tmp_path / "out"
    assert main(["run", "--preset", "pretrained", "--max-steps", "2", "--train-sizes", "8", "--batch-size", "4",
                 "--n-test", "2", "--n-valid", "2", "--eval-every-steps", "2", "--threads", "1",
                 "--out", str(out)]) == 0  # fmt: skip
    results = {p.stem: json.loads(p.read_text()) for p in (out / "addition").glob("*.json")}
    assert sorted(results) == sorted(f"{m}-n8-lora-s0" for m in ("lora", "fone", "digits_ntl_was", "xval"))
    for result in results.values():
        assert result["config"]["base"] == real_dir() and result["timing"]["optimizer_steps"] == 2
        assert [p["step"] for p in result["step_curve"]] == [2]
        assert 0.0 <= result["metrics"]["exact_match"]["value"] <= 1.0
    # SmolLM2 writes one token per digit: "1234 + 567 =" -> 1 2 3 4 Ġ+ Ġ 5 6 7 Ġ=; FoNE one [NUM] a number (xVal too,
    # within the range fitted on these 8 training problems: a larger sum stays text)
    tokens = {m: results[f"{m}-n8-lora-s0"]["data"]["tokens_per_number"] for m in ("lora", "fone", "xval")}
    assert tokens["lora"] > 3.0 and tokens["fone"] == 1.0 and tokens["xval"] < tokens["lora"]
    report = (out / "report.md").read_text()
    assert "| run | step 2 | train s |" in report and "optimizer steps per run: digits_ntl_was 2, fone 2" in report
