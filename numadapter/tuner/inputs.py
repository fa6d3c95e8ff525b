"""Validation of the number tensors against the token ids, and the per-call plan (sides, targets, labels).

The tensors NumberTokenizer and the collator produce are checked before the model runs: shapes, dtypes, and above all
that ``num_mask`` is exactly ``input_ids == marker`` (the [NUM] id, or [AGG] with digits + aggregate). Any other state
means some transform (padding, truncation, shifting) touched the ids but not the number tensors, so the error is raised
instead of attaching numbers to the wrong tokens (docs/DESIGN.md, "Bad input never corrupts silently"). All content
checks are reduced on the device and read back with one host sync.

Names of the keyword arguments `NumberAdapterModel.forward` accepts:

- ``num_mask``, ``num_digits``, ``num_sign``, ``num_values``: aligned with ``input_ids`` (causal LM input, T5
  encoder input).
- ``labels_num_mask``, ``labels_num_digits``, ``labels_num_sign``, ``labels_num_values`` (T5): aligned with
  ``labels``; the number-head targets, and (shifted right, like the labels) the decoder-input numbers when
  ``decoder_input_ids`` is not given. Causal LMs take them with ``shift_labels`` (labels aligned with the logits):
  the number-head targets at the same positions.
- ``decoder_num_mask``, ... (T5): aligned with an explicit ``decoder_input_ids`` (generation).
- ``number_texts`` (a list, from the tokenizer) is accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from numadapter.config import NumberAdapterConfig
from numadapter.methods.base import NumberPlan
from numadapter.methods.fone.answer_mode import answers_mode
from numadapter.methods.registry import get_method
from numadapter.schema import FIELDS, NUMBER_KWARGS, NUMBER_TEXTS, PREFIXES, NumberInputs  # noqa: F401
from numadapter.tuner.alignment import (
    NumberTargets,
    causal_lm_labels,
    causal_targets,
    seq2seq_targets,
    shift_right_numbers,
)


def needed_fields(config: NumberAdapterConfig) -> tuple[str, ...]:
    """The number tensors (short names, e.g. ``"digits"``) the model reads besides ``mask`` for `config`.

    Asked of the encoding's number method (`numadapter.methods.NumberMethod.fields`): fone reads the digits (and the
    sign with ``sign_policy="feature"``), xval the values, digits + aggregate the digits.
    """
    return tuple(get_method(config).fields(config))


def pop_number_kwargs(kwargs: dict) -> dict[str, dict[str, torch.Tensor]]:
    """Removes the number keyword arguments from `kwargs`; returns ``{side: {field: tensor}}`` for given ones."""
    out: dict[str, dict[str, torch.Tensor]] = {}
    for side, prefix in PREFIXES.items():
        fields = {field: kwargs.pop(prefix + field) for field in FIELDS if kwargs.get(prefix + field) is not None}
        for field in FIELDS:
            kwargs.pop(prefix + field, None)
        if fields:
            out[side] = fields
    kwargs.pop(NUMBER_TEXTS, None)
    return out


class _Checks:
    """Collects device-side boolean checks and reads them back with a single sync."""

    def __init__(self) -> None:
        self.items: list[tuple[torch.Tensor, Callable[[], str]]] = []

    def add(self, bad: torch.Tensor, message: Callable[[], str]) -> None:
        self.items.append((bad, message))

    def run(self) -> None:
        if not self.items:
            return
        device = self.items[0][0].device
        result = torch.stack([bad.any().to(device) for bad, _ in self.items]).tolist()  # the one host sync
        for (_, message), failed in zip(self.items, result):
            if failed:
                raise ValueError(message())


def _locate(side: NumberInputs) -> bool:
    """Stores the number positions of a validated side (``side.index``); returns whether it has any."""
    side.index = (side.mask != 0).nonzero(as_tuple=True)  # ((N,), (N,)), host-known N
    side.has_numbers = side.index[0].numel() > 0
    return side.has_numbers


def _first(bad: torch.Tensor) -> tuple[int, ...]:
    return tuple(bad.nonzero()[0].tolist())


def _side(
    name: str,
    ids: torch.Tensor,
    given: dict[str, torch.Tensor] | None,
    config: NumberAdapterConfig,
    marker: int | None,
    checks: _Checks,
) -> NumberInputs | None:
    """Validates one side's tensors against its ids (shapes now, contents via `checks`)."""
    labels_side = name in ("labels", "shift_labels")
    prefix = PREFIXES["labels" if labels_side else ("input" if name in ("input", "encoder") else "decoder")]
    ids_name = {"input": "input_ids", "encoder": "input_ids", "decoder": "decoder_input_ids"}.get(name, name)
    token = get_method(config).marker_token(config)
    if marker is None:  # plain digits: no number tokens, nothing may be marked
        if given and "mask" in given:
            mask = given["mask"]
            checks.add(
                mask != 0,
                lambda: (
                    f"`{prefix}mask` marks numbers, but encoding='digits' without aggregate "
                    "has no number tokens: drop the number tensors or set aggregate=True."
                ),
            )
        return None
    is_marker = ids == marker  # (B, T)
    if not given:
        checks.add(
            is_marker,
            lambda: (
                f"`{ids_name}` contains {token} (id {marker}) at {_first(is_marker)} but no `{prefix}mask` / "
                f"`{prefix}digits` were passed: encode with NumberTokenizer and pass its number tensors to the model."
            ),
        )
        return None
    if "mask" not in given:
        raise ValueError(f"`{prefix}mask` is missing (got {sorted(prefix + k for k in given)}); pass all of them.")
    mask = given["mask"]
    places = config.num_places
    expected = {
        "mask": tuple(ids.shape),
        "digits": (*ids.shape, places),
        "sign": tuple(ids.shape),
        "values": tuple(ids.shape),
    }
    for field, tensor in given.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"`{prefix}{field}` must be a torch.Tensor, got {type(tensor).__name__}.")
        if tuple(tensor.shape) != expected[field]:
            hint = f" (P = int_digits + frac_digits = {places})" if field == "digits" else ""
            raise ValueError(
                f"`{prefix}{field}` has shape {tuple(tensor.shape)} but `{ids_name}` has shape {tuple(ids.shape)}, so "
                f"it must be {expected[field]}{hint}: pad / truncate / shift the number tensors together with the ids "
                "(NumberTokenizer and the number collator do)."
            )
        if field != "values" and tensor.dtype.is_floating_point:
            raise TypeError(f"`{prefix}{field}` must be an integer tensor, got dtype {tensor.dtype}.")
    missing = [prefix + field for field in needed_fields(config) if field not in given]
    if missing:
        raise ValueError(f"encoding={config.encoding!r} needs {missing}; got {sorted(prefix + k for k in given)}.")
    flagged = mask != 0
    in_digits = answers_mode(config)  # numbers may stay digit tokens and still be marked (num_mask 2)
    mismatch = ((mask == 1) if in_digits else flagged) != is_marker
    also = " (1 at each marker, 2 at the last token of a number left in digits)" if in_digits else ""
    checks.add(
        mismatch,
        lambda: (
            f"`{prefix}mask` does not match the {token} positions of `{ids_name}` (id {marker}){also}: first "
            f"mismatch at {_first(mismatch)}, where the id is {ids[_first(mismatch)].item()} and the mask "
            f"{mask[_first(mismatch)].item()}; {int(mismatch.sum())} position(s) differ. Numbers would attach to the "
            "wrong tokens: apply every padding / truncation / shift of the ids to the number tensors too."
        ),
    )
    if in_digits:
        odd = (mask < 0) | (mask > 2)
        checks.add(
            odd,
            lambda: (
                f"`{prefix}mask` is {mask[_first(odd)].item()} at {_first(odd)}: with fone_numbers='answers' it must "
                "be 0, 1 ([NUM]) or 2 (the last token of a number written in digits), as NumberTokenizer gives it."
            ),
        )
    if "digits" in given:
        digits = given["digits"]
        bad = flagged.unsqueeze(-1) & ((digits < 0) | (digits > 9))
        checks.add(
            bad,
            lambda: (
                f"`{prefix}digits` holds {digits[_first(bad)[:2]].tolist()} at number position "
                f"{_first(bad)[:2]}: place digits must be 0..9."
            ),
        )
    if "sign" in needed_fields(config):  # the modules read the sign: it must be +1 / -1 at every number
        sign = given["sign"]
        bad_sign = flagged & (sign.abs() != 1)
        checks.add(
            bad_sign,
            lambda: (
                f"`{prefix}sign` is {sign[_first(bad_sign)].item()} at number position "
                f"{_first(bad_sign)}: it must be +1 or -1 there (sign_policy='feature')."
            ),
        )
    return NumberInputs(mask=mask, digits=given.get("digits"), sign=given.get("sign"), values=given.get("values"))


def plan_causal(
    config: NumberAdapterConfig,
    marker: int | None,
    input_ids: torch.Tensor | None,
    labels: torch.Tensor | None,
    given: dict[str, dict[str, torch.Tensor]],
    with_head: bool,
    shifted: bool = False,
) -> NumberPlan:
    """Validates and aligns a causal-LM call.

    `labels` aligned with `input_ids` (shifted inside, `alignment.causal_targets`), or with `shifted` aligned with
    the logits (``shift_labels``; the number targets are then the ``labels_num_*`` tensors at the same positions,
    `alignment.seq2seq_targets`).
    """
    allowed = {"input", "labels"} if shifted else {"input"}
    if set(given) - allowed:
        hint = "" if shifted else " (`labels_num_*` go with `shift_labels`)"
        raise ValueError(f"a causal LM takes `num_*` tensors only{hint}, got {sorted(given)} side tensors.")
    if input_ids is None:
        if given:
            raise ValueError("number tensors need `input_ids` (they are aligned with them), got inputs_embeds only.")
        lm_labels = None if labels is None else (labels if shifted else causal_lm_labels(labels))
        return NumberPlan(sides={}, lm_labels=lm_labels)
    checks = _Checks()
    side = _side("input", input_ids, given.get("input"), config, marker, checks)
    targets = None
    if shifted:
        targets = _shifted_targets(config, marker, input_ids, labels, given.get("labels"), with_head, checks)
        lm_labels = labels
    else:
        if labels is not None:
            _check_labels(marker, input_ids, labels, checks)
        if side is not None and labels is not None and with_head:
            targets = causal_targets(labels, marker, side)
        lm_labels = None if labels is None else causal_lm_labels(labels)
    checks.run()
    sides = {"input": side} if side is not None and _locate(side) else {}
    plan = NumberPlan(sides=sides, targets=targets, lm_labels=lm_labels)
    if targets is not None:
        plan.target_index = targets.mask.nonzero(as_tuple=True)
    return plan


def _check_labels(marker: int | None, input_ids: torch.Tensor, labels: torch.Tensor, checks: _Checks) -> None:
    """`labels` aligned with `input_ids`: same shape, and a [NUM] label only where the input has that [NUM]."""
    if labels.shape != input_ids.shape:
        raise ValueError(f"`labels` has shape {tuple(labels.shape)}, `input_ids` {tuple(input_ids.shape)}.")
    if marker is not None:
        orphan = (labels == marker) & (input_ids != marker)
        checks.add(
            orphan,
            lambda: (
                f"`labels` has the number token (id {marker}) at {_first(orphan)} where "
                "`input_ids` does not, so its number is unknown: labels must be a (masked) copy of input_ids."
            ),
        )


def _shifted_targets(
    config: NumberAdapterConfig,
    marker: int | None,
    input_ids: torch.Tensor,
    shift_labels: torch.Tensor,
    given: dict[str, torch.Tensor] | None,
    with_head: bool,
    checks: _Checks,
) -> NumberTargets | None:
    """The number targets of a causal call with ``shift_labels``: read at the same position from ``labels_num_*``."""
    if shift_labels.shape != input_ids.shape:
        raise ValueError(
            f"`shift_labels` has shape {tuple(shift_labels.shape)}, `input_ids` {tuple(input_ids.shape)}: "
            "shift_labels[:, t] is the label of logits[:, t], one per input position."
        )
    label_side = _side("shift_labels", shift_labels, given, config, marker, checks)
    return seq2seq_targets(shift_labels, marker, label_side) if label_side is not None and with_head else None


def plan_seq2seq(
    config: NumberAdapterConfig,
    marker: int | None,
    input_ids: torch.Tensor | None,
    decoder_input_ids: torch.Tensor | None,
    labels: torch.Tensor | None,
    given: dict[str, dict[str, torch.Tensor]],
    with_head: bool,
    shift_right: Callable[[torch.Tensor], torch.Tensor],
) -> NumberPlan:
    """Validates and aligns a T5 call (see `alignment.seq2seq_targets` and `alignment.shift_right_numbers`)."""
    checks = _Checks()
    sides: dict[str, NumberInputs] = {}
    encoder = (
        _side("encoder", input_ids, given.get("input"), config, marker, checks) if input_ids is not None else None
    )
    label_side = _side("labels", labels, given.get("labels"), config, marker, checks) if labels is not None else None
    derived = None
    if decoder_input_ids is not None:
        decoder = _side("decoder", decoder_input_ids, given.get("decoder"), config, marker, checks)
    elif labels is not None:
        if "decoder" in given:
            raise ValueError("`decoder_num_*` were passed without `decoder_input_ids`; pass both or neither.")
        derived = shift_right(labels)
        decoder = shift_right_numbers(label_side, derived, marker) if label_side is not None else None
    else:
        decoder = None
    targets = seq2seq_targets(labels, marker, label_side) if label_side is not None and with_head else None
    checks.run()
    for name, side in (("encoder", encoder), ("decoder", decoder)):
        if side is not None and _locate(side):
            sides[name] = side
    plan = NumberPlan(sides=sides, targets=targets, lm_labels=labels, decoder_input_ids=derived)
    if targets is not None:
        plan.target_index = targets.mask.nonzero(as_tuple=True)
    return plan


def encoder_ids_for_outputs(
    encoder_outputs,
    input_ids: torch.Tensor | None,
    given: dict[str, dict[str, torch.Tensor]],
    marker: int | None,
    numbers_needed: bool,
) -> torch.Tensor | None:
    """The ids to validate T5's encoder number tensors against in a call given ``encoder_outputs``.

    The encoder does not run again, so its ids only serve to check ``num_*``: the `input_ids` passed beside
    ``encoder_outputs``, or else stand-in ids ``[B, T_enc]`` with the marker where ``num_mask`` is set (checked
    against the length of the encoder outputs).

    Args:
        encoder_outputs: the encoder's outputs (``last_hidden_state`` ``[B, T_enc, H]`` first).
        input_ids: the encoder's ids passed beside them, or None.
        given: the number tensors of the call (`pop_number_kwargs`).
        marker: the [NUM] id, or None.
        numbers_needed: the head reads the encoder's numbers (the context head, with no cache that holds them).

    Returns:
        The ids, or None when neither `input_ids` nor ``num_*`` were passed and the numbers are not needed.

    Raises:
        ValueError: the numbers are needed and unknown, ``num_*`` without ``num_mask``, or a ``num_mask`` whose shape
            is not the encoder outputs'.
    """
    if input_ids is not None:
        return input_ids
    if "input" not in given:
        if numbers_needed:
            raise ValueError(
                "T5 was called with `encoder_outputs` and without the encoder's number tensors, but this adapter's "
                "number head (fone_head_input='context') builds each number from the numbers before it, the "
                "encoder's included: pass the encoder-side `num_mask`, `num_digits` and `num_sign` that "
                "NumberTokenizer gave with the encoder's input_ids beside `encoder_outputs` (with or without those "
                "`input_ids`), or call the model with `input_ids` instead."
            )
        return None
    mask = given["input"].get("mask")
    if mask is None:
        got = sorted("num_" + k for k in given["input"])
        raise ValueError(f"`num_mask` is missing (got {got}); pass all of them.")
    positions = tuple(encoder_outputs[0].shape[:2])  # last_hidden_state (B, T_enc)
    if tuple(mask.shape) != positions:
        raise ValueError(
            f"`num_mask` has shape {tuple(mask.shape)} but `encoder_outputs` hold {positions} positions: beside "
            "`encoder_outputs` pass the number tensors NumberTokenizer gave with the encoder's input_ids."
        )
    return torch.where(mask != 0, -1 if marker is None else marker, -1)
