"""QLoRA: numadapter on a 4-bit (bitsandbytes NF4) base model, with the number parts kept in full precision.

QLoRA (Dettmers et al., 2023) freezes the base in 4-bit NormalFloat with double quantisation and trains LoRA on
top. numadapter adds the [NUM] / [AGG] embedding rows and the number modules (FoNE projection and digit head, xVal
direction and regression head); those are small and numerically sensitive (FoNE periods reach 10^m), so they are
never quantised and are trained in float32. The flow::

    from numadapter.integrations.qlora import qlora_config, prepare_qlora_model, check_number_precision

    base = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16,
                                                quantization_config=qlora_config(torch.bfloat16))
    base = prepare_qlora_model(base)                  # PEFT's prepare_model_for_kbit_training
    model = numadapter.get_peft_model(base, NumberAdapterConfig(...), tokenizer=tokenizer)
    check_number_precision(model)                     # number modules and [NUM] rows: float32, trainable

Only ``nn.Linear`` layers are quantised (transformers keeps ``lm_head`` and the embeddings unquantised), so the
[NUM] rows live in ordinary embedding / LM-head weights. PEFT creates the trained rows in float32 (its default
``autocast_adapter_dtype=True`` upcasts adapter weights of a bf16 / fp16 base) and the number modules are float32 by
construction (`numadapter.tuner.number_modules`). `prepare_qlora_model` (PEFT's ``prepare_model_for_kbit_training``)
additionally casts the non-quantised base weights (norms, embeddings, LM head) to float32. TRL's ``SFTTrainer`` then
casts every trainable parameter of a quantised model to bf16 (the QLoRA paper's advice for LoRA);
`restore_number_precision` undoes that for the number parameters and is what a numadapter trainer calls after
``SFTTrainer.__init__``.

DeepSpeed ZeRO-3: partitioning flattens parameters of one dtype, so the packed 4-bit weights must be *stored* in the
training dtype: pass ``quant_storage=torch.bfloat16`` (``bnb_4bit_quant_storage``) for a bf16 model loaded with
``dtype=torch.bfloat16``, and `check_zero3_quant_storage` refuses a mismatch. Without ZeRO-3 the default ``uint8``
storage is fine. (With ``bf16`` enabled, DeepSpeed itself runs every parameter in bf16 in the forward pass and keeps
float32 master weights in the optimizer; that applies to the number parameters too.)

bitsandbytes >= 0.50 runs 4-bit layers on CPU too (that is how the tests train a QLoRA model here); install it with
``pip install "numadapter[bnb]"``.

CPU repack: on a CPU with AVX512-BF16, bitsandbytes 0.50 rewrites a 4-bit layer's weight into a tiled layout on its
first forward in eval mode without gradients (``[N * K / 2, 1]`` -> ``[N, K / 2]``, block scales rounded to bf16 and
stored ``[K / blocksize, N]``) and from then on computes it with a bf16 kernel that has no backward: gradients stop
flowing through that layer, silently, also in train mode, and ``dequantize_4bit`` of the new layout returns wrong
weights. `keep_canonical_layout` (called by `prepare_qlora_model` and `numadapter.training.sft.NumberSFTTrainer`)
turns the repack off and undoes it where it already happened; `dequantize_cpu_packed` reads the tiled layout (the
export uses it for a layer that was repacked anyway).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

__all__ = [
    "qlora_config",
    "prepare_qlora_model",
    "restore_number_precision",
    "check_number_precision",
    "check_zero3_quant_storage",
    "keep_canonical_layout",
    "dequantize_cpu_packed",
]

QUANT_TYPES = ("nf4", "fp4")
STORAGE_DTYPES = (torch.uint8, torch.float16, torch.bfloat16, torch.float32)
COMPUTE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
BNB_INSTALL = 'pip install "numadapter[bnb]" (bitsandbytes>=0.50,<0.51)'
CPU_TILE_ROWS = 32  # rows per tile of bitsandbytes' CPU layout (``_convert_weight_packed_for_cpu``'s ``block_n``)


def _require_bitsandbytes() -> None:
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"QLoRA needs bitsandbytes: {BNB_INSTALL}.") from exc


def qlora_config(
    compute_dtype: torch.dtype = torch.bfloat16,
    quant_storage: torch.dtype | None = None,
    quant_type: str = "nf4",
    double_quant: bool = True,
    skip_modules: list[str] | None = None,
) -> Any:
    """The `transformers.BitsAndBytesConfig` of QLoRA: 4-bit NF4 weights with double quantisation.

    Args:
        compute_dtype: dtype the 4-bit layers compute in (``bnb_4bit_compute_dtype``); bf16 on GPUs, float32 or
            bf16 on CPU. Higher precision: slower, slightly more accurate.
        quant_storage: dtype the packed 4-bit weights are stored in (``bnb_4bit_quant_storage``). None: bitsandbytes'
            ``uint8``. Under DeepSpeed ZeRO-3 it must equal the training dtype (see the module docstring).
        quant_type: ``"nf4"`` (QLoRA's NormalFloat) or ``"fp4"``.
        double_quant: quantise the quantisation constants too (QLoRA's double quantisation; ~0.4 bit per weight less).
        skip_modules: module names to keep unquantised (``llm_int8_skip_modules``; transformers always keeps the LM
            head unquantised).

    Returns:
        A `transformers.BitsAndBytesConfig` for ``from_pretrained(..., quantization_config=...)``.

    Raises:
        ValueError / TypeError: an unknown quant type or dtype (the message lists the accepted ones).
        ImportError: bitsandbytes is not installed.
    """
    if quant_type not in QUANT_TYPES:
        raise ValueError(f"`quant_type` must be one of {list(QUANT_TYPES)}, got {quant_type!r}.")
    if not isinstance(compute_dtype, torch.dtype) or compute_dtype not in COMPUTE_DTYPES:
        raise ValueError(f"`compute_dtype` must be one of {[str(d) for d in COMPUTE_DTYPES]}, got {compute_dtype!r}.")
    if quant_storage is not None and (
        not isinstance(quant_storage, torch.dtype) or quant_storage not in STORAGE_DTYPES
    ):
        raise ValueError(
            f"`quant_storage` must be None or one of {[str(d) for d in STORAGE_DTYPES]}, got {quant_storage!r}: "
            "use the model's dtype for DeepSpeed ZeRO-3."
        )
    if not isinstance(double_quant, bool):
        raise TypeError(f"`double_quant` must be a bool, got {type(double_quant).__name__}.")
    _require_bitsandbytes()
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=quant_type,
        bnb_4bit_use_double_quant=double_quant,
        bnb_4bit_compute_dtype=compute_dtype,
        bnb_4bit_quant_storage=quant_storage if quant_storage is not None else torch.uint8,
        llm_int8_skip_modules=skip_modules,
    )


def quantized_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The bitsandbytes 4-bit weights of `model` (``Params4bit``), by qualified parameter name."""
    return {n: p for n, p in model.named_parameters() if type(p).__name__ == "Params4bit"}


def is_cpu_packed(weight: torch.Tensor) -> bool:
    """Whether a ``Params4bit`` is in bitsandbytes' CPU layout (repacked by a forward, see the module docstring)."""
    return bool(getattr(getattr(weight, "quant_state", None), "packing_format_for_cpu", False))


def _cpu_packed_codes(packed: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """The 4-bit codes ``[N, K]`` (uint8, 0..15) of a weight of `shape` ``(N, K)`` stored in the CPU layout.

    That layout (``[N, K / 2]`` bytes) cuts the code matrix into tiles of 32 rows; for each tile and each pair of
    columns, the 64 codes (32 rows x 2 columns, row-major) take 32 bytes: the first 32 codes in the low nibbles, the
    last 32 in the high nibbles.
    """
    rows, cols = shape
    chunks = packed.contiguous().view(torch.uint8).reshape(-1, CPU_TILE_ROWS)
    tiles = torch.cat([chunks & 0xF, chunks >> 4], dim=1)  # [(N / 32) * (K / 2), 64]
    return tiles.reshape(rows // CPU_TILE_ROWS, cols // 2, CPU_TILE_ROWS, 2).transpose(1, 2).reshape(rows, cols)


def _cpu_packed_scales(state: Any) -> torch.Tensor:
    """The float32 block scales ``[N, K / blocksize]`` of a CPU-layout weight (stored bf16, ``[K / blocksize, N]``)."""
    return state.absmax.float().T


def dequantize_cpu_packed(weight: torch.Tensor) -> torch.Tensor:
    """The float32 weight ``[out, in]`` of a ``Params4bit`` in bitsandbytes' CPU layout (`is_cpu_packed`).

    These are the weights the repacked layer computes with: the codes of the original quantisation times its block
    scales as the repack rounded them to bf16 (relative error <= 2^-8 against the weights before the repack; the
    finer double-quantised scales are gone). ``bitsandbytes.functional.dequantize_4bit`` reads this layout as the
    original one and returns wrong weights.

    Raises:
        ValueError: `weight` is not in the CPU layout.
    """
    if not is_cpu_packed(weight):
        raise ValueError(
            f"dequantize_cpu_packed expects a 4-bit weight in bitsandbytes' CPU layout, got {type(weight).__name__} "
            f"of shape {list(weight.shape)}: use bitsandbytes.functional.dequantize_4bit for the original layout."
        )
    state = weight.quant_state
    rows, cols = state.shape
    values = state.code.float().to(weight.device)[_cpu_packed_codes(weight.data, state.shape).long()]
    scales = _cpu_packed_scales(state)  # [N, K / blocksize]
    return (values.reshape(rows, -1, state.blocksize) * scales[..., None]).reshape(rows, cols)


def _restore_canonical(weight: torch.Tensor) -> None:
    """Rewrites a CPU-layout ``Params4bit`` into the original layout, in place, keeping its weights exactly.

    The codes go back to bitsandbytes' packing (two per byte, the first in the high nibble, row-major); the bf16
    block scales become float32 scales without double quantisation (bitsandbytes' own inverse re-quantises them,
    which changes the weights).
    """
    state = weight.quant_state
    codes = _cpu_packed_codes(weight.data, state.shape).reshape(-1, 2)
    packed = ((codes[:, 0] << 4) | codes[:, 1]).reshape(state.original_qshape)
    storage = getattr(state, "original_storage_type", None)
    weight.data = packed.view(storage) if storage is not None else packed
    state.absmax = _cpu_packed_scales(state).reshape(-1).contiguous()
    state.dtype = state.original_dtype
    state.packing_format_for_cpu = False


def _is_bnb_linear4bit(module: nn.Module) -> bool:
    """A bitsandbytes ``Linear4bit`` (or subclass), told by name so that bitsandbytes need not be imported."""
    return any(
        cls.__name__ == "Linear4bit" and cls.__module__.startswith("bitsandbytes.") for cls in type(module).__mro__
    )


def keep_canonical_layout(model: nn.Module) -> list[str]:
    """Stops bitsandbytes' CPU repack of the 4-bit layers of `model` and undoes it where it already happened.

    The repack (module docstring) makes the layers compute without a backward, so training after an evaluation
    would lose the gradients through them, and makes their weights unreadable by ``dequantize_4bit``. With it off,
    the layers compute as during training (de-quantise, then matmul in the compute dtype) in eval mode too; on CPU
    that is slower than the repacked bf16 kernel. A no-op for models without 4-bit layers and off CPU.

    Args:
        model: any model; its bitsandbytes ``Linear4bit`` layers are changed in place.

    Returns:
        The names of the layers whose repack was undone (their weights are unchanged; their block scales are now
        float32 without double quantisation).
    """
    restored = []
    for name, module in model.named_modules():
        if not _is_bnb_linear4bit(module):  # (PEFT's LoRA wrapper of one is not: its base layer comes next)
            continue
        module.support_avx512bf16_for_cpu = False  # what bitsandbytes checks before it repacks
        if is_cpu_packed(module.weight):
            _restore_canonical(module.weight)
            restored.append(name)
    return restored


def prepare_qlora_model(
    model: nn.Module,
    gradient_checkpointing: bool = True,
    gradient_checkpointing_kwargs: Mapping[str, Any] | None = None,
) -> nn.Module:
    """PEFT's ``prepare_model_for_kbit_training`` for a 4-bit base, before `numadapter.get_peft_model`.

    Freezes the base, casts its non-quantised bf16 / fp16 parameters (norms, embeddings, LM head) to float32, keeps
    the 4-bit layers in their trainable layout (`keep_canonical_layout`) and, by default, enables gradient
    checkpointing with ``use_reentrant=False`` (no input-gradient hack needed; works with numadapter's embedding
    hooks).

    Args:
        model: a transformers model loaded with ``quantization_config=qlora_config(...)``.
        gradient_checkpointing: enable gradient checkpointing. Lower memory, slower steps (each checkpointed
            layer's forward runs again in the backward pass).
        gradient_checkpointing_kwargs: passed to ``gradient_checkpointing_enable`` (default
            ``{"use_reentrant": False}``).

    Returns:
        The same model, prepared in place.

    Raises:
        ValueError: the model has no 4-bit layers (load it with ``quantization_config=qlora_config(...)``).
    """
    if not quantized_weights(model):
        raise ValueError(
            f"prepare_qlora_model expects a 4-bit model, but {type(model).__name__} has no bitsandbytes 4-bit "
            "weights: load it with from_pretrained(..., "
            "quantization_config=numadapter.integrations.qlora.qlora_config())."
        )
    from peft import prepare_model_for_kbit_training

    kwargs = {"use_reentrant": False, **dict(gradient_checkpointing_kwargs or {})}
    keep_canonical_layout(model)
    return prepare_model_for_kbit_training(
        model, use_gradient_checkpointing=gradient_checkpointing, gradient_checkpointing_kwargs=kwargs
    )


def number_parameters(model: nn.Module) -> dict[str, torch.nn.Parameter]:
    """The parameters numadapter adds besides LoRA: the number modules and the [NUM] / [AGG] rows, by name."""
    return {
        name: param
        for name, param in model.named_parameters()
        if ".number_modules." in f".{name}" or "trainable_tokens_delta" in name
    }


@torch.no_grad()
def restore_number_precision(model: nn.Module, dtype: torch.dtype = torch.float32) -> list[str]:
    """Casts the number modules and [NUM] rows back to `dtype` (in place); returns the names it changed.

    TRL's ``SFTTrainer`` casts *every* trainable parameter of a quantised model to bf16 in its constructor (QLoRA
    paper's advice for LoRA matrices); numadapter's number parameters must stay float32, so a trainer built on it
    calls this right after ``SFTTrainer.__init__`` (before the optimizer exists). Only floating parameters of
    another dtype are touched.

    Args:
        model: a numadapter ``PeftModel``.
        dtype: the dtype to restore (float32).

    Returns:
        The qualified names of the parameters that were cast.
    """
    changed = []
    for name, param in number_parameters(model).items():
        if param.dtype.is_floating_point and param.dtype != dtype:
            param.data = param.data.to(dtype)
            changed.append(name)
    return changed


def check_number_precision(model: nn.Module, dtype: torch.dtype = torch.float32) -> dict[str, torch.dtype]:
    """Checks that the number modules and the [NUM] rows are unquantised, trainable and in `dtype`.

    Args:
        model: a numadapter ``PeftModel`` (e.g. on a 4-bit base).
        dtype: the required dtype (float32: full precision).

    Returns:
        ``{parameter name: dtype}`` of every number parameter checked.

    Raises:
        ValueError: the model has no number parameters, or one is quantised, frozen or of another dtype (the
            message names it and the fix).
    """
    params = number_parameters(model)
    if not params:
        raise ValueError(
            f"{type(model).__name__} has no numadapter number parameters (number modules or [NUM] rows): pass the "
            "PeftModel that numadapter.get_peft_model returned."
        )
    for name, param in params.items():
        if type(param).__name__ in ("Params4bit", "Int8Params"):
            raise ValueError(f"number parameter {name} is quantised ({type(param).__name__}); it must stay {dtype}.")
        if param.dtype != dtype:
            raise ValueError(
                f"number parameter {name} is {param.dtype}, expected {dtype}: something cast it (TRL's SFTTrainer "
                "casts the trainable parameters of quantised models to bf16; get_peft_model with "
                "autocast_adapter_dtype=False keeps the rows in the embedding dtype); call "
                "numadapter.integrations.qlora.restore_number_precision(model) after that cast."
            )
        if not param.requires_grad:
            raise ValueError(f"number parameter {name} is frozen; the adapter must be in training mode.")
    return {name: param.dtype for name, param in params.items()}


def _training_dtype(model: nn.Module, deepspeed_config: Mapping[str, Any] | None) -> torch.dtype:
    """bf16 / fp16 when the DeepSpeed config enables it explicitly, else the dtype the model was loaded in."""
    config = deepspeed_config or {}
    for key, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        section = config.get(key)
        if isinstance(section, Mapping) and section.get("enabled") is True:
            return dtype
    model_config = getattr(model, "config", None)
    loaded = getattr(model_config, "dtype", None) or getattr(model_config, "torch_dtype", None)
    if isinstance(loaded, str):
        loaded = getattr(torch, loaded, None)
    return loaded if isinstance(loaded, torch.dtype) else torch.float32


def check_zero3_quant_storage(
    model: nn.Module, deepspeed_config: Mapping[str, Any] | None = None, dtype: torch.dtype | None = None
) -> None:
    """Refuses a 4-bit model whose packed weights are not stored in the training dtype under ZeRO-3.

    Args:
        model: the (4-bit) base model or PeftModel.
        deepspeed_config: the DeepSpeed config dict; None: checks only when ZeRO-3 is active in this process
            (`numadapter.integrations.launch.zero3_enabled`).
        dtype: the dtype the storage must have. None: bf16 / fp16 when the DeepSpeed config enables it (``true``,
            not ``"auto"``), else the dtype the model was loaded in (``model.config.dtype``).

    Raises:
        ValueError: naming both dtypes and ``bnb_4bit_quant_storage`` as the setting to change.
    """
    if deepspeed_config is not None:
        if deepspeed_config.get("zero_optimization", {}).get("stage", 0) != 3:
            return
    else:
        from numadapter.integrations.launch import zero3_enabled

        if not zero3_enabled():
            return
    packed = quantized_weights(model)
    if not packed:
        return
    expected = dtype if dtype is not None else _training_dtype(model, deepspeed_config)
    storage = sorted({str(p.dtype) for p in packed.values()})
    if storage != [str(expected)]:
        raise ValueError(
            f"DeepSpeed ZeRO-3 needs the 4-bit weights stored in the training dtype {expected}, found "
            f"{', '.join(storage)}: load the base with qlora_config(..., quant_storage={expected}) "
            f"(bnb_4bit_quant_storage={expected}) and dtype={expected}."
        )
