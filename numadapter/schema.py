"""The side-tensor schema: how numbers travel next to the token ids, declared once.

A number reaches the model as one marker token (``[NUM]`` with ``encoding="fone"`` / ``"xval"``, ``[AGG]`` with
``encoding="digits", aggregate=True``) plus its exact digits, sign and value in *side tensors*. Every module that
builds, moves or reads them takes the names, the ignore index and the containers from here. They come in three
forms:

- **Batches** (tensors, what `NumberAdapterModel.forward` takes; `NumberDataCollator` and `NumberTokenizer(...,
  return_tensors="pt")` build them): ``num_mask`` ``[B, T]`` int64 (1 at markers), ``num_digits`` ``[B, T, P]``
  int64 (place digits of ``|x|``, P = int_digits + frac_digits), ``num_sign`` ``[B, T]`` int64 (+1 / -1 at
  markers), ``num_values`` ``[B, T]`` float32, aligned with ``input_ids``. The same four with ``labels_num_`` are
  aligned with ``labels`` (T5 targets, or a causal LM's ``shift_labels``), with ``decoder_num_`` with an explicit
  ``decoder_input_ids`` (`PREFIXES`). Inside the model one side travels as `NumberInputs`, the head's targets as
  `NumberTargets`.
- **Dense rows** (per-token lists: ``NumberTokenizer`` without ``return_tensors``, and datasets prepared by
  numadapter 0.1.0): ``num_mask`` ``[T]``, ``num_digits`` ``[T][P]``, ``num_sign`` ``[T]``, ``num_values`` ``[T]``
  and ``number_group`` ``[T]`` (k on every token of the k-th number, ``[]`` when unknown).
- **Sparse rows** (what `numadapter.data.prepare_dataset` stores: one entry per number, not per token):
  ``number_positions`` ``[N]`` (the marker positions, increasing), ``number_digits`` ``[N][P]``, ``number_sign``
  ``[N]``, ``number_values`` ``[N]`` and ``number_spans`` ``[G][2]`` (``[first, stop)`` of the tokens of each
  number, the spans of ``number_group``; None when unknown), and with ``fone_numbers="answers"`` ``number_kind``
  ``[N]`` (the ``num_mask`` value of each row, 1 or 2; absent: every row is a marker). T5 targets use the ``labels_``
  prefix. The collator densifies them (`dense_rows`) and still accepts dense rows.

This module holds names, containers and row conversions only, and imports nothing of numadapter, so that every
other module (the method interface included) can take its types from here. Whether a tokenizer agrees with an
adapter config is `numadapter.tokenization.matching`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import torch

__all__ = [
    "DECODER_PREFIX",
    "FIELDS",
    "GROUP_FIELD",
    "IGNORE_INDEX",
    "INPUT_PREFIX",
    "KIND_FIELD",
    "MARKER_KIND",
    "CONTEXT_KIND",
    "LABEL_PREFIX",
    "NUMBER_KWARGS",
    "NUMBER_TEXTS",
    "POSITIONS_FIELD",
    "PREFIXES",
    "SIDE_FIELDS",
    "SPAN_FIELD",
    "SPARSE_FIELDS",
    "EncodedNumber",
    "NumberInputs",
    "NumberTargets",
    "dense_rows",
    "is_sparse",
    "sparse_rows",
]

IGNORE_INDEX = -100  # the label of a position that is not trained (transformers' and torch's convention)

# -- batches and dense rows -------------------------------------------------------------------------------------------
FIELDS = ("mask", "digits", "sign", "values")
INPUT_PREFIX = "num_"
LABEL_PREFIX = "labels_"  # columns aligned with ``labels`` (T5 targets, a causal LM's ``shift_labels``)
DECODER_PREFIX = "decoder_"  # columns aligned with an explicit ``decoder_input_ids``
PREFIXES = {"input": INPUT_PREFIX, "labels": LABEL_PREFIX + INPUT_PREFIX, "decoder": DECODER_PREFIX + INPUT_PREFIX}
SIDE_FIELDS = tuple(INPUT_PREFIX + field for field in FIELDS)  # num_mask, num_digits, num_sign, num_values
GROUP_FIELD = "number_group"
NUMBER_TEXTS = "number_texts"
NUMBER_KWARGS = tuple(prefix + field for prefix in PREFIXES.values() for field in FIELDS) + (NUMBER_TEXTS,)

# -- sparse rows (prepared datasets) ----------------------------------------------------------------------------------
POSITIONS_FIELD = "number_positions"
SPAN_FIELD = "number_spans"
SPARSE_FIELDS = (POSITIONS_FIELD, "number_digits", "number_sign", "number_values")
KIND_FIELD = "number_kind"  # the num_mask value of each sparse row (fone_numbers="answers" only)
MARKER_KIND = 1  # num_mask at a [NUM] / [AGG] marker
CONTEXT_KIND = 2  # num_mask at the last token of a number left in digits (fone_numbers="answers": context only)
MASK_KINDS = (1, 2)  # a marker; the last token of a number left in digits (context only)


# -- containers -------------------------------------------------------------------------------------------------------
class EncodedNumber(NamedTuple):
    """One number that `NumberTokenizer` turned into a marker token.

    Attributes:
        text: its surface text as it stood in the input (without the sign with ``sign_policy="text"``).
        digits: the P place digits of ``|x|``, most significant first.
        sign: +1 or -1.
        value: the signed float value the marker carries.
    """

    text: str
    digits: tuple[int, ...]
    sign: int
    value: float


@dataclass
class NumberInputs:
    """The number tensors of one side, aligned with that side's token ids.

    Attributes:
        mask: int64 ``[B, T]``, nonzero at [NUM] / [AGG] positions.
        digits: int64 ``[B, T, P]`` place digits of ``|x|`` (or None when the encoding does not read them).
        sign: int64 ``[B, T]`` of +1 / -1 at number rows (or None).
        values: float32 ``[B, T]`` signed values at number rows (or None).
        has_numbers: whether any position is a number (known on the host, so hooks can skip work without a sync).
        index: ``(batch_idx, time_idx)`` of the number positions, each ``(N,)`` (set once validated), or None.
    """

    mask: torch.Tensor
    digits: torch.Tensor | None = None
    sign: torch.Tensor | None = None
    values: torch.Tensor | None = None
    has_numbers: bool = True
    index: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.mask.shape)


@dataclass
class NumberTargets:
    """What the number head is trained on, aligned with the hidden states ``[B, T]``.

    Attributes:
        mask: bool ``[B, T]``: True where hidden state t has a number to predict.
        digits: int64 ``[B, T, P]`` target place digits (zeros elsewhere), or None.
        sign: int64 ``[B, T]`` target signs (+1 elsewhere, so a sign check never sees 0), or None.
        values: float32 ``[B, T]`` target values (0 elsewhere), or None.
    """

    mask: torch.Tensor
    digits: torch.Tensor | None
    sign: torch.Tensor | None
    values: torch.Tensor | None


# -- sparse <-> dense rows ------------------------------------------------------------------------------------------
def sparse_rows(rows: Mapping[str, Sequence], kinds: bool = False) -> dict[str, Any]:
    """One example's dense number columns (``num_*`` and ``number_group``, one entry per token) as sparse rows.

    Args:
        rows: the dense columns.
        kinds: also return ``number_kind`` (``fone_numbers="answers"``, where ``num_mask`` is 1 or 2).

    Returns:
        ``number_positions`` ``[N]``, ``number_digits`` ``[N][P]``, ``number_sign`` ``[N]``, ``number_values``
        ``[N]`` (N = rows), ``number_spans`` ``[G][2]`` (None when ``number_group`` is ``[]``, unknown) and, with
        `kinds`, ``number_kind`` ``[N]``.
    """
    positions = [t for t, flag in enumerate(rows["num_mask"]) if flag]
    out: dict[str, Any] = {POSITIONS_FIELD: positions}
    if kinds:
        out[KIND_FIELD] = [rows["num_mask"][t] for t in positions]
    for sparse, dense in zip(SPARSE_FIELDS[1:], SIDE_FIELDS[1:]):
        column = rows[dense]
        out[sparse] = [column[t] for t in positions]
    group = rows.get(GROUP_FIELD)
    out[SPAN_FIELD] = [list(span) for span in group_spans(group)] if group else None
    return out


def group_spans(group: Sequence[int]) -> list[tuple[int, int]]:
    """``[(first, last + 1), ...]`` of every number group k > 0 of a ``number_group`` column, in order of k."""
    ranges: dict[int, tuple[int, int]] = {}
    for t, k in enumerate(group):
        if k:
            first, _ = ranges.get(k, (t, t))
            ranges[k] = (first, t + 1)
    return [ranges[k] for k in sorted(ranges)]


def is_sparse(example: Mapping[str, Any], prefix: str = "") -> bool:
    """Whether `example` carries the `prefix` side's numbers as sparse rows (``number_positions``)."""
    return prefix + POSITIONS_FIELD in example


def dense_rows(example: Mapping[str, Any], prefix: str, length: int, places: int, where: str) -> dict[str, list]:
    """The `prefix` side's sparse rows of one example as dense per-token lists (what the collator pads).

    Args:
        example: a prepared example with ``{prefix}number_positions`` etc. (see the module docstring).
        prefix: ``""`` (aligned with ``input_ids``) or ``"labels_"`` (aligned with ``labels``).
        length: T, the token count of that side.
        places: P.
        where: names the example in errors.

    Returns:
        ``num_mask`` ``[T]`` (``number_kind`` at each row when the example has it, else 1), ``num_digits``
        ``[T][P]``, ``num_sign`` ``[T]``, ``num_values`` ``[T]`` and ``number_group`` ``[T]`` (``[]`` when the spans
        are unknown), as the dense rows of the same text.

    Raises:
        ValueError: dense and sparse columns together, lists of different lengths, a position outside
            ``[0, T)`` or out of order, digit rows that are not P wide, a kind other than 1 or 2, or a span outside
            the tokens.
    """
    dense = [prefix + name for name in (*SIDE_FIELDS, GROUP_FIELD) if example.get(prefix + name) is not None]
    if dense:
        raise ValueError(
            f"{where} has both sparse number rows (`{prefix}{POSITIONS_FIELD}`) and dense ones ({dense}): keep one "
            "kind (prepare_dataset writes the sparse rows; older versions wrote the dense ones)."
        )
    columns = {name: _as_list(example.get(prefix + name)) for name in SPARSE_FIELDS}
    if example.get(prefix + KIND_FIELD) is not None:
        columns[KIND_FIELD] = _as_list(example[prefix + KIND_FIELD])
    positions = columns[POSITIONS_FIELD]
    sizes = {prefix + name: len(column) for name, column in columns.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"{where}: the sparse number rows must have one entry per number each, got sizes {sizes}.")
    if any(not 0 <= t < length for t in positions) or any(a >= b for a, b in zip(positions, positions[1:])):
        raise ValueError(
            f"{where}: `{prefix}{POSITIONS_FIELD}` = {positions} must be increasing positions in [0, {length}) (its "
            "tokens): prepare the data with numadapter.data.prepare_dataset."
        )
    bad = next((row for row in columns["number_digits"] if len(row) != places), None)
    if bad is not None:
        raise ValueError(
            f"{where}: `{prefix}number_digits` rows have {len(bad)} places, but the collator was built for "
            f"num_places={places} (int_digits + frac_digits): build it with the config the data was tokenized with."
        )
    kinds = columns.get(KIND_FIELD) or [1] * len(positions)
    odd = next((kind for kind in kinds if kind not in MASK_KINDS), None)
    if odd is not None:
        raise ValueError(
            f"{where}: `{prefix}{KIND_FIELD}` holds {odd}, but each row is 1 (a marker) or 2 (a number left in "
            "digits): prepare the data with numadapter.data.prepare_dataset."
        )
    out = {
        "num_mask": [0] * length,
        "num_digits": [[0] * places for _ in range(length)],
        "num_sign": [0] * length,
        "num_values": [0.0] * length,
    }
    digits, signs, values = columns["number_digits"], columns["number_sign"], columns["number_values"]
    for i, t in enumerate(positions):
        out["num_mask"][t] = int(kinds[i])
        out["num_digits"][t] = list(digits[i])
        out["num_sign"][t] = signs[i]
        out["num_values"][t] = values[i]
    out[GROUP_FIELD] = group_column(example.get(prefix + SPAN_FIELD), length, where, prefix)
    return out


def group_column(spans: Any, length: int, where: str = "an example", prefix: str = "") -> list[int]:
    """The ``number_group`` column ``[T]`` of ``number_spans`` (k on the tokens of the k-th span; ``[]`` for None)."""
    if spans is None:
        return []
    group = [0] * length
    for k, span in enumerate(_as_list(spans), 1):
        first, stop = (int(x) for x in span)
        if not 0 <= first < stop <= length:
            raise ValueError(
                f"{where}: `{prefix}{SPAN_FIELD}` holds [{first}, {stop}), outside its {length} tokens: prepare the "
                "data with numadapter.data.prepare_dataset."
            )
        group[first:stop] = [k] * (stop - first)
    return group


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return value.tolist() if hasattr(value, "tolist") else list(value)


def sparse_features(places: int, prefix: str = "", kinds: bool = False) -> dict[str, Any]:
    """The `datasets` feature types of one side's sparse rows (fixed, so a batch without numbers cannot set them).

    Digits, signs and kinds are stored as int8 (0..9, +1 / -1, 1 / 2), positions and spans as int32, values as
    float64. ``number_kind`` only with `kinds` (``fone_numbers="answers"``).
    """
    import datasets

    kind = {prefix + KIND_FIELD: datasets.List(datasets.Value("int8"))} if kinds else {}
    return {
        **kind,
        prefix + POSITIONS_FIELD: datasets.List(datasets.Value("int32")),
        prefix + "number_digits": datasets.List(datasets.List(datasets.Value("int8"), length=places)),
        prefix + "number_sign": datasets.List(datasets.Value("int8")),
        prefix + "number_values": datasets.List(datasets.Value("float64")),
        prefix + SPAN_FIELD: datasets.List(datasets.List(datasets.Value("int32"), length=2)),
    }
