"""The registry of built-in tasks: `TASKS` (name -> task) and `get_task`."""

from __future__ import annotations

from .base import Task
from .fermat import fermat_tasks
from .fone import fone_tasks
from .ntl import ntl_tasks
from .quickstart import quickstart_tasks
from .xval import xval_tasks

FAMILIES = (fone_tasks, xval_tasks, ntl_tasks, fermat_tasks, quickstart_tasks)
TASKS: dict[str, Task] = {task.name: task for family in FAMILIES for task in family()}


def get_task(name: str) -> Task:
    """The registered task called `name`.

    Raises:
        ValueError: unknown name; the message lists the valid names (``python -m eval_harness tasks`` too).
    """
    if not isinstance(name, str) or name not in TASKS:
        raise ValueError(
            f"Unknown task {name!r}. Valid names: {', '.join(sorted(TASKS))}. "
            f"Run `python -m eval_harness tasks` for descriptions, or load your own file with load_jsonl_task."
        )
    return TASKS[name]
