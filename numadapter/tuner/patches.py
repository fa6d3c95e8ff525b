"""Per-architecture knowledge: which modules embed tokens, which module is the LM head, what is tied to what.

numadapter patches at the *embedding module* (a forward hook adds the number features to its output) and captures
the *input of the output embedding* (a forward pre-hook), so every architecture's own scaling applies exactly as the
model applies it (docs/DESIGN.md, "Respect each architecture's own scaling"):

- Llama (and Mistral, Qwen2: the same layout): ``model.embed_tokens`` -> decoder -> ``lm_head``; no scaling.
- Granite: ``embed_tokens`` output is multiplied by ``embedding_multiplier`` inside ``GraniteModel.forward`` (so the
  number features, added at the embedding module, are scaled with the [NUM] row); logits are divided by
  ``logits_scaling`` after ``lm_head`` (the captured hidden state is the one ``lm_head`` sees).
- T5: ``shared`` is the input embedding, but the stacks call their own ``encoder.embed_tokens`` /
  ``decoder.embed_tokens`` (separate modules holding the *same* Parameter in transformers 5, or the same module
  object after some resizes). Both are hooked; which side's tensors apply is decided by forward pre-hooks on the
  ``encoder`` / ``decoder`` stacks, never by shapes. T5 v1.0 (``scale_decoder_outputs``) multiplies the decoder
  output by ``d_model**-0.5`` before a tied ``lm_head``; the pre-hook captures it after that scaling.

Ties are detected by Parameter identity, ZeRO-3 ``ds_id`` or ``data_ptr()``
(`numadapter.integrations.deepspeed_zero.same_parameter`), never by ``config.tie_word_embeddings`` (transformers 5 sets
that to True for every T5, including v1.1 / Flan-T5 checkpoints whose ``lm_head`` has its own weights). Shapes come
from `numadapter.integrations.deepspeed_zero.full_shape` (``ds_shape`` for a ZeRO-3 partitioned weight, whose own shape
is ``(0,)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from numadapter.integrations.deepspeed_zero import (
    full_shape,
    gathered_parameters,
    is_partitioned,
    matrix_shape,
    partition_like,
    same_parameter,
)


@dataclass(frozen=True)
class Architecture:
    """What numadapter needs to know about one supported model class.

    Attributes:
        name: short family name (``"llama"``, ``"granite"``, ``"t5"``).
        model_class: the transformers class name.
        is_encoder_decoder: True for T5 (two sides of number tensors, labels not shifted).
        task_type: the PEFT task type the adapter config must carry.
    """

    name: str
    model_class: str
    is_encoder_decoder: bool
    task_type: str


SUPPORTED_ARCHITECTURES: dict[str, Architecture] = {
    "LlamaForCausalLM": Architecture("llama", "LlamaForCausalLM", False, "CAUSAL_LM"),
    "GraniteForCausalLM": Architecture("granite", "GraniteForCausalLM", False, "CAUSAL_LM"),
    "MistralForCausalLM": Architecture("mistral", "MistralForCausalLM", False, "CAUSAL_LM"),
    "Qwen2ForCausalLM": Architecture("qwen2", "Qwen2ForCausalLM", False, "CAUSAL_LM"),
    "T5ForConditionalGeneration": Architecture("t5", "T5ForConditionalGeneration", True, "SEQ_2_SEQ_LM"),
}


def detect_architecture(model: nn.Module) -> Architecture:
    """The `Architecture` of a transformers model; raises `ValueError` listing the supported classes otherwise."""
    arch = SUPPORTED_ARCHITECTURES.get(type(model).__name__)
    if arch is None:
        raise ValueError(
            f"numadapter does not support {type(model).__name__} yet; supported model classes: "
            f"{sorted(SUPPORTED_ARCHITECTURES)}. Load the base model with one of these classes."
        )
    return arch


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two weights are tied: the same Parameter, the same ZeRO-3 ``ds_id``, or the same ``data_ptr()``.

    See `numadapter.integrations.deepspeed_zero.same_parameter` (a partitioned or empty weight has ``data_ptr() == 0``
    like any other, so storage is compared only for ordinary, non-empty tensors).
    """
    return same_parameter(a, b)


def expects_untied_head(model_config: object) -> bool:
    """Whether a T5 config says its checkpoint has an LM head of its own (T5 v1.1 / Flan-T5).

    transformers 5 forces ``tie_word_embeddings=True`` on every T5 config and keeps the old meaning in
    ``scale_decoder_outputs``: False for v1.1-style checkpoints, whose ``lm_head.weight`` differs from ``shared``.
    """
    return (
        getattr(model_config, "model_type", None) == "t5"
        and getattr(model_config, "scale_decoder_outputs", True) is False
    )


def check_partitioned_head(model: nn.Module) -> None:
    """Refuses a T5 v1.1 loaded ZeRO-3 partitioned with its LM head tied to the embedding.

    Under ``zero.Init``, transformers 5.23 compares the two checkpoint tensors it would tie while both are empty
    partitions, finds them "equal" and ties ``lm_head`` to ``shared``: the checkpoint's LM head is silently lost (its
    logits are the embedding's). numadapter cannot recover it from the model, so it says how to load instead.

    Raises:
        ValueError: the config expects an own LM head (`expects_untied_head`) but the partitioned model has none.
    """
    output = model.get_output_embeddings()
    if output is None or not expects_untied_head(model.config):
        return
    head, embedding = base_weight(output), base_weight(model.get_input_embeddings())
    if is_partitioned(head) and same_storage(head, embedding):
        raise ValueError(
            f"{type(model).__name__} has an LM head of its own in its checkpoint (config scale_decoder_outputs=False, "
            "T5 v1.1 / Flan-T5), but it was loaded ZeRO-3 partitioned (zero.Init) with lm_head tied to the shared "
            "embedding: transformers ties them under zero.Init, losing the checkpoint's LM head. Load this model "
            "whole: create the training arguments after from_pretrained, or set zero3_init_flag: false in the "
            "accelerate config (numadapter train does this by itself for such models)."
        )


def check_resized_head(model: nn.Module, original_rows: int, rows: int) -> None:
    """Refuses a T5 v1.1 that reached numadapter already resized, with its LM head tied to the embedding.

    transformers' ``resize_token_embeddings`` decides ties from ``config.tie_word_embeddings`` (always True for T5 in
    transformers 5), so resizing a T5 v1.1 ties ``lm_head`` to ``shared`` and the checkpoint's LM head is lost.
    PEFT's ``AutoPeftModelForSeq2SeqLM.from_pretrained`` calls it when the adapter directory holds a tokenizer longer
    than the embedding (a saved `NumberTokenizer` is). `resize_embeddings` keeps the ties; this names the other one.

    Raises:
        ValueError: the config expects an own LM head (`expects_untied_head`) but the resized model has none.
    """
    output = model.get_output_embeddings()
    if output is None or not expects_untied_head(model.config):
        return
    if same_storage(base_weight(output), base_weight(model.get_input_embeddings())):
        raise ValueError(
            f"{type(model).__name__} has an LM head of its own in its checkpoint (config scale_decoder_outputs=False, "
            f"T5 v1.1 / Flan-T5), but it was resized from {original_rows} to {rows} rows before numadapter loaded the "
            "adapter, and the resize tied lm_head to the shared embedding, losing the checkpoint's LM head "
            "(transformers' resize_token_embeddings does; AutoPeftModelForSeq2SeqLM.from_pretrained calls it when the "
            "adapter directory holds the tokenizer). Load the base unresized and let numadapter resize it: "
            "PeftModel.from_pretrained(AutoModelForSeq2SeqLM.from_pretrained(base), adapter_dir)."
        )


def base_weight(module: nn.Module) -> torch.Tensor:
    """The raw weight of an embedding / linear, also through PEFT wrappers (never the merged copy)."""
    while hasattr(module, "base_layer") or hasattr(module, "token_adapter"):
        module = module.token_adapter.base_layer if hasattr(module, "token_adapter") else module.base_layer
    return module.weight


def innermost(module: nn.Module) -> nn.Module:
    """The plain ``nn.Embedding`` / ``nn.Linear`` inside PEFT wrappers."""
    while hasattr(module, "base_layer") or hasattr(module, "token_adapter"):
        module = module.token_adapter.base_layer if hasattr(module, "token_adapter") else module.base_layer
    return module


def module_name(model: nn.Module, target: nn.Module) -> str:
    """The qualified name of `target` inside `model` (first occurrence)."""
    for name, module in model.named_modules(remove_duplicate=False):
        if module is target:
            return name
    raise ValueError(f"{type(target).__name__} is not a submodule of {type(model).__name__}.")


def tied_group(model: nn.Module) -> tuple[list[str], str | None]:
    """Modules sharing the input embedding weight, and the untied output embedding.

    Returns:
        ``(tied, untied_output)``: ``tied`` are the qualified names of every ``nn.Embedding`` / ``nn.Linear`` whose
        weight is the input embedding's (by identity / data_ptr), the input embedding itself first; ``untied_output``
        is the name of the output embedding when it has its own weight, else None.
    """
    embedding = model.get_input_embeddings()
    weight = embedding.weight
    source = module_name(model, embedding)
    tied = [source]
    for name, module in model.named_modules(remove_duplicate=False):
        if name == source or not isinstance(module, (nn.Embedding, nn.Linear)):
            continue
        if same_storage(module.weight, weight):
            tied.append(name)
    output = model.get_output_embeddings()
    untied_output = None
    if output is not None and not same_storage(output.weight, weight):
        untied_output = module_name(model, output)
    return tied, untied_output


def embedding_call_sites(model: nn.Module, arch: Architecture) -> list[nn.Module]:
    """The module objects whose forward turns ids into embeddings during the model's forward (deduplicated)."""
    if arch.is_encoder_decoder:
        sites = [model.encoder.embed_tokens, model.decoder.embed_tokens]
    else:
        sites = [model.get_input_embeddings()]
    unique: list[nn.Module] = []
    for site in sites:
        if all(site is not seen for seen in unique):
            unique.append(site)
    return unique


def side_scopes(model: nn.Module, arch: Architecture) -> list[tuple[str, nn.Module]]:
    """``(side, module)`` pairs whose forward defines which side's number tensors the embedding reads (T5 only)."""
    if arch.is_encoder_decoder:
        return [("encoder", model.encoder), ("decoder", model.decoder)]
    return []


def output_module(model: nn.Module) -> nn.Module:
    """The module producing token logits (its input is the hidden state the number head reads)."""
    output = model.get_output_embeddings()
    if output is None:
        raise ValueError(f"{type(model).__name__} has no output embedding (LM head); numadapter needs one.")
    return output


@torch.no_grad()
def resize_embeddings(model: nn.Module, new_rows: int) -> None:
    """Grows the input embedding (and an untied LM head) to `new_rows` rows, keeping every tie as it was.

    transformers' ``resize_token_embeddings`` decides ties from ``config.tie_word_embeddings``, which ties a T5 v1.1
    LM head to the embedding (destroying it) in transformers 5; this function swaps in new Parameters for exactly the
    modules that share storage. New rows are zeros (deterministic, so a reload reproduces them bit-exactly; the
    number-token rows are then served by PEFT trainable tokens). Never shrinks. A ZeRO-3 partitioned weight is
    gathered for the copy, and its replacement is partitioned at once
    (`numadapter.integrations.deepspeed_zero.partition_like`).

    Args:
        model: a transformers model.
        new_rows: the row count wanted (>= the current one).
    """
    embedding = model.get_input_embeddings()
    old = embedding.weight
    rows, _ = matrix_shape(old, "the input embedding weight")
    if new_rows < rows:
        raise ValueError(f"numadapter never shrinks an embedding: it has {rows} rows, asked for {new_rows}.")
    if new_rows == rows:
        return
    output = model.get_output_embeddings()
    groups = [old]
    if output is not None and not same_storage(output.weight, old):
        groups.append(output.weight)
    replacements: dict[int, nn.Parameter] = {}
    for weight in groups:
        columns = full_shape(weight)[1]
        grown = torch.zeros(new_rows, columns, dtype=weight.dtype, device=weight.device)
        if grown.device.type != "meta":
            with gathered_parameters([weight], modifier_rank=None):  # ZeRO-3: every rank reads the whole weight
                grown[: weight.shape[0]] = weight.data
        replacement = nn.Parameter(grown, requires_grad=weight.requires_grad)
        partition_like(weight, [replacement])  # ZeRO-3: partitioned at once, like the weight it replaces
        replacements[id(weight)] = replacement
    for _, module in model.named_modules(remove_duplicate=False):
        if not isinstance(module, (nn.Embedding, nn.Linear)):
            continue
        for weight in groups:
            if module.weight is weight or same_storage(module.weight, weight):
                module._parameters["weight"] = replacements[id(weight)]  # not via setattr: no meta move under
                # accelerate's init_empty_weights (PeftModel(..., low_cpu_mem_usage=True))
                if isinstance(module, nn.Embedding):
                    module.num_embeddings = new_rows
                else:
                    module.out_features = new_rows
                break
    for config in {id(c): c for c in (model.config, model.config.get_text_config())}.values():
        config.vocab_size = new_rows
    if hasattr(model, "vocab_size"):
        model.vocab_size = new_rows
