"""Prompt encoding for generation: `NumberTokenizer` output padded into one batch, side tensors padded in step.

docs/DESIGN.md, "Side tensors travel with input_ids": every transform of ``input_ids`` applies to the number side
tensors in the same place. Here the transform is the batch padding of the prompts: left padding for causal LMs (every
row ends at the last column, so the next token of every row is predicted at the same position, as transformers pads for
generation), right padding for the T5 encoder. The padding is done here rather than by the tokenizer so that generation
works with a tokenizer that has no pad token (pad rows are masked out; any id serves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from numadapter.schema import SIDE_FIELDS as SIDE_KEYS
from numadapter.tokenization.tokenizer import NumberTokenizer


@dataclass
class PromptBatch:
    """A padded batch of prompts.

    Attributes:
        input_ids: int64 ``[B, T]`` padded ids.
        attention_mask: int64 ``[B, T]``, 1 on prompt tokens, 0 on padding.
        numbers: ``num_mask`` ``[B, T]``, ``num_digits`` ``[B, T, P]``, ``num_sign`` ``[B, T]``, ``num_values``
            ``[B, T]`` padded like the ids; empty when the encoding has no number token (plain digits).
        ids: the unpadded prompt ids of each row.
        number_texts: the surface forms of each row's prompt numbers, in order.
        has_padding: whether any row is padded (else the attention mask is all ones).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    numbers: dict[str, torch.Tensor]
    ids: list[list[int]]
    number_texts: list[list[str]]
    has_padding: bool


@dataclass
class PromptRow:
    """One unpadded prompt: its ids, its number side values aligned with them, and its numbers' surface forms.

    Attributes:
        ids: the prompt ids.
        sides: ``num_mask`` / ``num_sign`` / ``num_values`` ``[T]`` and ``num_digits`` ``[T, P]`` (lists or tensors),
            or None when the row has no number.
        number_texts: the surface form of each number, in order.
    """

    ids: list[int]
    sides: dict[str, Any] | None
    number_texts: list[str]


def encode_prompts(
    ntok: NumberTokenizer,
    prompts: list[str],
    pad_id: int,
    padding_side: str,
    device: torch.device,
    base: bool = False,
) -> PromptBatch:
    """Encodes `prompts` with `ntok` and pads ids, mask and side tensors together.

    Args:
        ntok: the number tokenizer (its special-token settings apply: bos for Llama, eos for T5).
        prompts: the texts.
        pad_id: the id written into padding positions (masked out, never attended to).
        padding_side: ``"left"`` (causal LMs) or ``"right"`` (T5 encoder).
        device: where the tensors go.
        base: the adapters are disabled: numbers become the base tokenizer's own tokens (`base_rows`).

    Returns:
        The `PromptBatch`.

    Raises:
        ValueError: a prompt encodes to no token at all (a causal LM without bos has nothing to condition on).
    """
    enc = ntok(prompts)
    rows = []
    for b, ids in enumerate(enc["input_ids"]):
        if not ids:
            raise ValueError(
                f"prompt {b} ({prompts[b]!r}) encodes to no token (this tokenizer adds no bos/eos): give every prompt "
                "at least one character of text."
            )
        texts = list(enc["number_texts"][b])
        marked = any(enc["num_mask"][b]) if ntok.marker_token_id is not None else False  # [NUM]s, or numbers in digits
        sides = {key: enc[key][b] for key in SIDE_KEYS} if marked else None
        rows.append(PromptRow(list(ids), sides, texts))
    if base and ntok.marker_token_id is not None:
        rows = base_rows(rows, ntok.marker_token_id, ntok, "numadapter.generate")
    places = ntok.config.num_places if ntok.marker_token_id is not None else None
    return pad_prompts(rows, places, pad_id, padding_side, device)


def base_rows(rows: list[PromptRow], marker: int, ntok: NumberTokenizer | None, caller: str) -> list[PromptRow]:
    """The prompts as the base model reads them, for generation with the adapters disabled
    (``with model.disable_adapter():``): the base has no number embedding, so a [NUM] / [AGG] would reach it as a
    bare token row. A row with a marker is decoded with its numbers and the text re-tokenized by the base tokenizer
    (``ntok.tokenizer``; its leading and trailing special tokens, bos / eos, are kept as they are), which gives the
    ids the base tokenizer gives the prompt text. The rows returned carry no number values.

    Args:
        rows: the prompts (ids with markers, their number values and texts).
        marker: the [NUM] / [AGG] id.
        ntok: the `NumberTokenizer` (None when unknown).
        caller: what is generating, for the error.

    Raises:
        ValueError: a row holds a marker and `ntok` is None.
    """
    if not any(marker in row.ids for row in rows):
        return rows
    if ntok is None:
        raise ValueError(
            f"{caller} under `with model.disable_adapter():` runs the base model, which reads each prompt number as "
            "its own tokens, so the prompt must be re-tokenized with the NumberTokenizer: pass tokenizer=ntok, or "
            "the tensors ntok returned (model.generate(**ntok(prompts, return_tensors='pt', padding=True)))."
        )
    special = set(ntok.tokenizer.all_special_ids) - {marker}
    converted = []
    for row in rows:
        ids = list(row.ids)
        if marker not in ids:
            converted.append(PromptRow(ids, None, []))
            continue
        start, end = 0, len(ids)
        while start < end and ids[start] in special:
            start += 1
        while end > start and ids[end - 1] in special:
            end -= 1
        text = ntok.decode(
            ids[start:end], number_texts=row.number_texts if ntok.num_token_id is not None else None,
            skip_special_tokens=False, clean_up_tokenization_spaces=False,
        )  # fmt: skip
        middle = ntok.tokenizer(text, add_special_tokens=False)["input_ids"]
        converted.append(PromptRow(ids[:start] + middle + ids[end:], None, []))
    return converted


def pad_prompts(
    rows: list[PromptRow], places: int | None, pad_id: int, padding_side: str, device: torch.device
) -> PromptBatch:
    """Pads prompt rows into one `PromptBatch` (ids, mask and side tensors padded alike).

    Args:
        rows: the prompts.
        places: digit places P of ``num_digits``; None when the encoding has no number marker (no side tensors).
        pad_id: the id written into padding positions.
        padding_side: ``"left"`` (causal LMs) or ``"right"`` (T5 encoder).
        device: where the tensors go.
    """
    batch, length = len(rows), max(len(row.ids) for row in rows)
    input_ids = torch.full((batch, length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros(batch, length, dtype=torch.long)
    numbers: dict[str, torch.Tensor] = {}
    if places is not None:
        numbers = {
            "num_mask": torch.zeros(batch, length, dtype=torch.long),
            "num_digits": torch.zeros(batch, length, places, dtype=torch.long),
            "num_sign": torch.zeros(batch, length, dtype=torch.long),
            "num_values": torch.zeros(batch, length, dtype=torch.float32),
        }
    for b, row in enumerate(rows):
        cols = slice(length - len(row.ids), length) if padding_side == "left" else slice(0, len(row.ids))
        input_ids[b, cols] = torch.tensor(row.ids, dtype=torch.long)
        attention_mask[b, cols] = 1
        if numbers and row.sides is not None:
            for key in SIDE_KEYS:
                numbers[key][b, cols] = torch.as_tensor(row.sides[key], dtype=numbers[key].dtype).cpu()
    return PromptBatch(
        input_ids=input_ids.to(device),
        attention_mask=attention_mask.to(device),
        numbers={key: value.to(device) for key, value in numbers.items()},
        ids=[list(row.ids) for row in rows],
        number_texts=[list(row.number_texts) for row in rows],
        has_padding=any(len(row.ids) < length for row in rows),
    )


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions of a left-padded batch as transformers computes them: ``cumsum(mask) - 1``, 0 on padding.

    Args:
        attention_mask: ``[B, T]``.

    Returns:
        int64 ``[B, T]``: the first real token of every row is at position 0.
    """
    positions = attention_mask.long().cumsum(-1) - 1
    return positions.masked_fill(attention_mask == 0, 0)
