"""eval_harness.bench.common.interleaved_times: every side once per repetition in rotating order, warmup untimed, each
clock timed, sync around every call."""

from __future__ import annotations

from eval_harness.bench.common import interleaved_times


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
