"""Model sizes and LoRA settings (no heavy imports, so `python -m eval_harness --help` stays fast)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSize:
    """A Llama configuration of the FoNE paper's Table 6."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int


TABLE6: dict[int, ModelSize] = {
    1: ModelSize(64, 256, 1, 4, 2),
    2: ModelSize(128, 512, 2, 4, 2),
    3: ModelSize(192, 768, 3, 6, 3),
    4: ModelSize(256, 1024, 4, 8, 4),
    5: ModelSize(320, 1280, 5, 8, 4),
    6: ModelSize(384, 1536, 6, 8, 4),
}


@dataclass(frozen=True)
class LoraSettings:
    """LoRA settings of the adapter regime (all methods use the same).

    Attributes:
        r: rank.
        alpha: scaling numerator (``lora_alpha``).
        dropout: LoRA dropout.
        target_modules: module names (Llama / Granite names by default).
    """

    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
