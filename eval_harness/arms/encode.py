"""Examples -> padded token tensors (+ number side tensors) for one method, and the token counts of Table 1.

Every example becomes ``prompt ids + answer ids + [eos]``, right-padded:

- the prompt (``example.prompt``) is encoded with special tokens (the tokenizer's bos), the answer
  (``example.sep + example.target``) without, separately, so the prompt ids are exactly what prediction feeds the
  model (no tokenizer merge can cross the prompt/answer boundary) and the answer can use another encoder than the
  prompt: with ``digits`` + [AGG] the answer stays plain digit tokens (an [AGG] before the answer would carry the
  answer's own digits into its input, and generation cannot produce it; `numadapter.generation` never does);
- labels are -100 on the prompt and on padding: the loss is on the answer and the end-of-sequence token only
  (completion-only training, as the NTL paper's arithmetic is trained);
- an answer read by a number head (one [NUM], FoNE / xVal) can instead be trained without being fed
  (`EncodedSet.head_batch`: the prompt alone, its last position trained on the answer), as the FoNE paper trains
  its "a+b=" tasks; `eval_harness.runner` picks that format where it applies (``RunSpec.train_format``);
- fone / xval (numadapter): each number is one [NUM] with its side tensors (`numadapter.tokenization`).

Tensors are built in chunks (``return_tensors="pt"``), never as Python lists of every digit, so the paper's
720,000-example splits fit in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tqdm.auto import tqdm

from eval_harness.tasks.base import Example
from numadapter import find_numbers
from numadapter.schema import IGNORE_INDEX
from numadapter.schema import SIDE_FIELDS as SIDE_KEYS

CHUNK = 8192


@dataclass
class EncodedSet:
    """Padded sequences of one split for one method.

    Attributes:
        input_ids: int64 ``[N, T]`` prompt + answer + eos, right-padded with the pad id.
        attention_mask: int64 ``[N, T]``.
        labels: int64 ``[N, T]`` aligned with ``input_ids`` (the model shifts them), -100 on prompt and padding.
        prompt_lengths: int64 ``[N]`` tokens of each prompt (bos included).
        lengths: int64 ``[N]`` tokens of each whole sequence.
        numbers: ``num_mask [N, T]``, ``num_digits [N, T, P]``, ``num_sign [N, T]``, ``num_values [N, T]``
            aligned with ``input_ids``; empty when the method has no number token.
        prompts: the prompt texts.
        pad_id: the id written into padding.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    prompt_lengths: torch.Tensor
    lengths: torch.Tensor
    numbers: dict[str, torch.Tensor] = field(default_factory=dict)
    prompts: list[str] = field(default_factory=list)
    pad_id: int = 0

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def batch(self, index: torch.Tensor, device: torch.device | str) -> dict[str, torch.Tensor]:
        """The training batch of rows `index`, trimmed to its longest sequence, on `device`."""
        width = int(self.lengths[index].max())
        out = {
            "input_ids": self.input_ids[index, :width],
            "attention_mask": self.attention_mask[index, :width],
            "labels": self.labels[index, :width],
        }
        out.update({key: value[index, :width] for key, value in self.numbers.items()})
        return {key: value.to(device, non_blocking=True) for key, value in out.items()}

    def prompt_batch(self, index: torch.Tensor, device: torch.device | str) -> dict[str, torch.Tensor]:
        """The prompts of rows `index` alone, right-padded (answer tokens replaced by padding), on `device`."""
        return {key: value.to(device) for key, value in self._prompts(index).items()}

    def head_batch(self, index: torch.Tensor, device: torch.device | str) -> dict[str, torch.Tensor]:
        """The training batch of rows `index` for an answer read by a number head: the prompts alone, the last
        prompt position trained on the answer's token ([NUM]) and number, which are not fed (as the FoNE paper
        trains its "a+b=" tasks: the head reads the answer at "=").

        Every row's answer must be one [NUM] followed by eos (`one_number_answers`).

        Returns:
            ``input_ids`` / ``attention_mask`` / ``num_*`` ``[B, W]`` (W: the longest prompt), ``shift_labels``
            ``[B, W]`` (labels aligned with the logits: -100 but at each prompt's last position) and
            ``labels_num_*`` aligned with them, on `device`.
        """
        lengths = self.prompt_lengths[index]
        rows = torch.arange(len(index))
        one_num = self.one_number_answers(index)  # (B,)
        if not bool(one_num.all()):
            first = int(index[~one_num][0])
            raise ValueError(
                f"head_batch needs every answer to be one [NUM] followed by eos; row {first} is not "
                f"({int((self.lengths - self.prompt_lengths)[first])} answer tokens): train it with `batch` instead."
            )
        out = self._prompts(index)
        last = lengths - 1  # (B,)
        shift_labels = torch.full_like(out["input_ids"], IGNORE_INDEX)
        shift_labels[rows, last] = self.input_ids[index, lengths]
        out["shift_labels"] = shift_labels
        for key, value in self.numbers.items():
            side = torch.zeros_like(out[key])
            side[rows, last] = value[index, lengths]
            out["labels_" + key] = side
        return {key: value.to(device, non_blocking=True) for key, value in out.items()}

    def one_number_answers(self, index: torch.Tensor | None = None) -> torch.Tensor:
        """bool ``[N]`` (or ``[B]`` for rows `index`): which answers are exactly one number token ([NUM]) followed by
        eos, so that a number head reads the whole answer at the last prompt position (all False without number
        tensors)."""
        index = torch.arange(len(self)) if index is None else index
        if "num_mask" not in self.numbers:
            return torch.zeros(len(index), dtype=torch.bool)
        prompt = self.prompt_lengths[index]
        at_answer = self.numbers["num_mask"][index, prompt] == 1
        return ((self.lengths[index] - prompt) == 2) & at_answer

    def _prompts(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        lengths = self.prompt_lengths[index]
        width = int(lengths.max())
        keep = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)  # (B, W)
        out = {
            "input_ids": torch.where(keep, self.input_ids[index, :width], self.pad_id),
            "attention_mask": keep.long(),
        }
        for key, value in self.numbers.items():
            rows = value[index, :width]
            mask = keep if rows.dim() == 2 else keep.unsqueeze(-1)
            out[key] = torch.where(mask, rows, torch.zeros((), dtype=rows.dtype))
        return out


def _cat_ragged(parts: Sequence[tuple[torch.Tensor, torch.Tensor]], fill: float | int) -> torch.Tensor:
    """Row-wise concatenation of right-padded parts: ``out[i] = p1[i, :len1[i]] + p2[i, :len2[i]] + ...``.

    Args:
        parts: ``(tensor [N, T_k, ...], lengths [N])`` per part.
        fill: value of the padding after the last part.

    Returns:
        ``[N, max_i sum_k len_k[i], ...]``.
    """
    first = parts[0][0]
    n = first.shape[0]
    total = sum(lengths for _, lengths in parts)  # (N,)
    out = torch.full((n, int(total.max()), *first.shape[2:]), fill, dtype=first.dtype)
    offset = torch.zeros(n, dtype=torch.long)
    for tensor, lengths in parts:
        cols = torch.arange(tensor.shape[1])
        valid = cols.unsqueeze(0) < lengths.unsqueeze(1)  # (N, T_k)
        rows, col = valid.nonzero(as_tuple=True)
        out[rows, offset[rows] + col] = tensor[rows, col]
        offset = offset + lengths
    return out


class Codec:
    """Encodes examples for one method: its prompt encoder, answer encoder and special ids.

    Args:
        tokenizer: the Hugging Face fast tokenizer (with a pad id: the base's pad, else its eos).
        prompt_encoder: callable like a tokenizer (``NumberTokenizer`` or `tokenizer`) for prompts.
        answer_encoder: the same for answers.
        side: whether the encoders return number side tensors (numadapter fone / xval / digits + [AGG]).
        places: P, the width of ``num_digits`` (with `side`).
    """

    def __init__(self, tokenizer: Any, prompt_encoder: Any, answer_encoder: Any, side: bool, places: int = 0) -> None:
        if tokenizer.eos_token_id is None:
            raise ValueError(
                f"the tokenizer {type(tokenizer).__name__} has no eos token; the harness ends every answer with eos "
                "so that generation knows where it stops: use a tokenizer with an eos token."
            )
        self.tokenizer = tokenizer
        self.prompt_encoder = prompt_encoder
        self.answer_encoder = answer_encoder
        self.side = side
        self.places = places
        self.eos_id = int(tokenizer.eos_token_id)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)

    def _encode_texts(self, encoder: Any, texts: list[str], specials: bool) -> dict[str, Any]:
        return encoder(texts, add_special_tokens=specials, padding=True, return_tensors="pt", padding_side="right")

    def _chunk(self, examples: Sequence[Example]) -> dict[str, torch.Tensor]:
        prompts = self._encode_texts(self.prompt_encoder, [e.prompt for e in examples], True)
        answers = self._encode_texts(self.answer_encoder, [e.sep + e.target for e in examples], False)
        n = len(examples)
        p_len = prompts["attention_mask"].sum(1)
        a_len = answers["attention_mask"].sum(1)
        if bool((a_len == 0).any()):
            bad = examples[int((a_len == 0).nonzero()[0])]
            raise ValueError(f"an answer encodes to no token: {bad.target!r} (prompt {bad.prompt!r}).")
        eos = (torch.full((n, 1), self.eos_id), torch.ones(n, dtype=torch.long))
        ids = _cat_ragged([(prompts["input_ids"], p_len), (answers["input_ids"], a_len), eos], self.pad_id)
        ones = (torch.ones(n, 1, dtype=torch.long), torch.ones(n, dtype=torch.long))
        mask = _cat_ragged([(prompts["attention_mask"], p_len), (answers["attention_mask"], a_len), ones], 0)
        labels = torch.where(mask.bool(), ids, IGNORE_INDEX)
        labels[torch.arange(ids.shape[1]).unsqueeze(0) < p_len.unsqueeze(1)] = IGNORE_INDEX
        out = {"input_ids": ids, "attention_mask": mask, "labels": labels, "prompt_lengths": p_len}
        if self.side:
            for key in SIDE_KEYS:
                p, a = prompts[key], answers.get(key)
                if a is None:  # an answer encoder without number tokens: zero rows
                    a = torch.zeros((n, answers["input_ids"].shape[1], *p.shape[2:]), dtype=p.dtype)
                tail = (torch.zeros((n, 1, *p.shape[2:]), dtype=p.dtype), torch.ones(n, dtype=torch.long))
                out[key] = _cat_ragged([(p, p_len), (a, a_len), tail], 0)
        return out

    def encode(self, examples: Sequence[Example], desc: str = "encode") -> EncodedSet:
        """Encodes `examples` (in chunks, with a progress bar) into one `EncodedSet`."""
        if not examples:
            raise ValueError("got no examples to encode; pass at least one.")
        chunks = []
        for start in tqdm(range(0, len(examples), CHUNK), desc=desc, leave=False, disable=len(examples) <= CHUNK):
            chunks.append(self._chunk(examples[start : start + CHUNK]))
        width = max(c["input_ids"].shape[1] for c in chunks)

        def stack(key: str, fill: float | int) -> torch.Tensor:
            padded = []
            for c in chunks:
                t = c[key]
                pad = torch.full((t.shape[0], width - t.shape[1], *t.shape[2:]), fill, dtype=t.dtype)
                padded.append(torch.cat([t, pad], dim=1))
            return torch.cat(padded)

        mask = stack("attention_mask", 0)
        return EncodedSet(
            input_ids=stack("input_ids", self.pad_id),
            attention_mask=mask,
            labels=stack("labels", IGNORE_INDEX),
            prompt_lengths=torch.cat([c["prompt_lengths"] for c in chunks]),
            lengths=mask.sum(1),
            numbers={key: stack(key, 0) for key in SIDE_KEYS} if self.side else {},
            prompts=[e.prompt for e in examples],
            pad_id=self.pad_id,
        )

    def number_tokens(self, text: str) -> list[int]:
        """The tokens the method spends on one number written alone (no special tokens), as in FoNE Table 1."""
        return list(self.prompt_encoder(text, add_special_tokens=False)["input_ids"])


def numbers_of(examples: Sequence[Example]) -> list[str]:
    """The surface forms of every number in the prompts and answers of `examples`, in order."""
    return [span.text for e in examples for span in find_numbers(e.prompt + e.sep + e.target)]


def number_places(examples: Sequence[Example]) -> tuple[int, int]:
    """``(int_digits, frac_digits)``: the fewest digit places holding every number of `examples` exactly (>= 1, 0)."""
    int_places, frac_places = 1, 0
    for e in examples:
        for span in find_numbers(e.prompt + e.sep + e.target):
            int_places = max(int_places, len(span.exact.int_digits))
            frac_places = max(frac_places, len(span.exact.frac_digits))
    return int_places, frac_places
