"""``pipeline("text-generation")`` that carries the numbers when its model is a numadapter model.

transformers' text-generation pipeline passes ``model.generate`` the ids and mask only, so a numadapter model's
numbers cannot travel through it (`numadapter.generation.hf` refuses such ids). numadapter has a pipeline that
carries them, `numadapter.generation.pipeline.NumberTextGenerationPipeline`. `TextGenerationDispatch` is what
``pipeline("text-generation")`` builds once numadapter is imported
(`numadapter.serving.auto.register_text_generation`):

- for a numadapter model (``numadapter.get_peft_model``, ``PeftModel.from_pretrained``, `numadapter.load_exported`,
  ``AutoModelForCausalLM.from_pretrained`` of an export), the number pipeline, with the tokenizer wrapped as the
  model's `NumberTokenizer` when it is a plain one (``pipeline("text-generation", model=DIR)`` loads the export's
  plain tokenizer);
- for every other model, transformers' own ``TextGenerationPipeline``, built with the same arguments.
"""

from __future__ import annotations

from typing import Any

from transformers.pipelines.text_generation import TextGenerationPipeline


def is_number_model(model: Any) -> bool:
    """Whether `model` is a numadapter ``PeftModel`` (its tuner serves the number runtime)."""
    return callable(getattr(getattr(model, "base_model", None), "number_runtime", None))


def number_tokenizer(model: Any, tokenizer: Any) -> Any:
    """`tokenizer` when it is a `NumberTokenizer`, else a `NumberTokenizer` around it with the model's number
    settings (which checks that its [NUM] / [AGG] ids are the model's)."""
    from numadapter.tokenization.tokenizer import NumberTokenizer

    if isinstance(tokenizer, NumberTokenizer):
        return tokenizer
    if tokenizer is None:
        raise TypeError(
            "pipeline('text-generation') of a numadapter model needs its tokenizer: pass tokenizer=ntok (the "
            "NumberTokenizer), or model=DIR of an export, whose tokenizer is loaded with it."
        )
    return NumberTokenizer(tokenizer, model.peft_config[model.active_adapter])


class TextGenerationDispatch(TextGenerationPipeline):
    """Builds `NumberTextGenerationPipeline` for a numadapter model, transformers' ``TextGenerationPipeline``
    otherwise (see the module docstring); never an instance of this class itself."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        kwargs.update(zip(("model", "tokenizer"), args[:2]))  # Pipeline(model, tokenizer=None, ...)
        args = args[2:]
        model = kwargs.get("model")
        if not is_number_model(model):
            return TextGenerationPipeline(*args, **kwargs)
        from numadapter.generation.pipeline import NumberTextGenerationPipeline

        kwargs["tokenizer"] = number_tokenizer(model, kwargs.get("tokenizer"))
        return NumberTextGenerationPipeline(*args, **kwargs)
