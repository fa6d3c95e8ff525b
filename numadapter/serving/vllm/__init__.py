"""numadapter's vLLM plugin: ``LLM(DIR)`` and ``vllm serve DIR`` write a number export's numbers.

A number export (`numadapter.export.export_merged`) is marked so that engines that do not know numadapter refuse it
(`numadapter.serving.marking`): its ``config.json`` says ``model_type: "numadapter-llama"`` and
``architectures: ["NumadapterLlamaForCausalLM"]``. With numadapter installed in vLLM's environment, two entry points
(``pyproject.toml``) teach vLLM those names:

- ``vllm.general_plugins`` -> `register`: the config class of the marked model_type (a ``LlamaConfig`` under
  numadapter's name, `numadapter.serving.vllm.config`) and the model class of each marked architecture
  (`numadapter.serving.vllm.model`), which loads the base weights and ``number_modules.safetensors`` beside them;
- ``vllm.logits_processors`` -> `numadapter.serving.vllm.processor.NumberLogitsProcessor`: inactive for any other
  model; for an export it chooses every token of every request as `numadapter.generate` does and writes each number
  the head forms into the text (docs/DESIGN.md, "Serving the export with vLLM").

Nothing here is imported by ``import numadapter``; vLLM imports it in each of its processes.
"""

from __future__ import annotations

# marked architecture -> the plugin's model class ("module:Class", imported by vLLM when an export is loaded)
ARCHITECTURES = {
    "NumadapterLlamaForCausalLM": "numadapter.serving.vllm.model:NumberLlamaForCausalLM",
    "NumadapterMistralForCausalLM": "numadapter.serving.vllm.model:UnservedFamily",
    "NumadapterQwen2ForCausalLM": "numadapter.serving.vllm.model:UnservedFamily",
    "NumadapterGraniteForCausalLM": "numadapter.serving.vllm.model:UnservedFamily",
    "NumadapterT5ForConditionalGeneration": "numadapter.serving.vllm.model:UnservedFamily",
}


def register() -> None:
    """The ``vllm.general_plugins`` entry point: registers the marked config and model classes with vLLM.

    vLLM calls it in every process it starts (front end, engine core, workers), so it registers each name once."""
    from vllm import ModelRegistry

    from numadapter.serving.vllm.config import register_configs

    register_configs()
    known = set(ModelRegistry.get_supported_archs())
    for architecture, target in ARCHITECTURES.items():
        if architecture not in known:
            ModelRegistry.register_model(architecture, target)
