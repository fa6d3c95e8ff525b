"""Wrappers around PEFT's adapter loading that turn silent or unclear failures into errors naming the file and fix.

Installed once by `numadapter.tuner.registration.register` (next to its save-side wrapper), in the namespaces PEFT
calls them from:

- ``peft.peft_model.load_peft_weights``: for a local directory holding a numadapter ``adapter_config.json``, a
  missing weights file is a `FileNotFoundError` naming the directory (PEFT would try the directory as a Hub repo id
  and fail with ``HFValidationError: Repo id must be ...``), and an unreadable file (truncated, not safetensors) is a
  `ValueError` naming it. A dict read from a local file remembers the file, for the next check;
- ``peft.peft_model.set_peft_model_state_dict``: `numadapter.tuner.integrity.check_adapter_state` runs first, for
  numadapter configs (every number tensor present with its shape, stamped settings equal to the config, every tensor
  equal to the digest saved with it) and for other
  configs whose file holds number modules (an ``adapter_config.json`` edited to ``peft_type: "LORA"``);
- ``PeftModel.from_pretrained`` and ``PeftModel.load_adapter``: before PEFT builds the model from a local numadapter
  directory, its config is compared with the settings stamp of the weights file
  (`numadapter.tuner.integrity.check_saved_settings`), so an edited ``base_hidden_size`` / ``original_vocab_size`` is
  named as the edited field, not reported as a base model of another shape;
- ``PeftConfigMixin.from_json_file``: a truncated or invalid JSON config is a `ValueError` naming the file (PEFT's
  ``json.JSONDecodeError`` names only a line and column). It applies to every PEFT config and changes nothing else.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")


class SourcedStateDict(dict):
    """A state dict that remembers the file it was read from (``source``)."""

    source: str = "the adapter state dict"


def _numadapter_dir(path: Any) -> bool:
    """Whether `path` is a local directory whose adapter_config.json names numadapter's peft_type."""
    from numadapter.integrations.peft_type import PEFT_TYPE_VALUE

    file = os.path.join(os.fspath(path), "adapter_config.json") if isinstance(path, (str, os.PathLike)) else ""
    if not file or not os.path.isfile(file):
        return False
    try:
        with open(file, encoding="utf-8") as handle:
            return json.load(handle).get("peft_type") == PEFT_TYPE_VALUE
    except (OSError, ValueError, AttributeError):
        return False


def _wrap_load_peft_weights(original):
    @functools.wraps(original)
    def load_peft_weights(model_id, device=None, key_mapping=None, **kwargs):
        subfolder = kwargs.get("subfolder")
        path = os.path.join(model_id, subfolder) if subfolder else model_id
        local = os.fspath(path) if isinstance(path, (str, os.PathLike)) and os.path.isdir(path) else None
        files = [
            os.path.join(local, name) for name in WEIGHT_FILES if local and os.path.isfile(os.path.join(local, name))
        ]
        ours = _numadapter_dir(path)
        if ours and not files:
            raise FileNotFoundError(
                f"{local!r} holds adapter_config.json but no {WEIGHT_FILES[0]}: the adapter weights were deleted or "
                "never written (a save that did not finish). Copy the complete adapter directory, or save it again "
                "with model.save_pretrained(DIR) / trainer.save_model(DIR)."
            )
        try:
            weights = original(model_id, device=device, key_mapping=key_mapping, **kwargs)
        except Exception as exc:
            if not ours:
                raise
            raise ValueError(
                f"{files[0]} cannot be read ({type(exc).__name__}: {exc}): the file is truncated or damaged (a save "
                "that did not finish, an interrupted copy). Restore it from a complete copy or save the adapter again."
            ) from exc
        if not files:
            return weights
        sourced = SourcedStateDict(weights)
        sourced.source = files[0]
        return sourced

    load_peft_weights._numadapter_wrapped = True
    return load_peft_weights


def _wrap_set_state_dict(original):
    @functools.wraps(original)
    def set_peft_model_state_dict(model, peft_model_state_dict, adapter_name="default", **kwargs):
        from numadapter.tuner.integrity import check_adapter_state

        config = model.peft_config[adapter_name]
        source = getattr(peft_model_state_dict, "source", SourcedStateDict.source)
        checked = check_adapter_state(model, config, peft_model_state_dict, adapter_name, source)
        return original(model, checked, adapter_name=adapter_name, **kwargs)

    set_peft_model_state_dict._numadapter_wrapped = True
    return set_peft_model_state_dict


def _settings_first(model_id: Any, config: Any, kwargs: dict) -> None:
    """`check_saved_settings` for a local numadapter directory (`config`: the given config, or None to read it)."""
    from numadapter.config import NumberAdapterConfig
    from numadapter.tuner.integrity import check_saved_settings

    subfolder = kwargs.get("subfolder")
    path = os.path.join(model_id, subfolder) if subfolder and isinstance(model_id, (str, os.PathLike)) else model_id
    if not _numadapter_dir(path):
        return
    if config is None:
        config = NumberAdapterConfig.from_pretrained(os.fspath(path))
    if isinstance(config, NumberAdapterConfig):
        check_saved_settings(os.fspath(path), config)


def _wrap_from_pretrained(original):
    function = original.__func__

    @functools.wraps(function)
    def from_pretrained(cls, model, model_id, adapter_name="default", is_trainable=False, config=None, **kwargs):
        _settings_first(model_id, config, kwargs)
        return function(cls, model, model_id, adapter_name, is_trainable, config, **kwargs)

    from_pretrained._numadapter_wrapped = True
    return classmethod(from_pretrained)


def _wrap_load_adapter(original):
    @functools.wraps(original)
    def load_adapter(self, model_id, adapter_name, *args, **kwargs):
        if adapter_name not in self.peft_config:  # a new adapter: PEFT builds it from the directory's config
            _settings_first(model_id, None, kwargs)
        return original(self, model_id, adapter_name, *args, **kwargs)

    load_adapter._numadapter_wrapped = True
    return load_adapter


def _wrap_from_json_file(original):
    function = original.__func__

    @functools.wraps(function)
    def from_json_file(cls, path_json_file: str, **kwargs):
        try:
            return function(cls, path_json_file, **kwargs)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{path_json_file} is not valid JSON ({exc}): the file is truncated or was edited by hand. Restore it "
                "from a complete copy, or save the adapter again with save_pretrained."
            ) from exc

    from_json_file._numadapter_wrapped = True
    return classmethod(from_json_file)


def install() -> None:
    """Installs the wrappers (idempotent)."""
    import peft.peft_model as peft_model_module
    from peft import PeftModel
    from peft.config import PeftConfigMixin

    if not getattr(peft_model_module.load_peft_weights, "_numadapter_wrapped", False):
        peft_model_module.load_peft_weights = _wrap_load_peft_weights(peft_model_module.load_peft_weights)
    if not getattr(peft_model_module.set_peft_model_state_dict, "_numadapter_wrapped", False):
        peft_model_module.set_peft_model_state_dict = _wrap_set_state_dict(peft_model_module.set_peft_model_state_dict)
    if not getattr(PeftModel.__dict__["from_pretrained"].__func__, "_numadapter_wrapped", False):
        PeftModel.from_pretrained = _wrap_from_pretrained(PeftModel.__dict__["from_pretrained"])
    if not getattr(PeftModel.load_adapter, "_numadapter_wrapped", False):
        PeftModel.load_adapter = _wrap_load_adapter(PeftModel.load_adapter)
    current = PeftConfigMixin.__dict__["from_json_file"]
    if not getattr(current.__func__, "_numadapter_wrapped", False):
        PeftConfigMixin.from_json_file = _wrap_from_json_file(current)
