"""Your own data as a task: `load_jsonl_task` reads JSON Lines files of prompt/target records.

Each non-empty line must be a JSON object with (at least) the prompt and target keys. JSON numbers are kept
exactly as written (``"target": 579.120`` becomes the text "579.120", never a float); every other key is kept
in the example's metadata. The file order is the example order; `generate(split, n)` returns the first `n`
records, and its seed is ignored (a file is already one fixed sample).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from .base import Example, Task, canonical_number


def _plain(value: Any) -> Any:
    """JSON value parsed with Decimal floats -> plain JSON types, with Decimals as their exact text."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _text(value: Any, key: str, path: Path, lineno: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise ValueError(
            f"{path}, line {lineno}: key {key!r} must be a string or a number, got {type(value).__name__} "
            f"{value!r}. Store a string (or a JSON number) under {key!r}."
        )
    return str(value)


def _answer(target: str) -> str:
    """Canonical exact number of the target when it is a number, else the target itself."""
    try:
        value = Decimal(target.strip())
    except InvalidOperation:
        return target
    return canonical_number(value) if value.is_finite() else target


def read_jsonl(
    path: str | Path, prompt_key: str = "prompt", target_key: str = "target", answer_key: str | None = None
) -> list[Example]:
    """Read one JSONL file into examples (see the module docstring).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a line is not JSON, not an object, lacks a key (the message names the key, the line number
            and the keys found), or a prompt/target is neither a string nor a number.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"JSONL file {str(path)!r} does not exist; pass the path of a .jsonl file.")
    examples = []
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line, parse_float=Decimal)
            except json.JSONDecodeError as err:
                raise ValueError(
                    f"{path}, line {lineno}: not valid JSON ({err.msg}); each line must be one JSON object."
                ) from None
            if not isinstance(record, dict):
                raise ValueError(
                    f"{path}, line {lineno}: expected a JSON object like "
                    f'{{"{prompt_key}": ..., "{target_key}": ...}}, got {type(record).__name__}.'
                )
            for role, key in (("prompt_key", prompt_key), ("target_key", target_key), ("answer_key", answer_key)):
                if key is not None and key not in record:
                    raise ValueError(
                        f"{path}, line {lineno}: missing key {key!r} ({role}={key!r}); keys found: "
                        f"{sorted(record)}. Pass {role}=<one of these keys>."
                    )
            prompt = _text(record[prompt_key], prompt_key, path, lineno)
            target = _text(record[target_key], target_key, path, lineno)
            answer = _text(record[answer_key], answer_key, path, lineno) if answer_key else target
            used = {prompt_key, target_key, answer_key}
            metadata = {k: _plain(v) for k, v in record.items() if k not in used}
            metadata["line"] = lineno
            examples.append(Example(prompt=prompt, target=target, answer=_answer(answer), metadata=metadata))
    return examples


@dataclass(frozen=True, eq=False)
class JsonlTask(Task):
    """A task backed by JSONL files, one per split (built by `load_jsonl_task`)."""

    name: str
    files: Mapping[str, Path]
    prompt_key: str = "prompt"
    target_key: str = "target"
    answer_key: str | None = None
    sep: str = " "
    description: str = ""
    metrics: tuple[str, ...] = ("exact_match", "mae", "cer")
    source: str = "user JSONL"
    _cache: dict[str, list[Example]] = field(default_factory=dict, repr=False)

    def _examples(self, split: str) -> list[Example]:
        if split not in self._cache:
            examples = read_jsonl(self.files[split], self.prompt_key, self.target_key, self.answer_key)
            self._cache[split] = [
                Example(e.prompt, e.target, e.answer, {**e.metadata, "task": self.name}, self.sep) for e in examples
            ]
        return self._cache[split]

    @property
    def splits(self) -> dict[str, int]:
        return {split: len(self._examples(split)) for split in self.files}

    _capacity_hint = " (the number of records in its file)"

    def capacity(self, split: str) -> int:
        return len(self._examples(split))

    def _generate(self, split: str, n: int, seed: int) -> list[Example]:
        return self._examples(split)[:n]


def load_jsonl_task(
    path: str | Path | Mapping[str, str | Path],
    prompt_key: str = "prompt",
    target_key: str = "target",
    *,
    answer_key: str | None = None,
    name: str | None = None,
    sep: str = " ",
    split: str = "test",
) -> JsonlTask:
    """Point the harness at your own data.

    Args:
        path: one JSONL file (it becomes the split `split`), or a mapping split name -> file, e.g.
            ``{"train": "train.jsonl", "test": "test.jsonl"}``.
        prompt_key: the key holding the model input.
        target_key: the key holding the answer text.
        answer_key: optional key holding the exact answer value (defaults to the target).
        name: task name (defaults to the file stem).
        sep: text between prompt and target in ``Example.text()``.
        split: split name for a single file.

    Returns:
        A `JsonlTask`; every file is read and validated now, so errors surface here.

    Raises:
        FileNotFoundError, ValueError: see `read_jsonl`.
    """
    files = {split: Path(path)} if isinstance(path, str | Path) else {k: Path(v) for k, v in path.items()}
    if not files:
        raise ValueError("`path` mapping is empty; pass a file path or {split: path}.")
    first = next(iter(files.values()))
    task = JsonlTask(
        name=name or first.stem,
        files=files,
        prompt_key=prompt_key,
        target_key=target_key,
        answer_key=answer_key,
        sep=sep,
        description=f"user data from {', '.join(str(p) for p in files.values())}",
    )
    for s in files:
        task._examples(s)  # validate eagerly
    return task
