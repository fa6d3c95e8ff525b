"""Binding the trainers' inputs: the numadapter `PeftModel` and its `NumberTokenizer`, completion-only, datasets.

`_bind` checks (and when asked, builds) the model a number trainer trains and wraps its tokenizer; the tokenizer must
match the adapter's config (`numadapter.tokenization.matching.check_tokenizer_matches`).
"""

from __future__ import annotations

import warnings
from typing import Any

from peft import PeftModel

from numadapter.config import NumberAdapterConfig
from numadapter.data.checks import first_example
from numadapter.methods.registry import get_method
from numadapter.tokenization.matching import check_tokenizer_matches
from numadapter.tokenization.tokenizer import NumberTokenizer
from numadapter.training.head_choice import own_decision


def _bind(model: Any, processing_class: Any, peft_config: NumberAdapterConfig | None) -> tuple[PeftModel, Any]:
    """The numadapter PeftModel and its NumberTokenizer (wrapping the model with `peft_config` when given)."""
    from numadapter.mapping import get_peft_model

    if isinstance(model, str):
        raise TypeError(
            f"numadapter trainers take a model object, got the string {model!r}: load it with from_pretrained and "
            "wrap it with numadapter.get_peft_model (or pass peft_config=NumberAdapterConfig(...))."
        )
    if processing_class is None:
        raise ValueError(
            "numadapter trainers need `processing_class`: a NumberTokenizer (or the model's tokenizer, which is then "
            "wrapped in a NumberTokenizer with the adapter's config)."
        )
    if peft_config is not None:
        if not isinstance(peft_config, NumberAdapterConfig):
            raise TypeError(f"`peft_config` must be a NumberAdapterConfig, got {type(peft_config).__name__}.")
        if isinstance(model, PeftModel):
            raise ValueError("Pass either a PeftModel or a base model with `peft_config`, not both.")
        model = get_peft_model(model, peft_config, tokenizer=processing_class)
    config = model.peft_config.get(model.active_adapter) if isinstance(model, PeftModel) else None
    if not isinstance(config, NumberAdapterConfig):
        raise TypeError(
            f"numadapter trainers train a numadapter PeftModel, got {type(model).__name__}: wrap the model with "
            "numadapter.get_peft_model(model, NumberAdapterConfig(...), tokenizer=tokenizer), or pass "
            "peft_config=NumberAdapterConfig(...)."
        )
    ntok = processing_class
    if not isinstance(ntok, NumberTokenizer):
        ntok = NumberTokenizer(processing_class, config)
    own_decision(model, ntok)  # a decision to make goes on the model's own config, never on the caller's
    check_tokenizer_matches(ntok, model.peft_config[model.active_adapter], "the number trainer", "processing_class")
    warn_untrained_settings(config)
    return model, ntok


def _completion_only(args_value: bool | None, dataset: Any) -> bool:
    """TRL's rule: None means True for prompt-completion data, False otherwise."""
    if args_value is not None:
        return bool(args_value)
    return first_example(dataset, "train_dataset").keys() >= {"prompt", "completion"}


def _map_datasets(datasets: Any, fn) -> Any:
    if datasets is None or isinstance(datasets, str):
        return datasets
    if isinstance(datasets, dict):
        return {name: fn(dataset) for name, dataset in datasets.items()}
    return fn(datasets)


def warn_untrained_settings(config: NumberAdapterConfig) -> None:
    """Gives the method's warnings about settings that train nothing (`NumberMethod.training_warnings`: ``ntl_weight
    > 0`` with FoNE's context head, `numadapter.methods.fone.fone_ntl`)."""
    for message in get_method(config).training_warnings(config):
        warnings.warn(message, stacklevel=3)
