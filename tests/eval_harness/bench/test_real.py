"""eval_harness.bench.real: the four real-checkpoint comparisons, run here on a tiny random Llama saved with the quick
start's tokenizer (the same code path as on SmolLM2-135M, in seconds). No timing assertions: timed ratios are only
checked to be positive and finite."""

from __future__ import annotations

import math

import pytest
import torch

from eval_harness.bench import all as bench_all
from eval_harness.bench.real import _memory_mb, _rss_in_child, run
from eval_harness.quickstart_limits import _random_base


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return _random_base("32,64,2", str(tmp_path_factory.mktemp("tiny-base")))


@pytest.fixture(scope="module")
def result(base):
    return run(base=base, batch=2, step_repeats=2, epoch_steps=1, epoch_repeats=2, gen_batch=2, new_tokens=3,
               gen_repeats=2, warmup=0, rss=False, threads=1, clock="thread")  # fmt: skip


def test_every_comparison_reports_both_sides_and_a_positive_finite_ratio(result):
    assert set(result) == {"setup", "train_step", "epoch", "generate", "memory", "ratios"}
    assert set(result["ratios"]) == {"train_step", "epoch_digits_over_fone", "generate", "trainable_params",
                                     "adapter_bytes"}  # fmt: skip
    assert all(math.isfinite(v) and v > 0 for v in result["ratios"].values())
    assert set(result["train_step"]["median_s"]) == {"lora", "fone"}
    assert set(result["epoch"]["step_s"]) == {"digits", "fone"}
    assert set(result["generate"]["ms_per_token"]) == {"base", "adapted", "lora"}
    for times in (result["train_step"]["median_s"], result["epoch"]["step_s"], result["generate"]["ms_per_token"]):
        assert all(math.isfinite(v) and v > 0 for v in times.values())
    assert result["setup"]["threads"] == 1 and result["setup"]["clock"] == "thread"


def test_the_sides_differ_only_where_they_should(result):
    step, epoch, memory = result["train_step"], result["epoch"], result["memory"]
    # the same ids and shapes: the FLOPs differ only by the number work (digit head), a small share
    assert 1.0 < step["flops_ratio"] < 1.5
    # "a + b =" " c" eos: digits spend one token per digit (3-4 per operand), FoNE one [NUM] per number
    assert epoch["seq_len_mean"]["digits"] > epoch["seq_len_mean"]["fone"] + 6
    assert step["tokens_per_row"] == epoch["seq_len_mean"]["fone"]  # step 1 ran FoNE's own encoding
    # a fresh adapter's LoRA B is zero and the prompts hold no number: the same greedy text on every side
    assert result["generate"]["same_ids"] is True
    # the FoNE adapter holds PEFT's LoRA (same r / targets) and its number modules on top
    assert memory["trainable"]["fone"] > memory["trainable"]["lora"] > 0
    assert memory["adapter_bytes"]["fone"] > memory["adapter_bytes"]["lora"] > 0


def test_headlines_and_selection_of_the_real_bench(result):
    rows = bench_all.headlines("real", result)
    assert [(r["op"], r["target"]) for r in rows] == [("<=", 1.03), (None, None), ("<=", 1.05), ("<=", 1.01)]
    assert [r["value"] for r in rows] == [result["ratios"][k] for k in ("train_step", "epoch_digits_over_fone",
                                                                        "generate", "trainable_params")]  # fmt: skip
    assert "real" not in bench_all.select(None)  # 3-5 minutes: only when asked for
    assert bench_all.select(None, real=True) == ["real"]
    assert bench_all.select("train_step", real=True) == ["train_step", "real"]
    assert bench_all.select("real") == ["real"]


def test_peak_rss_is_the_child_process_s_own(base, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    batch = dict(tokenizer(["12 + 34 = 46"], return_tensors="pt"))
    batch["labels"] = batch["input_ids"].clone()
    path = str(tmp_path / "batch.pt")
    torch.save({"batches": {"lora": batch}, "places": (2, 0)}, path)
    ballast = torch.ones(256 * 2**20)  # 1 GiB in this process: ru_maxrss would carry it over exec into the child
    ballast[::1024] = 2.0  # touch every page
    parent_peak = _memory_mb("VmHWM")
    run = _rss_in_child("lora", base, path, threads=1)
    assert parent_peak > 1024
    assert 100 < run["peak_rss_mb"] < parent_peak - 512  # the child's own peak: torch, the tiny model, two steps
    assert run["before_training_mb"] <= run["peak_rss_mb"] and run["training_mb"] >= 0
    del ballast


def test_bad_options_are_refused(base):
    with pytest.raises(ValueError, match="`batch` must be a positive integer, got 0"):
        run(base=base, batch=0)
    with pytest.raises(ValueError, match="needs threads=1, got threads=None"):
        run(base=base, clock="thread")
