"""Deterministic sampling without replacement and disjoint split assignment.

Two mechanisms, both reproducible across machines (no salted built-in ``hash``):

1. `KeyedPermutation` (tasks whose problems can be enumerated, e.g. FoNE operand pairs): a keyed pseudo-random
   bijection of ``[0, size)`` (a 4-round Feistel network on the smallest even number of bits that holds `size`,
   with cycle walking, vectorised in numpy). The permuted order is cut into contiguous ranges
   ``valid = [0, n_valid)``, ``test = [n_valid, n_valid + n_test)``, ``train = the rest``. Splits are therefore
   disjoint by construction, duplicate-free, and even a near-exhaustive split (FoNE 3-digit multiplication
   uses 500,000 of the 500,500 pairs a <= b) costs O(n).
2. `hash_split` (tasks sampled with replacement, e.g. word problems): a problem's canonical key is hashed
   (keyed BLAKE2b) to a point in [0, 1) that picks its split; a generator draws candidates and keeps those whose
   hash falls in the requested split.

Unranking helpers map an index to operands: `unrank_pairs` (a <= b) and `unrank_triple` (x <= y <= z).
`PermutedSpaceTask` is the base of the tasks of the first kind (their split check, capacity and ranks).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from .base import Task

T = TypeVar("T")

_ROUNDS = 4

# `hash_split` partition used by the tasks that sample with replacement: shares of the problem space.
HASH_SPLITS = ("train", "valid", "test")
HASH_FRACTIONS = (0.85, 0.05, 0.10)
MAX_ATTEMPTS_PER_EXAMPLE = 1000


def derive_key(*parts: object) -> int:
    """A 64-bit key from any printable parts (e.g. task name, seed, split), stable across runs."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on a uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class KeyedPermutation:
    """A keyed pseudo-random bijection of ``[0, size)``.

    Args:
        size: number of elements, 1 <= size <= 2**64.
        key: 64-bit key (see `derive_key`); different keys give independent-looking permutations.
    """

    def __init__(self, size: int, key: int) -> None:
        if size < 1 or size > 1 << 64:
            raise ValueError(f"KeyedPermutation size must be in [1, 2**64], got {size}.")
        self.size = size
        half = max(1, math.ceil(max(1, (size - 1).bit_length()) / 2))
        self._half = half
        self._mask = np.uint64((1 << half) - 1)
        self._keys = [np.uint64(derive_key(key, r)) for r in range(_ROUNDS)]

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        h = np.uint64(self._half)
        left, right = x >> h, x & self._mask
        for k in self._keys:
            left, right = right, left ^ (_mix64(right ^ k) & self._mask)
        return (left << h) | right

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        """Permute indices (uint64 array, values < size) -> uint64 array of the same shape, values < size."""
        y = self._feistel(indices.astype(np.uint64))
        size = np.uint64(self.size - 1)
        out = y > size
        while out.any():  # cycle walking: re-apply until the value lands inside [0, size)
            y[out] = self._feistel(y[out])
            out = y > size
        return y

    def range(self, start: int, stop: int) -> np.ndarray:
        """The permuted images of ``start, start+1, ..., stop-1`` as a uint64 array of length stop-start."""
        return self(np.arange(start, stop, dtype=np.uint64))


def split_ranges(size: int, n_valid: int, n_test: int) -> dict[str, tuple[int, int]]:
    """Contiguous ranges of a permuted space: valid first, then test, then train (all the rest)."""
    if size > 1 << 64:
        raise ValueError(
            f"The task has {size} distinct problems, more than the 2**64 a `KeyedPermutation` indexes; "
            f"use fewer digits/operands."
        )
    if n_valid + n_test > size:
        raise ValueError(f"valid + test sizes ({n_valid} + {n_test}) exceed the {size} distinct problems.")
    return {"valid": (0, n_valid), "test": (n_valid, n_valid + n_test), "train": (n_valid + n_test, size)}


class PermutedSpaceTask(Task):
    """A task whose problems are the ranks ``0 .. space_size - 1`` of an enumeration (FoNE's operand pairs and
    triples, xVal's expression trees), drawn through a `KeyedPermutation` cut by `split_ranges`: valid and test are
    reserved first, train gets every remaining problem. A subclass (a dataclass with ``n_valid`` and ``n_test``)
    defines `space_size` and calls ``super().__post_init__()`` after its own checks."""

    _capacity_hint = ", or build the task with larger n_valid/n_test (train gets every problem not in valid/test)"

    def __post_init__(self) -> None:
        self._split_range("train")  # validates that valid + test fit the space

    @property
    def space_size(self) -> int:
        """The number of distinct problems."""
        raise NotImplementedError

    def _split_range(self, split: str) -> tuple[int, int]:
        return split_ranges(self.space_size, self.n_valid, self.n_test)[split]

    def capacity(self, split: str) -> int:
        start, stop = self._split_range(split)
        return stop - start

    def _ranks(self, family: str, split: str, n: int, seed: int) -> np.ndarray:
        """The ranks of the first `n` problems of `split`: the split's range through the permutation keyed by
        ``(family, name, seed)``."""
        start, _ = self._split_range(split)
        return KeyedPermutation(self.space_size, derive_key(family, self.name, seed)).range(start, start + n)


def unrank_pairs(ranks: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray]:
    """Map ranks in ``[0, n(n+1)/2)`` to pairs ``0 <= a <= b < n`` (colex order), vectorised.

    Rank r = b(b+1)/2 + a. Returns int64 arrays (a, b) shaped like `ranks`.
    """
    r = ranks.astype(np.int64)
    b = np.floor((np.sqrt(8.0 * r.astype(np.float64) + 1.0) - 1.0) / 2.0).astype(np.int64)
    # correct float rounding: enforce b(b+1)/2 <= r < (b+1)(b+2)/2
    b = np.where(b * (b + 1) // 2 > r, b - 1, b)
    b = np.where((b + 1) * (b + 2) // 2 <= r, b + 1, b)
    a = r - b * (b + 1) // 2
    if np.any(b >= n_values):
        raise ValueError(f"rank out of range for {n_values} values")
    return a, b


def _largest_with_binom_at_most(rank: int, k: int) -> int:
    """Largest c >= k - 1 with C(c, k) <= rank: a float estimate, then exact integer correction."""
    c = max(k - 1, int((math.factorial(k) * rank) ** (1.0 / k)) + (k - 1) // 2)
    while math.comb(c, k) > rank:
        c -= 1
    while math.comb(c + 1, k) <= rank:
        c += 1
    return c


def unrank_triple(rank: int, n_values: int) -> tuple[int, int, int]:
    """Map a rank in ``[0, C(n+2, 3))`` to a sorted triple ``0 <= x <= y <= z < n`` (colex, multisets).

    A multiset x <= y <= z of [0, n) is the strict combination (x, y+1, z+2) of [0, n+2), whose colex rank is
    C(z+2, 3) + C(y+1, 2) + x.
    """
    if not 0 <= rank < math.comb(n_values + 2, 3):
        raise ValueError(f"rank {rank} out of range for triples of {n_values} values")
    c3 = _largest_with_binom_at_most(rank, 3)
    rank -= math.comb(c3, 3)
    c2 = _largest_with_binom_at_most(rank, 2)
    rank -= math.comb(c2, 2)
    return rank, c2 - 1, c3 - 2


def hash_split(key: str, seed_key: int, names: Sequence[str], fractions: Sequence[float]) -> str:
    """The split a problem belongs to: its keyed hash picks an interval of the cumulative `fractions`.

    Args:
        key: canonical text of the problem (e.g. ``"*|12|345"`` with the operands sorted).
        seed_key: 64-bit key (from `derive_key` of the task and seed).
        names: split names, e.g. ("train", "valid", "test").
        fractions: their shares of the problem space, summing to 1.
    """
    digest = hashlib.blake2b(key.encode(), digest_size=8, key=seed_key.to_bytes(8, "little")).digest()
    u = int.from_bytes(digest, "little") / 2.0**64
    acc = 0.0
    for name, frac in zip(names, fractions):
        acc += frac
        if u < acc:
            return name
    return names[-1]


def sample_disjoint(
    draw: Callable[[random.Random], tuple[str, T]],
    split: str,
    n: int,
    rng: random.Random,
    seed_key: int,
    *,
    check_split: bool = True,
) -> list[T]:
    """Draw items with ``draw(rng) -> (canonical key, item)`` and keep those whose key hashes to `split`.

    Args:
        draw: draws one candidate problem; the key identifies the problem (not its surface form, so one
            problem asked with two templates stays in one split).
        split: the split being generated (one of `HASH_SPLITS` when `check_split`).
        n: number of items to return.
        rng: the split's random generator, consumed sequentially (so outputs are prefix-stable).
        seed_key: the key of `hash_split`.
        check_split: False keeps every candidate (for splits disjoint from the others by construction, such
            as extrapolation sets).

    Raises:
        RuntimeError: when the split holds (almost) no problem of the space.
    """
    out: list[T] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > MAX_ATTEMPTS_PER_EXAMPLE * (n + 1):
            raise RuntimeError(f"split {split!r} found only {len(out)} of {n} items; its problem space is too small")
        key, item = draw(rng)
        if not check_split or hash_split(key, seed_key, HASH_SPLITS, HASH_FRACTIONS) == split:
            out.append(item)
    return out
