"""Which numbers a FoNE config writes as [NUM], with its ``"auto"`` / None defaults decided.

``fone_numbers="auto"`` (the default) is ``"answers"`` on a causal LM with a head mode that reads the numbers before
it (the built-in ``"context"``), ``"all"`` on an encoder-decoder or with another head; ``fone_context_products=None``
(the default) is on in answers mode. Both depend on ``task_type``, which `numadapter.get_peft_model` sets from the
model. The config, the tokenizer and the model read these; the context head's own settings live in
`numadapter.methods.fone.context_settings` (re-exported here).
"""

from __future__ import annotations

from typing import Any

from numadapter.methods.fone.context_settings import (
    CONTEXT_NUMBERS,
    POINTER_NUMBERS,
    POINTER_SETTINGS,
    context_count,
    numbers_for_head,
    products_for_head,
)
from numadapter.methods.fone.modes.registry import get_head_mode

__all__ = [
    "CONTEXT_NUMBERS", "POINTER_NUMBERS", "POINTER_SETTINGS", "answers_mode", "context_count", "context_products",
    "fone_numbers_in_effect", "head_in_use", "head_left_out",
]  # fmt: skip


def _reads_context(config: Any) -> bool:
    """Whether the config's head mode combines the numbers before the position (`HeadMode.reads_context`)."""
    return get_head_mode(getattr(config, "fone_head_input", "context")).reads_context


def fone_numbers_in_effect(config: Any) -> str:
    """``config.fone_numbers`` with ``"auto"`` decided: ``"answers"`` on a causal LM with a head mode that reads the
    numbers before it (`HeadMode.reads_context`, the built-in ``"context"``), ``"all"`` on an encoder-decoder or with
    another head (`numadapter.methods.fone.context_settings.numbers_for_head`)."""
    return numbers_for_head(config, _reads_context(config))


def context_products(config: Any) -> bool:
    """``config.fone_context_products`` with None decided for the config's head mode: on in answers mode
    (`fone_numbers_in_effect`), off with ``"all"`` or the pointer
    (`numadapter.methods.fone.context_settings.products_for_head`)."""
    return products_for_head(config, _reads_context(config))


def answers_mode(config: Any) -> bool:
    """Whether `config` (a `NumberAdapterConfig`) writes only formable answers as [NUM] (``encoding="fone"``,
    ``fone_numbers="answers"``, or ``"auto"`` on a causal LM: `fone_numbers_in_effect`) and leaves
    every other number in the base tokenizer's digit tokens."""
    return config.encoding == "fone" and fone_numbers_in_effect(config) == "answers"


def head_in_use(config: Any) -> bool:
    """Whether the head writes numbers: ``config.fone_head_in_use``, None (not decided by a trainer) read as True."""
    return getattr(config, "fone_head_in_use", None) is not False


def head_left_out(config: Any) -> bool:
    """Whether a FoNE config in answers mode writes no [NUM] at all (``fone_head_in_use=False``, decided by
    `NumberSFTTrainer` from ``fone_head_min_share``): every number stays digits, as with LoRA on digits."""
    return (
        getattr(config, "encoding", None) == "fone"
        and fone_numbers_in_effect(config) == "answers"
        and not head_in_use(config)
    )
