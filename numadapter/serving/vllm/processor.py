"""The plugin's vLLM logits processor: chooses every token of a number export's requests.

vLLM loads it from the ``vllm.logits_processors`` entry point for every model it serves; it is inactive (no effect
on any logit) unless the model is a marked numadapter export. For an export it forwards vLLM's batch changes and
logits to `numadapter.serving.vllm.engine.ENGINE`, which forces on each sampled row the token numadapter's rules
choose. It runs after vLLM's built-in processors; penalties, temperature and top-k/p cannot move a forced token.

vLLM loads the same entry point for its V2 model runner (``VLLM_USE_V2_MODEL_RUNNER``, the CUDA build's), whose
processors implement another interface (``add_request(slot, params)``, ``apply(logits, ctx)``) and which refuses
every installed processor that does not: so the class implements both, and under V2 it declines every request. The
plugin serves number exports on the V1 runner only; under V2 the model class refuses them by name
(`numadapter.serving.vllm.model`).
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor

try:  # vLLM's V2 model runner's interface (import-light by vLLM's design); absent from older vLLM
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcessor as RunnerV2Processor
except ImportError:  # pragma: no cover - depends on the vLLM version
    RunnerV2Processor = object  # type: ignore[assignment,misc]

from numadapter.serving.marking import CLASS_PREFIX
from numadapter.serving.vllm.config import serves_export as export_config_read
from numadapter.serving.vllm.engine import ENGINE
from numadapter.serving.vllm.requests import unsupported_settings


def serves_export(vllm_config: Any) -> bool:
    """Whether vLLM's model is a marked numadapter export (its architecture carries numadapter's prefix)."""
    model_config = getattr(vllm_config, "model_config", None)  # (a worker is given the config; no process flag)
    architectures = getattr(getattr(model_config, "hf_config", None), "architectures", None) or []
    return any(str(name).startswith(CLASS_PREFIX) for name in architectures)


class NumberLogitsProcessor(LogitsProcessor, RunnerV2Processor):
    """Forces the tokens of a number export's requests (see the module docstring); inactive for other models and
    under vLLM's V2 model runner."""

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Refuses, for a numadapter export, the sampling settings its token choice does not apply (vLLM answers the
        request with HTTP 400 and this message); nothing for any other model."""
        found = unsupported_settings(sampling_params) if export_config_read() else []
        if found:
            raise ValueError(
                f"numadapter's vLLM plugin chooses each token of a number export as numadapter.generate does (greedy, "
                f"or sampled with temperature, top_k, top_p, seed, min_tokens); it does not apply {', '.join(found)}. "
                "Leave them at their defaults."
            )

    def __init__(self, vllm_config: Any, *runner: Any) -> None:
        """V1: ``(vllm_config, device, is_pin_memory)``; V2: ``(vllm_config, req_states)``, inactive."""
        self.active = len(runner) == 2 and serves_export(vllm_config)

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        """V2 only: the processor changes no request's logits there."""
        return False

    def is_argmax_invariant(self) -> bool:
        return not self.active

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if self.active and batch_update is not None:
            ENGINE.update(batch_update)

    def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        """``logits [R, V]`` with the export's tokens forced (V1); unchanged when inactive (and under V2, `ctx`)."""
        return ENGINE.force(logits) if self.active else logits
