"""The config classes vLLM reads a marked export's ``config.json`` with.

vLLM builds its Llama model from a transformers ``LlamaConfig`` (its RoPE settings, head size, defaults). A marked
export says ``model_type: "numadapter-llama"``, which transformers only knows after ``import numadapter``, and then as
`numadapter.serving.auto.NumberExportConfig`, a plain bag of fields. In a vLLM process the plugin maps each marked
model_type to its family's own config class under numadapter's name instead, in vLLM's table of config classes and
in transformers' ``AutoConfig`` (the last registration wins, so it is made again each time `register` runs).

Reading a marked config also tells the process that it serves a numadapter export (`serves_export`): vLLM's front end
reads the config but never builds the model, and the logits processor checks each request's sampling settings there.
"""

from __future__ import annotations

from typing import Any

from transformers import (
    AutoConfig,
    GraniteConfig,
    LlamaConfig,
    MistralConfig,
    PreTrainedConfig,
    Qwen2Config,
    T5Config,
)

from numadapter.serving.marking import marked_model_type

_SEEN = {"export": False}


def serves_export() -> bool:
    """Whether this process has read a marked export's config (vLLM's front end and engine serving one do)."""
    return _SEEN["export"]


class MarkedConfig:
    """Notes, when built, that this process serves a numadapter export (`serves_export`). (transformers generates
    each config class's ``__init__`` as a dataclass's, which calls ``__post_init__``.)"""

    def __post_init__(self, *args: Any, **kwargs: Any) -> None:
        super().__post_init__(*args, **kwargs)
        _SEEN["export"] = True


class NumberLlamaConfig(MarkedConfig, LlamaConfig):
    model_type = marked_model_type("llama")


class NumberMistralConfig(MarkedConfig, MistralConfig):
    model_type = marked_model_type("mistral")


class NumberQwen2Config(MarkedConfig, Qwen2Config):
    model_type = marked_model_type("qwen2")


class NumberGraniteConfig(MarkedConfig, GraniteConfig):
    model_type = marked_model_type("granite")


class NumberT5Config(MarkedConfig, T5Config):
    model_type = marked_model_type("t5")


# one class per family numadapter marks (numadapter.serving.auto.FAMILIES), named at module level: vLLM pickles the
# config into its engine process
MARKED_CONFIGS: dict[str, type[PreTrainedConfig]] = {
    cls.model_type: cls
    for cls in (NumberLlamaConfig, NumberMistralConfig, NumberQwen2Config, NumberGraniteConfig, NumberT5Config)
}


def register_configs() -> None:
    """Registers every marked model_type with vLLM's config table and transformers' ``AutoConfig``."""
    from vllm.transformers_utils import config as vllm_config

    for model_type, cls in MARKED_CONFIGS.items():
        vllm_config._CONFIG_REGISTRY[model_type] = cls
        AutoConfig.register(model_type, cls, exist_ok=True)
