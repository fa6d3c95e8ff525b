"""Clear errors for datasets that leave nothing to train on (empty, or every example dropped by truncation), and
the warning for examples that truncation left without a completion.

Without these, the first ``next(iter(dataset))`` of the trainers or of `numadapter.data.prepare_dataset` raised a
bare ``StopIteration``, which names neither the dataset nor the reason, and examples cut away by ``max_length``
vanished without a word.
"""

from __future__ import annotations

import warnings
from typing import Any


def first_example(dataset: Any, name: str = "dataset") -> dict:
    """The first example of `dataset` (a `datasets.Dataset`, `IterableDataset` or any iterable of dicts).

    Raises:
        ValueError: the dataset has no example; the message names `name` and the fix.
    """
    for example in dataset:
        return example
    raise ValueError(
        f"`{name}` is empty (0 examples): there is nothing to train or evaluate on. Pass a dataset with at least one "
        "example (check the data files and any filter applied before)."
    )


def require_examples(dataset: Any, name: str, max_length: int | None, truncation_mode: str) -> None:
    """Raises `ValueError` when truncation to `max_length` dropped every example of a (sized) prepared dataset."""
    if not hasattr(dataset, "num_rows") or dataset.num_rows > 0:
        return
    raise ValueError(
        f"every example of `{name}` was dropped: truncated to max_length={max_length} "
        f"(truncation_mode={truncation_mode!r}), no example kept a completion token to train on. Raise max_length, "
        "shorten the prompts, or set truncation_mode='keep_end' so the completions are kept."
    )


def warn_cut_examples(count: int | None, total: int | None, what: str, max_length: int | None, mode: str) -> None:
    """Warns that truncation to `max_length` cost `count` of `total` examples their whole completion (`what`: what
    happened to them, e.g. "were dropped"); None for an unknown count or total (a streamed dataset)."""
    if count == 0:
        return
    share = "Examples" if count is None else f"{count} of {total} examples"
    warnings.warn(
        f"{share} {what}: truncated to max_length={max_length} (truncation_mode={mode!r}), they kept no completion "
        "token, so they do not train. Raise max_length (SFTConfig(max_length=...) for the trainers), shorten the "
        "prompts, or set truncation_mode='keep_end' to keep the completions.",
        stacklevel=3,
    )
