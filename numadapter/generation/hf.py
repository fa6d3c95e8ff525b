"""``model.generate(**ntok(prompts, return_tensors="pt", padding=True))`` on a numadapter model, number-aware.

`NumberAdapterModel.generate` (the PEFT tuner, which ``PeftModel.generate`` calls) routes here, so every model
numadapter returns (`numadapter.get_peft_model`, ``PeftModel.from_pretrained`` / ``AutoPeftModel*``,
`numadapter.load_exported`) generates through numadapter's decode loop (`numadapter.generation.core.run_loop`, the
same as `numadapter.generate`) instead of transformers' loop, which would feed [NUM] without its number features and
leave every generated [NUM] undecoded.

Inputs: ``input_ids`` and ``attention_mask`` with the number tensors of the `NumberTokenizer` batch (``num_mask``,
``num_digits``, ``num_sign``, ``num_values``; ``number_texts`` too). Ids that hold [NUM] / [AGG] without the number
tensors are refused, naming ``model.generate(**ntok(...))`` and the number-aware pipeline
(`numadapter.generation.pipeline`): numbers are never looked up from the ids' values, since prompts that differ only
in their numbers have the same ids (transformers' own ``pipeline("text-generation")`` passes ids and mask only).
Padding may be left or right (each row is re-padded as the loop needs: left for causal LMs, right for the T5
encoder); the mask must be one run of ones per row.

With the adapters disabled (``with model.disable_adapter():``) the base model reads each prompt number as its own
tokens: the rows that hold [NUM] / [AGG] are decoded with their numbers and re-tokenized by the base tokenizer
(`numadapter.generation.prompts.base_rows`; the `NumberTokenizer` is ``tokenizer=`` or the one whose ``input_ids``
tensor this is, else the call is refused), and the base generates from that, as ``base.generate(**tokenizer(text))``
would. The returned sequences still start with the ids as given, and decode with their numbers.

Generation settings follow transformers: ``generation_config`` and keyword arguments (``max_new_tokens`` or
``max_length``, ``min_new_tokens`` / ``min_length``, ``do_sample``, ``temperature``, ``top_k`` (default 50 when
sampling, as in transformers), ``top_p``, ``eos_token_id``, ``pad_token_id``, ``num_return_sequences`` (sampling),
``suppress_tokens``, ``stop_strings`` (with ``tokenizer=``), ``use_cache``, ``return_dict_in_generate``). What the
loop cannot do (beam search, repetition penalties, logits processors, scores, ...) is refused by name.

Output, as transformers returns it: a LongTensor ``[B * num_return_sequences, L]``, causal: the input ids as given
followed by the generated ids, T5: ``decoder_start_token_id`` followed by them; sequences that stop early are padded
with ``pad_token_id``. The numbers go with it: ``ntok.batch_decode(output)`` renders every [NUM] (prompt and
generated), and so do ``ntok.decode(output[0])`` and ``ntok.batch_decode(output[:, prompt_len:])`` (views of the
output tensor, see `numadapter.tokenization.notes`); a copy of it carries no numbers. `numbers_of(output)` gives the
generated numbers and stop reasons.

A numadapter model without a number marker (``encoding="digits"`` without ``aggregate``) writes numbers as digit
tokens: there ``model.generate`` is transformers' own (beam search and the rest included).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import torch

from numadapter.generation.core import loop_settings, parts_from_tuner, run_loop, special_ids, token_ids, vocab_size
from numadapter.generation.eval_mode import evaluating
from numadapter.generation.loop import AdapterParts, decoder_start
from numadapter.generation.prompts import SIDE_KEYS, PromptBatch, PromptRow, base_rows, pad_prompts
from numadapter.generation.sampling import sampling_settings
from numadapter.generation.stopping import RowTracker
from numadapter.methods.registry import get_method
from numadapter.tokenization.decoding import render_place_digits
from numadapter.tokenization.notes import DigitsGeneration, PromptNumbers, SequenceNumbers, decoding, note, noted
from numadapter.tuner.number_modules import marker_token_id

FIX = (
    "pass the whole NumberTokenizer batch, model.generate(**ntok(prompts, return_tensors='pt', padding=True)), or "
    "call numadapter.generate(model, ntok, prompts); for pipelines use pipeline('number-text-generation', "
    "model=model, tokenizer=ntok) (numadapter.generation.pipeline.NumberTextGenerationPipeline), which carries the "
    "numbers"
)
# Generation options the number-aware loop cannot honour, with the values that mean "off".
UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "num_beams": (None, 1),
    "num_beam_groups": (None, 1),
    "diversity_penalty": (None, 0.0),
    "penalty_alpha": (None,),
    "dola_layers": (None,),
    "repetition_penalty": (None, 1.0),
    "encoder_repetition_penalty": (None, 1.0),
    "no_repeat_ngram_size": (None, 0),
    "encoder_no_repeat_ngram_size": (None, 0),
    "bad_words_ids": (None,),
    "force_words_ids": (None,),
    "constraints": (None,),
    "sequence_bias": (None,),
    "begin_suppress_tokens": (None,),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "typical_p": (None, 1.0),
    "epsilon_cutoff": (None, 0.0),
    "eta_cutoff": (None, 0.0),
    "min_p": (None,),
    "top_h": (None,),
    "guidance_scale": (None, 1.0),
    "exponential_decay_length_penalty": (None,),
    "renormalize_logits": (None, False),
    "watermarking_config": (None,),
    "output_scores": (None, False),
    "output_logits": (None, False),
    "output_attentions": (None, False),
    "output_hidden_states": (None, False),
    "prompt_lookup_num_tokens": (None,),
    "max_time": (None,),
    "token_healing": (None, False),
    "low_memory": (None, False),
}
EMPTY_OK = ("logits_processor", "stopping_criteria")  # transformers' list arguments: accepted when empty


def numbers_of(sequences: Any) -> SequenceNumbers:
    """The numbers ``model.generate`` produced with `sequences` (texts of every [NUM] per row, generated values,
    stop reasons); `ValueError` for a tensor that did not come from a numadapter ``model.generate``, and for the
    output of an ``encoding="digits"`` adapter, whose numbers are digit tokens in the text."""
    found = noted(sequences)
    if isinstance(found, DigitsGeneration):
        raise ValueError(
            "this output is from model.generate of an encoding='digits' adapter, which writes numbers as ordinary "
            "digit tokens, so there is no number record to return: read the numbers from the text, "
            "numadapter.find_numbers(ntok.decode(output[row, prompt_len:])) with prompt_len = "
            f"{found.prompt_length}, or use numadapter.generate(model, ntok, prompts, return_dict=True).numbers."
        )
    if not isinstance(found, SequenceNumbers):
        raise ValueError(
            "this tensor was not returned by model.generate of a numadapter model (or is a copy or slice of it): pass "
            "the output tensor itself."
        )
    return found


def generate_for_tuner(tuner: Any, *args: Any, **kwargs: Any) -> Any:
    """``model.generate`` of a numadapter model (see the module docstring).

    Args:
        tuner: the `NumberAdapterModel` (``peft_model.base_model``).
        *args: ``input_ids`` may come first, as in transformers.
        **kwargs: ``input_ids``, ``attention_mask``, number tensors, ``generation_config`` and its fields.

    Returns:
        The sequences ``[N, L]`` (a ``Generate*Output`` with ``sequences`` when ``return_dict_in_generate=True``).

    The model runs in eval mode and gets its modes back after (`numadapter.generation.eval_mode`), also on the
    ``encoding="digits"`` path that is transformers' own loop.
    """
    with evaluating(tuner):
        return _generate(tuner, *args, **kwargs)


def _generate(tuner: Any, *args: Any, **kwargs: Any) -> Any:
    if len(args) > 1:
        raise TypeError("model.generate takes input_ids as its only positional argument; pass the rest by keyword.")
    input_ids = args[0] if args else kwargs.pop("input_ids", kwargs.pop("inputs", None))
    given = {key: kwargs.pop(key) for key in SIDE_KEYS if key in kwargs}
    number_texts = kwargs.pop("number_texts", None)
    config = tuner.number_runtime().config
    marker = marker_token_id(config)
    if marker is None:  # digits without [AGG]: numbers are digit tokens, transformers' loop is exact
        if "num_mask" in given and bool(given["num_mask"].any()):
            raise ValueError("num_mask marks numbers, but this adapter (encoding='digits') has no number marker.")
        output = tuner.model.generate(input_ids, **kwargs) if input_ids is not None else tuner.model.generate(**kwargs)
        width = input_ids.shape[-1] if isinstance(input_ids, torch.Tensor) else 0
        note(output, DigitsGeneration(width))
        if isinstance(getattr(output, "sequences", None), torch.Tensor):
            note(output.sequences, DigitsGeneration(width))
        return output
    parts = parts_from_tuner(tuner)
    for name in ("inputs_embeds", "decoder_input_ids", "decoder_inputs_embeds", "encoder_outputs"):
        if kwargs.get(name) is not None:
            raise ValueError(f"model.generate of a numadapter model takes input_ids, not {name}: {FIX}.")
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError(f"model.generate needs input_ids as a [batch, length] tensor: {FIX}.")
    tokenizer = _number_tokenizer(kwargs.pop("tokenizer", None), parts)
    numbers, texts = _prompt_numbers(given, number_texts)
    found = noted(input_ids)  # the NumberTokenizer whose output this very tensor is (never its numbers alone)
    if tokenizer is None and isinstance(found, PromptNumbers):
        tokenizer = found.tokenizer
    gen = copy.deepcopy(kwargs.pop("generation_config", None) or parts.runtime.inner.generation_config)
    extra = gen.update(**kwargs)
    attention_mask = extra.pop("attention_mask", None)
    streamer = extra.pop("streamer", None)
    _check_options(gen, extra)
    enc_dec = parts.runtime.arch.is_encoder_decoder
    eos_ids, pad_id = special_ids(parts, gen.eos_token_id, gen.pad_token_id, tokenizer)
    rows = _rows(input_ids, attention_mask, numbers, texts, pad_id, eos_ids, marker, config)
    prompt_texts = [[] if enc_dec else row.number_texts for row in rows]
    if parts.runtime.modules is None:  # adapters disabled: the base reads the numbers as its own tokens
        rows = base_rows(rows, marker, tokenizer, "model.generate")
    repeat = gen.num_return_sequences or 1
    if repeat > 1 and not gen.do_sample:
        raise ValueError(
            f"num_return_sequences={repeat} with greedy decoding gives {repeat} identical sequences: pass "
            "do_sample=True (numadapter has no beam search)."
        )
    rows = [row for row in rows for _ in range(repeat)]
    prompt_texts = [texts for texts in prompt_texts for _ in range(repeat)]
    batch = pad_prompts(rows, config.num_places, pad_id, "right" if enc_dec else "left", parts.device)
    loop = _loop(parts, gen, input_ids.shape[1], eos_ids, pad_id, tokenizer)
    decode = None
    if loop.stops:
        decode = lambda ids, number_texts: tokenizer.decode(ids, number_texts=number_texts)  # noqa: E731
    prompt_ids = input_ids.repeat_interleave(repeat, 0)
    tracker_cls, end = RowTracker, None
    if streamer is not None:
        start = _sequences(parts, prompt_ids, [[] for _ in rows], pad_id)
        num_id = marker if get_method(config).replaces_numbers(config) else None  # [NUM], also with adapters off
        tracker_cls, end = _streaming(streamer, start, prompt_texts, num_id, pad_id)
    with torch.no_grad():
        tracker = run_loop(parts, batch, loop, decode, tracker_cls, tokenizer)
    if end is not None:
        end()
    sequences = _sequences(parts, prompt_ids, tracker.tokens, pad_id)
    result = SequenceNumbers(
        number_texts=[p + [n.text for n in got] for p, got in zip(prompt_texts, tracker.numbers)],
        numbers=[[n.value for n in got] for got in tracker.numbers],
        stop_reasons=list(tracker.reasons),
    )
    note(sequences, result)
    if gen.return_dict_in_generate:
        from transformers.generation.utils import GenerateDecoderOnlyOutput, GenerateEncoderDecoderOutput

        output = (GenerateEncoderDecoderOutput if enc_dec else GenerateDecoderOnlyOutput)(sequences=sequences)
        note(output, result)
        return output
    return sequences


def _streaming(
    streamer: Any, start: torch.Tensor, prompt_texts: list[list[str]], num_id: int | None, pad_id: int
) -> tuple[type[RowTracker], Callable[[], None]]:
    """A `RowTracker` class that hands every step's tokens to a transformers streamer (``put``), and the function
    that ends the stream (``end``).

    The streamer first gets `start` (``[B, T]``: the prompt ids, or T5's decoder start id), then ``[B]`` per step,
    as transformers' loop gives them. A streamer that decodes (``TextStreamer``) calls ``ntok.decode`` on the ids so
    far, as a list: each ``put`` / ``end`` runs inside a decoding scope of this generation's rows so far
    (`numadapter.tokenization.notes.decoding`), so their [NUM] tokens decode to the numbers the head produced.
    """
    rows = [list(row) for row in start.tolist()]
    live = [(rows[row], list(prompt_texts[row])) for row in range(len(rows))]

    def scope() -> Any:
        return decoding(live, num_id) if num_id is not None else contextlib.nullcontext()

    with scope():
        streamer.put(start.cpu())

    class StreamingTracker(RowTracker):
        def record(self, tokens: list[int], numbers: dict) -> list[int]:
            active = list(self.active)
            stopped = super().record(tokens, numbers)
            for row in active:
                rows[row].append(tokens[row])
                live[row] = (rows[row], prompt_texts[row] + [n.text for n in self.numbers[row]])
            fed = [tokens[row] if row in active else pad_id for row in range(len(rows))]
            with scope():
                streamer.put(torch.tensor(fed, dtype=torch.long))
            return stopped

    def end() -> None:
        with scope():
            streamer.end()

    return StreamingTracker, end


def _number_tokenizer(tokenizer: Any, parts: AdapterParts) -> Any:
    """The ``tokenizer=`` argument when it is a `NumberTokenizer` of this adapter (checked), else None."""
    from numadapter.tokenization.matching import check_tokenizer_matches
    from numadapter.tokenization.tokenizer import NumberTokenizer

    if tokenizer is None:
        return None
    if not isinstance(tokenizer, NumberTokenizer):
        raise TypeError(
            f"tokenizer= must be the NumberTokenizer of this adapter, got {type(tokenizer).__name__}: pass "
            "NumberTokenizer(tokenizer, config) (it decodes the [NUM] tokens for stop_strings)."
        )
    check_tokenizer_matches(tokenizer, parts.runtime.config, "model.generate", "tokenizer")
    return tokenizer


def _prompt_numbers(given: dict[str, torch.Tensor], number_texts: Any) -> tuple[dict[str, torch.Tensor] | None, Any]:
    """The prompt's number tensors (``[B, T]``, ``num_digits`` ``[B, T, P]``) and texts as given; ``(None, None)``
    when none were given (`_rows` then refuses rows that hold a marker)."""
    if not given:
        return None, None
    missing = [key for key in SIDE_KEYS if key not in given]
    if missing:
        raise ValueError(f"model.generate got {sorted(given)} but not {missing}: {FIX}.")
    return given, number_texts


def _check_options(gen: Any, extra: dict[str, Any]) -> None:
    for name, neutral in UNSUPPORTED.items():
        value = getattr(gen, name, None)
        if not any(value is n or value == n for n in neutral):
            raise ValueError(
                f"generation_config.{name}={value!r} is not supported by numadapter's number-aware generation, which "
                "decodes greedily or samples (temperature, top_k, top_p) and feeds every generated number back: "
                f"remove it. (numadapter.generate documents the options.)"
            )
    for name in EMPTY_OK:
        if extra.get(name) is not None and len(extra[name]):
            raise ValueError(
                f"model.generate of a numadapter model does not take {name} (its decode loop cannot run them): "
                "remove it."
            )
        extra.pop(name, None)
    if extra:
        raise ValueError(
            f"model.generate of a numadapter model got arguments it does not use: {sorted(extra)}. It takes "
            "input_ids, attention_mask, the number tensors, number_texts, tokenizer and GenerationConfig fields: "
            f"{FIX}."
        )


def _loop(parts: AdapterParts, gen: Any, width: int, eos_ids: list[int], pad_id: int, tokenizer: Any):
    """The loop settings from a `GenerationConfig` (lengths as transformers counts them)."""
    start = 1 if parts.runtime.arch.is_encoder_decoder else width  # tokens max_length / min_length count first
    if gen.max_new_tokens is not None:
        max_new = gen.max_new_tokens
    elif gen.max_length is not None:
        max_new = gen.max_length - start
    else:
        max_new = 20  # transformers' default
    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
        raise ValueError(
            f"max_new_tokens must be >= 1, got {max_new} (max_new_tokens={gen.max_new_tokens}, max_length="
            f"{gen.max_length}, prompt length {width}): raise max_new_tokens."
        )
    if gen.min_new_tokens is not None:
        min_new = gen.min_new_tokens
    else:
        min_new = max((gen.min_length or 0) - start, 0)
    min_new = min(min_new, max_new)
    do_sample = bool(gen.do_sample)
    sampling = sampling_settings(
        do_sample,
        gen.temperature if do_sample else None,
        (50 if gen.top_k is None else gen.top_k) if do_sample else None,
        gen.top_p if do_sample else None,
    )
    stops = gen.stop_strings
    stops = [stops] if isinstance(stops, str) else list(stops or [])
    if stops and tokenizer is None:
        raise ValueError(
            "stop_strings needs the NumberTokenizer to read the generated text: pass tokenizer=ntok (or the whole "
            "ntok batch, whose tokenizer is known)."
        )
    suppress = token_ids(gen.suppress_tokens, "suppress_tokens", vocab_size(parts))
    use_cache = True if gen.use_cache is None else bool(gen.use_cache)
    return loop_settings(
        parts, sampling, eos_ids=eos_ids, pad_id=pad_id, max_new_tokens=max_new, min_new_tokens=min_new,
        stops=stops, use_cache=use_cache, suppress=suppress,
    )  # fmt: skip


def _rows(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    numbers: dict[str, torch.Tensor] | None,
    texts: Any,
    pad_id: int,
    eos_ids: list[int],
    marker: int,
    config: Any,
) -> list[PromptRow]:
    """The unpadded prompt rows of a padded batch (left or right padding), with their number values and texts.
    Without `numbers`, a batch whose rows hold markers is refused: ids are never matched to numbers by value."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
        if pad_id not in eos_ids:  # as transformers infers it
            attention_mask = (input_ids != pad_id).long()
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, input_ids {tuple(input_ids.shape)}: {FIX}."
        )
    method = get_method(config)
    ids_cpu, mask_cpu = input_ids.cpu(), attention_mask.cpu().bool()
    side = {key: value.cpu() for key, value in numbers.items()} if numbers is not None else None
    rows = []
    for b in range(ids_cpu.shape[0]):
        kept = mask_cpu[b].nonzero().flatten()
        if kept.numel() == 0:
            raise ValueError(f"row {b} of attention_mask is all zeros: every prompt needs at least one token.")
        first, last = int(kept[0]), int(kept[-1]) + 1
        if last - first != kept.numel():
            raise ValueError(
                f"row {b} of attention_mask has gaps (ones at columns {kept.tolist()}): pad each prompt on one side "
                "only, as NumberTokenizer(..., padding=True) does."
            )
        ids = ids_cpu[b, first:last].tolist()
        row_sides = {key: value[b, first:last] for key, value in side.items()} if side is not None else None
        count = ids.count(marker)
        row_texts = list(texts[b]) if texts is not None else None
        if row_texts is None or len(row_texts) != count:
            row_texts = _texts_from_digits(row_sides, ids, marker, config) if count else []
        rows.append(PromptRow(ids, row_sides, row_texts if method.replaces_numbers(config) else []))
    counts = [row.ids.count(marker) for row in rows]
    if side is None and any(counts):
        b = next(b for b, count in enumerate(counts) if count)
        raise ValueError(
            f"input_ids row {b} holds {counts[b]} {method.marker_token(config)} token(s) but model.generate got no "
            "number tensors (num_mask, num_digits, num_sign, num_values), so their numbers are unknown (prompts that "
            f"differ only in their numbers have the same ids; a copy of the ids carries no numbers): {FIX}."
        )
    return rows


def _texts_from_digits(sides: dict[str, torch.Tensor] | None, ids: list[int], marker: int, config: Any) -> list[str]:
    """The canonical text of each marker's number, from its place digits and sign."""
    if sides is None:
        return []
    places = [t for t, token in enumerate(ids) if token == marker]
    return [render_place_digits(sides["num_digits"][t].tolist(), int(sides["num_sign"][t]), config) for t in places]


def _sequences(parts: AdapterParts, input_ids: torch.Tensor, generated: list[list[int]], pad_id: int) -> torch.Tensor:
    """``[N, L]``: causal: the input ids as given + the generated ids; T5: the decoder start id + them; padded."""
    width = max(len(row) for row in generated)
    new = torch.full((len(generated), width), pad_id, dtype=torch.long)
    for b, row in enumerate(generated):
        new[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    new = new.to(input_ids.device)
    if parts.runtime.arch.is_encoder_decoder:
        start = decoder_start(parts, PromptBatch(input_ids, input_ids, {}, [], [], False))
        return torch.cat((start, new), dim=1)
    return torch.cat((input_ids, new), dim=1)
