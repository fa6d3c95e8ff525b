"""Full-size shape check on the meta device (no weights): Llama-3.2-1B, Granite-3.1-2B and Flan-T5-base.

The configs are written out from their public ``config.json`` values. For each model and encoding the number
adapter is built with ``peft.get_peft_model`` (ids given in the config, as without a tokenizer) and compared with a
LoRA-only adapter of the same rank and target modules: trainable parameters and adapter bytes (what
``save_pretrained`` would write, computed from the meta tensors' shapes). Run with ``-s`` to see the table.
"""

from __future__ import annotations

import peft
import pytest
import torch
from peft import LoraConfig
from torch import nn
from transformers import (
    GraniteConfig,
    GraniteForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    T5Config,
    T5ForConditionalGeneration,
)

from numadapter.config import NumberAdapterConfig

RANK = 16
DECODER_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
T5_TARGETS = ["q", "k", "v", "o", "wi_0", "wi_1", "wo"]

LLAMA_3_2_1B = dict(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
    num_key_value_heads=8, head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
    tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128001,
    rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                  "original_max_position_embeddings": 8192, "rope_type": "llama3"},
)  # fmt: skip
GRANITE_3_1_2B = dict(
    vocab_size=49155, hidden_size=2048, intermediate_size=8192, num_hidden_layers=40, num_attention_heads=32,
    num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=5000000.0,
    tie_word_embeddings=True, embedding_multiplier=12.0, logits_scaling=8.0, residual_multiplier=0.22,
    attention_multiplier=0.015625, bos_token_id=0, eos_token_id=0, pad_token_id=0,
)  # fmt: skip
FLAN_T5_BASE = dict(
    vocab_size=32128, d_model=768, d_kv=64, d_ff=2048, num_layers=12, num_decoder_layers=12, num_heads=12,
    relative_attention_num_buckets=32, relative_attention_max_distance=128, feed_forward_proj="gated-gelu",
    tie_word_embeddings=False, layer_norm_epsilon=1e-6, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
)  # fmt: skip

# name: (builder, LoRA targets, task type, [NUM] id, hidden H, rows of the LM head that are trainable)
MODELS = {
    "llama-3.2-1b": ("llama", DECODER_TARGETS, "CAUSAL_LM", 128256, 2048, 1),  # new id -> resized to 128257
    "granite-3.1-2b": ("granite", DECODER_TARGETS, "CAUSAL_LM", 49155, 2048, 1),  # -> 49156
    "flan-t5-base": ("t5", T5_TARGETS, "SEQ_2_SEQ_LM", 32100, 768, 2),  # a free padding row (32128 > 32100); untied
}
P = 12  # int_digits 8 + frac_digits 4 (defaults)
DIGITS = list(range(15, 25))  # Llama 3's "0".."9"; the other models only use them for range checks on meta


def build_meta(kind: str) -> nn.Module:
    with torch.device("meta"):
        if kind == "llama":
            return LlamaForCausalLM(LlamaConfig(**LLAMA_3_2_1B))
        if kind == "granite":
            return GraniteForCausalLM(GraniteConfig(**GRANITE_3_1_2B))
        model = T5ForConditionalGeneration(T5Config(**FLAN_T5_BASE))
        model.lm_head.weight = nn.Parameter(torch.empty(32128, 768))  # Flan-T5 has its own LM head
        return model


def adapter_bytes(model) -> int:
    state = peft.peft_model.get_peft_model_state_dict(model)  # what save_pretrained writes
    return sum(t.numel() * t.element_size() for t in state.values())


def extra_params(encoding: str, hidden: int, head_rows: int, causal: bool) -> int:
    """Hand count of what the number adapter adds to LoRA (P = 12 places, sign as text)."""
    rows = hidden * head_rows
    if encoding == "fone":
        # projection 2P -> H; head H -> 2P (+ bias); context head's coefficients H -> 3K (+ bias), K = 4 numbers
        extra = rows + 2 * P * hidden + (hidden * 2 * P + 2 * P) + (hidden * 3 * 4 + 3 * 4)
        # on a causal LM the default (answers mode) adds products and exact quotients: an operation classifier
        # H -> 1 + 18 (the sum, then a product of 2 of the 4 numbers (6) or a quotient of one by another (12))
        return extra + (hidden * 19 + 19 if causal else 0)
    if encoding == "xval":
        width = NumberAdapterConfig().xval_head_hidden  # 32
        count = NumberAdapterConfig().xval_context_numbers  # 4
        # direction u; MLP H -> 32 -> 1; the weights of the 4 numbers before it, H -> 4
        return rows + hidden + (hidden * width + width) + (width + 1) + (hidden * count + count)
    return rows  # digits + [AGG]: only the [AGG] rows


@pytest.mark.parametrize("encoding", ["fone", "xval", "digits"])
@pytest.mark.parametrize("name", list(MODELS))
def test_full_size_shapes_and_adapter_size(name, encoding):
    kind, targets, task, num_id, hidden, head_rows = MODELS[name]
    lora = peft.get_peft_model(build_meta(kind), LoraConfig(r=RANK, lora_alpha=2 * RANK, target_modules=targets))
    lora_params, lora_bytes = lora.get_nb_trainable_parameters()[0], adapter_bytes(lora)

    ids = dict(num_token_id=num_id) if encoding != "digits" else dict(agg_token_id=num_id, aggregate=True)
    config = NumberAdapterConfig(
        encoding=encoding, r=RANK, lora_alpha=2 * RANK, target_modules=targets, task_type=task,
        digit_token_ids=DIGITS, **ids,
    )  # fmt: skip
    model = peft.get_peft_model(build_meta(kind), config)
    params, size = model.get_nb_trainable_parameters()[0], adapter_bytes(model)

    base = model.get_base_model()
    rows = max(num_id + 1, base.config.vocab_size if kind == "t5" else 0)
    assert config.resized_vocab_size == rows
    assert model.get_input_embeddings().token_adapter.base_layer.weight.shape == (rows, hidden)
    extra = extra_params(encoding, hidden, head_rows, task == "CAUSAL_LM")
    assert params == lora_params + extra
    stamp = model.base_model.number_modules["default"].settings_stamp  # the settings as JSON bytes, checked on load
    assert stamp.dtype == torch.uint8 and stamp.numel() < 1024
    assert size == lora_bytes + 4 * extra + stamp.numel()  # float32 parameters
    ratio = size / lora_bytes
    print(f"{name:15s} {encoding:6s} trainable {params:>11,} vs LoRA {lora_params:>11,}  bytes ratio {ratio:.4f}")
    # <= 1.01 before the context head (fone_head_input="context", the default): its coefficient read-out adds
    # H x 3K = 2048 x 12 parameters on Llama-3.2-1B, 0.2% of its LoRA (1.0089 -> 1.0111); the operation classifier
    # of answers mode 2048 x 19 more (0.3%)
    assert ratio <= 1.015
