"""Packing for `NumberSFTTrainer` (``packing=True``): whole examples in rows of ``max_length`` tokens, padding-free.

`pack_examples` groups prepared examples (best fit decreasing); `PackedCollator` collates a batch of packs into one
row ``[1, T]`` with ``position_ids``, so the number tensors travel with their examples and the losses equal the
unpacked ones.
"""

from __future__ import annotations

from typing import Any

import torch

from numadapter.data.collator import GROUP_FIELD

PACK_COLUMN = "pack"


def pack_examples(dataset: Any, max_length: int | None) -> Any:
    """Prepared examples packed whole into rows of at most `max_length` tokens (best fit decreasing, as TRL's
    ``packing_strategy="bfd"``): one row per pack, its examples kept as a list under ``"pack"`` (each with its own
    number tensors, so no number crosses a boundary). An example longer than `max_length` gets a row alone."""
    import datasets

    lengths = [len(ids) for ids in dataset["input_ids"]]
    limit = max_length or max(lengths, default=1)
    bins: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        fits = [b for b in range(len(bins)) if room[b] >= lengths[index]]
        if fits:
            best = min(fits, key=lambda b: room[b])
            bins[best].append(index)
            room[best] -= lengths[index]
        else:
            bins.append([index])
            room.append(limit - lengths[index])
    return datasets.Dataset.from_dict({PACK_COLUMN: [[dataset[i] for i in sorted(b)] for b in bins]})


class PackedCollator:
    """Collates packed rows (`pack_examples`) padding-free: the examples of the whole batch in one row ``[1, T]``.

    The examples are collated by `collator` (truncation, numbers, completion masking as unpacked), then every
    row's real tokens are concatenated: ``position_ids`` restart at 0 for each example and no ``attention_mask`` is
    passed, so transformers' attention keeps the examples apart (its packed-sequence mask); the first label of each
    example is -100 (unpacked, nothing predicts it) and number groups are renumbered so they stay distinct.
    """

    def __init__(self, collator: Any) -> None:
        self.collator = collator

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        examples = [example for feature in features for example in feature[PACK_COLUMN]]
        batch = dict(self.collator(examples))
        if "shift_labels" in batch:
            raise ValueError("packing=True cannot train answer_format='head' rows: use answer_format='sequence'.")
        keep = batch.pop("attention_mask").bool()
        labels = batch["labels"].clone()
        labels[torch.arange(len(labels)), keep.int().argmax(1)] = -100  # each example's first real token
        batch["labels"] = labels
        if GROUP_FIELD in batch:
            groups = batch[GROUP_FIELD].clone()
            offsets = torch.cat([groups.new_zeros(1), groups.amax(1).cumsum(0)[:-1]])
            batch[GROUP_FIELD] = torch.where(groups > 0, groups + offsets[:, None], groups)
        out: dict[str, torch.Tensor] = {}
        for key, value in batch.items():
            if not (isinstance(value, torch.Tensor) and value.shape[:2] == keep.shape):
                raise ValueError(f"packing=True cannot flatten the collator's {key!r}: use packing=False.")
            out[key] = value[keep].unsqueeze(0)
        out["position_ids"] = torch.cat([torch.arange(int(n)) for n in keep.sum(1)]).unsqueeze(0)
        return out
