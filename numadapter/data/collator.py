"""`NumberDataCollator`: pads and truncates the number side tensors in step with ``input_ids`` and ``labels``.

docs/DESIGN.md, "Side tensors travel with input_ids": every transform of the ids must apply to the side tensors too, in
the same place. Here that is one function per transform: `safe_slice` (one example, before padding) and
`NumberDataCollator.__call__` (padding and completion-only labels), both slicing every per-token column with the same
slice.

Examples are dicts of lists (the names and forms are `numadapter.schema`'s):

- ``input_ids`` (required) and the example's numbers, in either form: sparse rows, one entry per number, as
  `numadapter.data.prepare_dataset` stores them (``number_positions`` ``[N]``, ``number_digits`` ``[N][P]``,
  ``number_sign``, ``number_values``, ``number_spans``, and with ``fone_numbers="answers"`` ``number_kind``: 1 for a
  [NUM], 2 for a number left in digits), densified here first (`numadapter.schema.dense_rows`); or
  dense per-token rows, as `NumberTokenizer` without ``return_tensors`` gives them and numadapter 0.1.0 prepared
  them (``num_mask``, ``num_digits`` ``[T][P]``, ``num_sign``, ``num_values``). Both give the same batch. The
  number columns default to zeros when absent (a text without numbers);
- ``completion_mask`` (optional): 1 on completion tokens; with ``completion_only_loss`` the other labels are -100;
- ``labels`` (optional): used as given (causal LMs) instead of a copy of ``input_ids``;
- ``number_group`` (optional; dense rows, ``number_spans`` in sparse ones): 0 outside numbers, k on every token of
  the k-th number (its [NUM] / [AGG], its sign token with ``sign_policy="text"``, and in ``encoding="digits"`` every
  digit, separator and point token);
- sequence-to-sequence (``seq2seq=True``, T5): ``labels`` are the target ids with ``labels_number_*`` (sparse) or
  ``labels_num_*`` and ``labels_number_group`` (dense) aligned with them.

Truncation never cuts a number in half (``encoding="digits"`` spreads a number over several tokens, and a minus
sign kept as text belongs to the [NUM] after it): when the cut falls inside a number, the whole number is dropped,
i.e. the cut moves to the number's first token (``truncation_mode="keep_start"``) or past its last token
(``"keep_end"``), so the sequence comes out shorter than ``max_length``. Without ``number_group`` the collator
cannot see where a digit-tokenised number ends; it then refuses (``ValueError``) to cut within two tokens of a digit
token when ``digit_token_ids`` is set (digits mode); a [NUM] is a single token and is never split.

T5: the decoder reads the labels shifted right, and so are their number tensors. The adapter does that shift
(`numadapter.tuner.alignment.shift_right_numbers`, called from `NumberAdapterModel.forward` when no
``decoder_input_ids`` are given), so the collator returns the label side unshifted and no ``decoder_*`` keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from numadapter.data.answer_format import check_answer_format, seq2seq_answer_cut, shift_example
from numadapter.data.checks import warn_cut_examples
from numadapter.methods.registry import get_method
from numadapter.schema import (  # noqa: F401  (IGNORE_INDEX, SIDE_FIELDS, LABEL_PREFIX: re-exported, public before)
    GROUP_FIELD,
    IGNORE_INDEX,
    KIND_FIELD,
    LABEL_PREFIX,
    SIDE_FIELDS,
    SPAN_FIELD,
    SPARSE_FIELDS,
    dense_rows,
    group_spans,
    is_sparse,
)

TRUNCATION_MODES = ("keep_start", "keep_end")
PADDING_SIDES = ("left", "right")
# Columns the collator reads (both forms of the numbers); trainers keep them when they remove unused columns.
NUMBER_COLUMNS = (*SIDE_FIELDS, GROUP_FIELD, *SPARSE_FIELDS, SPAN_FIELD, KIND_FIELD)
CAUSAL_COLUMNS = ("input_ids", "attention_mask", "labels", "completion_mask", *NUMBER_COLUMNS)
SEQ2SEQ_COLUMNS = CAUSAL_COLUMNS + tuple(LABEL_PREFIX + name for name in NUMBER_COLUMNS)


_LOST = "__completion_lost__"  # set on an example whose completion the max_length cut removed


def _scores(labels: Sequence[int] | None) -> bool:
    """Whether `labels` hold a scored (not -100) label."""
    return labels is not None and any(label != IGNORE_INDEX for label in labels)


def safe_slice(
    length: int,
    max_length: int,
    mode: str,
    group: Sequence[int] | None = None,
    ids: Sequence[int] | None = None,
    digit_token_ids: Sequence[int] | None = None,
    where: str = "an example",
) -> slice:
    """The slice that truncates a sequence of `length` tokens to at most `max_length` without splitting a number.

    Args:
        length: tokens in the sequence.
        max_length: the limit (>= 1).
        mode: ``"keep_start"`` (drop the end) or ``"keep_end"`` (drop the start).
        group: the ``number_group`` column (see the module docstring), or None / empty when unknown.
        ids: the token ids (only read without `group`, for the digit-token check).
        digit_token_ids: the "0".."9" ids in digits mode (None: numbers are single [NUM] tokens).
        where: names the example in error messages.

    Returns:
        ``slice(start, stop)`` with ``stop - start <= max_length``; a number cut by the limit is left out whole.

    Raises:
        ValueError: one number is longer than `max_length`, or (without `group`, digits mode) the cut is next to
            a digit token.
    """
    if length <= max_length:
        return slice(0, length)
    cut = max_length if mode == "keep_start" else length - max_length  # first dropped / first kept token
    if group:
        for first, stop in group_spans(group):
            if first < cut < stop:
                if stop - first > max_length:
                    raise ValueError(
                        f"{where}: a number spans {stop - first} tokens (positions {first}-{stop - 1}), more than "
                        f"max_length={max_length}: raise `max_length`."
                    )
                cut = first if mode == "keep_start" else stop
                break
    elif digit_token_ids is not None and ids is not None:
        digits = set(digit_token_ids)
        near = [t for t in range(max(cut - 2, 0), min(cut + 2, length)) if ids[t] in digits]
        if near:
            raise ValueError(
                f"{where}: truncating {length} tokens to max_length={max_length} cuts at position {cut}, next to the "
                f"digit token(s) at {near}, and the example has no `{GROUP_FIELD}` column to tell where its numbers "
                "end: prepare the data with numadapter.data.prepare_dataset (which records number spans, so a number "
                "cut by the limit is dropped whole) or raise `max_length`."
            )
    return slice(0, cut) if mode == "keep_start" else slice(cut, length)


def _column(example: Mapping[str, Any], key: str, length: int, default: Any, where: str) -> list:
    value = example.get(key)
    if value is None:
        return [default() if callable(default) else default for _ in range(length)]
    value = value.tolist() if hasattr(value, "tolist") else list(value)
    if len(value) != length:
        raise ValueError(
            f"{where}: `{key}` has {len(value)} entries but its ids have {length}: the number columns must be aligned "
            "one row per token (tokenize with NumberTokenizer / numadapter.data.prepare_dataset)."
        )
    return value


def _side_rows(example: Mapping[str, Any], prefix: str, length: int, places: int, where: str) -> dict[str, list]:
    """The `prefix` side's number columns as dense per-token lists (sparse rows are densified here)."""
    if is_sparse(example, prefix):
        return dense_rows(example, prefix, length, places, where)
    rows = {
        "num_mask": _column(example, prefix + "num_mask", length, 0, where),
        "num_digits": _column(example, prefix + "num_digits", length, lambda: [0] * places, where),
        "num_sign": _column(example, prefix + "num_sign", length, 0, where),
        "num_values": _column(example, prefix + "num_values", length, 0.0, where),
    }
    bad = next((row for row in rows["num_digits"] if len(row) != places), None)
    if bad is not None:
        raise ValueError(
            f"{where}: `{prefix}num_digits` rows have {len(bad)} places, but the collator was built for num_places="
            f"{places} (int_digits + frac_digits): build it with the config the data was tokenized with."
        )
    group = example.get(prefix + GROUP_FIELD)
    rows[GROUP_FIELD] = _column(example, prefix + GROUP_FIELD, length, 0, where) if group else []
    return rows


@dataclass
class NumberDataCollator:
    """Pads (left or right) and truncates ids, labels and number side tensors together; completion-only labels.

    Args:
        pad_token_id: the id padded ``input_ids`` get (labels get -100, number columns 0).
        num_places: P = int_digits + frac_digits (the width of ``num_digits``).
        completion_only_loss: labels are -100 where ``completion_mask`` is 0 (when the example has one).
        padding_side: ``"right"`` or ``"left"`` for ``input_ids`` (T5 labels are always right-padded: the decoder
            reads them left to right from its start token).
        pad_to_multiple_of: round the padded length up to a multiple of this.
        max_length: truncate ``input_ids`` (and every aligned column) to this many tokens (None: no truncation).
            The first batch in which the cut takes an example's every scored label warns with their count.
        truncation_mode: ``"keep_start"`` or ``"keep_end"``; a number the cut would split is dropped whole.
        seq2seq: T5 examples (``labels`` + ``labels_num_*`` are the target side; see the module docstring).
        max_target_length: truncate the T5 labels to this many tokens (keep_start).
        digit_token_ids: the "0".."9" token ids in ``encoding="digits"`` (for the check without ``number_group``).
        answer_format: ``"sequence"`` (default) or ``"head"``: one-number answers trained at the number head without
            being fed (`numadapter.data.answer_format`). Causal batches then carry ``shift_labels`` and
            ``labels_num_*`` (``[B, T]``, ``[B, T, P]``) next to ``labels``; pass the model ``shift_labels``.
        eos_token_ids: the ids that may follow a one-number answer (``answer_format="head"``).

    Returns (``__call__``):
        A dict of tensors: ``input_ids`` / ``attention_mask`` / ``labels`` [B, T] int64, ``num_mask`` [B, T] int64,
        ``num_digits`` [B, T, P] int64, ``num_sign`` [B, T] int64, ``num_values`` [B, T] float32; with ``seq2seq``
        also ``labels_num_mask`` / ``labels_num_digits`` / ``labels_num_sign`` / ``labels_num_values`` aligned with
        ``labels`` [B, L].

    Example (P = 2; the second example is right-padded; the prompt token of each example gets label -100):

    >>> collator = NumberDataCollator(pad_token_id=0, num_places=2)
    >>> examples = [
    ...     {"input_ids": [5, 9, 7], "completion_mask": [0, 1, 1], "num_mask": [0, 1, 0],
    ...      "num_digits": [[0, 0], [4, 2], [0, 0]], "num_sign": [0, 1, 0], "num_values": [0.0, 42.0, 0.0]},
    ...     {"input_ids": [5, 6], "completion_mask": [0, 1]},
    ... ]
    >>> batch = collator(examples)
    >>> batch["input_ids"]
    tensor([[5, 9, 7],
            [5, 6, 0]])
    >>> batch["attention_mask"]
    tensor([[1, 1, 1],
            [1, 1, 0]])
    >>> batch["labels"]
    tensor([[-100,    9,    7],
            [-100,    6, -100]])
    >>> batch["num_mask"]
    tensor([[0, 1, 0],
            [0, 0, 0]])
    >>> batch["num_digits"][0]
    tensor([[0, 0],
            [4, 2],
            [0, 0]])
    >>> batch["num_values"]
    tensor([[ 0., 42.,  0.],
            [ 0.,  0.,  0.]])
    >>> left = NumberDataCollator(pad_token_id=0, num_places=2, padding_side="left")
    >>> left(examples)["num_mask"]
    tensor([[0, 1, 0],
            [0, 0, 0]])
    >>> left(examples)["input_ids"]
    tensor([[5, 9, 7],
            [0, 5, 6]])
    """

    pad_token_id: int
    num_places: int
    completion_only_loss: bool = True
    padding_side: str = "right"
    pad_to_multiple_of: int | None = None
    max_length: int | None = None
    truncation_mode: str = "keep_start"
    seq2seq: bool = False
    max_target_length: int | None = None
    digit_token_ids: Sequence[int] | None = None
    answer_format: str = "sequence"
    eos_token_ids: Sequence[int] | None = None

    def __post_init__(self) -> None:
        check_answer_format(self.answer_format)
        if self.answer_format == "head" and self.digit_token_ids is not None:
            raise ValueError(
                "answer_format='head' trains a one-number answer at the number head, and encoding='digits' has none: "
                "use answer_format='sequence'."
            )
        if self.pad_token_id is None:
            raise ValueError(
                "NumberDataCollator needs a pad token id, got None: set tokenizer.pad_token (e.g. to the eos token)."
            )
        if self.padding_side not in PADDING_SIDES:
            raise ValueError(f"`padding_side` must be 'left' or 'right', got {self.padding_side!r}.")
        if self.truncation_mode not in TRUNCATION_MODES:
            raise ValueError(f"`truncation_mode` must be 'keep_start' or 'keep_end', got {self.truncation_mode!r}.")
        for name in ("max_length", "max_target_length", "pad_to_multiple_of"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"`{name}` must be a positive integer or None, got {value!r}.")
        if not isinstance(self.num_places, int) or self.num_places < 1:
            raise ValueError(
                f"`num_places` must be a positive integer (int_digits + frac_digits), got {self.num_places}."
            )

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, **kwargs: Any) -> NumberDataCollator:
        """A collator for a `NumberTokenizer`: its pad id, P, padding side and (digits mode) digit token ids.

        Args:
            tokenizer: the `numadapter.tokenization.NumberTokenizer` the data was encoded with.
            **kwargs: any other field of the collator (they override what the tokenizer gives).
        """
        config = tokenizer.config
        settings: dict[str, Any] = {
            "pad_token_id": tokenizer.pad_token_id,
            "num_places": config.num_places,
            "padding_side": tokenizer.padding_side,
            "eos_token_ids": [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [],
        }
        if not get_method(config).replaces_numbers(config):  # numbers as digit tokens: group them by digit ids
            settings["digit_token_ids"] = tokenizer.digit_token_ids
        settings.update(kwargs)
        return cls(**settings)

    # -- one example ---------------------------------------------------------------------------------------------
    def _source(self, example: Mapping[str, Any], index: int) -> dict[str, list]:
        where = f"Example {index}"
        if "input_ids" not in example:
            raise ValueError(
                f"{where} has no `input_ids` (keys: {sorted(example)}): tokenize it first with "
                "numadapter.data.prepare_dataset (the number trainers do this for you)."
            )
        ids = list(example["input_ids"].tolist() if hasattr(example["input_ids"], "tolist") else example["input_ids"])
        rows = _side_rows(example, "", len(ids), self.num_places, where)
        rows["input_ids"] = ids
        if not self.seq2seq:
            labels = _column(example, "labels", len(ids), None, where) if "labels" in example else list(ids)
            completion = example.get("completion_mask")
            if completion is not None and self.completion_only_loss:
                completion = _column(example, "completion_mask", len(ids), 0, where)
                labels = [label if keep else IGNORE_INDEX for label, keep in zip(labels, completion)]
            rows["labels"] = labels
        if self.max_length is not None:
            cut = safe_slice(
                len(ids), self.max_length, self.truncation_mode, rows[GROUP_FIELD], ids, self.digit_token_ids, where
            )
            scored = _scores(rows.get("labels"))
            rows = {key: value[cut] if value else value for key, value in rows.items()}
            lost = scored and not _scores(rows.get("labels"))
        else:
            lost = False
        if self.answer_format == "head" and not self.seq2seq:
            rows = shift_example(rows, self.eos_token_ids or [])
        if lost:
            rows[_LOST] = True  # the cut took every scored label: counted and removed by __call__
        return rows

    def _target(self, example: Mapping[str, Any], index: int) -> dict[str, list]:
        where = f"Example {index} (labels)"
        if "labels" not in example:
            raise ValueError(
                f"Example {index} has no `labels` (keys: {sorted(example)}): a sequence-to-sequence example needs the "
                "target ids as `labels` (numadapter.data.prepare_dataset(..., seq2seq=True) builds them)."
            )
        labels = example["labels"]
        labels = list(labels.tolist() if hasattr(labels, "tolist") else labels)
        rows = _side_rows(example, LABEL_PREFIX, len(labels), self.num_places, where)
        rows["labels"] = labels
        if self.max_target_length is not None:
            limit, group, digit_ids = self.max_target_length, rows[GROUP_FIELD], self.digit_token_ids
            cut = safe_slice(len(labels), limit, "keep_start", group, labels, digit_ids, where)
            scored = _scores(rows.get("labels"))
            rows = {key: value[cut] if value else value for key, value in rows.items()}
            if scored and not _scores(rows.get("labels")):
                rows[_LOST] = True  # the cut took every scored label: counted and removed by __call__
        if self.answer_format == "head":
            rows = seq2seq_answer_cut(rows, self.eos_token_ids or [])
        return rows

    # -- padding -------------------------------------------------------------------------------------------------
    def _padded_length(self, lengths: list[int]) -> int:
        longest = max(lengths) if lengths else 0
        multiple = self.pad_to_multiple_of
        if multiple:
            longest = -(-longest // multiple) * multiple
        return longest

    def _pad(self, rows: list[dict[str, list]], side: str, id_key: str, id_pad: int, prefix: str) -> dict:
        length = self._padded_length([len(r[id_key]) for r in rows])
        batch, places = len(rows), self.num_places
        ids = torch.full((batch, length), id_pad, dtype=torch.long)
        num_mask = torch.zeros((batch, length), dtype=torch.long)
        num_digits = torch.zeros((batch, length, places), dtype=torch.long)
        num_sign = torch.zeros((batch, length), dtype=torch.long)
        num_values = torch.zeros((batch, length), dtype=torch.float32)
        attention = torch.zeros((batch, length), dtype=torch.long)
        labels = torch.full((batch, length), IGNORE_INDEX, dtype=torch.long) if "labels" in rows[0] else None
        for b, row in enumerate(rows):
            n = len(row[id_key])
            span = slice(0, n) if side == "right" else slice(length - n, length)
            ids[b, span] = torch.tensor(row[id_key], dtype=torch.long)
            attention[b, span] = 1
            if n:
                num_mask[b, span] = torch.tensor(row["num_mask"], dtype=torch.long)
                num_digits[b, span] = torch.tensor(row["num_digits"], dtype=torch.long).view(n, places)  # (n, P)
                num_sign[b, span] = torch.tensor(row["num_sign"], dtype=torch.long)
                num_values[b, span] = torch.tensor(row["num_values"], dtype=torch.float32)
            if labels is not None and id_key != "labels":
                labels[b, span] = torch.tensor(row["labels"], dtype=torch.long)
        out = {
            id_key: ids,
            prefix + "num_mask": num_mask,
            prefix + "num_digits": num_digits,
            prefix + "num_sign": num_sign,
            prefix + "num_values": num_values,
        }
        if id_key == "input_ids":
            out["attention_mask"] = attention
            if labels is not None:
                out["labels"] = labels
            if "shift_labels" in rows[0]:  # answer_format="head": padded like the target side of T5
                targets = [
                    {"labels": r["shift_labels"], **{k: r[LABEL_PREFIX + k] for k in SIDE_FIELDS}} for r in rows
                ]
                shifted = self._pad(targets, side, "labels", IGNORE_INDEX, LABEL_PREFIX)
                out["shift_labels"] = shifted.pop("labels")
                out.update(shifted)
        return out

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """Collates a list of examples into one padded batch (see the class docstring)."""
        if not examples:
            raise ValueError("NumberDataCollator got an empty list of examples.")
        sources = [self._source(example, i) for i, example in enumerate(examples)]
        lost = sum(source.pop(_LOST, False) for source in sources)
        if lost and not self.__dict__.get("_warned_lost"):  # once per collator: the first batch that loses one
            self._warned_lost = True
            what = "of this batch lost their whole completion (later batches are not reported)"
            warn_cut_examples(lost, len(examples), what, self.max_length, self.truncation_mode)
        batch = self._pad(sources, self.padding_side, "input_ids", self.pad_token_id, "")
        if self.seq2seq:
            targets = [self._target(example, i) for i, example in enumerate(examples)]
            batch.update(self._pad(targets, "right", "labels", IGNORE_INDEX, LABEL_PREFIX))
        return batch
