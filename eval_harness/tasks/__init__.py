"""Evaluation tasks from the papers numadapter implements, behind one API (see `base.Task`).

Families: FoNE arithmetic + classification (`fone`), xVal multi-operand expressions (`xval`), NTL
multiplication and question answering (`ntl`), FERMAT-style number views (`fermat`), the quick start's addition
(`quickstart`), and your own JSONL files (`jsonl.load_jsonl_task`). ``TASKS`` maps every built-in name to its task;
``get_task(name)`` looks one up.
"""

from .base import Example, Task, canonical_number
from .jsonl import JsonlTask, load_jsonl_task
from .registry import TASKS, get_task

__all__ = ["TASKS", "Example", "JsonlTask", "Task", "canonical_number", "get_task", "load_jsonl_task"]
