"""eval_harness.bench.common: interleaved_times times every side once per repetition in rotating order, warmup
untimed, each clock timed, sync around every call; median_ratio compares two sides per repetition; check_clock and
cuda_sync."""

from __future__ import annotations

import pytest
import torch

from eval_harness.bench.common import check_clock, cuda_sync, interleaved_times, median_ratio


def test_sides_rotate_warmup_is_untimed_and_every_clock_times_every_call():
    calls, syncs = [], []
    fns = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    times = interleaved_times(fns, repeats=3, warmup=2, clocks=("wall", "cpu"), sync=lambda: syncs.append(1))
    timed = calls[6:]
    assert timed == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]  # the timed repetitions start in the given order
    assert sorted(calls[:6]) == ["a", "a", "b", "b", "c", "c"]  # two untimed rounds first
    assert len(syncs) == 2 * len(calls)
    assert set(times) == {"wall", "cpu"}
    for series in times.values():
        assert set(series) == {"a", "b", "c"} and all(len(s) == 3 and min(s) >= 0 for s in series.values())


def test_median_ratio_is_the_median_of_the_per_repetition_ratios():
    times = {"a": [2.0, 9.0, 3.0], "b": [1.0, 3.0, 1.0]}  # ratios 2, 3, 3; the ratio of the medians would be 3
    assert median_ratio(times, "a", "b") == 3.0
    assert median_ratio({"a": [1.0, 4.0], "b": [2.0, 2.0]}, "a", "b") == 1.25  # (0.5 + 2) / 2


def test_check_clock_takes_wall_and_thread_only_and_cuda_sync_waits_on_a_gpu_only():
    check_clock("wall")
    check_clock("thread")
    with pytest.raises(ValueError, match=r"^`clock` must be 'wall' or 'thread', got 'cpu'\.$"):
        check_clock("cpu")
    assert cuda_sync("cpu") is None
    assert cuda_sync("cuda:0") is torch.cuda.synchronize
