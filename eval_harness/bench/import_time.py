"""Start-up cost of numadapter: ``import numadapter`` against loading every public name, in fresh interpreters.

Each side is one ``python -c ...`` subprocess started in the repository root, so it imports this checkout:

=========  =========================================================================================================
side       what the child runs
=========  =========================================================================================================
python     ``pass``: the interpreter's own start-up, for reference
import     ``import numadapter`` (the lazy package: PEP 562, nothing heavy is imported)
eager      ``import numadapter`` then every name of ``numadapter.__all__``: the modules ``import numadapter``
           loaded before it was lazy (the old ``__init__`` imported exactly these)
help       ``python -m numadapter.app.cli --help`` (what the ``numadapter`` console script does for ``--help``)
before     with ``--baseline DIR``: ``import numadapter`` in another checkout (e.g. ``git worktree add DIR <commit>``
           of a commit before the package was lazy), so the old and the new import are timed side by side
=========  =========================================================================================================

Repetitions rotate through the sides, so drifts in machine load hit all of them alike; each side's figure is the
best (minimum) wall time over the repetitions, and the headline is ``eager / import``. Each child also reports how
many modules it left in ``sys.modules`` and whether torch, transformers, peft, trl, deepspeed and bitsandbytes
are among them.

Run: ``python -m eval_harness.bench.import_time [--repeats 5] [--baseline DIR] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from eval_harness.bench.common import write_json

ROOT = Path(__file__).resolve().parents[2]
WATCHED = ("torch", "transformers", "peft", "trl", "deepspeed", "bitsandbytes")
REPORT = f"import json, sys; print(json.dumps([len(sys.modules), [m for m in {WATCHED!r} if m in sys.modules]]))"
SIDES: dict[str, list[str]] = {
    "python": ["-c", "pass"],
    "import": ["-c", f"import numadapter; {REPORT}"],
    "eager": ["-c", f"import numadapter; [getattr(numadapter, n) for n in numadapter.__all__]; {REPORT}"],
    "help": ["-m", "numadapter.app.cli", "--help"],
}


def run_side(side: str, baseline: Path | None = None) -> tuple[float, Any]:
    """Runs one side once in a fresh interpreter; returns (wall seconds, what it reported or None)."""
    args, cwd = (SIDES["import"], baseline) if side == "before" else (SIDES[side], ROOT)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"side {side!r} exited with {done.returncode}: {done.stderr[-2000:]}")
    lines = done.stdout.strip().splitlines()
    report = json.loads(lines[-1]) if lines and lines[-1].startswith("[") else None
    return wall, report


def measure(repeats: int = 5, baseline: Path | None = None) -> dict[str, Any]:
    """Best-of-`repeats` wall times of every side (rotating order) and the ``eager / import`` ratio.

    Args:
        repeats: runs of each side; the minimum is kept.
        baseline: another checkout whose ``import numadapter`` is timed as the side ``before`` (None: no such side).
    """
    if repeats < 1:
        raise ValueError(f"`repeats` must be at least 1, got {repeats}.")
    if baseline is not None and not (Path(baseline) / "numadapter" / "__init__.py").is_file():
        raise ValueError(f"--baseline {baseline} holds no numadapter/__init__.py: pass a checkout of the repository.")
    order = list(SIDES) + (["before"] if baseline is not None else [])
    walls: dict[str, list[float]] = {side: [] for side in order}
    reports: dict[str, Any] = {}
    for rep in range(repeats):
        for side in order[rep % len(order) :] + order[: rep % len(order)]:
            wall, report = run_side(side, baseline)
            walls[side].append(wall)
            if report is not None:
                reports[side] = {"modules": report[0], "heavy_loaded": report[1]}
    best = {side: min(values) for side, values in walls.items()}
    result = {
        "repeats": repeats,
        "baseline": None if baseline is None else str(baseline),
        "best_s": best,
        "walls_s": walls,
        "loaded": reports,
        "ratio_eager_over_import": best["eager"] / best["import"],
        "ratio_help_over_python": best["help"] / best["python"],
    }
    if baseline is not None:
        result["ratio_before_over_import"] = best["before"] / best["import"]
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each side; the best is kept")
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout whose import is timed as 'before'")
    parser.add_argument("--json", default=None, help="write the result here")
    args = parser.parse_args(argv)
    result = measure(args.repeats, args.baseline)
    for side, best in result["best_s"].items():
        loaded = result["loaded"].get(side)
        heavy = ", ".join(loaded["heavy_loaded"]) or "none" if loaded else ""
        extra = f"  {loaded['modules']} modules, heavy: {heavy}" if loaded else ""
        print(f"{side:>7}: {best:7.3f} s{extra}")
    print(f"eager / import: {result['ratio_eager_over_import']:.1f}x (best of {args.repeats})")
    if "ratio_before_over_import" in result:
        print(f"before / import: {result['ratio_before_over_import']:.1f}x")
    write_json(result, args.json)
    return result


if __name__ == "__main__":
    main()
