"""``python -m eval_harness``: list tasks and generate their data.

Subcommands:
    tasks      list the built-in tasks with their descriptions, split sizes and metrics.
    generate   write examples of one task split as JSON Lines (stdout or --out).

Running methods on tasks (``run``: methods, presets, device) is not part of this command yet; it is added by
the runner work, as a further subparser in `make_parser`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO


def make_parser() -> argparse.ArgumentParser:
    """The argument parser (separate from `main` so tests and docs can inspect it)."""
    parser = argparse.ArgumentParser(
        prog="python -m eval_harness",
        description="numadapter evaluation harness: tasks from the FoNE, xVal, NTL and digit-aggregation papers.",
        epilog="Training and evaluating methods on these tasks (a `run` command) is not available yet.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    sub.add_parser("tasks", help="list tasks with descriptions, split sizes and metrics")

    gen = sub.add_parser(
        "generate",
        help="write examples of a task split as JSON Lines",
        description="Write the first N examples of a task split as JSON Lines, one object per line with keys "
        "prompt, target, answer, sep, metadata (and split).",
    )
    gen.add_argument("--task", required=True, help="task name (see `python -m eval_harness tasks`)")
    gen.add_argument("--split", default="test", help="split name, e.g. train, valid, test (default: test)")
    gen.add_argument("--n", type=int, default=None, help="number of examples (default: the task's split size)")
    gen.add_argument("--seed", type=int, default=0, help="seed fixing the split partition and order (default: 0)")
    gen.add_argument("--out", type=Path, default=None, help="output .jsonl file (default: print to stdout)")
    # `run` (methods, presets cpu-small/paper, --device) is added here by the runner work.
    return parser


def _list_tasks(out: TextIO) -> None:
    from .tasks import TASKS

    width = max(len(name) for name in TASKS)
    for name, task in TASKS.items():
        sizes = ", ".join(f"{split} {size:,}" for split, size in task.splits.items())
        out.write(f"{name:<{width}}  {task.description}\n")
        out.write(f"{'':<{width}}  splits: {sizes}; metrics: {', '.join(task.metrics)}; source: {task.source}\n")


def _generate(args: argparse.Namespace, out: TextIO) -> None:
    from .tasks import get_task

    task = get_task(args.task)
    examples = task.generate(args.split, n=args.n, seed=args.seed)
    lines = [json.dumps({**e.to_dict(), "split": args.split}, ensure_ascii=False) + "\n" for e in examples]
    if args.out is None:
        out.writelines(lines)
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as handle:
        handle.writelines(lines)
    out.write(f"wrote {len(lines)} examples of {task.name}/{args.split} (seed {args.seed}) to {args.out}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 with a message on bad input)."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "tasks":
            _list_tasks(sys.stdout)
        elif args.command == "generate":
            _generate(args, sys.stdout)
    except (ValueError, TypeError) as err:
        parser.exit(2, f"error: {err}\n")
    return 0
