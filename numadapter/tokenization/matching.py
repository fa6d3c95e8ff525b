"""Whether a `NumberTokenizer` and an adapter config agree: the one check of the config <-> tokenizer binding.

The tokenizer writes the side tensors with its config's number settings and token ids; the model's modules read
them with the adapter's. `check_tokenizer_matches` is the only place that compares the two, and every place that
pairs them calls it: `NumberTokenizer` itself (built around a config already bound to token ids),
`numadapter.get_peft_model`, the trainers, generation and export. `NumberAdapterConfig.validate_model_binding` checks
the config's own values only (ids and sizes in range), with no tokenizer at hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numadapter.config import ANSWERS, BOUND_ID, MATCHED, NumberAdapterConfig, fields_with
from numadapter.methods.fone.answer_mode import (
    answers_mode,
    context_count,
    context_products,
    fone_numbers_in_effect,
    head_in_use,
)
from numadapter.methods.registry import get_method

__all__ = ["ANSWER_FIELDS", "MATCHED_FIELDS", "MATCHED_IDS", "check_tokenizer_matches", "tokenizer_mismatches"]

# Config fields the side tensors depend on: the tokenizer writes them, the model's modules read them.
MATCHED_FIELDS = fields_with(MATCHED)
# FoNE fields that decide which numbers become [NUM] (compared when both use FoNE and either writes only answers)
ANSWER_FIELDS = fields_with(ANSWERS)
# Token ids the config records when it is bound to a tokenizer (compared once the config has them).
MATCHED_IDS = fields_with(BOUND_ID)


def tokenizer_mismatches(ntok: Any, config: Any) -> dict[str, tuple[Any, Any]]:
    """``{field: (tokenizer's value, config's value)}`` for every field on which `ntok` and `config` disagree.

    Compared: `MATCHED_FIELDS`, the method's own `NumberMethod.matched_fields` when both use the same encoding (the
    xVal normalisation), `ANSWER_FIELDS` when both use FoNE and either has ``fone_numbers="answers"`` (the
    tokenizer writes as [NUM] only the answers the context head forms from that many numbers), and the token ids
    of `MATCHED_IDS` where the config has one (a config not yet bound to a tokenizer has None there).
    """
    mine = ntok.config
    same = mine.encoding == config.encoding
    fields = MATCHED_FIELDS + (tuple(get_method(config).matched_fields(config)) if same else ())
    if same and (answers_mode(mine) or answers_mode(config)):  # both FoNE, either writing only answers
        fields += ANSWER_FIELDS

    def value(cfg: Any, name: str) -> Any:  # as in effect: fone_numbers 'auto', fone_context_products None, ...
        in_effect = {"fone_numbers": fone_numbers_in_effect, "fone_context_products": context_products,
                     "fone_head_in_use": head_in_use, "fone_context_numbers": context_count,
                     "fone_context_pointer": lambda c: bool(getattr(c, "fone_context_pointer", None))}  # fmt: skip
        return in_effect[name](cfg) if name in in_effect else getattr(cfg, name)

    differ = {name: (value(mine, name), value(config, name)) for name in fields}
    differ = {name: pair for name, pair in differ.items() if pair[0] != pair[1]}
    for name in MATCHED_IDS:
        theirs, ours = getattr(config, name, None), getattr(ntok, name, None)
        if theirs is not None and (list(ours) if isinstance(ours, Sequence) else ours) != (
            list(theirs) if isinstance(theirs, Sequence) else theirs
        ):
            differ[name] = (ours, theirs)
    return differ


def check_tokenizer_matches(ntok: Any, config: Any, where: str, argument: str = "number_tokenizer") -> None:
    """Raises unless `ntok` is a `NumberTokenizer` whose number settings and token ids agree with `config`.

    Args:
        ntok: the tokenizer given to `where`.
        config: the adapter's `NumberAdapterConfig`.
        where: the entry point, named in the error (``"export_merged"``, ``"numadapter.generate"``, ...).
        argument: the name of `ntok`'s argument there.

    Raises:
        TypeError: `ntok` is not a `NumberTokenizer` (an object with a `NumberAdapterConfig` as ``config`` and a
            wrapped ``tokenizer``).
        ValueError: a field disagrees; the message names each field with both values, and the fix.
    """
    if not isinstance(getattr(ntok, "config", None), NumberAdapterConfig) or not hasattr(ntok, "tokenizer"):
        raise TypeError(
            f"{where}: `{argument}` must be a numadapter NumberTokenizer, got {type(ntok).__name__}: build it with "
            "NumberTokenizer(tokenizer, config) using the adapter's config."
        )
    differ = tokenizer_mismatches(ntok, config)
    if differ:
        listed = "; ".join(
            f"{name}: tokenizer {ours!r}, adapter config {theirs!r}" for name, (ours, theirs) in differ.items()
        )
        raise ValueError(
            f"{where}: the NumberTokenizer does not match the adapter config on {sorted(differ)} ({listed}): the "
            "numbers would be encoded one way and read another. Build the NumberTokenizer with the adapter's config "
            "(NumberTokenizer(tokenizer, model.peft_config[adapter_name])) or load the one saved with the adapter "
            "(NumberTokenizer.from_pretrained(adapter_dir))."
        )
