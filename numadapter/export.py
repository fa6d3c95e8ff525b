"""Merge-and-export: one self-contained directory per trained adapter (docs/DESIGN.md, "Export owns its directory").

An export directory holds

- ``config.json``, ``generation_config.json``, ``model.safetensors`` (or shards) and
  ``model.safetensors.index.json`` (also for one file: engines that find no index load every ``*.safetensors`` of
  the directory, ``number_modules.safetensors`` included): the base model with LoRA merged
  and the [NUM] / [AGG] rows written into its (resized) input embedding and LM head. When the [NUM] / [AGG] token
  carries values, ``config.json`` has numadapter's ``model_type`` (``"numadapter-llama"``,
  `numadapter.serving.marking`): transformers without numadapter refuses it, and after ``import numadapter``,
  ``AutoModelForCausalLM.from_pretrained(out_dir)`` (``AutoModelForSeq2SeqLM`` for T5) returns the `load_exported`
  model (`numadapter.serving.auto`). Otherwise (digits without [AGG], a FoNE head left out) it is the base's
  ordinary transformers checkpoint, which transformers serves without numadapter;
- the tokenizer files (with [NUM] / [AGG] as an added special token) and ``number_tokenizer_config.json``: the
  `NumberTokenizer`;
- ``number_modules.safetensors``: the number modules of the adapter (FoNE projection and digit head, xVal direction
  and regression head, the [AGG] aggregate), float32, and the settings stamp with the SHA-256 of each module tensor
  and of the [NUM] / EOS rows written into the merged weights (checked by `load_exported`; the rows when loaded in
  the exported dtype; the rest of the merged weights is an ordinary transformers checkpoint, not digested);
- ``number_config.json``: the number settings and token ids (the fields `NumberAdapterConfig` adds to LoRA), the
  task type, what was merged, the files written and a copy of ``config.json`` as written (``"model_config"``),
  against which `load_exported` checks ``config.json`` (`numadapter.export_files.read_model_config`: its
  ``model_type``; then transformers' loading report: no tensor of the weights may be re-initialised, left random or
  ignored).

Safetensors and JSON only: nothing is unpickled on load.

`load_exported` rebuilds the numadapter model from these files: ``from_pretrained`` of the merged model (with the
base's config, `numadapter.export_files.base_model_config`), then
`numadapter.mapping.get_peft_model` with the saved number settings and PEFT's ``"dummy-target-modules"`` (an adapter
without LoRA layers), so the number modules, the [NUM] rows and the forward / generation hooks are attached by the
same tuner code as during training (`numadapter.tuner.model.NumberAdapterModel`), not by a second implementation.
The tuner serves the [NUM] rows from PEFT trainable tokens; `load_exported` fills them with the merged rows.

Merging (`export_merged`) runs on a deep copy by default (``inplace=False``: the model passed in keeps working, at the
cost of a second copy in memory; ``inplace=True`` merges the model itself, which is then unusable as an adapter):

- ordinary bases: PEFT's ``merge_and_unload`` (LoRA, DoRA and the trainable [NUM] rows);
- 4-bit / 8-bit bitsandbytes bases (QLoRA): each LoRA layer's base weight is dequantised to float32, its LoRA delta
  (``get_delta_weight``) added, and the result stored as an ``nn.Linear`` of the export dtype; the other quantised
  layers are dequantised the same way (a layer that bitsandbytes' CPU forward repacked is read in its new layout,
  `numadapter.integrations.qlora.dequantize_cpu_packed`). The export is therefore a full-precision model: a warning
  gives its size;
- DeepSpeed ZeRO-3 (partitioned parameters): refused. PEFT cannot merge partitioned weights; save the adapter
  (``trainer.save_model()``) and export offline with `export_checkpoint` (``numadapter export --adapter DIR``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import warnings
from typing import Any

import torch
from torch import nn

from numadapter.checkpoints import float_dtypes, resolve_dtype
from numadapter.tokenization.matching import check_tokenizer_matches

NUMBER_CONFIG_NAME = "number_config.json"
NUMBER_MODULES_NAME = "number_modules.safetensors"
FORMAT = "numadapter-merged"
FORMAT_VERSION = 1
DTYPES = float_dtypes()


def number_fields() -> list[str]:
    """The fields `NumberAdapterConfig` adds to `peft.LoraConfig` (number settings and model binding)."""
    from peft import LoraConfig

    from numadapter.config import NumberAdapterConfig

    lora = {f.name for f in dataclasses.fields(LoraConfig)}
    return [f.name for f in dataclasses.fields(NumberAdapterConfig) if f.name not in lora]


def _adapter(model: Any) -> tuple[Any, str, Any]:
    """The numadapter tuner, the active adapter name and its config; `TypeError` for other models."""
    from numadapter.tuner.model import NumberAdapterModel

    tuner = getattr(model, "base_model", None)
    if not isinstance(tuner, NumberAdapterModel):
        raise TypeError(
            f"export_merged needs the PeftModel of a numadapter adapter (numadapter.get_peft_model or "
            f"PeftModel.from_pretrained of a numadapter checkpoint), got {type(model).__name__}."
        )
    name = model.active_adapter
    return tuner, name, tuner.peft_config[name]


def _check_not_partitioned(model: nn.Module) -> None:
    if any(hasattr(p, "ds_id") for p in model.parameters()):
        raise ValueError(
            "this model's parameters are partitioned by DeepSpeed ZeRO-3, and PEFT cannot merge LoRA into partitioned "
            "weights. Save the adapter on every rank (trainer.save_model(DIR)), then export in a normal process: "
            "numadapter export --adapter DIR --out OUT_DIR (or numadapter.export.export_checkpoint(DIR, OUT_DIR))."
        )


def _is_bnb(param: torch.Tensor) -> bool:
    return type(param).__name__ in ("Params4bit", "Int8Params")


def _dequantized(module: nn.Module) -> torch.Tensor:
    """The float32 weight of a bitsandbytes linear layer (or of a plain one)."""
    weight = module.weight
    if not _is_bnb(weight):
        return weight.detach().float()
    from numadapter.integrations.qlora import dequantize_cpu_packed, is_cpu_packed

    if is_cpu_packed(weight):  # repacked by a CPU forward: dequantize_4bit would misread it
        return dequantize_cpu_packed(weight)
    from transformers.integrations.bitsandbytes import dequantize_bnb_weight

    state = getattr(module, "state", None)
    return dequantize_bnb_weight(weight, state).detach().float()


def _linear(module: nn.Module, weight: torch.Tensor, dtype: torch.dtype) -> nn.Linear:
    """An ``nn.Linear`` of `dtype` with `weight` (float32, ``[out, in]``) and the bias of `module`."""
    bias = getattr(module, "bias", None)
    out = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device="meta")
    out.weight = nn.Parameter(weight.to(dtype), requires_grad=False)
    if bias is not None:
        out.bias = nn.Parameter(bias.detach().to(weight.device, dtype), requires_grad=False)
    return out


def _model_bytes(model: nn.Module, dtype: torch.dtype) -> tuple[int, int]:
    """(bytes now, bytes once every parameter is a full `dtype` tensor)."""
    now = after = 0
    itemsize = torch.empty((), dtype=dtype).element_size()
    for param in model.parameters():
        now += param.numel() * param.element_size()
        state = getattr(param, "quant_state", None)
        numel = state.shape.numel() if state is not None and hasattr(state, "shape") else param.numel()
        after += numel * itemsize
    return now, after


def _dequantize_and_merge(inner: nn.Module, adapter: str, dtype: torch.dtype) -> int:
    """Replaces every bitsandbytes layer of `inner` (LoRA-wrapped or not) by a merged ``nn.Linear`` of `dtype`.

    LoRA layers around a quantised base get ``W = dequant(W_base) + sum of their active deltas`` (float32, then cast);
    plain quantised layers get ``dequant(W)``. Returns the number of layers replaced.
    """
    from peft.tuners.lora import LoraLayer

    replaced: list[str] = []
    for name, module in list(inner.named_modules()):
        if not name or any(name.startswith(done + ".") for done in replaced):
            continue  # the root, or inside a layer already replaced (a LoRA layer's base_layer, lora_A, ...)
        if isinstance(module, LoraLayer):
            base = module.get_base_layer()
            if not _is_bnb(base.weight):
                continue
            if module.use_dora.get(adapter, False) or getattr(module, "lora_bias", {}).get(adapter, False):
                raise ValueError(
                    f"{name}: exporting a DoRA / lora_bias adapter on a quantised base is not supported: export the "
                    "saved adapter onto the full-precision base instead (numadapter export --adapter DIR --base PATH)."
                )
            weight = _dequantized(base)  # (out, in)
            if adapter in module.lora_A:
                weight = weight + module.get_delta_weight(adapter).detach().float().to(weight.device)
            inner.set_submodule(name, _linear(base, weight, dtype))
            replaced.append(name)
        elif _is_bnb(getattr(module, "weight", torch.empty(0))):
            inner.set_submodule(name, _linear(module, _dequantized(module), dtype))
            replaced.append(name)
    quantizer = getattr(inner, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(inner)
    elif hasattr(inner.config, "quantization_config"):
        del inner.config.quantization_config
    return len(replaced)


def _default_dtype(model: nn.Module, quantized: bool) -> torch.dtype:
    if quantized:
        loaded = getattr(model.config, "dtype", None)
        if isinstance(loaded, str):
            loaded = DTYPES.get(loaded)
        return loaded if loaded in DTYPES.values() else torch.bfloat16
    from numadapter.tuner.patches import base_weight

    weight = base_weight(model.get_input_embeddings())
    return weight.dtype if weight.dtype in DTYPES.values() else torch.float32


def export_merged(
    model: Any,
    number_tokenizer: Any,
    out_dir: str | os.PathLike,
    *,
    dtype: str | torch.dtype | None = None,
    inplace: bool = False,
    max_shard_size: str | int = "5GB",
) -> str:
    """Writes the merged model, the tokenizer and the number parts to `out_dir` (see the module docstring).

    Args:
        model: the numadapter ``PeftModel`` (its active adapter is exported).
        number_tokenizer: the `NumberTokenizer` of the adapter.
        out_dir: the export directory (created; existing files of the same names are overwritten).
        dtype: dtype of the merged weights (``"float32"``, ``"bfloat16"``, ``"float16"``). None: the model's
            weight dtype (for a 4-bit base, the dtype it was loaded with). The number modules stay float32.
        inplace: merge `model` itself instead of a deep copy (saves one model copy of memory; `model` is then the
            merged plain model's wrapper and must not be used as an adapter any more).
        max_shard_size: passed to ``save_pretrained``.

    Returns:
        `out_dir` as a string.

    Raises:
        TypeError: `model` is not a numadapter PeftModel, or `number_tokenizer` not a `NumberTokenizer`.
        ValueError: the tokenizer does not match the adapter, a bad `dtype`, or a ZeRO-3 partitioned model.
    """
    from safetensors.torch import save_file

    from numadapter.export_files import check_export_target, file_listing, staged_directory, write_weight_index
    from numadapter.integrations.qlora import quantized_weights
    from numadapter.serving.marking import unreachable_ids, write_config
    from numadapter.tuner.integrity import STAMP, with_digests

    tuner, adapter, config = _adapter(model)
    check_tokenizer_matches(number_tokenizer, config, "export_merged")
    _check_not_partitioned(model)
    protected = {
        "the base model's directory": config.base_model_name_or_path,
        "the directory the base model was loaded from": getattr(tuner.model, "name_or_path", None),
    }
    check_export_target(out_dir, protected)
    quantized = bool(quantized_weights(model))
    target = resolve_dtype(dtype) or _default_dtype(tuner.model, quantized)
    modules = tuner.number_modules[adapter] if adapter in tuner.number_modules else None
    module_state = {} if modules is None else {k: _module_tensor(v) for k, v in modules.state_dict().items()}
    if quantized:
        now, after = _model_bytes(model, target)
        warnings.warn(
            f"Exporting a model with a 4-bit / 8-bit (QLoRA) base: the base is dequantised and merged into a "
            f"full-precision {target} model of about {after / 2**30:.2f} GiB, in memory (on top of the "
            f"{now / 2**30:.2f} GiB the quantised model takes{'' if inplace else ' and its copy'}) and on disk. Pass "
            "dtype='bfloat16' for the smallest export, or inplace=True to skip the copy.",
            stacklevel=2,
        )
    work = model if inplace else copy.deepcopy(model)
    if quantized:
        _dequantize_and_merge(work.base_model.model, adapter, target)
    plain = work.merge_and_unload(adapter_names=[adapter], drop_numbers=True)  # the number modules are saved above
    plain.to(target)
    plain.config.dtype = target
    suppressed = unreachable_ids(config)  # [NUM] of a FoNE adapter whose head was left out: never generated
    if suppressed:
        already = plain.generation_config.suppress_tokens or []
        plain.generation_config.suppress_tokens = sorted({*already, *suppressed})
    if STAMP in module_state:  # digests of the number modules and of the rows numadapter wrote, checked on load
        module_state[STAMP] = with_digests({**module_state, **_written_rows(plain, config)}, STAMP)
    with staged_directory(out_dir) as staging:  # replaces out_dir whole once every file is written
        plain.save_pretrained(staging, max_shard_size=max_shard_size)
        write_weight_index(staging)  # engines that glob *.safetensors read the index, not number_modules
        number_tokenizer.save_pretrained(staging)
        save_file(module_state, os.path.join(staging, NUMBER_MODULES_NAME), metadata={"format": "pt"})
        info = _export_info(config, target, quantized)
        info["model_config"] = write_config(staging, config)  # marked for numbers; load_exported compares with it
        info["files"] = file_listing(staging)
        with open(os.path.join(staging, NUMBER_CONFIG_NAME), "w", encoding="utf-8") as file:
            json.dump(info, file, indent=2, sort_keys=True)
    return os.fspath(out_dir)


def _module_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU copy of a number-module tensor for export: floating ones as float32, others (the stamp) unchanged."""
    tensor = tensor.detach().to("cpu")
    if tensor.is_floating_point():
        tensor = tensor.to(torch.float32)
    return tensor.contiguous().clone()


def _export_info(config: Any, target: torch.dtype, quantized: bool) -> dict[str, Any]:
    """The content of ``number_config.json`` (without the file list)."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "task_type": getattr(config.task_type, "value", config.task_type),
        "number_config": {name: getattr(config, name) for name in number_fields()},
        "merged_adapter": {
            "base_model_name_or_path": config.base_model_name_or_path,
            "r": config.r,
            "lora_alpha": config.lora_alpha,
            "target_modules": sorted(config.target_modules)
            if isinstance(config.target_modules, (set, list))
            else config.target_modules,
            "dtype": str(target).removeprefix("torch."),
            "dequantized_from_4bit": quantized,
        },
    }


def read_number_config(path: str | os.PathLike) -> tuple[Any, dict[str, Any]]:
    """The `NumberAdapterConfig` (no LoRA, frozen) and the raw ``number_config.json`` of an export directory."""
    from peft.utils.constants import DUMMY_TARGET_MODULES

    from numadapter.config import NumberAdapterConfig, with_legacy_defaults

    file = os.path.join(path, NUMBER_CONFIG_NAME)
    if not os.path.isfile(file):
        raise FileNotFoundError(
            f"No {NUMBER_CONFIG_NAME} in {os.fspath(path)!r}: this is not a numadapter export (write one with "
            "numadapter.export.export_merged or `numadapter export`)."
        )
    from numadapter.export_files import REEXPORT
    from numadapter.json_file import read_json

    info = read_json(file, f"copy the complete export directory, or {REEXPORT}")
    if not isinstance(info, dict) or not isinstance(info.get("number_config"), dict):
        raise ValueError(f"{file} holds no `number_config` mapping: the file was edited or damaged; {REEXPORT}.")
    if info.get("format") != FORMAT or info.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{file} has format {info.get('format')!r} version {info.get('format_version')!r}; this numadapter reads "
            f"{FORMAT!r} version {FORMAT_VERSION}: re-export with this version."
        )
    known = set(number_fields())
    settings = {k: v for k, v in with_legacy_defaults(info["number_config"]).items() if k in known}
    config = NumberAdapterConfig(
        task_type=info["task_type"], target_modules=DUMMY_TARGET_MODULES, inference_mode=True, **settings
    )
    return config, info


def _number_rows(base: nn.Module, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The merged rows `ids` of the input embedding and (when untied) of the LM head, float32 copies."""
    from numadapter.tuner.patches import same_storage

    embedding = base.get_input_embeddings().weight
    rows_in = embedding.detach()[ids].float().clone()  # (K, H)
    output = base.get_output_embeddings()
    if output is None or same_storage(output.weight, embedding):
        return rows_in, None
    return rows_in, output.weight.detach()[ids].float().clone()  # (K, H)


def _written_rows(model: nn.Module, config: Any) -> dict[str, torch.Tensor]:
    """The [NUM] / [AGG] / EOS rows of the merged input embedding and (untied) LM head, as stored, keyed
    ``"<parameter>[<ids>]"`` (their digests are saved in the stamp of ``number_modules.safetensors``)."""
    from numadapter.tuner.number_modules import end_token_ids, number_token_ids
    from numadapter.tuner.patches import same_storage

    ids = list(dict.fromkeys(number_token_ids(config) + end_token_ids(config)))
    names = {id(p): n for n, p in model.named_parameters()}
    embedding = model.get_input_embeddings().weight
    weights = [embedding]
    output = model.get_output_embeddings()
    if output is not None and not same_storage(output.weight, embedding):
        weights.append(output.weight)
    return {f"{names[id(w)]}{ids}": w.detach()[ids] for w in weights if ids}  # (K, H) each


def load_exported(
    path: str | os.PathLike, *, dtype: str | torch.dtype | None = None, device_map: Any = None
) -> tuple[Any, Any]:
    """Loads an export directory as a numadapter model (number modules attached) and its `NumberTokenizer`.

    Args:
        path: a directory written by `export_merged`.
        dtype: dtype of the model weights (None: as saved). The number modules are float32.
        device_map: passed to ``from_pretrained`` (e.g. ``"cuda"``).

    Returns:
        ``(model, number_tokenizer)``: `model` is a frozen ``peft.PeftModel`` (eval mode) whose adapter has no LoRA
        layers, only the number modules and the [NUM] rows; use it with ``model(**batch)``, `numadapter.generate`,
        ``model.generate(**batch)`` or a text-generation pipeline.
        ``model.get_base_model()`` is the plain merged transformers model.
    """
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    from numadapter.export_files import (
        base_model_config,
        check_export_files,
        check_loaded_weights,
        config_changes,
        read_model_config,
    )
    from numadapter.mapping import get_peft_model
    from numadapter.tokenization.tokenizer import NumberTokenizer
    from numadapter.tuner.number_modules import number_token_ids

    path = os.fspath(path)
    config, info = read_number_config(path)
    check_export_files(path, info)
    model_config = read_model_config(path, info)
    changes = config_changes(model_config, info.get("model_config"))
    ntok = NumberTokenizer.from_pretrained(path, config=config)
    auto = AutoModelForSeq2SeqLM if config.task_type == "SEQ_2_SEQ_LM" else AutoModelForCausalLM
    kwargs = {"dtype": resolve_dtype(dtype) or "auto"}
    if device_map is not None:
        kwargs["device_map"] = device_map
    # shape mismatches are reported (and raised as an error naming config.json) instead of raised by transformers
    kwargs["config"] = base_model_config(model_config)  # the base's config: config.json may be marked for numadapter
    base, loading = auto.from_pretrained(path, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs)
    check_loaded_weights(path, loading, changes)
    if changes:
        warnings.warn(
            f"{os.path.join(path, 'config.json')} differs from the config the export wrote ({'; '.join(changes)}); "
            "the model is loaded with the edited values. Restore the file if the edit was not intended.",
            stacklevel=2,
        )
    ids = number_token_ids(config)
    rows_in, rows_out = _number_rows(base, ids)
    written = _written_rows(base, config)  # checked against their digests when loaded in the exported dtype
    exported = str(info.get("merged_adapter", {}).get("dtype"))
    same_dtype = str(base.get_input_embeddings().weight.dtype).removeprefix("torch.") == exported
    model = get_peft_model(base, config)
    tuner = model.base_model
    inner = tuner.model
    with torch.no_grad():
        for module, rows in ((inner.get_input_embeddings(), rows_in), (inner.get_output_embeddings(), rows_out)):
            if rows is None or not ids:
                continue
            delta = module.token_adapter.trainable_tokens_delta["default"]  # (K, H)
            delta[: len(ids)] = rows.to(delta.device, delta.dtype)
    skip = None if same_dtype else written.__contains__
    load_number_modules(path, config, tuner.number_modules["default"], written if same_dtype else {}, skip)
    model.eval()
    return model, ntok


def load_number_modules(
    path: str,
    config: Any,
    modules: nn.Module,
    rows: dict[str, torch.Tensor] | None = None,
    skip: Any = None,
) -> None:
    """Loads ``number_modules.safetensors`` of the export `path` into `modules` (`NumberModules` built for
    `config`), after checking the settings it was saved with and the digest of every tensor.

    Args:
        path: the export directory.
        config: its `NumberAdapterConfig` (`read_number_config`).
        modules: the number modules to fill (`load_exported`'s adapter, or the vLLM plugin's own).
        rows: the [NUM] / EOS rows of the loaded model weights keyed as `_written_rows` keys them, checked too
            (None: only the modules' own tensors are checked, the saved digests of rows are skipped).
        skip: with `rows`, ``skip(key)`` true for saved digests not to check (None: all).

    Raises:
        ValueError: the file disagrees with the config, or a tensor's bytes changed (the message names the fix).
    """
    from safetensors.torch import load_file

    from numadapter.export_files import REEXPORT
    from numadapter.tuner.integrity import STAMP, check_stamp, digest_error, digest_problems, without_digests

    modules_file = os.path.join(path, NUMBER_MODULES_NAME)
    state = load_file(modules_file)
    check_stamp(config, state.get(STAMP), modules_file, os.path.join(path, NUMBER_CONFIG_NAME))
    if rows is None:  # the modules' own tensors only: a row of the model weights is keyed "<parameter>[<ids>]"
        rows, skip = {}, lambda key: "[" in key
    problems = digest_problems({**state, **rows}, state.get(STAMP), modules_file, skip)
    if problems:
        raise digest_error(problems, f"{modules_file} (with the rows of the model weights)", REEXPORT)
    state.setdefault(STAMP, modules.settings_stamp)  # an export written before settings stamps existed
    state[STAMP] = without_digests(state[STAMP], modules_file)
    device = next(iter(modules.parameters()), torch.empty(0)).device
    try:
        modules.load_state_dict({k: v.to(device) for k, v in state.items()}, strict=True)
    except RuntimeError as exc:
        raise ValueError(
            f"{modules_file} does not hold the number modules {os.path.join(path, NUMBER_CONFIG_NAME)} describes "
            f"({exc}): the export was edited or damaged; {REEXPORT}."
        ) from exc


def export_checkpoint(
    adapter_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    base: str | None = None,
    tokenizer: str | None = None,
    dtype: str | torch.dtype | None = None,
    max_shard_size: str | int = "5GB",
) -> str:
    """Exports a saved adapter (a training checkpoint) offline: base + adapter -> `export_merged`.

    This is the way to export after DeepSpeed ZeRO-3 training, where PEFT cannot merge in the training processes.

    Args:
        adapter_dir: a directory with ``adapter_config.json`` + ``adapter_model.safetensors`` (``save_pretrained`` of
            the PeftModel, or a Trainer checkpoint).
        out_dir: the export directory.
        base: the base model (local directory or hub id); None: ``base_model_name_or_path`` of the adapter config.
        tokenizer: a directory with the `NumberTokenizer` (``number_tokenizer_config.json``); None: `adapter_dir`
            (numadapter's trainers save it into every checkpoint).
        dtype: dtype to load the base in and to export (None: as saved).
        max_shard_size: passed to ``save_pretrained``.

    Returns:
        `out_dir` as a string.
    """
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    from numadapter.config import NumberAdapterConfig
    from numadapter.export_files import check_export_target
    from numadapter.tokenization.tokenizer import CONFIG_NAME, NumberTokenizer
    from numadapter.tuner.registration import register

    register(force=True)
    if not os.path.isfile(os.path.join(adapter_dir, "adapter_config.json")):
        raise FileNotFoundError(
            f"No adapter_config.json in {os.fspath(adapter_dir)!r}: pass the directory the adapter was saved to "
            "(trainer.save_model / model.save_pretrained, or a checkpoint-N directory)."
        )
    config = NumberAdapterConfig.from_pretrained(adapter_dir)
    base = base or config.base_model_name_or_path
    if not base:
        raise ValueError(
            f"the adapter config in {os.fspath(adapter_dir)!r} names no base model: pass base= (--base PATH)."
        )
    check_export_target(out_dir, {"the adapter's directory": adapter_dir, "the base model's directory": base})
    tokenizer = tokenizer or os.fspath(adapter_dir)
    if not os.path.isfile(os.path.join(tokenizer, CONFIG_NAME)):
        raise FileNotFoundError(
            f"No {CONFIG_NAME} in {tokenizer!r}: pass tokenizer= (--tokenizer DIR), a directory saved with "
            "NumberTokenizer.save_pretrained (numadapter's trainers save it next to the adapter)."
        )
    ntok = NumberTokenizer.from_pretrained(tokenizer)
    auto = AutoModelForSeq2SeqLM if config.task_type == "SEQ_2_SEQ_LM" else AutoModelForCausalLM
    target = resolve_dtype(dtype)
    base_model = auto.from_pretrained(base, dtype=target or "auto")
    model = PeftModel.from_pretrained(base_model, os.fspath(adapter_dir))
    return export_merged(model, ntok, out_dir, dtype=target, inplace=True, max_shard_size=max_shard_size)
