"""Models and tokenizers for the two regimes, built the same way for every method.

From scratch (``regime="scratch"``): a random-init ``LlamaForCausalLM`` of the FoNE paper's Table 6 (hidden,
intermediate, layers, heads, key-value heads), tied input/output embeddings like Llama-3.2-1B (the paper's
parameter counts, e.g. 8.31M for model 1, are those of a tied 128k vocabulary), seeded so that every method with
the same vocabulary starts from the same weights. Tokenizers are trained locally (`numadapter.testing.toy`):

- ``"digits"``: `numadapter.testing.toy` "digits" (byte-level BPE, every digit its own token);
- ``"subword"``: `numadapter.testing.toy` "llama3" (Llama 3's split regex: digit runs cut left to right into groups of
  up to 3) trained on its corpus plus every 1-3 digit string, so that, as in Llama 3's vocabulary, every group is one
  token ("571.870" -> "571" "." "870", 3 tokens; the toy default vocabulary lacks most 3-digit groups);
- fone / xval: the digits tokenizer (numbers become [NUM]; which tokenizer does not matter for them).

numadapter methods go through `numadapter.get_peft_model` (the product path: [NUM] rows, number modules,
the adapter's loss). PEFT needs at least one LoRA target, so from scratch a rank-1 LoRA on ``q_proj`` rides along
(B starts at zero) and then every base parameter is unfrozen: the whole model trains, as in the paper. Plain
methods are plain transformers models (no PEFT) trained on every parameter.

Adapter regime (``regime="adapter"``): the base model and its tokenizer are loaded from a path
(``AutoModelForCausalLM`` / ``AutoTokenizer``, no ``trust_remote_code``); the base stays frozen; ``lora`` is
``peft.LoraConfig``, the numadapter methods a `NumberAdapterConfig` with the same LoRA settings. On the product train
path (``product=True``) ``lora`` is numadapter's plain LoRA instead (`Method.product_adapter`: a
`NumberAdapterConfig` with ``encoding="digits"``, ``train_eos_row=False`` and the same LoRA settings), so that
`numadapter.NumberSFTTrainer` trains it.

Only numadapter's public API is used: the names of ``numadapter.__all__``, the methods' embedding modules (listed
there) and `numadapter.testing.toy` (the README's tokenizers for tests and examples).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from eval_harness.arms import Method
from eval_harness.arms.encode import Codec
from eval_harness.arms.sizes import TABLE6, LoraSettings, ModelSize  # noqa: F401 (re-exported)

SCRATCH_TOKENIZERS = ("digits", "subword")
SUBWORD_VOCAB = 2300  # byte alphabet + specials + the 1,110 digit groups + merges of the toy corpus


@dataclass
class Built:
    """A model ready to train, with everything needed to encode data for it and read its answers.

    Attributes:
        model: the trainable model (plain transformers model or numadapter ``PeftModel``).
        codec: encodes examples for this method.
        tokenizer: the Hugging Face tokenizer (with the number token added for numadapter methods).
        number_tokenizer: the `NumberTokenizer` of the prompts (numadapter methods), else None.
        config: the `NumberAdapterConfig` (numadapter methods), else None.
        params: parameter counts (``total``, ``trainable``, ``embedding``, ``non_embedding``).
        settings: the resolved settings written into the result (adapter config fields, LoRA, sizes).
    """

    model: torch.nn.Module
    codec: Codec
    tokenizer: Any
    number_tokenizer: Any = None
    config: Any = None
    params: dict[str, int] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


def _digit_groups() -> list[str]:
    return [str(i) for i in range(10)] + [f"{i:02d}" for i in range(100)] + [f"{i:03d}" for i in range(1000)]


def scratch_tokenizer(kind: str, path: str | os.PathLike) -> Any:
    """The from-scratch tokenizer of `kind` (``"digits"`` / ``"subword"``), saved to `path` and reloaded.

    Raises:
        ValueError: unknown kind.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from numadapter.testing.toy import CONFIGS, build_tokenizer, corpus, train_tokenizer

    if kind == "digits":
        return build_tokenizer("digits", path)
    if kind != "subword":
        raise ValueError(f"Unknown scratch tokenizer {kind!r}; choose one of {list(SCRATCH_TOKENIZERS)}.")
    groups = _digit_groups()
    raw = train_tokenizer("llama3", vocab_size=SUBWORD_VOCAB, lines=corpus() + [" ".join(groups)] * 3)
    missing = [g for g in groups if raw.token_to_id(g) is None]
    if missing:
        raise RuntimeError(f"the subword tokenizer lacks digit groups {missing[:5]}: raise SUBWORD_VOCAB.")
    spec = CONFIGS["llama3"]
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=spec.bos_token,
        eos_token=spec.eos_token,
        pad_token=spec.pad_token,
        padding_side="right",
        model_max_length=4096,
        clean_up_tokenization_spaces=False,
    )
    os.makedirs(path, exist_ok=True)
    wrapped.save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def scratch_model(size: ModelSize, tokenizer: Any, seed: int) -> torch.nn.Module:
    """A random-init tied ``LlamaForCausalLM`` of `size` with ``len(tokenizer)`` rows, seeded with `seed`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def load_base(path: str | os.PathLike) -> tuple[torch.nn.Module, Any]:
    """The pretrained causal LM and tokenizer at `path` (float32, no remote code)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not os.path.isdir(path):
        raise ValueError(f"--base {str(path)!r} is not a directory: pass the path of a saved model and tokenizer.")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if model.config.is_encoder_decoder:
        raise ValueError(
            f"the harness trains causal LMs; {type(model).__name__} at {str(path)!r} is an encoder-decoder: "
            "pass a Llama / Granite / Mistral / Qwen2 base."
        )
    return model, tokenizer


def count_parameters(model: torch.nn.Module) -> dict[str, int]:
    """Total, trainable, embedding (input + untied output) and non-embedding parameter counts (shared ones once)."""
    seen: dict[int, torch.nn.Parameter] = {p.data_ptr(): p for p in model.parameters()}
    total = sum(p.numel() for p in seen.values())
    trainable = sum(p.numel() for p in seen.values() if p.requires_grad)
    embedding_ptrs = set()
    for module in (model.get_input_embeddings(), model.get_output_embeddings()):
        while module is not None and (hasattr(module, "base_layer") or hasattr(module, "token_adapter")):
            module = module.token_adapter.base_layer if hasattr(module, "token_adapter") else module.base_layer
        if module is not None:  # the raw weight inside PEFT's wrappers (LoRA, trainable tokens)
            embedding_ptrs.add(module.weight.data_ptr())
    embedding = sum(seen[ptr].numel() for ptr in embedding_ptrs if ptr in seen)
    return {"total": total, "trainable": trainable, "embedding": embedding, "non_embedding": total - embedding}


def _number_config(
    method: Method,
    regime: str,
    places: tuple[int, int],
    xval_values: Sequence[float],
    lora: Mapping[str, Any],
    overrides: Mapping[str, Any],
    product: bool,
) -> Any:
    from numadapter import NumberAdapterConfig
    from numadapter.methods.xval.embedding import fit_normalization

    # the papers' setting: every number a [NUM] (the library's default since round 6 keeps numbers in digits)
    settings: dict[str, Any] = {"int_digits": places[0], "frac_digits": places[1], "fone_numbers": "all"}
    settings.update(method.adapter_settings(regime, product))
    settings.update(overrides)
    if settings["encoding"] == "xval" and "xval_scale" not in settings:
        center, scale = fit_normalization(list(xval_values), method="absmax", clip=settings.get("xval_clip", 5.0))
        settings.update(xval_center=center, xval_scale=scale)
    return NumberAdapterConfig(**settings, **lora)


def build(
    method: Method,
    regime: str,
    *,
    workdir: str | os.PathLike,
    seed: int,
    places: tuple[int, int],
    xval_values: Sequence[float] = (),
    size: ModelSize | None = None,
    base_path: str | os.PathLike | None = None,
    lora: LoraSettings | None = None,
    number_settings: Mapping[str, Any] | None = None,
    product: bool = False,
) -> Built:
    """Builds the model, tokenizer(s) and codec of one run.

    Args:
        method: the method.
        regime: ``"scratch"`` or ``"adapter"``.
        workdir: a directory for the locally trained tokenizers.
        seed: the model-init seed.
        places: ``(int_digits, frac_digits)`` holding every number of the task (numadapter methods).
        xval_values: the training numbers' values, to fit xVal's normalisation (xval only).
        size: the Table 6 size (scratch).
        base_path: the pretrained base (adapter).
        lora: LoRA settings (adapter).
        number_settings: `NumberAdapterConfig` fields replacing the method's (numadapter methods).
        product: the run trains on the product path: a plain method with a `Method.product_adapter` is built as
            numadapter's model with those settings.

    Returns:
        The `Built` run.
    """
    from numadapter import NumberAdapterConfig, NumberTokenizer, get_peft_model

    if regime not in method.regimes:
        other = {"scratch": "digits, subword", "adapter": "lora"}[regime]
        raise ValueError(
            f"method {method.name!r} runs in the {' / '.join(method.regimes)} regime, not {regime!r}; "
            f"the plain baselines of the {regime} regime are: {other}."
        )
    torch.manual_seed(seed)
    if regime == "scratch":
        if size is None:
            raise ValueError("the scratch regime needs a model size (FoNE Table 6: 1 ... 6).")
        tokenizer = scratch_tokenizer(method.tokenizer, os.path.join(workdir, f"tokenizer-{method.tokenizer}"))
        model = scratch_model(size, tokenizer, seed)
        lora_kwargs: dict[str, Any] = {"r": 1, "lora_alpha": 1, "lora_dropout": 0.0, "target_modules": ["q_proj"]}
        settings: dict[str, Any] = {"model_size": vars(size), "tie_word_embeddings": True}
    elif regime == "adapter":
        if base_path is None:
            raise ValueError("the adapter regime needs a pretrained base: pass --base PATH.")
        model, tokenizer = load_base(base_path)
        lora = lora or LoraSettings()
        lora_kwargs = {
            "r": lora.r,
            "lora_alpha": lora.alpha,
            "lora_dropout": lora.dropout,
            "target_modules": list(lora.target_modules),
        }
        settings = {"base": str(base_path), "lora": dict(lora_kwargs)}
    else:
        raise ValueError(f"`regime` must be 'scratch' or 'adapter', got {regime!r}.")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not method.adapter_settings(regime, product):  # a plain method (on the product path only with settings)
        if regime == "adapter":
            import peft

            model = peft.get_peft_model(model, peft.LoraConfig(task_type="CAUSAL_LM", **lora_kwargs))
        codec = Codec(tokenizer, tokenizer, tokenizer, side=False)
        return Built(model, codec, tokenizer, params=count_parameters(model), settings=settings)
    config = _number_config(method, regime, places, xval_values, lora_kwargs, number_settings or {}, product)
    ntok = NumberTokenizer(tokenizer, config)
    answer_encoder = ntok
    if config.encoding == "digits" and config.aggregate:  # answers stay plain digit tokens (see encode.py)
        plain_digits = NumberAdapterConfig(encoding="digits", int_digits=places[0], frac_digits=places[1])
        answer_encoder = NumberTokenizer(tokenizer, plain_digits)
    model = get_peft_model(model, config, tokenizer=ntok)
    if regime == "scratch":
        for parameter in model.parameters():
            parameter.requires_grad_(True)
    side = ntok.marker_token_id is not None
    codec = Codec(ntok.tokenizer, ntok, answer_encoder, side=side, places=config.num_places)
    settings["number_config"] = {
        key: getattr(config, key)
        for key in (
            "encoding", "int_digits", "frac_digits", "aggregate", "sign_policy", "fone_projection",
            "fone_head_input", "fone_head_target", "fone_bases", "xval_form", "xval_center", "xval_scale", "xval_clip",
            "number_loss_weight", "ntl_weight", "ntl_kind", "aggregate_loss_lambda", "r", "lora_alpha",
        )
    }  # fmt: skip
    settings["number_config"]["target_modules"] = sorted(config.target_modules)
    return Built(model, codec, ntok.tokenizer, ntok, config, count_parameters(model), settings)
