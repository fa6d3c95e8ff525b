"""`generate`: text in, text out, with every generated number decoded by the number head.

Decisions (see also `numadapter.generation.loop` and `numadapter.generation.readout`):

- **Prompt in the returned text.** As transformers' pipelines do: causal LMs return prompt + completion
  (``text-generation``, ``return_full_text=True``), T5 returns the completion only (``text2text-generation``).
  ``return_full_text`` overrides either. The prompt part is the prompt string exactly as given.
- **Numbers.** FoNE: each generated [NUM] is rendered from the digit head's argmax digits (exact, canonical:
  ``"-12.5"``, ``"0.001"``); xVal: from the regression head's value, with at most ``frac_digits`` fraction digits.
  ``return_numbers=True`` also returns them raw: `ExactNumber` (FoNE) or float (xVal) per generated [NUM], in order.
  With ``encoding="digits"`` numbers are ordinary digit tokens; the raw numbers are then those `find_numbers`
  finds in the completion text.
- **[AGG]** (``encoding="digits"``, ``aggregate=True``) is an input-side marker whose embedding is the aggregate of
  the digits that *follow* it, unknown while generating; it is never generated (its logit is masked), numbers are
  written as digit tokens. `numadapter.data.prepare_dataset` writes the numbers of a completion (or T5 target)
  without [AGG], so the trainers never teach the model to emit it or feed it an answer's digits.
- **xVal values out of range.** A predicted value that normalises beyond ``xval_clip`` (or is not finite) cannot be
  fed back as the next [NUM] and is never clamped: by default (``xval_out_of_range="stop"``) that sequence stops
  right after the number (rendered as predicted), with a warning and ``stop_reason="number_out_of_range"``;
  ``"error"`` raises `NumberOutOfRangeError` instead.
- **FoNE context sums beyond ``int_digits``.** The context head (``fone_head_input="context"``) writes a combination
  of the numbers before it on angles, modulo ``10^int_digits``; generation compares its digits with the
  combination's exact value (`numadapter.methods.fone.wrapping`). A number that needs more integer places
  (``999999 + 1`` with ``int_digits=6``) is written in full, as text, and handled like an xVal value out of range
  (``xval_out_of_range``: stop with a warning, or raise). A combination below zero (wrong signs; a [NUM]'s digits
  hold a magnitude under either ``sign_policy``) is never written as its complement: the LM writes it in digits
  (``fone_numbers="answers"``), or it is written in full and stops like a number out of range.
- **Beam search** is not supported (``num_beams > 1`` raises): beams would need the number features of every
  hypothesis re-ordered with the cache, and the number head's prediction is not part of the beam score.
- **Stopping** is per sequence: eos (kept in ``token_ids``, dropped from the text), a stop string (kept in the text),
  an unfeedable number, or ``max_new_tokens``; the others go on. ``stop_reasons`` says which.
- **Eval mode.** The model runs in eval mode (no dropout, and a KV cache even under gradient checkpointing, which
  transformers turns off in train mode) and every module gets its own train / eval mode back afterwards, so calling
  it straight after ``trainer.train()`` gives the answers of ``model.eval()`` (`numadapter.generation.eval_mode`).
- With the adapters disabled (``with model.disable_adapter():``) generation runs the base model on the prompt as
  the base tokenizer tokenizes it (each number as the base's own tokens, `numadapter.generation.prompts.base_rows`)
  and never emits [NUM] / [AGG] (there is no head to decode them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from numadapter.generation.core import LoopSettings, adapter_parts, loop_settings, run_loop, special_ids
from numadapter.generation.eval_mode import evaluating
from numadapter.generation.loop import AdapterParts
from numadapter.generation.prompts import encode_prompts
from numadapter.generation.sampling import sampling_settings
from numadapter.methods.base import GeneratedNumber
from numadapter.methods.fone.answer_mode import answers_mode
from numadapter.numbers import ExactNumber, find_numbers
from numadapter.tokenization.matching import check_tokenizer_matches
from numadapter.tokenization.tokenizer import NumberTokenizer

OUT_OF_RANGE_CHOICES = ("stop", "error")


@dataclass
class NumberGenerationOutput:
    """Everything `generate` produced, one entry per prompt.

    Attributes:
        texts: the decoded texts (prompt + completion or completion only, see ``return_full_text``).
        completions: the generated text only.
        numbers: the generated numbers in order (`ExactNumber` for FoNE and digits, float for xVal).
        token_ids: the generated token ids (the final eos included when one was generated).
        stop_reasons: ``"eos"``, ``"stop_string"``, ``"length"`` or ``"number_out_of_range"``.
        confidences: per generated number, how well the number head's output fits it, in [0, 1]
            (`numadapter.methods.GeneratedNumber.confidence`; docs/guide.md, "Generation"), or None where the head
            gives none (xVal, digit tokens).
        combinations: per generated number, the FoNE context head's coefficients (-1, 0, +1) of the numbers before
            it, most recent first, or None.
    """

    texts: list[str] = field(default_factory=list)
    completions: list[str] = field(default_factory=list)
    numbers: list[list[ExactNumber | float]] = field(default_factory=list)
    token_ids: list[list[int]] = field(default_factory=list)
    stop_reasons: list[str] = field(default_factory=list)
    confidences: list[list[float | None]] = field(default_factory=list)
    combinations: list[list[tuple[int, ...] | None]] = field(default_factory=list)


def _check_arguments(prompts, max_new_tokens, min_new_tokens, stop_strings, num_beams, batch_size, oor, seed):
    if isinstance(num_beams, bool) or not isinstance(num_beams, int) or num_beams != 1:
        raise ValueError(
            f"num_beams={num_beams!r}: numadapter.generate decodes greedily (do_sample=False) or by sampling "
            "(do_sample=True) and has no beam search (the numbers fed back would have to follow every beam). Use "
            "num_beams=1; for text without numbers, model.generate(..., num_beams=...) on the PEFT model works."
        )
    single = isinstance(prompts, str)
    texts = [prompts] if single else prompts
    if not isinstance(texts, Sequence) or not texts or any(not isinstance(p, str) for p in texts):
        raise TypeError(f"`prompts` must be a string or a non-empty list of strings, got {prompts!r:.100}.")
    for name, value, low in (("max_new_tokens", max_new_tokens, 1), ("min_new_tokens", min_new_tokens, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}.")
    if min_new_tokens > max_new_tokens:
        raise ValueError(
            f"`min_new_tokens` ({min_new_tokens}) must be <= `max_new_tokens` ({max_new_tokens}): raise "
            "max_new_tokens."
        )
    stops = [stop_strings] if isinstance(stop_strings, str) else list(stop_strings or [])
    if any(not isinstance(s, str) or not s for s in stops):
        raise ValueError(f"`stop_strings` must be a non-empty string or a list of them, got {stop_strings!r}.")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"`batch_size` must be a positive integer or None (all prompts at once), got {batch_size!r}.")
    if oor not in OUT_OF_RANGE_CHOICES:
        raise ValueError(f"`xval_out_of_range` must be one of {list(OUT_OF_RANGE_CHOICES)}, got {oor!r}.")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"`seed` must be an integer or None, got {seed!r}.")
    return single, list(texts), stops


def generate(
    model: Any,
    number_tokenizer: NumberTokenizer,
    prompts: str | Sequence[str],
    *,
    max_new_tokens: int = 64,
    min_new_tokens: int = 0,
    do_sample: bool = False,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    stop_strings: str | Sequence[str] | None = None,
    seed: int | None = None,
    return_numbers: bool = False,
    return_full_text: bool | None = None,
    return_dict: bool = False,
    use_cache: bool = True,
    num_beams: int = 1,
    batch_size: int | None = None,
    xval_out_of_range: str = "stop",
) -> Any:
    """Generates text with a number adapter, decoding every generated number with the number head.

    Args:
        model: the PEFT model from `numadapter.get_peft_model` / ``PeftModel.from_pretrained`` (Llama, Granite, T5).
        number_tokenizer: the `NumberTokenizer` built with the adapter's config.
        prompts: one prompt or a list (encoded with the number tokenizer: numbers in prompts become [NUM]).
        max_new_tokens: the most tokens generated per prompt.
        min_new_tokens: end-of-sequence tokens are blocked until this many tokens were generated.
        do_sample: False: greedy (argmax). True: sample with `temperature`, `top_k`, `top_p`.
        temperature, top_k, top_p: sampling warpers, as in transformers (ignored, with a warning, when greedy).
        eos_token_id: the id(s) that end a sequence (default: ``generation_config.eos_token_id``, else the
            tokenizer's eos; ``[]``: none, every sequence runs to `max_new_tokens` or a stop string).
        stop_strings: a sequence also stops when its generated text contains one of these (kept in the text, as
            transformers does; `min_new_tokens` does not delay them).
        seed: seeds a private random generator for sampling (same seed, same output; torch's global RNG is left
            untouched). None: torch's global RNG.
        return_numbers: also return the generated numbers (see the return value).
        return_full_text: include the prompt in the returned text (default: True for causal LMs, False for T5).
        return_dict: return a `NumberGenerationOutput` (texts, completions, numbers, ids, stop reasons).
        use_cache: use the KV cache (False recomputes the whole sequence every step: a slow reference).
        num_beams: must be 1 (beam search is refused with a `ValueError`).
        batch_size: prompts per batch (None: all at once).
        xval_out_of_range: ``"stop"`` or ``"error"``: what happens when an xVal value, or a FoNE context head's
            sum beyond ``int_digits``, cannot be fed back.

    Returns:
        The text (for a single prompt string) or the list of texts; with ``return_numbers=True`` a pair
        ``(texts, numbers)`` (numbers: a list per prompt, or one list for a single prompt string); with
        ``return_dict=True`` a `NumberGenerationOutput` (always lists).
    """
    single, texts, stops = _check_arguments(
        prompts, max_new_tokens, min_new_tokens, stop_strings, num_beams, batch_size, xval_out_of_range, seed
    )
    settings = sampling_settings(do_sample, temperature, top_k, top_p)
    parts = adapter_parts(model)
    check_tokenizer_matches(number_tokenizer, parts.runtime.config, "numadapter.generate")
    eos_ids, pad_id = special_ids(parts, eos_token_id, None, number_tokenizer)
    encoder_decoder = parts.runtime.arch.is_encoder_decoder
    full_text = (not encoder_decoder) if return_full_text is None else bool(return_full_text)
    generator = None
    if do_sample and seed is not None:
        generator = torch.Generator(device=parts.device)
        generator.manual_seed(seed)
    loop = loop_settings(
        parts, settings, eos_ids=eos_ids, pad_id=pad_id, max_new_tokens=max_new_tokens,
        min_new_tokens=min_new_tokens, stops=stops, use_cache=use_cache, out_of_range=xval_out_of_range,
        generator=generator,
    )  # fmt: skip
    result = NumberGenerationOutput()
    step = batch_size or len(texts)
    with torch.no_grad(), evaluating(model):
        for start in range(0, len(texts), step):
            _generate_batch(parts, number_tokenizer, texts[start : start + step], loop, full_text, result)
    if return_dict:
        return result
    out_texts: Any = result.texts[0] if single else result.texts
    if not return_numbers:
        return out_texts
    return out_texts, (result.numbers[0] if single else result.numbers)


def _generate_batch(
    parts: AdapterParts,
    ntok: NumberTokenizer,
    prompts: list[str],
    loop: LoopSettings,
    full_text: bool,
    result: NumberGenerationOutput,
) -> None:
    side = "right" if parts.runtime.arch.is_encoder_decoder else "left"
    batch = encode_prompts(ntok, prompts, loop.pad_id, side, parts.device, base=parts.runtime.modules is None)

    def decode(ids: list[int], number_texts: list[str]) -> str:
        return ntok.decode(ids, number_texts=number_texts, skip_special_tokens=True)

    tracker = run_loop(parts, batch, loop, decode, tokenizer=ntok)
    in_digits = answers_mode(parts.runtime.config) and parts.runtime.modules is not None
    for row, prompt in enumerate(prompts):
        ids, numbers = tracker.tokens[row], tracker.numbers[row]
        generated = [n.text for n in numbers]
        if parts.runtime.arch.is_encoder_decoder:
            completion = decode(ids, generated)
        else:
            prompt_texts = batch.number_texts[row] if parts.num_token_id is not None else []
            head = decode(batch.ids[row], prompt_texts)
            whole = decode(batch.ids[row] + ids, prompt_texts + generated)
            completion = whole[len(head) :] if whole.startswith(head) else decode(ids, generated)
        if parts.num_token_id is None:  # digit tokens: the numbers come from the text, no head read them
            values, confidences, combinations = _text_numbers(completion, [])
        elif in_digits:  # fone_numbers="answers": the head's numbers among those written in digits
            values, confidences, combinations = _numbers_in_order(ids, numbers, parts.num_token_id, ntok)
        else:
            values = [n.value for n in numbers]
            confidences, combinations = [n.confidence for n in numbers], [n.combination for n in numbers]
        result.texts.append(prompt + completion if full_text else completion)
        result.completions.append(completion)
        result.numbers.append(values)
        result.token_ids.append(list(ids))
        result.stop_reasons.append(tracker.reasons[row])
        result.confidences.append(confidences)
        result.combinations.append(combinations)


def _text_numbers(completion: str, generated: list[GeneratedNumber]) -> tuple[list, list, list]:
    """Every number of `completion` (digit tokens: no head wrote them): ``(values, confidences, combinations)``."""
    values = [span.exact for span in find_numbers(completion)]
    return values, [None] * len(values), [None] * len(values)


def _numbers_in_order(
    ids: list[int], generated: list[GeneratedNumber], num_id: int, ntok: NumberTokenizer
) -> tuple[list, list, list]:
    """``fone_numbers="answers"``: every generated number in order, the digit-written ones (found in the text between
    the [NUM]s, with no confidence or combination) and the head's (`generated`, one per [NUM]): ``(values,
    confidences, combinations)``. Read per piece of text between [NUM]s, so a number written next to a [NUM] is
    never read together with it."""
    values, confidences, combinations = [], [], []
    piece: list[int] = []
    heads = iter(generated)
    for token in [*ids, None]:
        if token is not None and token != num_id:
            piece.append(token)
            continue
        for span in find_numbers(ntok.tokenizer.decode(piece, skip_special_tokens=True)):
            values.append(span.exact)
            confidences.append(None)
            combinations.append(None)
        piece = []
        number = next(heads, None) if token == num_id else None
        if number is not None:
            values.append(number.value)
            confidences.append(number.confidence)
            combinations.append(number.combination)
    return values, confidences, combinations
