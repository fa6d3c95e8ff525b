"""eval_harness.bench.ntl_overhead: the NTL overhead benchmark runs and reports every scenario and clock (no timing
assertions: timed numbers are only checked to be positive)."""

from __future__ import annotations

from eval_harness.bench.ntl_overhead import run


def test_overhead_benchmark_runs() -> None:
    result = run(batch=1, seq=8, vocab=64, repeats=1, step_repeats=1, warmup=0, threads=1)
    for scenario in ("loss", "step"):
        for clock in ("wall", "cpu"):
            res = result[scenario][clock]
            assert set(res["median_s"]) == {"ce", "fused_ce", "fused_ce_ntl", "ce_plus_ntl"}
            assert res["ntl_work_s"] > 0 and res["ratio_ce_plus_ntl_work_vs_ce"] > 1
            assert all(v > 0 for v in res["median_s"].values())
