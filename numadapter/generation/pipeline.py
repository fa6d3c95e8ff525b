"""`NumberTextGenerationPipeline`: transformers' text-generation pipeline, with the numbers carried through.

transformers' ``TextGenerationPipeline`` hands ``model.generate`` the ``input_ids`` and ``attention_mask`` of the
tokenizer's output only, re-pads prompts into new tensors when batching, and decodes the generated ids as plain lists:
the number tensors of a `NumberTokenizer` batch are lost on the way, and ids alone cannot say which numbers they
hold (prompts that differ only in their numbers have the same ids). So numadapter refuses that path (the error names
this pipeline) and this subclass carries the numbers instead:

- ``preprocess``: the `NumberTokenizer` output of each prompt (plain text or chat template) keeps its number tensors
  (``num_mask``, ``num_digits``, ``num_sign``, ``num_values``) and ``number_texts``; transformers' batching pads
  the tensors together with the ids (the padding side is the tokenizer's).
- ``_forward``: passes them to ``model.generate`` (numadapter's decode loop, `numadapter.generation.hf`) and keeps
  the text of every [NUM] of every returned sequence (`numadapter.generation.numbers_of`).
- ``postprocess``: transformers' own, run inside a decoding scope of those sequences
  (`numadapter.tokenization.notes.decoding`), so each decoded [NUM] gets the number of its sequence.

Use it with ``pipeline("number-text-generation", model=model, tokenizer=ntok)`` (the task is registered when
`numadapter.tokenization` is imported, i.e. whenever a `NumberTokenizer` exists) or
``pipeline("text-generation", model=model, tokenizer=ntok, pipeline_class=NumberTextGenerationPipeline)``. The
model is a numadapter causal LM (`numadapter.get_peft_model`, ``PeftModel.from_pretrained``,
`numadapter.load_exported`); the tokenizer its `NumberTokenizer`. Calls, options and outputs are those of
``pipeline("text-generation")``; ``handle_long_generation="hole"`` (which cuts the ids but not their numbers) is
refused.
"""

from __future__ import annotations

from typing import Any

from transformers.pipelines.text_generation import TextGenerationPipeline

from numadapter.schema import SIDE_FIELDS as SIDE_KEYS
from numadapter.tokenization.notes import SequenceNumbers, decoding, noted_in_storage
from numadapter.tokenization.pipeline_task import TASK

__all__ = ["TASK", "NumberTextGenerationPipeline"]

_TEXTS = "sequence_number_texts"  # what _forward adds for postprocess: the [NUM] texts of each returned sequence


class NumberTextGenerationPipeline(TextGenerationPipeline):
    """``pipeline("text-generation")`` for a numadapter model and its `NumberTokenizer` (see the module docstring).

    Raises:
        TypeError: the model is not a numadapter model, or the tokenizer not a `NumberTokenizer`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from numadapter.tokenization.tokenizer import NumberTokenizer

        if not callable(getattr(getattr(self.model, "base_model", None), "number_runtime", None)):
            raise TypeError(
                f"{type(self).__name__} needs a numadapter model (numadapter.get_peft_model, "
                "PeftModel.from_pretrained of a numadapter adapter, numadapter.load_exported), got "
                f"{type(self.model).__name__}: for another model use pipeline('text-generation')."
            )
        if not isinstance(self.tokenizer, NumberTokenizer):
            raise TypeError(
                f"{type(self).__name__} needs the model's NumberTokenizer as tokenizer=, got "
                f"{type(self.tokenizer).__name__}: pass tokenizer=NumberTokenizer(tokenizer, config) (or the one "
                "numadapter.load_exported returns)."
            )

    def check_model_type(self, supported_models: Any) -> None:
        """transformers' check, under the task name it knows (``"text-generation"``) rather than this pipeline's."""
        task, self.task = self.task, "text-generation"
        try:
            super().check_model_type(supported_models)
        finally:
            self.task = task

    def preprocess(self, prompt_text: Any, *args: Any, handle_long_generation: Any = None, **kwargs: Any) -> Any:
        if handle_long_generation is not None:
            raise ValueError(
                f"handle_long_generation={handle_long_generation!r} cuts the prompt's ids without their numbers: "
                "shorten the prompt instead (or pass truncation=True, max_length=..., which NumberTokenizer applies "
                "to the numbers too)."
            )
        return super().preprocess(prompt_text, *args, **kwargs)

    def _forward(self, model_inputs: dict[str, Any], **generate_kwargs: Any) -> dict[str, Any]:
        batched = isinstance(model_inputs["prompt_text"], list)  # transformers' batching collated several prompts
        number_texts = model_inputs.pop("number_texts", None)
        if number_texts is not None:
            rows = [item[0] for item in number_texts] if batched else list(number_texts)
            generate_kwargs["number_texts"] = rows
        for key in SIDE_KEYS:
            if key in model_inputs:
                generate_kwargs[key] = model_inputs.pop(key)
        if self.tokenizer.marker_token_id is not None:  # for stop strings, and to re-tokenize under disable_adapter
            generate_kwargs.setdefault("tokenizer", self.tokenizer)
        outputs = super()._forward(model_inputs, **generate_kwargs)
        record = noted_in_storage(outputs["generated_sequence"])  # the generate output, reshaped [B, n, L]
        count = outputs["generated_sequence"].shape[0] * outputs["generated_sequence"].shape[1]
        texts = record.number_texts if isinstance(record, SequenceNumbers) else [[] for _ in range(count)]
        per_prompt = len(texts) // max(outputs["generated_sequence"].shape[0], 1)
        items = [texts[i : i + per_prompt] for i in range(0, len(texts), per_prompt)]
        outputs[_TEXTS] = items if batched else items[0]
        return outputs

    def postprocess(self, model_outputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        texts = model_outputs.pop(_TEXTS)
        sequences = model_outputs["generated_sequence"][0].tolist()
        marker = self.tokenizer.num_token_id
        if marker is None:  # digits + [AGG]: numbers are digit tokens, nothing to carry
            return super().postprocess(model_outputs, *args, **kwargs)
        with decoding(list(zip(sequences, texts)), marker):
            return super().postprocess(model_outputs, *args, **kwargs)
