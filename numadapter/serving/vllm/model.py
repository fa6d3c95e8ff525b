"""The vLLM model class of a marked export: vLLM's own Llama, plus the export's number modules.

`NumberLlamaForCausalLM` is vLLM's ``LlamaForCausalLM`` (its attention, KV cache, prefix caching and chunked prefill
unchanged) with three additions:

- it loads the base weights only (``model*.safetensors``: the index or the single file) and the export's number
  modules from ``number_modules.safetensors`` (`numadapter.serving.vllm.served.ServedExport`), refusing the modes
  the plugin does not serve by name;
- its forward computes the input embeddings itself and adds to every fed [NUM] its number's features
  (`numadapter.serving.vllm.engine.EngineNumbers.embed`);
- ``compute_logits`` keeps the LM-head input of the sampled rows, which the number head reads when the logits
  processor chooses the tokens.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.model_executor.models.llama import LlamaForCausalLM

from numadapter.serving.vllm.engine import ENGINE
from numadapter.serving.vllm.served import ELSEWHERE, ServedExport, UnservedExportError


class NumberLlamaForCausalLM(LlamaForCausalLM):
    """vLLM's Llama with a numadapter export's number modules (see the module docstring)."""

    # the base weights: the shards of an index, else the single file; never number_modules.safetensors
    allow_patterns_overrides = ["model-*-of-*.safetensors", "model.safetensors"]

    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        model_config = vllm_config.model_config
        if getattr(vllm_config, "use_v2_model_runner", False):
            raise UnservedExportError(
                f"numadapter's vLLM plugin serves number exports on vLLM's V1 model runner; {model_config.model} is "
                "being loaded by the V2 model runner, whose logits processors cannot write the numbers yet. Set "
                f"VLLM_USE_V2_MODEL_RUNNER=0 to serve it with vLLM. {ELSEWHERE}"
            )
        served = ServedExport.load(model_config.model, model_config.hf_config)  # refuses before building anything
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        eos = getattr(model_config.hf_config, "eos_token_id", None)
        if isinstance(eos, list):
            eos = eos[0] if eos else None
        if eos is None:
            eos = served.ntok.tokenizer.eos_token_id
        ENGINE.attach(served, eos)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor,
        intermediate_tensors: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> Any:
        ENGINE.locate()
        if inputs_embeds is None and input_ids is not None:
            inputs_embeds = ENGINE.embed(self.embed_input_ids(input_ids), input_ids, positions)
        return super().forward(None, positions, intermediate_tensors, inputs_embeds, **kwargs)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        logits = super().compute_logits(hidden_states)
        ENGINE.keep_hidden(hidden_states)
        return logits


class UnservedFamily(torch.nn.Module):
    """A marked export of a family the plugin does not serve yet: refused by name when vLLM builds the model."""

    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        super().__init__()
        config = vllm_config.model_config.hf_config
        raise UnservedExportError(
            f"numadapter's vLLM plugin serves Llama-family exports so far; {vllm_config.model_config.model} is a "
            f"{getattr(config, 'model_type', '?')} export. {ELSEWHERE}"
        )
