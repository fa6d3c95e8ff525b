"""Registers numadapter with PEFT, so `peft.get_peft_model` / `PeftModel.from_pretrained` / `AutoPeftModel*` work.

PEFT 0.21's `register_peft_method` only accepts names that already exist in the closed `PeftType` enum and refuses
a prefix that is already taken ("lora_" is LoRA's; numadapter's layers are real LoRA layers). This module therefore
does by hand, once, what `register_peft_method` would do:

1. adds a member ``PeftType.NUMADAPTER`` to PEFT's string enum (`numadapter.integrations.peft_type`, which also holds
   the value and the tested peft range, so that the config names its peft type without importing this module);
2. fills ``PEFT_TYPE_TO_CONFIG_MAPPING`` / ``PEFT_TYPE_TO_TUNER_MAPPING`` / ``PEFT_TYPE_TO_PREFIX_MAPPING``
   (prefix ``"lora_"``);
3. wraps the ``get_peft_model_state_dict`` that ``PeftModel.save_pretrained`` calls so that, for numadapter adapters
   only, ``save_embedding_layers="auto"`` means False: PEFT's "auto" saves the *whole* embedding and LM head as soon
   as the vocabulary was resized, but numadapter re-creates the resize itself when loading and saves the [NUM]/[AGG]
   rows as PEFT trainable tokens (a few KB instead of hundreds of MB). An explicit ``True`` is still honoured. The
   saved settings stamp gets the SHA-256 of every other saved tensor (`numadapter.tuner.integrity.with_digests`);
4. wraps PEFT's loading functions (`numadapter.tuner.peft_load_hooks`) so that a numadapter adapter file is verified
   against its config before it is loaded (`numadapter.tuner.integrity`).

When: at the import of this module, which happens as soon as PEFT is imported in a process that imported numadapter
(`numadapter.integrations.import_hooks`; ``import numadapter`` itself imports no PEFT), and before any numadapter
model is built (`numadapter.mapping`, `numadapter.export`).

Version guard: this is done only for peft >= 0.21, < 0.22 (the range it is written and tested for).
Outside it, the registration leaves PEFT untouched and warns; `numadapter.get_peft_model` then registers anyway
(``register(force=True)``) with a warning, while the ``peft.get_peft_model`` / ``PeftModel.from_pretrained`` path
fails with the KeyError above; the warning says to use `numadapter.get_peft_model` or install peft>=0.21,<0.22.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import peft
from peft.utils.peft_types import PeftType

from numadapter.integrations.peft_type import (
    PEFT_TYPE_NAME,
    PEFT_TYPE_VALUE,
    add_enum_member,
    peft_version_supported,
    supported_range,
)
from numadapter.tuner.integrity import STAMP, with_digests

PEFT_PREFIX = "lora_"

_state: dict[str, Any] = {"registered": False, "warned": False}


def _patch_state_dict_for_save() -> None:
    """Makes ``save_embedding_layers="auto"`` mean False for numadapter adapters in `PeftModel.save_pretrained`."""
    import peft.peft_model as peft_model_module

    original = peft_model_module.get_peft_model_state_dict
    if getattr(original, "_numadapter_wrapped", False):
        return

    @functools.wraps(original)
    def get_peft_model_state_dict(
        model, state_dict=None, adapter_name="default", unwrap_compiled=False, save_embedding_layers="auto"
    ):
        config = model.peft_config[adapter_name]
        if save_embedding_layers == "auto" and config.peft_type == PEFT_TYPE_VALUE:
            save_embedding_layers = False
        saved = original(
            model,
            state_dict=state_dict,
            adapter_name=adapter_name,
            unwrap_compiled=unwrap_compiled,
            save_embedding_layers=save_embedding_layers,
        )
        stamp_key = next((key for key in saved if key.endswith(f"number_modules.{STAMP}")), None)
        real = stamp_key is not None and saved[stamp_key].numel() and not any(t.is_meta for t in saved.values())
        if config.peft_type == PEFT_TYPE_VALUE and real:
            saved[stamp_key] = with_digests(saved, stamp_key)  # checked on load (`integrity.digest_problems`)
        return saved

    get_peft_model_state_dict._numadapter_wrapped = True
    peft_model_module.get_peft_model_state_dict = get_peft_model_state_dict


def register(force: bool = False) -> PeftType | None:
    """Registers numadapter with PEFT (idempotent).

    Args:
        force: register even when the installed peft is outside ``>=0.21,<0.22`` (with a warning). Without it an
            unsupported peft is left untouched and None is returned.

    Returns:
        ``PeftType.NUMADAPTER``, or None when the peft version is unsupported and `force` is False.

    Raises:
        RuntimeError: `force` was given and PEFT's internals differ too much to register; the message says which
            peft versions work.
    """
    if _state["registered"]:
        return PeftType[PEFT_TYPE_NAME]
    if not peft_version_supported():
        if not force:
            if not _state["warned"]:
                _state["warned"] = True
                warnings.warn(
                    f"numadapter supports {supported_range()}, found peft {peft.__version__}: it did not register "
                    "itself with PEFT, so `peft.get_peft_model(model, NumberAdapterConfig(...))` and "
                    "`PeftModel.from_pretrained` will not find it. Use `numadapter.get_peft_model(...)` (it registers "
                    f"anyway, untested) or install {supported_range()}.",
                    stacklevel=2,
                )
            return None
        warnings.warn(
            f"numadapter is tested with {supported_range()}, found peft {peft.__version__}: registering anyway.",
            stacklevel=2,
        )
    from peft.mapping import PEFT_TYPE_TO_CONFIG_MAPPING, PEFT_TYPE_TO_PREFIX_MAPPING, PEFT_TYPE_TO_TUNER_MAPPING

    from numadapter.config import NumberAdapterConfig
    from numadapter.tuner import peft_load_hooks
    from numadapter.tuner.model import NumberAdapterModel

    try:
        member = add_enum_member()
        PEFT_TYPE_TO_CONFIG_MAPPING[member] = NumberAdapterConfig
        PEFT_TYPE_TO_TUNER_MAPPING[member] = NumberAdapterModel
        PEFT_TYPE_TO_PREFIX_MAPPING[member] = PEFT_PREFIX
        _patch_state_dict_for_save()
        peft_load_hooks.install()  # load-time checks: number tensors present, settings stamp, clear file errors
    except Exception as exc:  # pragma: no cover - only on an incompatible peft
        raise RuntimeError(
            f"numadapter could not register with peft {peft.__version__} ({type(exc).__name__}: {exc}); "
            f"install {supported_range()}."
        ) from exc
    _state["registered"] = True
    return member


register()  # at import: `import numadapter` (whose import hook imports this module with PEFT) is all a user needs
