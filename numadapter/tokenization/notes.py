"""Numbers that travel with token-id tensors between `NumberTokenizer`, ``model.generate`` and ``decode``.

Hugging Face code passes ids alone where numadapter needs ids *and* numbers: ``pipeline("text-generation")`` hands
``model.generate`` only ``input_ids`` and ``attention_mask`` of the tokenizer's output, and decodes the generated
ids as plain lists (``tokenizer.decode(sequence[prompt_length:])``); users write ``tokenizer.decode(out[0])``. Two
records bridge those gaps without changing what the tensors are:

- **Tensor notes** (`note`, `noted`): the ``input_ids`` tensor that `NumberTokenizer` returns (``return_tensors="pt"``)
  is noted with its number tensors and surface forms, and the ``sequences`` tensor ``model.generate`` returns with
  the text of every [NUM] of every row. Notes are keyed by the tensor object and dropped when it is garbage
  collected (a weak reference; nothing is attached to the tensor, so pickling and ``torch.save`` are unaffected).
  A copy of the tensor (``.to("cuda")``, a pipeline's re-padded batch) is another object: `noted_rows` matches its
  rows, in order, to the most recent rows the tokenizer encoded with exactly these ids (the last
  `RECENT_PROMPT_ROWS` rows are kept).
- **Recent generations** (`remember_generation`, `find_number_texts`): the rows of the last `RECENT` generate calls,
  so that a list of ids cut from one (a suffix of a row: ``out[0]``, ``out[0, prompt_len:]``, what pipelines decode)
  gets its numbers back. When it fits several rows of that call with different numbers (identical completions of
  templated prompts), rows are matched in order, as pipelines and ``for row in output`` decode them; a piece that
  fits only rows already matched raises an error rather than guess.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

RECENT = 16


@dataclass
class PromptNumbers:
    """The numbers of a `NumberTokenizer` batch: side tensors ``[B, T]`` (``num_digits`` ``[B, T, P]``) aligned with
    the noted ``input_ids``, the surface form of every number per row, the `NumberTokenizer` itself, and the
    attention mask ``[B, T]`` (which columns are padding)."""

    numbers: dict[str, torch.Tensor]
    number_texts: list[list[str]]
    tokenizer: Any = None
    attention_mask: torch.Tensor | None = None


@dataclass
class SequenceNumbers:
    """What ``model.generate`` attaches to its ``sequences`` ``[N, L]``.

    Attributes:
        number_texts: per row, the text of every [NUM] of the row in order (prompt numbers, then generated ones).
        numbers: per row, the generated numbers (`ExactNumber` for FoNE, float for xVal).
        stop_reasons: per row, why generation stopped (``"eos"``, ``"length"``, ...).
    """

    number_texts: list[list[str]]
    numbers: list[list[Any]] = field(default_factory=list)
    stop_reasons: list[str] = field(default_factory=list)


RECENT_PROMPT_ROWS = 256
_notes: dict[int, tuple[weakref.ref, Any]] = {}
_recent_prompts: deque[tuple[torch.Tensor, PromptNumbers]] = deque()
_prompt_rows = [0]  # rows in _recent_prompts
_recent: deque[GenerationRecord] = deque(maxlen=RECENT)


def note(tensor: torch.Tensor, payload: Any) -> None:
    """Records `payload` for `tensor` until the tensor is garbage collected."""
    key = id(tensor)

    def forget(ref: weakref.ref, key: int = key) -> None:
        entry = _notes.get(key)
        if entry is not None and entry[0] is ref:
            del _notes[key]

    _notes[key] = (weakref.ref(tensor, forget), payload)


def note_prompts(input_ids: torch.Tensor, payload: PromptNumbers) -> None:
    """Notes a `NumberTokenizer` batch: on its ``input_ids`` tensor (`note`), and among the recent batches (at most
    `RECENT_PROMPT_ROWS` rows in all), which `noted_rows` searches for copies (a pipeline collates single prompts
    into a new padded batch and drops them)."""
    note(input_ids, payload)
    _recent_prompts.append((input_ids, payload))
    _prompt_rows[0] += input_ids.shape[0]
    while len(_recent_prompts) > 1 and _prompt_rows[0] > RECENT_PROMPT_ROWS:
        _prompt_rows[0] -= _recent_prompts.popleft()[0].shape[0]


def noted(tensor: Any) -> Any:
    """The payload noted for this very tensor object, or None."""
    entry = _notes.get(id(tensor))
    if entry is None or entry[0]() is not tensor:
        return None
    return entry[1]


@dataclass
class NotedRow:
    """One unpadded row of a noted `NumberTokenizer` batch: side values ``[T]`` (``num_digits`` ``[T, P]``), the
    numbers' surface forms, and the tokenizer."""

    sides: dict[str, torch.Tensor]
    number_texts: list[str]
    tokenizer: Any


def noted_rows(rows: Sequence[Sequence[int]]) -> list[NotedRow] | None:
    """The numbers of a batch of unpadded id rows, from the most recent `NumberTokenizer` rows that have exactly
    these ids in this order (a copy of a noted batch moved to another device, or single prompts re-padded into one
    batch, as pipelines do); None when no such run of rows was encoded among the last `RECENT_PROMPT_ROWS` rows.

    The order matters: ``ntok("x = 5")``, ``ntok("x = 7")`` then a batch of their two rows gets 5 and 7, because the
    rows are matched to the encodings in sequence, never by ids alone.
    """
    wanted = [tuple(row) for row in rows]
    flat: list[tuple[tuple[int, ...], PromptNumbers, int, torch.Tensor]] = []
    for tensor, payload in _recent_prompts:
        ids_cpu = tensor.detach().cpu()
        mask = payload.attention_mask.cpu().bool() if payload.attention_mask is not None else None
        for r in range(ids_cpu.shape[0]):
            kept = mask[r] if mask is not None else torch.ones_like(ids_cpu[r], dtype=torch.bool)
            flat.append((tuple(ids_cpu[r][kept].tolist()), payload, r, kept))
    for end in range(len(flat), len(wanted) - 1, -1):
        window = flat[end - len(wanted) : end]
        if all(row[0] == ids for row, ids in zip(window, wanted)):
            return [
                NotedRow(
                    {key: value[r][kept.to(value.device)].cpu() for key, value in payload.numbers.items()},
                    list(payload.number_texts[r]),
                    payload.tokenizer,
                )
                for _, payload, r, kept in window
            ]
    return None


@dataclass
class GenerationRecord:
    """The rows of one generate call: ``(ids, texts of its [NUM])`` per row, and the next row to match first when a
    decoded piece fits several rows with different numbers (rows are decoded in order: pipelines, loops)."""

    num_token_id: int
    pad_id: int | None
    rows: list[tuple[tuple[int, ...], tuple[str, ...]]]
    cursor: int = 0


def remember_generation(
    num_token_id: int, pad_id: int | None, rows: Sequence[Sequence[int]], texts: Sequence[Sequence[str]]
) -> list[tuple[tuple[int, ...], tuple[str, ...]]]:
    """Keeps the rows of one generate call (ids and the text of each [NUM]) among the last `RECENT` calls.

    Returns:
        The kept list of ``(ids, texts)`` per row; replacing its entries updates the record (streaming).
    """
    record = GenerationRecord(num_token_id, pad_id, [(tuple(r), tuple(t)) for r, t in zip(rows, texts)])
    _recent.append(record)
    return record.rows


def _strip(ids: Sequence[int], pad_id: int | None) -> tuple[int, ...]:
    ids = tuple(ids)
    end = len(ids)
    while pad_id is not None and end and ids[end - 1] == pad_id:
        end -= 1
    return ids[:end]


def _suffix_texts(ids: tuple[int, ...], count: int, row: tuple[int, ...], texts: tuple[str, ...], pad_id: int | None):
    """The texts of the last `count` [NUM] of `row` when `row` ends with `ids` (trailing padding ignored)."""
    wanted, row = _strip(ids, pad_id), _strip(row, pad_id)
    if len(wanted) <= len(row) and row[len(row) - len(wanted) :] == wanted and count <= len(texts):
        return texts[len(texts) - count :] if count else ()
    return None


def find_number_texts(ids: Sequence[int], num_token_id: int) -> list[str] | None:
    """The [NUM] texts of `ids` when they end a remembered generated row (trailing padding ignored).

    The most recent generate call with such a row answers; older calls are searched only when it has none. When
    `ids` end several of its rows with different numbers (identical completions, e.g. ``output[:, prompt_len:]`` of
    templated prompts), they are matched in row order: the first such row after the last one matched this way, as
    pipelines and ``for row in output`` decode them.

    Returns:
        One text per [NUM] of `ids`, or None when no remembered row ends with `ids`.

    Raises:
        ValueError: `ids` end several rows with different numbers and none of them comes after the last match.
    """
    ids = tuple(ids)
    count = ids.count(num_token_id)
    for record in reversed(_recent):
        if record.num_token_id != num_token_id:
            continue
        found = [(i, t) for i, (row, texts) in enumerate(record.rows)
                 if (t := _suffix_texts(ids, count, row, texts, record.pad_id)) is not None]  # fmt: skip
        if not found:
            continue
        if len({t for _, t in found}) == 1:
            return list(found[0][1])
        later = [(i, t) for i, t in found if i >= record.cursor]
        if not later:
            raise ValueError(
                f"these ids are the end of {len(found)} generated sequences with different numbers, so their numbers "
                "cannot be recovered from the ids: decode the whole output of model.generate with "
                "number_tokenizer.batch_decode(output), or pass number_texts=..."
            )
        record.cursor = later[0][0] + 1
        return list(later[0][1])
    return None


def find_batch_number_texts(batch: Sequence[Sequence[int]], num_token_id: int) -> list[list[str]] | None:
    """Per row, the [NUM] texts of a batch cut from the output of one recent generate call (row b of `batch` ends
    row b of that output, e.g. ``output[:, prompt_len:]``); None when no remembered call fits row by row."""
    batch = [tuple(row) for row in batch]
    for record in reversed(_recent):
        if record.num_token_id != num_token_id or len(record.rows) != len(batch):
            continue
        rows, pad_id = record.rows, record.pad_id
        got = [_suffix_texts(ids, ids.count(num_token_id), *row, pad_id) for ids, row in zip(batch, rows)]
        if all(t is not None for t in got):
            return [list(t) for t in got]
    return None
