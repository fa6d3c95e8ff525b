"""Small pieces every benchmark shares: `write_json` (``--json``), `check_clock`, `cuda_sync`, `interleaved_times`
(sides timed alike, the one side-by-side timer of the benchmarks) and `median_ratio` (how two of its sides compare)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# clock name -> its timer: wall time, CPU time of the calling thread, CPU time of the process
CLOCKS: dict[str, Callable[[], float]] = {
    "wall": time.perf_counter,
    "thread": time.thread_time,
    "cpu": time.process_time,
}


def write_json(result: Any, path: str | None) -> None:
    """Writes `result` to `path` as indented JSON (UTF-8); nothing when `path` is None (no ``--json`` given)."""
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)


def check_clock(clock: str) -> None:
    """Refuses a ``clock`` other than ``"wall"`` and ``"thread"``, the two a benchmark's ``--clock`` offers."""
    if clock not in ("wall", "thread"):
        raise ValueError(f"`clock` must be 'wall' or 'thread', got {clock!r}.")


def cuda_sync(device: str) -> Callable[[], None] | None:
    """`interleaved_times`' ``sync`` for `device`: ``torch.cuda.synchronize`` on a GPU (a call returns before its
    kernels end), None on the CPU."""
    if not device.startswith("cuda"):
        return None
    import torch

    return torch.cuda.synchronize


def interleaved_times(
    fns: Mapping[str, Callable[[], Any]],
    repeats: int,
    warmup: int = 0,
    clocks: Sequence[str] = ("wall",),
    sync: Callable[[], None] | None = None,
) -> dict[str, dict[str, list[float]]]:
    """Times every function of `fns` once per repetition, side by side: the order rotates by one each repetition, so
    a drift in machine load hits every side alike and the per-repetition ratios compare like with like.

    Args:
        fns: ``{side: function}``, each called with no arguments.
        repeats: timed repetitions.
        warmup: untimed repetitions first (run the same way).
        clocks: names in `CLOCKS`; every call is timed on each of them.
        sync: called before and after each call (``torch.cuda.synchronize`` on a GPU), or None.

    Returns:
        ``{clock: {side: [seconds of each timed repetition]}}``.
    """
    names = list(fns)
    timers = {clock: CLOCKS[clock] for clock in clocks}
    times: dict[str, dict[str, list[float]]] = {clock: {name: [] for name in names} for clock in timers}
    for rep in range(-warmup, repeats):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            if sync is not None:
                sync()
            start = {clock: timer() for clock, timer in timers.items()}
            fns[name]()
            if sync is not None:
                sync()
            if rep >= 0:
                for clock, timer in timers.items():
                    times[clock][name].append(timer() - start[clock])
    return times


def median_ratio(times: Mapping[str, Sequence[float]], mine: str, theirs: str) -> float:
    """The median of the per-repetition ratios ``mine / theirs`` of `interleaved_times`' seconds of one clock: both
    sides of a ratio ran in the same repetition, so a drift in machine load cancels out of it."""
    return statistics.median(a / b for a, b in zip(times[mine], times[theirs]))
