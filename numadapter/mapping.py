"""`numadapter.get_peft_model`: the convenience that binds a tokenizer, then calls `peft.get_peft_model`.

Two ways to build a number adapter, both returning a genuine ``peft.PeftModelForCausalLM`` /
``peft.PeftModelForSeq2SeqLM``:

- ``numadapter.get_peft_model(model, config, tokenizer=tokenizer)`` (recommended): adds ``[NUM]`` (fone / xval) or
  ``[AGG]`` (digits + aggregate) to the tokenizer as a special token, unless present (the same way
  `numadapter.tokenization.NumberTokenizer` does, so both agree on the id), records the token ids, the digit-token
  ids and the vocabulary sizes in the config, sets ``task_type`` from the architecture when it is None, and calls
  `peft.get_peft_model`.
- ``peft.get_peft_model(model, config)`` after ``import numadapter``: works when the config already names the ids
  (``num_token_id`` / ``agg_token_id``, and ``digit_token_ids`` when the aggregate or NTL needs them) and
  ``task_type``; otherwise the error says which field is missing and points here.

Either way the tuner (`numadapter.tuner.model.NumberAdapterModel`) then resizes the embeddings and initialises the
number rows. Resizing policy: the embedding gets ``max(rows, len(tokenizer))`` rows, so a new token lands in a
padding row when the vocabulary is padded to a multiple (T5: 32128 rows for 32100 tokens; no resize), a tokenizer
longer than the embedding grows it, and an embedding larger than the tokenizer is never shrunk.
"""

from __future__ import annotations

from typing import Any

import peft
from torch import nn

from numadapter.config import NumberAdapterConfig
from numadapter.integrations.deepspeed_zero import matrix_shape
from numadapter.tokenization.matching import check_tokenizer_matches
from numadapter.tuner.patches import base_weight, detect_architecture
from numadapter.tuner.registration import register

DIGITS = "0123456789"


def digit_token_ids(tokenizer: Any) -> list[int] | None:
    """Ids of the single-character tokens "0" ... "9" of a Hugging Face tokenizer, or None if any is missing."""
    ids = [tokenizer.convert_tokens_to_ids(d) for d in DIGITS]
    unk = getattr(tokenizer, "unk_token_id", None)
    if any(i is None or i == unk for i in ids) or len(set(ids)) != 10:
        return None
    return ids


def bind_tokenizer(config: NumberAdapterConfig, tokenizer: Any, model: nn.Module) -> Any:
    """Adds the number token to `tokenizer` and records ids and sizes in `config` (in place).

    Args:
        config: the adapter config.
        tokenizer: a Hugging Face fast tokenizer or a `NumberTokenizer` built with the same encoding.
        model: the base model (its embedding rows give ``original_vocab_size``; the full row count also when the
            base was loaded ZeRO-3 partitioned).

    Raises:
        ValueError: the embedding's row count cannot be determined (an empty weight without ``ds_shape``).

    Returns:
        The `NumberTokenizer` (the given one, or a new one around `tokenizer`).
    """
    from numadapter.tokenization.tokenizer import NumberTokenizer

    ntok = tokenizer if isinstance(tokenizer, NumberTokenizer) else NumberTokenizer(tokenizer, config)
    check_tokenizer_matches(ntok, config, "get_peft_model", "tokenizer")
    config.num_token_id = ntok.num_token_id
    config.agg_token_id = ntok.agg_token_id
    config.digit_token_ids = digit_token_ids(ntok.tokenizer)
    if config.eos_token_id is None:
        config.eos_token_id = ntok.tokenizer.eos_token_id
    rows, _ = matrix_shape(base_weight(model.get_input_embeddings()), "the base model's input embedding weight")
    if config.original_vocab_size is None:
        config.original_vocab_size = rows
    config.resized_vocab_size = max(config.original_vocab_size, len(ntok.tokenizer))
    config.validate_model_binding()
    return ntok


def get_peft_model(
    model: nn.Module,
    config: NumberAdapterConfig,
    tokenizer: Any = None,
    adapter_name: str = "default",
    **kwargs: Any,
) -> peft.PeftModel:
    """Wraps a Llama / Granite / T5 model with a number adapter (LoRA + number modules).

    Args:
        model: a ``LlamaForCausalLM``, ``GraniteForCausalLM`` or ``T5ForConditionalGeneration``.
        config: the `NumberAdapterConfig` (modified in place: token ids, sizes, ``task_type``).
        tokenizer: the model's tokenizer (or a `NumberTokenizer`); the number token is added to it. Without it the
            config must already carry the ids (see the module docstring).
        adapter_name: the adapter name.
        **kwargs: passed to `peft.get_peft_model` (``autocast_adapter_dtype``, ``low_cpu_mem_usage``, ...).

    Returns:
        A `peft.PeftModel` (``PeftModelForCausalLM`` or ``PeftModelForSeq2SeqLM``).
    """
    if not isinstance(config, NumberAdapterConfig):
        raise TypeError(f"`config` must be a NumberAdapterConfig, got {type(config).__name__}.")
    register(force=True)
    arch = detect_architecture(model)
    if config.task_type is None:
        config.task_type = arch.task_type
    if tokenizer is not None:
        bind_tokenizer(config, tokenizer, model)
    return peft.get_peft_model(model, config, adapter_name=adapter_name, **kwargs)
