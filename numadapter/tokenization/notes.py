"""Numbers that travel with token-id tensors between `NumberTokenizer`, ``model.generate`` and ``decode``.

Ids are never matched to numbers by value: two prompts that differ only in their numbers ("The year 1969 ...",
"The year 2001 ...") have the same ids, so ids alone cannot say which numbers they hold. Numbers travel in three
ways only:

- **With the batch**: the number tensors and ``number_texts`` of the `NumberTokenizer` output
  (``model.generate(**ntok(...))``, ``ntok.decode(enc)``, the number-aware pipeline
  `numadapter.generation.pipeline.NumberTextGenerationPipeline`).
- **Tensor notes** (`note`, `noted`, `texts_of`): the ``input_ids`` tensor that `NumberTokenizer` returns
  (``return_tensors="pt"``) and the ``sequences`` tensor ``model.generate`` returns are noted with the text of every
  [NUM] of every row, so ``ntok.decode(out[0])`` and ``ntok.batch_decode(out[:, prompt_len:])`` render their numbers.
  A note belongs to the tensor's memory: the noted tensor itself and its views (rows, column slices: the same
  storage) find it, as long as the ids there are still those noted; a copy (``.clone()``, ``.to("cuda")``,
  ``.tolist()``, ``torch.tensor(list)``) is new memory and finds nothing, so decoding it raises instead of guessing.
  Notes are dropped when the tensor is garbage collected (a weak reference; nothing is attached to the tensor, so
  pickling and ``torch.save`` are unaffected).
- **A decoding scope** (`decoding`, `texts_in_scope`): while numadapter itself hands ids as lists to code that
  decodes them (a transformers streamer's ``put`` during ``model.generate``, the pipeline's postprocessing), it
  opens a scope with the rows of that one generation; a list decoded inside it that is a prefix or suffix of one of
  those rows gets that row's numbers. Outside such a call nothing is remembered.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


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


@dataclass
class DigitsGeneration:
    """What ``model.generate`` of an ``encoding="digits"`` adapter notes on its output: numbers are ordinary digit
    tokens there, so there is no number record, only the fact (for `numadapter.generation.numbers_of`'s error)."""

    prompt_length: int


@dataclass
class _Note:
    ref: weakref.ref
    payload: Any
    ids: torch.Tensor | None  # CPU copy of the noted ids [N, L] (tensors only)


_notes: dict[int, _Note] = {}  # id(object) -> note
_by_storage: dict[int, set[int]] = {}  # storage data_ptr -> ids of the noted tensors in it


def _storage_key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def note(obj: Any, payload: Any) -> None:
    """Records `payload` for `obj` (a ``[N, L]`` id tensor, or a ``ModelOutput``) until it is garbage collected.

    For a tensor, a copy of its ids is kept, so that a view finds the note only while the ids there are unchanged.
    """
    key = id(obj)
    storage = _storage_key(obj) if isinstance(obj, torch.Tensor) and obj.numel() else None

    def forget(ref: weakref.ref, key: int = key, storage: int | None = storage) -> None:
        entry = _notes.get(key)
        if entry is not None and entry.ref is ref:
            del _notes[key]
        if storage is not None:
            keys = _by_storage.get(storage)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del _by_storage[storage]

    ids = None
    if isinstance(obj, torch.Tensor):
        ids = obj.detach().to("cpu", copy=True)
    _notes[key] = _Note(weakref.ref(obj, forget), payload, ids)
    if storage is not None and ids is not None and ids.dim() == 2:
        _by_storage.setdefault(storage, set()).add(key)


def noted(obj: Any) -> Any:
    """The payload noted for this very object, or None."""
    entry = _notes.get(id(obj))
    if entry is None or entry.ref() is not obj:
        return None
    return entry.payload


@dataclass
class _Place:
    """Where a tensor lies inside a noted ``[N, L]`` tensor: the noted rows it covers and its first column."""

    rows: list[int]
    column: int


def _place(piece: torch.Tensor, owner: torch.Tensor) -> _Place | None:
    """The rows and first column of `piece` inside `owner` when `piece` is a view of whole or partial rows of it
    (``owner[r]``, ``owner[a:b, c:]``, ``owner[r, c:]``, ...): same storage and dtype, unit column stride, each row of
    `piece` inside one row of `owner`. None for any other layout (a column, a transpose, an expansion)."""
    if piece.dtype != owner.dtype or owner.dim() != 2 or piece.dim() not in (1, 2) or owner.stride(1) != 1:
        return None
    rows_owned, width, row_stride = owner.shape[0], owner.shape[1], owner.stride(0)
    if row_stride < width or row_stride <= 0:
        return None
    matrix = piece if piece.dim() == 2 else piece.unsqueeze(0)
    count, length = matrix.shape
    if count == 0 or length == 0 or (length > 1 and matrix.stride(1) != 1):
        return None
    offset = piece.storage_offset() - owner.storage_offset()
    if offset < 0:
        return None
    first, column = divmod(offset, row_stride)
    if column + length > width:
        return None
    step = 1
    if count > 1:
        step, rest = divmod(matrix.stride(0), row_stride)
        if rest or step < 1:
            return None
    rows = [first + i * step for i in range(count)]
    if rows[-1] >= rows_owned:
        return None
    return _Place(rows, column)


def texts_of(ids: Any, marker: int) -> list[list[str]] | None:
    """The [NUM] texts of each row of `ids` (``[B, T]``, or ``[T]``: one row), when `ids` is a noted tensor or a view
    of one (`note`) whose ids are still the noted ones; None otherwise (a copy, a list, an unknown tensor).

    Args:
        ids: a tensor.
        marker: the [NUM] id (the texts of the [NUM] before the piece's first column are skipped).
    """
    if not isinstance(ids, torch.Tensor) or ids.numel() == 0:
        return None
    candidates = [id(ids)] + sorted(_by_storage.get(_storage_key(ids), ()))
    for key in dict.fromkeys(candidates):
        entry = _notes.get(key)
        owner = entry.ref() if entry is not None else None
        if not isinstance(owner, torch.Tensor) or entry.ids is None or entry.ids.dim() != 2:
            continue
        if owner is not ids and _storage_key(owner) != _storage_key(ids):
            continue
        place = _place(ids, owner)
        texts = getattr(entry.payload, "number_texts", None)
        if place is None or texts is None:
            continue
        if not torch.equal(owner.detach()[place.rows].cpu(), entry.ids[place.rows]):
            continue  # written over in place since it was noted
        found = []
        for row in place.rows:
            before = entry.ids[row, : place.column].tolist().count(marker)
            inside = entry.ids[row, place.column : place.column + ids.shape[-1]].tolist().count(marker)
            found.append(list(texts[row][before : before + inside]))
        return found
    return None


def noted_in_storage(tensor: torch.Tensor) -> Any:
    """The payload of the noted tensor whose memory `tensor` is exactly (the same storage, offset and size: a
    reshape of it, as pipelines make), or None."""
    if not isinstance(tensor, torch.Tensor) or tensor.numel() == 0:
        return None
    for key in sorted(_by_storage.get(_storage_key(tensor), ())):
        entry = _notes.get(key)
        owner = entry.ref() if entry is not None else None
        if (
            isinstance(owner, torch.Tensor)
            and owner.storage_offset() == tensor.storage_offset()
            and owner.numel() == tensor.numel()
            and owner.is_contiguous()
            and tensor.is_contiguous()
        ):
            return entry.payload
    return None


# -- a decoding scope ----------------------------------------------------------------------------------------------
_scope: contextvars.ContextVar[tuple[Sequence[tuple[Sequence[int], Sequence[str]]], int] | None]
_scope = contextvars.ContextVar("numadapter_decoding_scope", default=None)


@contextlib.contextmanager
def decoding(rows: Sequence[tuple[Sequence[int], Sequence[str]]], marker: int) -> Iterator[None]:
    """Within this block, `texts_in_scope` finds the numbers of ids that are a prefix or suffix of one of `rows`.

    Args:
        rows: ``(ids, texts of every [NUM] of the ids)`` per row of one generation; the sequence may be updated in
            place while the block runs (a streamer's rows grow each step).
        marker: the [NUM] id.
    """
    token = _scope.set((rows, marker))
    try:
        yield
    finally:
        _scope.reset(token)


def texts_in_scope(ids: Sequence[int], marker: int) -> list[str] | None:
    """The [NUM] texts of `ids` when a `decoding` block is open and `ids` are a suffix (``row[prompt_len:]``, what
    streamers and pipelines decode) or a prefix of one of its rows; None when no block is open or no row fits.

    Raises:
        ValueError: `ids` fit several rows of the block with different numbers.
    """
    scope = _scope.get()
    if scope is None or scope[1] != marker:
        return None
    ids = [int(i) for i in ids]
    count, size = ids.count(marker), len(ids)
    found = []
    for row, texts in scope[0]:
        row, texts = list(row), list(texts)
        if size > len(row) or count > len(texts):
            continue
        if row[len(row) - size :] == ids:
            found.append(tuple(texts[len(texts) - count :]) if count else ())
        elif row[:size] == ids:
            found.append(tuple(texts[:count]))
    if not found:
        return None
    if len(set(found)) > 1:
        raise ValueError(
            f"these ids are part of {len(found)} generated sequences with different numbers, so their numbers are "
            "unknown: decode the output of model.generate itself (ntok.batch_decode(output), ntok.decode(output[i])) "
            "or pass number_texts=..."
        )
    return list(found[0])
