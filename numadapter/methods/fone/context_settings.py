"""The context head's settings with their None defaults decided: how many numbers it combines, whether it forms
products, and what ``fone_numbers="auto"`` means, for a head that does or does not read the numbers before it.

No numadapter imports: the context mode (`numadapter.methods.fone.modes.context`) reads these, and
`numadapter.methods.fone.answer_mode` decides them for a config's own head mode (asking the registry).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CONTEXT_NUMBERS", "POINTER_NUMBERS", "POINTER_SETTINGS", "context_count", "numbers_for_head", "products_for_head",
]  # fmt: skip

# the latest numbers the context head combines when ``fone_context_numbers`` is None (it scores 3^K combinations)
CONTEXT_NUMBERS = 4
# the most numbers the pointer form looks back over (the meet-in-the-middle search scores 2 x 3^(K/2) half sums); also
# its count when ``fone_context_numbers`` is None
POINTER_NUMBERS = 16
# the config fields of the pointer head (`numadapter.methods.fone.pointer`), as `NumberSFTTrainer` turns it on
POINTER_SETTINGS = {
    "fone_context_pointer": True, "fone_context_numbers": POINTER_NUMBERS, "fone_context_products": False,
}  # fmt: skip


def numbers_for_head(config: Any, reads_context: bool) -> str:
    """``config.fone_numbers`` with ``"auto"`` decided for a head that does (`reads_context`) or does not combine the
    numbers before it: ``"answers"`` on a causal LM with such a head, ``"all"`` on an encoder-decoder
    (``task_type="SEQ_2_SEQ_LM"``, which `numadapter.get_peft_model` sets from the model) or with another head.
    Before the architecture is known (``task_type`` None) ``"auto"`` means ``"answers"`` for a context head."""
    mode = getattr(config, "fone_numbers", "all")
    if mode != "auto":
        return mode
    seq2seq = getattr(config, "task_type", None) == "SEQ_2_SEQ_LM"
    return "answers" if reads_context and not seq2seq else "all"


def context_count(config: Any) -> int:
    """K, the latest numbers the context head combines: ``config.fone_context_numbers``, or when it is None (not set
    by the user) `CONTEXT_NUMBERS`, `POINTER_NUMBERS` with ``fone_context_pointer``. None keeps the choice open:
    `NumberSFTTrainer` may turn the pointer on only where the user set neither the count nor products."""
    count = getattr(config, "fone_context_numbers", None)
    if count is not None:
        return count
    return POINTER_NUMBERS if getattr(config, "fone_context_pointer", None) else CONTEXT_NUMBERS


def products_for_head(config: Any, reads_context: bool) -> bool:
    """``config.fone_context_products`` with None decided for a head that does (`reads_context`) or does not combine
    the numbers before it: on where the config writes only the answers the head forms (``fone_numbers`` in effect
    ``"answers"``, `numbers_for_head`), off with ``"all"`` (every number a [NUM]); always off with the pointer, which
    combines by signed sums only."""
    products = getattr(config, "fone_context_products", False)
    if getattr(config, "fone_context_pointer", None):
        return False
    if products is None:
        return getattr(config, "encoding", "fone") == "fone" and numbers_for_head(config, reads_context) == "answers"
    return bool(products)
