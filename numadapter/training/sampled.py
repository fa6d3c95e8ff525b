"""Data a trainer decides something from must be readable across the whole set, before anything is tokenized."""

from __future__ import annotations

from typing import Any

# the most training examples a decision reads (drawn at random across a larger data set)
SAMPLE_ROWS = 2000


def refuse_unsampled(dataset: Any, decides: str, text: str, fix: str, hint: str = "") -> None:
    """Raises for data a decision cannot be read from across the whole set: a stream, or rows already tokenized.

    Args:
        dataset: the training data.
        decides: what the trainer decides, e.g. "decides whether FoNE's context head is used (...)".
        text: what it reads in the data's text, e.g. "the training answers".
        fix: how to decide it without the trainer.
        hint: a sentence after the stream message (a helper that measures a chosen sample)."""
    if not hasattr(dataset, "select") or not hasattr(dataset, "__len__"):
        raise ValueError(
            f"NumberSFTTrainer {decides} from examples drawn across the training data, which a stream "
            f"({type(dataset).__name__}) cannot give without being read to its end: {fix}.{hint}"
        )
    if "input_ids" in (getattr(dataset, "column_names", None) or ()):
        raise ValueError(
            f"NumberSFTTrainer {decides} from the text of {text}, but this data is already tokenized (an input_ids "
            f"column): its [NUM]s were written before anything was decided. Prepare it with the decision made, or "
            f"{fix}."
        )
