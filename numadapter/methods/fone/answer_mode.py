"""Which numbers a FoNE config writes as [NUM], with its ``"auto"`` / None defaults decided.

``fone_numbers="auto"`` (the default) is ``"answers"`` on a causal LM with the context head, ``"all"`` on an
encoder-decoder or with another head; ``fone_context_products=None`` (the default) is on in answers mode. Both depend
on ``task_type``, which `numadapter.get_peft_model` sets from the model. No numadapter imports: the config, the
tokenizer and the head all read these.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CONTEXT_NUMBERS", "POINTER_NUMBERS", "POINTER_SETTINGS", "answers_mode", "context_count", "context_products",
    "fone_numbers_in_effect", "head_in_use", "head_left_out",
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


def fone_numbers_in_effect(config: Any) -> str:
    """``config.fone_numbers`` with ``"auto"`` decided: ``"answers"`` on a causal LM with the context head, ``"all"``
    on an encoder-decoder (``task_type="SEQ_2_SEQ_LM"``, which `numadapter.get_peft_model` sets from the model) or
    with another head. Before the architecture is known (``task_type`` None) ``"auto"`` means ``"answers"``."""
    mode = getattr(config, "fone_numbers", "all")
    if mode != "auto":
        return mode
    seq2seq = getattr(config, "task_type", None) == "SEQ_2_SEQ_LM"
    if seq2seq or getattr(config, "fone_head_input", "context") != "context":
        return "all"
    return "answers"


def answers_mode(config: Any) -> bool:
    """Whether `config` (a `NumberAdapterConfig`) writes only formable answers as [NUM] (``encoding="fone"``,
    ``fone_numbers="answers"``, or ``"auto"`` on a causal LM: `numadapter.config.fone_numbers_in_effect`) and leaves
    every other number in the base tokenizer's digit tokens."""
    return config.encoding == "fone" and fone_numbers_in_effect(config) == "answers"


def context_count(config: Any) -> int:
    """K, the latest numbers the context head combines: ``config.fone_context_numbers``, or when it is None (not set
    by the user) `CONTEXT_NUMBERS`, `POINTER_NUMBERS` with ``fone_context_pointer``. None keeps the choice open:
    `NumberSFTTrainer` may turn the pointer on only where the user set neither the count nor products."""
    count = getattr(config, "fone_context_numbers", None)
    if count is not None:
        return count
    return POINTER_NUMBERS if getattr(config, "fone_context_pointer", None) else CONTEXT_NUMBERS


def context_products(config: Any) -> bool:
    """``config.fone_context_products`` with None decided: on where the config writes only the answers the head
    forms (`fone_numbers_in_effect` is ``"answers"``), off with ``"all"`` (every number a [NUM])."""
    products = getattr(config, "fone_context_products", False)
    if getattr(config, "fone_context_pointer", None):  # the pointer combines by signed sums only
        return False
    if products is None:
        return getattr(config, "encoding", "fone") == "fone" and fone_numbers_in_effect(config) == "answers"
    return bool(products)


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
