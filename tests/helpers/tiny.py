"""Tiny random-init models for tests: built locally, saved with `save_pretrained`, loaded back.

The tokenizers come from `numadapter.testing.toy` (``toy.build_tokenizer(kind, path)``, kinds ``"digits"``,
``"llama3"`` and ``"t5"``; its docstring lists their special tokens); tests import them from there. Nothing is
downloaded. Models are random-init (seeded) Llama / Granite / T5 configurations, saved and reloaded with
`from_pretrained` so the real loading code is exercised.

Model families (`build_model(family, path, vocab_size)`):
``"llama"``, ``"granite"`` (non-trivial embedding/residual/attention multipliers and logits scaling) and ``"t5"``.

Transformers 5.x note on ties: `T5Config` always sets ``tie_word_embeddings=True``; passing ``False`` only turns
off the decoder-output scaling (``scale_decoder_outputs``, the d_model**-0.5 of T5 v1.0) and the weights are still
tied unless the checkpoint holds a different ``lm_head.weight``. `build_model("t5", ..., tie=False)` therefore
builds what T5 v1.1 / Flan-T5 checkpoints are: no scaling and an ``lm_head`` with its own weights.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import torch
from transformers import PreTrainedTokenizerFast

from numadapter.testing.toy import CONFIGS, build_tokenizer

MODEL_FAMILIES = ("llama", "granite", "t5")


def _llama_config(family: str, vocab_size: int, tie: bool, hidden_size: int, layers: int, heads: int, spec):
    from transformers import GraniteConfig, LlamaConfig

    common = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=256,
        tie_word_embeddings=tie,
        bos_token_id=spec.bos_token_id,
        eos_token_id=spec.eos_token_id,
        pad_token_id=spec.pad_token_id,
    )
    if family == "llama":
        return LlamaConfig(**common)
    return GraniteConfig(
        **common,
        embedding_multiplier=12.0,
        logits_scaling=8.0,
        residual_multiplier=0.22,
        attention_multiplier=0.0078125,
    )


def build_model(
    family: str,
    path: str | os.PathLike,
    vocab_size: int,
    tie: bool = False,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    tokenizer_kind: str | None = None,
    seed: int = 0,
    **overrides: Any,
) -> torch.nn.Module:
    """A tiny random-init model, saved to `path` and reloaded with `from_pretrained` (float32, eval mode).

    Args:
        family: ``"llama"``, ``"granite"`` or ``"t5"``.
        path: directory to save to.
        vocab_size: embedding rows; pass ``len(tokenizer)``.
        tie: tie the LM head to the input embedding. For T5, ``True`` is T5 v1.0 (tied, decoder output scaled by
            d_model**-0.5) and ``False`` is T5 v1.1 (own ``lm_head`` weights, no scaling).
        hidden_size, layers, heads: sizes.
        tokenizer_kind: whose bos/eos/pad ids go into the config (default: ``"t5"`` for T5, else ``"digits"``).
        seed: torch seed for the random init.
        **overrides: extra config fields (applied last).

    Returns:
        The reloaded model (`LlamaForCausalLM`, `GraniteForCausalLM` or `T5ForConditionalGeneration`).
    """
    if family not in MODEL_FAMILIES:
        raise ValueError(f"Unknown model family {family!r}; choose one of {list(MODEL_FAMILIES)}.")
    spec = CONFIGS[tokenizer_kind or ("t5" if family == "t5" else "digits")]
    torch.manual_seed(seed)
    if family == "t5":
        from transformers import T5Config, T5ForConditionalGeneration

        config = T5Config(
            vocab_size=vocab_size,
            d_model=hidden_size,
            d_ff=2 * hidden_size,
            d_kv=hidden_size // heads,
            num_layers=layers,
            num_decoder_layers=layers,
            num_heads=heads,
            relative_attention_num_buckets=8,
            relative_attention_max_distance=32,
            feed_forward_proj="relu" if tie else "gated-gelu",
            tie_word_embeddings=tie,
            pad_token_id=spec.pad_token_id,
            eos_token_id=spec.eos_token_id,
            decoder_start_token_id=spec.pad_token_id,
            **overrides,
        )
        model = T5ForConditionalGeneration(config)
        if not tie:
            # transformers 5 ties T5 regardless of the flag; give lm_head its own weights like a v1.1 checkpoint
            model.lm_head.weight = torch.nn.Parameter(torch.randn_like(model.shared.weight) * hidden_size**-0.5)
    else:
        from transformers import GraniteForCausalLM, LlamaForCausalLM

        config = _llama_config(family, vocab_size, tie, hidden_size, layers, heads, spec)
        for key, value in overrides.items():
            setattr(config, key, value)
        model = (LlamaForCausalLM if family == "llama" else GraniteForCausalLM)(config)
    os.makedirs(path, exist_ok=True)
    model.save_pretrained(path)
    return reload_model(family, path)


def reload_model(family: str, path: str | os.PathLike) -> torch.nn.Module:
    """`from_pretrained` of a saved tiny model (float32, eval mode)."""
    import transformers

    cls = {
        "llama": transformers.LlamaForCausalLM,
        "granite": transformers.GraniteForCausalLM,
        "t5": transformers.T5ForConditionalGeneration,
    }[family]
    return cls.from_pretrained(path, dtype=torch.float32).eval()


def is_tied(model: torch.nn.Module) -> bool:
    """Whether the output embedding shares storage with the input embedding (by data_ptr)."""
    return model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def tokenizer_and_model(
    kind: str, family: str, tmp_path: str | os.PathLike, tie: bool = False, **model_kwargs: Any
) -> tuple[PreTrainedTokenizerFast, torch.nn.Module]:
    """Convenience for tests: a tokenizer of `kind` and a `family` model sized to it, under `tmp_path`."""
    tok = build_tokenizer(kind, os.path.join(tmp_path, f"tok-{kind}"))
    model = build_model(
        family, os.path.join(tmp_path, f"model-{family}"), len(tok), tie=tie, tokenizer_kind=kind, **model_kwargs
    )
    return tok, model


def copy_tokenizer(tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """A deep copy of a tokenizer (so a test can add tokens without touching a shared one)."""
    return copy.deepcopy(tokenizer)
