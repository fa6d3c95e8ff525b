"""Registers the ``"number-text-generation"`` task with transformers' pipelines.

``pipeline("number-text-generation", model=model, tokenizer=ntok)`` gives
`numadapter.generation.pipeline.NumberTextGenerationPipeline`, transformers' text-generation pipeline with the
numbers carried through (transformers' own ``"text-generation"`` passes ids without their numbers, which numadapter
refuses). The task is registered by name, with the class as a dotted path that ``pipeline()`` imports on use, when
`numadapter.tokenization` is imported: whoever builds a pipeline has a `NumberTokenizer`, so the task is there, and
importing the tokenizer does not import the generation code.
"""

from __future__ import annotations

TASK = "number-text-generation"
IMPL = "numadapter.generation.pipeline.NumberTextGenerationPipeline"


def register() -> None:
    """Adds `TASK` to transformers' pipeline registry (once; a task of that name already there is left alone)."""
    from transformers import AutoModelForCausalLM
    from transformers.pipelines import PIPELINE_REGISTRY

    PIPELINE_REGISTRY.supported_tasks.setdefault(TASK, {"impl": IMPL, "pt": (AutoModelForCausalLM,), "type": "text"})


register()
