"""What `numadapter.generate` and ``model.generate`` share: the adapter's parts, special ids, and one decode run.

Both entry points end in the same decode loop (`numadapter.generation.loop.decode_loop`) through `run_loop`: the
text API (`numadapter.generation.api`) encodes prompt strings, the transformers-style API
(`numadapter.generation.hf`) takes the tensors of a `NumberTokenizer` batch; from the `PromptBatch` on everything
is this module and the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from numadapter.generation.digit_numbers import DigitNumbers
from numadapter.generation.loop import AdapterParts, decode_loop
from numadapter.generation.prompts import PromptBatch
from numadapter.generation.readout import NumberReader
from numadapter.generation.sampling import SamplingSettings, TokenChooser
from numadapter.generation.stopping import RowTracker
from numadapter.integrations.deepspeed_zero import full_shape
from numadapter.methods.fone.answer_mode import answers_mode
from numadapter.methods.registry import get_method
from numadapter.tuner.patches import base_weight


def parts_from_tuner(tuner: Any, model: Any = None) -> AdapterParts:
    """The loop's view of a numadapter tuner (`NumberAdapterModel`); `model` is what the prefill calls (default:
    the tuner itself, whose forward is the PEFT model's for LoRA)."""
    runtime = tuner.number_runtime()
    modules, config = runtime.modules, runtime.config
    marker = modules.marker_token_id if modules is not None else None
    # the marker the head writes numbers at ([NUM]); methods that keep numbers as digit tokens have none
    num_id = marker if modules is not None and get_method(config).replaces_numbers(config) else None
    caller = model if model is not None else tuner
    return AdapterParts(model=caller, runtime=runtime, marker=marker, num_token_id=num_id)


def adapter_parts(model: Any) -> AdapterParts:
    """The pieces of a numadapter PEFT model the decode loop drives; `TypeError` for anything else.

    A numadapter model is recognised by its tuner's ``number_runtime`` method (`NumberAdapterModel.number_runtime`),
    not by class: the tuner routes ``model.generate`` here (`numadapter.generation.hf`), so generation does not
    import the tuner's model module back.
    """
    tuner = getattr(model, "base_model", None)
    if not callable(getattr(tuner, "number_runtime", None)):
        raise TypeError(
            f"numadapter.generate needs the PeftModel returned by numadapter.get_peft_model (or loaded with "
            f"PeftModel.from_pretrained from a numadapter adapter), got {type(model).__name__}. For a model without a "
            "number adapter use model.generate."
        )
    return parts_from_tuner(tuner, model)


def token_ids(value: int | Sequence[int] | None, name: str, vocab: int) -> list[int]:
    """A token id or a list of them as a checked list (``[]`` for None); `ValueError` names `name` and the range."""
    if value is None:
        return []
    if isinstance(value, int) and not isinstance(value, bool):
        ids = [value]
    elif isinstance(value, Sequence) and not isinstance(value, str):
        ids = list(value)
    elif isinstance(value, torch.Tensor):
        ids = value.reshape(-1).tolist()
    else:
        raise ValueError(f"`{name}` must be a token id or a list of token ids, got {value!r}.")
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab:
            raise ValueError(f"`{name}` must hold token ids in [0, {vocab}), got {value!r}.")
    return ids


def vocab_size(parts: AdapterParts) -> int:
    """Rows of the LM head (the ids a generated token can take)."""
    return full_shape(base_weight(parts.runtime.inner.get_output_embeddings()))[0]


def special_ids(
    parts: AdapterParts,
    eos_token_id: int | Sequence[int] | None,
    pad_token_id: int | None,
    tokenizer: Any = None,
) -> tuple[list[int], int]:
    """The end-of-sequence ids and the padding id of a run.

    Args:
        parts: the adapter parts (their ``generation_config`` is the fallback).
        eos_token_id: given ids (None: ``generation_config.eos_token_id``, else the tokenizer's eos; ``[]``: none).
        pad_token_id: given pad id (None: the tokenizer's, else ``generation_config.pad_token_id``, else the first
            eos id, else 0).
        tokenizer: the (number) tokenizer, or None.
    """
    vocab = vocab_size(parts)
    if eos_token_id is None:
        eos = parts.runtime.inner.generation_config.eos_token_id
        if eos is None and tokenizer is not None:
            eos = tokenizer.eos_token_id
        eos_ids = token_ids(eos, "generation_config.eos_token_id", vocab)
    else:
        eos_ids = token_ids(eos_token_id, "eos_token_id", vocab)
    pad = pad_token_id
    if pad is None and tokenizer is not None:
        pad = tokenizer.pad_token_id
    if pad is None:
        pad = parts.runtime.inner.generation_config.pad_token_id
    if pad is None:
        pad = eos_ids[0] if eos_ids else 0
    pad = token_ids(pad, "pad_token_id", vocab)[0]
    return eos_ids, pad


@dataclass
class LoopSettings:
    """Everything one decode run needs besides the model and the prompts."""

    chooser: TokenChooser
    reader: NumberReader | None
    eos_ids: list[int]
    pad_id: int
    stops: list[str]
    max_new_tokens: int
    use_cache: bool
    out_of_range: str


def loop_settings(
    parts: AdapterParts,
    sampling: SamplingSettings,
    *,
    eos_ids: list[int],
    pad_id: int,
    max_new_tokens: int,
    min_new_tokens: int = 0,
    stops: Sequence[str] = (),
    use_cache: bool = True,
    out_of_range: str = "stop",
    generator: torch.Generator | None = None,
    suppress: Sequence[int] = (),
) -> LoopSettings:
    """Builds the token chooser and number reader of a run.

    [NUM] / [AGG] are never generated when the adapters are disabled (nothing could decode them), nor [AGG] with
    ``aggregate=True`` (its embedding is the aggregate of digits that follow it); `suppress` adds more ids.
    """
    config, modules = parts.runtime.config, parts.runtime.modules
    suppressed = list(suppress)
    if modules is None:
        suppressed += [i for i in (config.num_token_id, config.agg_token_id) if i is not None]
    else:
        suppressed += get_method(config).suppressed_ids(config)
    chooser = TokenChooser(sampling, suppressed, eos_ids, min_new_tokens, generator, parts.device)
    head = modules.head if modules is not None else None
    reader = NumberReader(config, head) if head is not None else None
    return LoopSettings(chooser, reader, eos_ids, pad_id, list(stops), max_new_tokens, use_cache, out_of_range)


def run_loop(
    parts: AdapterParts,
    batch: PromptBatch,
    loop: LoopSettings,
    decode: Callable[[list[int], list[str]], str] | None,
    tracker_cls: type[RowTracker] = RowTracker,
    tokenizer: Any = None,
) -> RowTracker:
    """Generates for every row of `batch`; returns the tracker with each row's tokens, numbers and stop reason.

    Args:
        parts: the adapter parts.
        batch: the padded prompts (left padding for causal LMs, right for T5).
        loop: the run's settings.
        decode: ``decode(ids, number_texts) -> text`` for stop strings (None when there are none).
        tracker_cls: `RowTracker` or a subclass (e.g. one that streams each step).
        tokenizer: the `NumberTokenizer` (needed with ``fone_numbers="answers"``: it reads the numbers the model
            writes in digits, `digit_numbers_of`).
    """
    tracker = tracker_cls(len(batch.ids), loop.eos_ids, loop.stops, parts.num_token_id, decode)
    decode_loop(
        parts, batch, loop.reader, loop.chooser, tracker, loop.max_new_tokens, loop.use_cache, loop.pad_id,
        loop.out_of_range, digit_numbers_of(parts, tokenizer, batch.ids),
    )  # fmt: skip
    return tracker


def digit_numbers_of(parts: AdapterParts, tokenizer: Any, prompts: list[list[int]]) -> DigitNumbers | None:
    """The follower of numbers generated in digits (`DigitNumbers`) for ``fone_numbers="answers"``, else None, for
    the rows of `prompts` (each row's prompt ids).

    Raises:
        ValueError: such an adapter without its `NumberTokenizer` (the numbers it writes in digits are context
            numbers, read from the text).
    """
    config = parts.runtime.config
    if not answers_mode(config) or parts.runtime.modules is None or parts.num_token_id is None:
        return None
    if tokenizer is None or not hasattr(tokenizer, "_context_row"):
        raise ValueError(
            "This adapter has fone_numbers='answers': the numbers it writes in digits are context numbers, read from "
            "the generated text, so generation needs its NumberTokenizer: use numadapter.generate(model, ntok, ...), "
            "or pass tokenizer=ntok to model.generate (or the input_ids of ntok(..., return_tensors='pt'))."
        )
    return digit_numbers_for(config, tokenizer, len(prompts), parts.num_token_id, prompts)


def digit_numbers_for(
    config: Any, tokenizer: Any, rows: int, num_token_id: int, prompts: list[list[int]] | None = None
) -> DigitNumbers:
    """`DigitNumbers` for `rows` rows of an answers-mode adapter with `config`, reading the text as its
    `NumberTokenizer` `tokenizer` does (the decode loop's, and the vLLM plugin's per request), with each row's
    prompt ids (`prompts`; the expression check reads the prompt's end)."""

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, number_texts=[], skip_special_tokens=True)

    def encode(text: str) -> list[int]:  # the base tokenizer's ids of `text`
        return list(getattr(tokenizer, "tokenizer", tokenizer).encode(text, add_special_tokens=False))

    def single(text: str) -> int | None:  # the one token id of `text` in the base tokenizer, if it is one token
        ids = encode(text)
        return ids[0] if len(ids) == 1 else None

    text_sign = config.sign_policy == "text"
    marks = {mark: single(mark) for mark in (("-", " -", "%") if text_sign else ("%",))}
    marks = {mark: token for mark, token in marks.items() if token is not None}
    return DigitNumbers(rows, decode, tokenizer._context_row, text_sign, num_token_id, prompts, marks, encode)
