"""The numbers behind a KV cache, so that a cached forward's context head sees what the full forward sees.

The FoNE context head (``fone_head_input="context"``) builds a number from the last K numbers at or before its
position (`numadapter.methods.context`). A forward call given ``past_key_values`` gets the number tensors of its new
tokens only: the earlier numbers sit behind the cache, where the head cannot read them. So, for a context head,
`NumberAdapterModel.forward` records with every cache it returns the last K numbers at the cache's last position and
the cache's length then (`CacheNumbers.record`), and a later call given that cache object starts from them
(`CacheNumbers.before`): ``model(**new_tokens, past_key_values=out.past_key_values).number_logits`` equal the full
forward's.

A cache with earlier tokens that no record accounts for is refused, never read without its numbers: one filled by
other code (the base model, transformers' own loop), one filled further or cropped outside the forward (its length
no longer matches), one whose batch or K changed. A cache whose rows were reordered in place (beam search) keeps its
length and batch, so the record cannot see it; numadapter's loops never reorder, and beam search is refused there.

Shapes: B rows, K = ``fone_context_numbers``, P = ``int_digits + frac_digits`` places.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from numadapter.methods.context import ContextNumbers
from numadapter.schema import NumberInputs

SUPPORTED = (
    "pass the cache this model's forward returned (`out.past_key_values`) unchanged, with the number tensors of the "
    "new tokens (num_mask, num_digits, num_sign), or generate with numadapter.generate(model, ntok, prompts) / "
    "model.generate(**ntok(prompts, return_tensors='pt', padding=True)), which keep the numbers of every step"
)


@dataclass(frozen=True)
class _Record:
    """What a cache held when the forward returned it: its length, batch, K and its last K numbers as a side."""

    length: int
    batch: int
    count: int
    side: NumberInputs


def cache_length(cache: Any) -> int:
    """The tokens already in `cache` (0 for None); `ValueError` for an object that is not a transformers `Cache`."""
    if cache is None:
        return 0
    length = getattr(cache, "get_seq_length", None)
    if not callable(length):
        raise ValueError(
            f"`past_key_values` is a {type(cache).__name__}, not a transformers Cache, so the numbers before its "
            f"tokens are unknown to the number head (fone_head_input='context'): {SUPPORTED}."
        )
    return int(length())


def call_rows(kwargs: dict, labels: Any = None) -> int:
    """B, the rows of a forward call (from its ids or embeddings, else its labels; 0 when it has none)."""
    for name in ("input_ids", "inputs_embeds", "decoder_input_ids", "decoder_inputs_embeds"):
        if kwargs.get(name) is not None:
            return kwargs[name].shape[0]
    return labels.shape[0] if labels is not None else 0


def _as_side(numbers: ContextNumbers) -> NumberInputs:
    """The last K numbers ``[B, K, ...]`` (slot 0 the latest) as a side of K positions, oldest first."""
    valid = numbers.valid.flip(-1)  # (B, K): the latest number at the last position
    return NumberInputs(
        mask=valid.long(), digits=numbers.digits.flip(-2), sign=numbers.sign.flip(-1), values=None, has_numbers=True
    )


class CacheNumbers:
    """The last numbers of every cache a context-head forward returned (weakly keyed: a record dies with its cache)."""

    def __init__(self) -> None:
        self._records: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __getstate__(self) -> dict:
        return {}  # the records belong to this process's live caches: a pickled or deep-copied model starts empty

    def __setstate__(self, state: dict) -> None:
        self._records = weakref.WeakKeyDictionary()

    def before(self, cache: Any, batch: int, count: int) -> NumberInputs | None:
        """The numbers before a cached call's new tokens, or None when `cache` holds no tokens yet.

        Args:
            cache: the call's ``past_key_values`` (or None).
            batch: B, the rows of the call.
            count: K of the active adapter.

        Returns:
            A side of ``[B, K]`` positions (`NumberInputs`: ``mask``, ``digits [B, K, P]``, ``sign``), oldest first,
            that comes before every new position; or None.

        Raises:
            ValueError: the cache holds tokens whose numbers no record of this model accounts for.
        """
        length = cache_length(cache)
        if length == 0:
            return None
        record = self._records.get(cache)
        if record is None:
            why = "it was not returned by this model's forward with the numbers recorded"
        elif record.length != length:
            why = f"this model's forward returned it with {record.length} tokens: it was filled or cropped elsewhere"
        elif (record.batch, record.count) != (batch, count):
            why = f"it was recorded for {record.batch} rows and K={record.count}, this call has {batch} and K={count}"
        else:
            return record.side
        raise ValueError(
            f"this numadapter model's number head (fone_head_input='context') builds each number from the numbers "
            f"before it, and the `past_key_values` passed hold {length} earlier tokens whose numbers are unknown "
            f"({why}); its number_logits would silently miss them. To run cached steps, {SUPPORTED}."
        )

    def record(self, cache: Any, numbers: ContextNumbers) -> None:
        """Remembers the last K numbers ``[B, K, ...]`` at `cache`'s last position, with its length now."""
        batch, count = numbers.valid.shape
        self._records[cache] = _Record(cache_length(cache), batch, count, _as_side(numbers))
