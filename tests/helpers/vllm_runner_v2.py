"""Checks, inside ``.venv-vllm``, how numadapter's plugin meets vLLM's V2 model runner; prints one JSON line.

vLLM's V2 runner (``VLLM_USE_V2_MODEL_RUNNER=1``) needs Triton with a CPU backend to run on CPU, which no registry
here provides, so no engine is started: the checks call what the runner calls. ``loaded``: the class names vLLM's
V2 loader builds from the installed ``vllm.logits_processors`` entry points (it refuses every class that does not
implement the V2 interface, for every model); ``declines`` / ``unchanged``: the built processor takes no request and
leaves the logits as they are; ``refused``: the message of the plugin's model class built by a V2 runner.
"""

from __future__ import annotations

import json
from types import SimpleNamespace


def main() -> None:
    import torch
    from vllm import SamplingParams
    from vllm.v1.worker.gpu.sample.logits_processor import build_custom_logits_processors
    from vllm.v1.worker.gpu.sample.logits_processor.loader import build_custom_logits_processors_params_validator

    result: dict = {}
    try:
        validate = build_custom_logits_processors_params_validator(None)  # the front end's, at startup
        validate(SamplingParams(temperature=0.0))
        fields = ("device", "max_num_reqs", "vocab_size", "all_token_ids", "prompt_len", "prefill_len", "total_len")
        states = SimpleNamespace(**dict.fromkeys(fields))
        marked = SimpleNamespace(model_config=SimpleNamespace(hf_config=SimpleNamespace(architectures=["X"])))
        processors = build_custom_logits_processors(marked, states, is_pooling_model=False)  # the worker's
        result["loaded"] = [type(p).__name__ for p in processors]
        result["declines"] = [p.add_request(0, SamplingParams(temperature=0.0)) is False for p in processors]
        logits = torch.randn(2, 8)
        result["unchanged"] = [torch.equal(p.apply(logits.clone(), None), logits) for p in processors]
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"
    from numadapter.serving.vllm.model import NumberLlamaForCausalLM

    config = SimpleNamespace(use_v2_model_runner=True, model_config=SimpleNamespace(model="/exports/sums"))
    try:
        NumberLlamaForCausalLM(vllm_config=config)
    except ValueError as error:
        result["refused"] = str(error)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
