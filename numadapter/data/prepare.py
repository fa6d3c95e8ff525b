"""Dataset preparation for the number trainers: text datasets -> token ids + aligned number columns.

`prepare_dataset` accepts the dataset formats TRL accepts and turns each example into ids and number rows for
`numadapter.data.collator.NumberDataCollator` with one `NumberTokenizer` call per batch:

- language modeling: a ``text`` column (``dataset_text_field``), or ``messages`` (rendered with the tokenizer's chat
  template), or any columns plus a ``formatting_func`` returning the text;
- prompt-completion: ``prompt`` and ``completion``, both strings or both lists of chat messages. The completion starts
  where the tokenized prompt and prompt + completion diverge, comparing the number rows too, so a number that the
  completion continues ("Total: 12" + "34") belongs to the completion. With ``digits`` + ``aggregate`` the
  completion's numbers are written without their [AGG] token (`drop_markers`), as the model writes them: an [AGG]
  is the aggregate of the digits after it, so one before a trained answer would feed the answer to the model, and
  generation never emits it (only the prompt's numbers carry [AGG]; the digit-aggregation paper marks input numbers).
  Data that trains every token (language modeling, or ``completion_only_loss=False``) therefore gets no [AGG] at
  all, with a warning;
- sequence-to-sequence (``seq2seq=True``, T5): ``prompt`` -> ``input_ids``, ``completion`` -> ``labels`` (or
  ``messages`` whose last message, the assistant's, is the target and the rest the source, via the chat template);
  the target's numbers carry no [AGG], as above.

FoNE with ``fone_numbers="answers"`` (causal LMs only; ``seq2seq=True`` raises): the numbers of a completion are its
answers (the tokenizer's ``answer_start`` is the prompt's length in the joined text; a chat prompt's rendered
length), and every number of language-modeling data may be one (``answer_start=0``); an answer the context head can
form is written as [NUM], every other number stays the base tokenizer's tokens with a context-only row
(``number_kind`` 2) at its last token, and its number span covers all its tokens, so truncation drops it whole.

Output columns: ``input_ids``, the numbers as sparse rows, one entry per number (`numadapter.schema`:
``number_positions`` ``[N]``, ``number_digits`` ``[N][P]`` int8, ``number_sign`` ``[N]`` int8, ``number_values``
``[N]``, ``number_spans`` ``[G][2]``; ``number_kind`` ``[N]`` int8 with ``fone_numbers="answers"``),
``completion_mask`` for prompt-completion data, and for seq2seq ``labels``
with ``labels_number_*`` / ``labels_number_spans``. Only the collator densifies them (`NumberDataCollator`). Like
TRL, an EOS token is appended to non-conversational causal texts that do not end with one. Truncation
(``max_length``) uses `numadapter.data.collator.safe_slice`: a number the cut would split is dropped whole.
Examples left without a trained token are dropped, as TRL does, with a warning that gives their count.
"""

from __future__ import annotations

import os
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from numadapter.data.checks import first_example, require_examples, warn_cut_examples
from numadapter.data.collator import safe_slice
from numadapter.methods.fone.answer_mode import answers_mode
from numadapter.methods.registry import get_method
from numadapter.numbers import find_numbers
from numadapter.schema import (
    GROUP_FIELD,
    KIND_FIELD,
    LABEL_PREFIX,
    POSITIONS_FIELD,
    SIDE_FIELDS,
    SPAN_FIELD,
    SPARSE_FIELDS,
    group_column,
    sparse_features,
    sparse_rows,
)

_ASCII_DIGITS = frozenset("0123456789")
# The columns of one side of a prepared example: its ids and its numbers as sparse rows.
TOKEN_COLUMNS = ("input_ids", *SPARSE_FIELDS, SPAN_FIELD)


def _is_conversation(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], Mapping) and "role" in value[0]


def detect_format(example: Mapping[str, Any], dataset_text_field: str = "text") -> str:
    """``"tokenized"``, ``"messages"``, ``"prompt_completion"``, ``"prompt_completion_chat"`` or ``"text"``."""
    if "input_ids" in example:
        return "tokenized"
    if "prompt" in example and "completion" in example:
        chat = _is_conversation(example["prompt"])
        if chat != _is_conversation(example["completion"]):
            raise ValueError(
                "`prompt` and `completion` must both be strings or both be lists of chat messages, got "
                f"{type(example['prompt']).__name__} and {type(example['completion']).__name__}."
            )
        return "prompt_completion_chat" if chat else "prompt_completion"
    if "messages" in example:
        return "messages"
    if dataset_text_field in example:
        return "text"
    raise ValueError(
        f"Cannot tell the dataset format from the columns {sorted(example)}: give a `{dataset_text_field}` column "
        "(set `dataset_text_field` to use another), `prompt` + `completion`, or `messages`, or pass a formatting_func."
    )


def number_groups(tokenizer: Any, text: str, ids: Sequence[int], number_texts: Sequence[str]) -> list[int]:
    """The ``number_group`` column of one encoded text: k on every token of its k-th number, 0 elsewhere.

    fone / xval: the [NUM] token, plus the token holding its minus sign when ``sign_policy="text"``. digits: every
    token from the number's first digit to its last (point, separators and exponent included), the [AGG] token and
    the sign token before it; digit tokens are matched to the text's ASCII digits in order (one token per digit).

    Args:
        tokenizer: the `NumberTokenizer` that produced `ids`.
        text: the text that was encoded (special-token strings included, as encoded).
        ids: its token ids (unpadded, untruncated).
        number_texts: the encoding's ``number_texts`` for this text.

    Returns:
        One int per token, or ``[]`` when the digit tokens cannot be matched to the text (e.g. a normaliser turned
        another character into a digit); the collator then treats the example conservatively.
    """
    config = tokenizer.config
    group = [0] * len(ids)
    spans = find_numbers(text)
    if get_method(config).replaces_numbers(config):  # one marker per number
        text_sign = config.sign_policy == "text"
        positions = [t for t, i in enumerate(ids) if i == tokenizer.num_token_id]
        signed, j = [], 0
        for span in spans:
            if j == len(number_texts):
                break
            start = span.start + (len(span.sign_text) if text_sign else 0)
            if text[start : span.end] == number_texts[j]:
                signed.append(text_sign and bool(span.sign_text))
                j += 1
        if j != len(positions):
            return []
        for k, (t, has_sign) in enumerate(zip(positions, signed), 1):
            group[t] = k
            if has_sign and t > 0:
                group[t - 1] = k
        return group
    digit_ids = set(tokenizer.digit_token_ids or ())
    token_at = [t for t, i in enumerate(ids) if i in digit_ids]
    char_at = [c for c, char in enumerate(text) if char in _ASCII_DIGITS]
    if len(token_at) != len(char_at):
        return []
    token_of_char = dict(zip(char_at, token_at))
    marker = tokenizer.agg_token_id
    for k, span in enumerate(spans, 1):
        chars = [c for c in range(span.start, span.end) if text[c] in _ASCII_DIGITS]
        if not chars:
            continue
        first, stop = token_of_char[chars[0]], token_of_char[chars[-1]] + 1
        if marker is not None and first > 0 and ids[first - 1] == marker:
            first -= 1
        if span.sign_text and first > 0:
            first -= 1  # the token ending with the sign character
            if marker is not None and first > 0 and ids[first - 1] == marker:  # sign_policy="feature": [AGG] "-"
                first -= 1
        group[first:stop] = [k] * (stop - first)
    return group


def _rows(encoding: Mapping[str, Any], b: int) -> dict[str, list]:
    return {key: list(encoding[key][b]) for key in ("input_ids", *SIDE_FIELDS)}


def _prefix_length(a: Mapping[str, list], b: Mapping[str, list]) -> int:
    """Tokens the two encodings share at the start, comparing ids and every number row."""
    n = 0
    for t in range(min(len(a["input_ids"]), len(b["input_ids"]))):
        if any(a[key][t] != b[key][t] for key in ("input_ids", *SIDE_FIELDS)):
            break
        n = t + 1
    return n


def drop_markers(rows: dict[str, list], start: int, marker_id: int | None) -> None:
    """Removes the [AGG] tokens at positions ``>= start`` from one encoding, with their number rows, in place.

    ``digits`` + ``aggregate`` only (`marker_id` is the tokenizer's ``agg_token_id``; None: nothing to do). The
    digit tokens stay: the number is then spelled as the model generates it. Columns: ``input_ids`` and the
    `SIDE_FIELDS` ([T] or [T, P]), and ``number_group`` when it is not empty.
    """
    if marker_id is None:
        return
    keep = [t for t, i in enumerate(rows["input_ids"]) if t < start or i != marker_id]
    if len(keep) == len(rows["input_ids"]):
        return
    for key in ("input_ids", *SIDE_FIELDS, GROUP_FIELD):
        if rows.get(key):
            rows[key] = [rows[key][t] for t in keep]


def _append_eos(rows: dict[str, list], eos_id: int | None, places: int) -> None:
    if eos_id is None or (rows["input_ids"] and rows["input_ids"][-1] == eos_id):
        return
    rows["input_ids"].append(eos_id)
    for key, pad in (("num_mask", 0), ("num_sign", 0), ("num_values", 0.0)):
        rows[key].append(pad)
    rows["num_digits"].append([0] * places)
    if rows[GROUP_FIELD]:
        rows[GROUP_FIELD].append(0)


def _encode(
    tokenizer: Any, texts: list[str], add_special_tokens: bool, answer_start: list[Any] | None = None,
    digits_in: list[Any] | None = None,
) -> list[dict[str, list]]:  # fmt: skip
    """Dense rows (ids, ``num_*`` and ``number_group``, one entry per token) of each text.

    `answer_start`: per text, the character offset where its answers begin (None: no answer), for
    ``fone_numbers="answers"``, whose number groups come from the tokenizer itself (numbers left in digits span
    several tokens); other modes ignore it and use `number_groups`. `digits_in`: per text, None or the character
    ranges whose numbers stay digits in the other modes (`_digit_answers`).
    """
    if not answers_mode(tokenizer.config):
        enc = tokenizer(texts, add_special_tokens=add_special_tokens, digits_in=digits_in)
        groups = [number_groups(tokenizer, text, enc["input_ids"][b], enc["number_texts"][b]) for b, text in
                  enumerate(texts)]  # fmt: skip
    else:
        enc = tokenizer(texts, add_special_tokens=add_special_tokens, answer_start=answer_start,
                        return_number_groups=True)  # fmt: skip
        groups = enc[GROUP_FIELD]
    out = []
    for b in range(len(texts)):
        rows = _rows(enc, b)
        rows[GROUP_FIELD] = list(groups[b])
        out.append(rows)
    return out


def _answer_starts(prompts: list[str] | None, fulls: list[str]) -> list[int]:
    """Where the answers of each full text begin: 0 without prompts (language modeling trains every number), else
    the length of the prompt's text (the part the full text shares with it, for a chat template that renders the
    prompt a little differently inside the whole conversation)."""
    if prompts is None:
        return [0] * len(fulls)
    return [len(os.path.commonprefix([prompt, full])) for prompt, full in zip(prompts, fulls)]


def _picked(text: str, share: float) -> bool:
    """Whether `text` is among the share `share` of texts picked by a hash of the text (the same text always gets
    the same answer, whatever the batch or the process)."""
    return zlib.crc32(text.encode("utf-8")) / 2**32 < share


def _in_digits_share(starts: list[Any], fulls: list[str], config: Any) -> list[Any]:
    """`starts` with None (no answer: every number in digits) for the share ``fone_digit_answers`` of the texts
    (`_picked`)."""
    share = float(getattr(config, "fone_digit_answers", 0.0) or 0.0)
    if not share:
        return list(starts)
    return [None if _picked(full, share) else start for start, full in zip(starts, fulls)]


def _digit_answers(starts: list[Any], fulls: list[str], config: Any) -> list[Any] | None:
    """Per text, its answers (`starts`' entry: an offset or ranges) for the share of the texts whose answers the
    encoding leaves in digits (`NumberMethod.digit_answer_share`, xVal's ``xval_digit_answers``; `_picked`), None
    for the others; None when the share is 0. The tokenizer's ``digits_in``."""
    share = get_method(config.encoding).digit_answer_share(config)
    if not share:
        return None
    return [start if start is not None and _picked(full, share) else None for start, full in zip(starts, fulls)]


def _chat(tokenizer: Any, messages: list, generation_prompt: bool = False) -> str:
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"The dataset holds chat messages but {type(tokenizer.tokenizer).__name__} has no chat_template: set "
            "tokenizer.chat_template, or give `text` / `prompt` + `completion` strings."
        )
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def _assistant_ranges(tokenizer: Any, messages: list, full: str) -> tuple[tuple[int, int], ...]:
    """The ``[start, end)`` character ranges of the assistant's turns in `full`, the rendered conversation.

    Each turn is where the conversation rendered up to it (with the generation prompt) and rendered through it part
    from `full` (the parts they share with it, for a template that renders a turn a little differently inside the
    whole): its content and the template's end-of-turn text, what the model writes for that turn."""
    ranges = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        before = _chat(tokenizer, messages[:i], generation_prompt=True)
        through = _chat(tokenizer, messages[: i + 1])
        start, stop = (len(os.path.commonprefix([text, full])) for text in (before, through))
        if stop > start:
            ranges.append((start, stop))
    return tuple(ranges)


def _range_mask(tokenizer: Any, full: str, rows: Mapping[str, list], ranges: Sequence[tuple[int, int]],
                answers: tuple[Any, Any], special: bool) -> list[int]:  # fmt: skip
    """1 on the tokens of `rows` (the encoding of `full`) inside the character `ranges`, 0 elsewhere.

    A range's first and last tokens are found by encoding `full` up to each end (with its `answers`, the text's
    ``(answer_start, digits_in)`` entries, up to there, so the [NUM]s match) and comparing with `rows`
    (`_prefix_length`): a template's turn boundaries are token boundaries, and the number rows must agree too."""
    mask = [0] * len(rows["input_ids"])
    for first, stop in ranges:
        bounds = []
        for end in (first, stop):
            clipped = [None if r is None else [(a, min(b, end)) for a, b in r if a < end] for r in answers]
            encoded = _encode(tokenizer, [full[:end]], special, [clipped[0]], [clipped[1]])[0]
            bounds.append(_prefix_length(encoded, rows))
        mask[bounds[0] : bounds[1]] = [1] * (bounds[1] - bounds[0])
    return mask


def trains_every_token(fmt: str, seq2seq: bool, completion_only_loss: bool) -> bool:
    """Whether every input token of a causal example of format `fmt` is also a label (so no number is input only)."""
    if seq2seq:
        return False
    return fmt in ("text", "messages") or (fmt.startswith("prompt_completion") and not completion_only_loss)


def warn_unused_markers(tokenizer: Any, fmt: str) -> None:
    """Says that [AGG] is left out of data that trains every token (see `_causal_batch`), when aggregate is on."""
    if tokenizer.agg_token_id is None:
        return
    warnings.warn(
        f"aggregate=True puts [AGG] only before numbers whose digits are not trained: its embedding aggregates the "
        f"digits after it, so before a trained number it would hand the model the digits it must predict. This "
        f"{fmt!r} data trains every token (language modeling, or completion_only_loss=False), so its numbers get no "
        "[AGG] and aggregate has no effect on it. To train with [AGG], give prompt/completion data with "
        "completion_only_loss=True: the prompt's numbers carry it.",
        stacklevel=3,
    )


def _causal_batch(
    batch: dict[str, list], tokenizer: Any, fmt: str, field: str, add_eos: bool, every_token: bool = False,
    assistant_only: bool = False,
) -> dict[str, list]:  # fmt: skip
    """Encodes one batch of causal examples; with `every_token` (all tokens trained) no number keeps an [AGG].

    A conversation's answers are the numbers of its assistant turns (`_assistant_ranges`); with `assistant_only`
    its ``completion_mask`` is 1 on those turns' tokens alone."""
    n = len(next(iter(batch.values())))
    places = tokenizer.config.num_places
    prompts = ranges = None
    if fmt == "text":
        fulls, special = [batch[field][i] for i in range(n)], True
    elif fmt == "messages":
        fulls, special = [_chat(tokenizer, batch["messages"][i]) for i in range(n)], False
        ranges = [_assistant_ranges(tokenizer, batch["messages"][i], full) for i, full in enumerate(fulls)]
    elif fmt == "prompt_completion":
        prompts = [batch["prompt"][i] for i in range(n)]
        fulls, special = [batch["prompt"][i] + batch["completion"][i] for i in range(n)], True
    else:
        prompts = [_chat(tokenizer, batch["prompt"][i], generation_prompt=True) for i in range(n)]
        fulls = [_chat(tokenizer, batch["prompt"][i] + batch["completion"][i]) for i in range(n)]
        special = False
    answer_ranges = ranges or _answer_starts(prompts, fulls)
    starts = _in_digits_share(answer_ranges, fulls, tokenizer.config)
    digits = _digit_answers(answer_ranges, fulls, tokenizer.config)
    full_rows = _encode(tokenizer, fulls, special, starts, digits)
    prompt_rows = _encode(tokenizer, prompts, special) if prompts is not None else None  # a prompt has no answer
    kinds = answers_mode(tokenizer.config)
    out: dict[str, list] = {key: [] for key in (*TOKEN_COLUMNS, *((KIND_FIELD,) if kinds else ()))}
    if prompt_rows is not None or (ranges is not None and assistant_only):
        out["completion_mask"] = []
    eos = tokenizer.eos_token_id if add_eos and fmt in ("text", "prompt_completion") else None
    marker = tokenizer.agg_token_id
    for i, rows in enumerate(full_rows):
        start = _prefix_length(prompt_rows[i], rows) if prompt_rows is not None else 0
        turns = None
        if prompt_rows is None and "completion_mask" in out:  # the assistant turns, before any [AGG] is dropped
            turns = _range_mask(tokenizer, fulls[i], rows, ranges[i], (starts[i], digits and digits[i]), special)
            turns = [m for m, token in zip(turns, rows["input_ids"]) if marker is None or token != marker]
        if every_token:  # the prompt's markers go too: the completion then starts that many tokens earlier
            start -= rows["input_ids"][:start].count(marker) if marker is not None else 0
            drop_markers(rows, 0, marker)
        else:
            drop_markers(rows, start, marker)
        _append_eos(rows, eos, places)
        stored = {"input_ids": rows["input_ids"], **sparse_rows(rows, kinds)}
        for key in out:
            if key != "completion_mask":
                out[key].append(stored[key])
        if prompt_rows is not None:
            out["completion_mask"].append([0] * start + [1] * (len(rows["input_ids"]) - start))
        elif turns is not None:
            out["completion_mask"].append(turns)
    return out


def _seq2seq_batch(batch: dict[str, list], tokenizer: Any, fmt: str) -> dict[str, list]:
    n = len(next(iter(batch.values())))
    if fmt == "prompt_completion":
        sources, targets = [batch["prompt"][i] for i in range(n)], [batch["completion"][i] for i in range(n)]
    elif fmt == "messages":
        sources, targets = [], []
        for messages in batch["messages"]:
            if messages[-1].get("role") != "assistant":
                raise ValueError(
                    f"A sequence-to-sequence `messages` example must end with the assistant's message (the target), "
                    f"got role {messages[-1].get('role')!r}."
                )
            sources.append(_chat(tokenizer, messages[:-1], generation_prompt=True))
            targets.append(messages[-1]["content"])
    else:
        raise ValueError(
            f"A sequence-to-sequence model (T5) needs a source and a target: give `prompt` + `completion` strings or "
            f"`messages`, got the {fmt!r} format."
        )
    digits = _digit_answers([0] * n, [source + target for source, target in zip(sources, targets)], tokenizer.config)
    out: dict[str, list] = {}
    for prefix, texts in (("", sources), (LABEL_PREFIX, targets)):
        encoded = _encode(tokenizer, texts, True, digits_in=digits if prefix else None)
        for rows in encoded if prefix else ():
            drop_markers(rows, 0, tokenizer.agg_token_id)
        encoded = [{"input_ids": rows["input_ids"], **sparse_rows(rows)} for rows in encoded]
        for key in TOKEN_COLUMNS:
            name = "labels" if prefix and key == "input_ids" else prefix + key
            out[name] = [rows[key] for rows in encoded]
    return out


def _cut_side(example: dict[str, Any], ids_key: str, prefix: str, limit: int, mode: str, digit_ids) -> dict:
    """One side's ids and sparse rows truncated to `limit` tokens (`safe_slice`); positions move with the cut."""
    ids = example[ids_key]
    group = group_column(example.get(prefix + SPAN_FIELD), len(ids))
    cut = safe_slice(len(ids), limit, mode, group, ids, digit_ids)
    start, stop = cut.start, cut.stop
    positions = example[prefix + POSITIONS_FIELD]
    kept = [i for i, t in enumerate(positions) if start <= t < stop]
    out = {ids_key: ids[cut], prefix + POSITIONS_FIELD: [positions[i] - start for i in kept]}
    for name in (*SPARSE_FIELDS[1:], KIND_FIELD):
        if example.get(prefix + name) is not None:  # number_kind: fone_numbers="answers" only
            out[prefix + name] = [example[prefix + name][i] for i in kept]
    spans = example.get(prefix + SPAN_FIELD)
    if spans is not None:  # safe_slice never cuts inside a span
        out[prefix + SPAN_FIELD] = [[a - start, b - start] for a, b in spans if start <= a and b <= stop]
    if not prefix and example.get("completion_mask"):
        out["completion_mask"] = example["completion_mask"][cut]
    return out


def _truncate(example: dict[str, Any], max_length: int | None, mode: str, max_target: int | None, digit_ids) -> dict:
    out = {}
    if max_length is not None:
        out.update(_cut_side(example, "input_ids", "", max_length, mode, digit_ids))
    if max_target is not None and "labels" in example:
        out.update(_cut_side(example, "labels", LABEL_PREFIX, max_target, "keep_start", digit_ids))
    return out


def prepared_features(places: int, seq2seq: bool, completion_mask: bool, kinds: bool = False) -> Any:
    """The `datasets.Features` of `prepare_dataset`'s output (fixed: inferred ones would depend on the first batch);
    `kinds`: the causal rows carry ``number_kind`` (``fone_numbers="answers"``)."""
    import datasets

    # ids as `datasets` types them by itself (input_ids int32, labels int64); the 0 / 1 completion mask as int8
    features = {"input_ids": datasets.List(datasets.Value("int32")), **sparse_features(places, kinds=kinds)}
    if seq2seq:
        features.update({"labels": datasets.List(datasets.Value("int64")), **sparse_features(places, LABEL_PREFIX)})
    elif completion_mask:
        features["completion_mask"] = datasets.List(datasets.Value("int8"))
    return datasets.Features(features)


def prepare_dataset(
    dataset: Any,
    tokenizer: Any,
    *,
    seq2seq: bool = False,
    dataset_text_field: str = "text",
    formatting_func: Callable[[dict], str] | None = None,
    add_eos: bool = True,
    max_length: int | None = None,
    truncation_mode: str = "keep_start",
    max_target_length: int | None = None,
    completion_only_loss: bool = True,
    assistant_only_loss: bool = False,
    num_proc: int | None = None,
    batch_size: int = 1000,
) -> Any:
    """Tokenizes a `datasets.Dataset` / `IterableDataset` of text with a `NumberTokenizer` (see the module docstring).

    Args:
        dataset: the dataset. Already tokenized data (an ``input_ids`` column) is returned unchanged.
        tokenizer: the `numadapter.tokenization.NumberTokenizer`.
        seq2seq: build T5 examples (``labels`` = the tokenized completion).
        dataset_text_field: the text column of language-modeling data.
        formatting_func: maps an example to its text (language modeling).
        add_eos: append EOS to non-conversational causal texts that lack one.
        max_length: truncate ``input_ids`` and its columns (numbers are never split; see `safe_slice`).
        truncation_mode: ``"keep_start"`` or ``"keep_end"``.
        max_target_length: truncate T5 labels (keep_start).
        completion_only_loss: prompt-completion data: drop examples whose completion was truncated away (a warning
            gives how many). False
            (the prompt trained too) also leaves the prompt's numbers without [AGG], as language-modeling data.
        assistant_only_loss: ``messages`` data: a ``completion_mask`` that is 1 on the assistant's turns alone (as
            TRL's ``assistant_only_loss``, found by rendering the conversation up to and through each turn, so any
            chat template serves), and examples whose assistant turns were truncated away are dropped. Whatever
            it is, a conversation's answers (``fone_numbers="answers"``) are the numbers of its assistant turns.
        num_proc: processes for `Dataset.map` (ignored for an `IterableDataset`).
        batch_size: examples per tokenizer call.

    Returns:
        The tokenized dataset (original columns removed).

    Raises:
        ValueError: `seq2seq` with ``fone_numbers="answers"`` (causal LMs only for now). With ``"auto"`` and no
            ``task_type`` yet, `seq2seq` sets the tokenizer config's ``task_type`` to ``"SEQ_2_SEQ_LM"`` (as
            `numadapter.get_peft_model` does for T5), which makes it ``"all"``.
    """
    config = tokenizer.config
    if seq2seq and getattr(config, "fone_numbers", "all") == "auto" and config.task_type is None:
        config.task_type = "SEQ_2_SEQ_LM"  # what get_peft_model sets for T5: fone_numbers='auto' is 'all' there
    if seq2seq and answers_mode(config):
        raise ValueError(
            "prepare_dataset(seq2seq=True) got a tokenizer with fone_numbers='answers', which is for causal LMs for "
            "now (its answers are found in one text from the prompt's length): use fone_numbers='all' for a "
            "sequence-to-sequence model (T5)."
        )
    first = first_example(dataset)
    fmt = detect_format(first, dataset_text_field) if formatting_func is None or "input_ids" in first else "text"
    if fmt == "tokenized":
        return dataset
    if formatting_func is not None:  # its text is the example, whatever other columns it has
        dataset = dataset.map(lambda example: {"__text__": formatting_func(example)}, remove_columns=list(first))
        dataset_text_field, first = "__text__", {"__text__": ""}
    columns = list(first)
    kwargs = {"batched": True, "batch_size": batch_size, "remove_columns": columns}
    if num_proc is not None and hasattr(dataset, "num_rows"):
        kwargs["num_proc"] = num_proc
    masked = fmt.startswith("prompt_completion") or (fmt == "messages" and assistant_only_loss and not seq2seq)
    features = prepared_features(config.num_places, seq2seq, masked, answers_mode(config))
    kwargs["features"] = features
    if seq2seq:
        dataset = dataset.map(_seq2seq_batch, fn_kwargs={"tokenizer": tokenizer, "fmt": fmt}, **kwargs)
    else:
        every_token = trains_every_token(fmt, seq2seq, completion_only_loss)
        if every_token:
            warn_unused_markers(tokenizer, fmt)
        fn_kwargs = {"tokenizer": tokenizer, "fmt": fmt, "field": dataset_text_field, "add_eos": add_eos,
                     "every_token": every_token, "assistant_only": assistant_only_loss}  # fmt: skip
        dataset = dataset.map(_causal_batch, fn_kwargs=fn_kwargs, **kwargs)
    if max_length is not None or max_target_length is not None:
        digit_ids = None if get_method(config).replaces_numbers(config) else tokenizer.digit_token_ids
        fn_kwargs = {"max_length": max_length, "mode": truncation_mode, "max_target": max_target_length}
        dataset = dataset.map(_truncate, fn_kwargs={**fn_kwargs, "digit_ids": digit_ids}, features=features)
        if masked and (completion_only_loss or fmt == "messages") and not seq2seq:
            before = getattr(dataset, "num_rows", None)
            if before is None:  # streamed: the count is unknown, the first dropped example warns
                dataset = dataset.filter(_KeepCompletion(max_length, truncation_mode))
            else:
                dataset = dataset.filter(_has_completion)
                require_examples(dataset, "dataset", max_length, truncation_mode)
                warn_cut_examples(before - dataset.num_rows, before, "were dropped", max_length, truncation_mode)
    return dataset


def _has_completion(example: Mapping[str, Any]) -> bool:
    return any(example["completion_mask"])


class _KeepCompletion:
    """The filter of a streamed dataset: keeps examples with a completion token, warns at the first one dropped."""

    def __init__(self, max_length: int | None, mode: str) -> None:
        self.max_length, self.mode, self.warned = max_length, mode, False

    def __call__(self, example: Mapping[str, Any]) -> bool:
        keep = _has_completion(example)
        if not keep and not self.warned:
            self.warned = True
            warn_cut_examples(None, None, "are dropped", self.max_length, self.mode)
        return keep
