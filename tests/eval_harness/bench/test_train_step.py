"""The training-step benchmark runs, and its deterministic part (matmul FLOPs) shows the sparse number rows."""

from __future__ import annotations

from eval_harness.bench.train_step import run


def test_train_step_benchmark_runs_and_counts_flops():
    result = run(device="cpu", repeats=1, warmup=0, vocab=256, hidden=64, layers=2, batch=2, seq=16, fraction=0.2)
    assert set(result["median_s"]) == {"lora", "lora_tokens", "numadapter"}
    flops = result["flops"]
    # PEFT's dense trainable tokens pay a full LM-head weight gradient (2 * B*T * V * H FLOPs); numadapter does not
    assert flops["lora_tokens"] - flops["lora"] >= 2 * (2 * 16) * 257 * 64
    assert flops["lora"] < flops["numadapter"] < flops["lora_tokens"]
