"""Token -> value maps for NTL: which tokens of a tokenizer are plain numbers, and their values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

KINDS = ("was", "was-cdf", "mse", "mae", "huber", "gce")  # the one list of NTL kinds (the config checks against it)
REDUCTIONS = ("mean", "sum", "none")
PREFIX_GROUPS = {"\u2581": 1, "\u0120": 2}  # SentencePiece word start, byte-level BPE space
_ASCII_DIGITS = re.compile(r"[0-9]+")
_EXACT_F32 = 2**24  # integers above this are not exact in float32: such values are handled in float64


def parse_number_token(token: str) -> tuple[int, int] | None:
    """Value of a vocabulary token that is a plain non-negative integer.

    Args:
        token: the token as stored in the vocabulary (e.g. "7", "\u25817", "\u01207", "123").

    Returns:
        ``(value, group)`` with group 0 for a bare token, 1 for a "\u2581" prefix, 2 for a "\u0120" prefix; ``None``
        when the token is not a plain number ("\u00bd", "1st", "-3", "1.5", "1e5", "0x1", "inf", ...).
    """
    group = PREFIX_GROUPS.get(token[:1], 0)
    body = token[1:] if group else token
    if not _ASCII_DIGITS.fullmatch(body):
        return None
    return int(body), group


@dataclass(frozen=True)
class NumberVocab:
    """The number tokens of a tokenizer, sorted by token id (built by `number_vocab`, read-only)."""

    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    values: tuple[int, ...]
    groups: tuple[int, ...]  # 0 bare, 1 "\u2581"-prefixed, 2 "\u0120"-prefixed


def number_vocab(tokenizer: Any, *, digit_level: bool = True) -> NumberVocab:
    """Find the number tokens of a Hugging Face tokenizer without changing it.

    Args:
        tokenizer: anything with ``get_vocab() -> dict[str, int]`` (a wrapper exposing ``.tokenizer`` also works).
        digit_level: only single-digit tokens ("0".."9", optionally prefixed) count as number tokens.

    Raises:
        TypeError: the object has no vocabulary.
        ValueError: the tokenizer has no number tokens at all.
    """
    source = tokenizer if hasattr(tokenizer, "get_vocab") else getattr(tokenizer, "tokenizer", None)
    if source is None or not hasattr(source, "get_vocab"):
        raise TypeError(f"NTL needs a tokenizer with `get_vocab()`, got {type(tokenizer).__name__}.")
    found = []
    for token, token_id in source.get_vocab().items():
        parsed = parse_number_token(token)
        if parsed is None or digit_level and len(token) - (parsed[1] != 0) != 1:  # one digit after the prefix
            continue
        found.append((int(token_id), token, *parsed))
    if not found:
        what = "single-digit tokens ('0'..'9')" if digit_level else "tokens that are ASCII digit strings"
        raise ValueError(
            f"The tokenizer ({type(source).__name__}, {len(source.get_vocab())} tokens) has no number tokens: NTL "
            f"needs {what}, optionally prefixed by '\u2581' or '\u0120'. Use a tokenizer that has digit tokens"
            + (" or pass digit_level=False to also accept multi-digit tokens." if digit_level else ".")
        )
    found.sort()
    ids, tokens, values, groups = zip(*found)
    return NumberVocab(tuple(ids), tuple(tokens), tuple(values), tuple(groups))
