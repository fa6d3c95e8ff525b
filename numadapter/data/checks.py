"""Clear errors for datasets that leave nothing to train on (empty, or every example dropped by truncation).

Without these, the first ``next(iter(dataset))`` of the trainers or of `numadapter.data.prepare_dataset` raised a
bare ``StopIteration``, which names neither the dataset nor the reason.
"""

from __future__ import annotations

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
