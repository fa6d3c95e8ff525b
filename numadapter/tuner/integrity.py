"""Load-time integrity of a number adapter: the saved tensors must be the ones its config implies.

PEFT checks the LoRA keys of an adapter file and ignores everything else, so without this module a file whose
number modules or [NUM] rows are missing loaded silently (the modules stayed random), and an edited
``adapter_config.json`` (``encoding``, ``fone_projection``, ``fone_head_target``, ``resized_vocab_size``, ...) built
other modules than the saved ones and loaded them partially or not at all. Two things close that gap:

- the settings stamp: every `NumberModules` holds a small persistent ``uint8`` buffer, ``settings_stamp``, the JSON of
  the config fields the modules and the embedding binding depend on (`STAMP_FIELDS`). It is saved with the adapter
  (and in an export's ``number_modules.safetensors``), so loading can compare the config it was given with the
  settings the tensors were trained with, including fields that change no tensor shape (``fone_head_target``,
  ``resized_vocab_size``, ``num_token_id``, ``xval_scale``);
- `check_adapter_state`, run by `numadapter.tuner.registration` before PEFT's ``set_peft_model_state_dict``: every
  number-module and [NUM]-row tensor the model expects must be in the file with the model's shape, the file must not
  hold number tensors the config does not build, and the stamp must match. Each failure is a `ValueError` naming the
  file, the tensors or fields, and the fix.

An adapter saved before the stamp existed has no ``settings_stamp``: it still loads (the key and shape checks run),
with a warning that its settings cannot be compared.

Tensor digests: safetensors has no checksum, so a flipped byte inside a LoRA matrix loaded silently. Saving
(`numadapter.tuner.registration`) therefore writes into the saved stamp, under ``"tensor_sha256"``, the SHA-256 of the
raw bytes of every other tensor of the file (LoRA, number modules, [NUM] / EOS rows; `with_digests`), and loading
(`check_adapter_state`, `numadapter.export.load_exported`) recomputes them (`digest_problems`): a changed, missing or
added tensor is refused, naming the file and the tensors. The model's own stamp buffer holds the settings only
(`without_digests`). The cost is one SHA-256 pass over the saved tensors' bytes at save and at load, a small part of
a load (docs/results.md, "Reliability", has the timing). Files saved before digests existed load without this check.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable
from typing import Any

import torch

from numadapter.config import STAMPED, fields_with

STAMP = "settings_stamp"
DIGESTS = "tensor_sha256"  # the stamp's entry of tensor digests: saved key -> SHA-256 hex of its raw bytes
# The config fields the number modules, the [NUM] rows and the resize depend on. Loss weights, out_of_range and
# xval_clip (what is encoded, not how) may change between runs and are not stamped.
STAMP_FIELDS = fields_with(STAMPED)
# Keys of an adapter file that belong to numadapter (beyond LoRA): number modules and the trainable [NUM] / [AGG] rows.
NUMBER_KEY_MARKERS = ("number_modules.", "trainable_tokens_delta")
# How many rows `peft.get_peft_model` may add for a number token id the config names without a tokenizer.
MAX_NEW_ROWS = 1024


def stamped_settings(config: Any) -> dict[str, Any]:
    """The stamped fields of `config` as JSON-ready values."""
    return {name: getattr(config, name, None) for name in STAMP_FIELDS}


def stamp_tensor(config: Any) -> torch.Tensor:
    """``[L]`` uint8: the UTF-8 JSON of `stamped_settings` (sorted keys)."""
    text = json.dumps(stamped_settings(config), sort_keys=True)
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.uint8)


def read_stamp(tensor: torch.Tensor, source: str) -> dict[str, Any]:
    """The settings a stamp tensor holds; `ValueError` naming `source` when it is not a stamp."""
    try:
        data = json.loads(bytes(tensor.detach().to("cpu", torch.uint8).tolist()).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(
            f"the {STAMP} tensor in {source} is not readable ({exc}): the file is damaged; restore it from the run "
            "that saved it."
        ) from exc
    if not isinstance(data, dict):
        raise ValueError(f"the {STAMP} tensor in {source} holds {type(data).__name__}, not the saved settings.")
    return data


def _stamp_bytes(settings: dict[str, Any]) -> torch.Tensor:
    return torch.tensor(list(json.dumps(settings, sort_keys=True).encode("utf-8")), dtype=torch.uint8)


def tensor_digest(tensor: torch.Tensor) -> str:
    """SHA-256 (hex) of the raw bytes of `tensor` as safetensors writes them (contiguous, its own dtype)."""
    data = tensor.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
    return hashlib.sha256(data.numpy()).hexdigest()


def tensor_digests(state: dict[str, torch.Tensor]) -> dict[str, str]:
    """`tensor_digest` of every tensor of `state` (one thread: a thread pool is slower on a busy machine)."""
    return {key: tensor_digest(tensor) for key, tensor in state.items()}


def with_digests(state: dict[str, torch.Tensor], stamp_key: str) -> torch.Tensor:
    """The stamp `state[stamp_key]` with the digest of every other tensor of `state` added (what saving writes)."""
    settings = read_stamp(state[stamp_key], "the adapter being saved")
    settings[DIGESTS] = tensor_digests({key: tensor for key, tensor in state.items() if key != stamp_key})
    return _stamp_bytes(settings)


def without_digests(tensor: torch.Tensor, source: str) -> torch.Tensor:
    """A saved stamp without its digests: the settings-only stamp the modules hold (`tensor` when it has none)."""
    settings = read_stamp(tensor, source)
    if DIGESTS not in settings:
        return tensor
    settings.pop(DIGESTS)
    return _stamp_bytes(settings)


def digest_problems(
    state: dict[str, torch.Tensor], stamp: torch.Tensor | None, source: str, skip: Callable[[str], bool] | None = None
) -> list[str]:
    """What differs between the tensors of `state` and the digests saved in `stamp` (keys of `state` besides the
    stamp's own; saved keys for which `skip` is true are not checked); empty when they agree or when `stamp` holds no
    digests (saved before they existed)."""
    saved = read_stamp(stamp, source).get(DIGESTS) if stamp is not None and stamp.device.type != "meta" else None
    if not isinstance(saved, dict):
        return []
    saved = {key: value for key, value in saved.items() if skip is None or not skip(key)}
    present = {key for key, tensor in state.items() if tensor is not stamp}
    problems = [f"{key}: missing (it was saved)" for key in saved if key not in present]
    problems += [f"{key}: not saved with the adapter" for key in sorted(present - set(saved))]
    digests = tensor_digests({key: state[key] for key in sorted(present & set(saved))})
    problems += [
        f"{key}: its bytes changed since it was saved" for key, value in digests.items() if value != saved[key]
    ]
    return problems


def digest_error(problems: list[str], source: str, fix: str) -> ValueError:
    """The `ValueError` for `digest_problems` of `source`."""
    return ValueError(
        f"{source} does not hold the tensors it was saved with (SHA-256 of each tensor, recorded in its "
        f"{STAMP}):\n  - "
        + "\n  - ".join(problems[:8])
        + (f"\n  (and {len(problems) - 8} more)" if len(problems) > 8 else "")
        + f"\nThe file was damaged (a flipped byte, a torn copy) or edited. {fix}"
    )


def stamp_differences(config: Any, saved: dict[str, Any]) -> list[str]:
    """One line per stamped field where `config` differs from the `saved` settings (fields absent from `saved`
    are skipped: a later numadapter may stamp more fields)."""
    current = json.loads(json.dumps(stamped_settings(config)))  # tuples -> lists, as in the saved JSON
    return [
        f"{name}: the config says {current[name]!r}, the saved tensors were trained with {saved[name]!r}"
        for name in STAMP_FIELDS
        if name in saved and current[name] != saved[name]
    ]


def check_stamp(config: Any, tensor: torch.Tensor | None, source: str, config_file: str) -> None:
    """Raises `ValueError` when the stamp in `source` disagrees with `config` (read from `config_file`)."""
    if tensor is None or tensor.device.type == "meta":
        return
    differences = stamp_differences(config, read_stamp(tensor, source))
    if differences:
        raise ValueError(
            f"{config_file} does not match the number modules saved in {source}:\n  - "
            + "\n  - ".join(differences)
            + f"\nThe modules would be rebuilt for other settings and load wrongly. Restore these values in "
            f"{config_file} (to change them, train a new adapter)."
        )


def check_saved_settings(directory: str, config: Any) -> None:
    """Compares `config` with the settings stamp of ``<directory>/adapter_model.safetensors`` before a model is built.

    PEFT builds the model from the config before it reads the weights, and binding refuses a base whose shape differs
    from the config's ``base_hidden_size`` / ``original_vocab_size``. An edited field would then be reported as a wrong
    base model; read first, the stamp names the edited field. Only the stamp tensor is read (a few hundred bytes).
    A missing or unreadable file is left to the loading checks (`numadapter.tuner.peft_load_hooks`), which name it.

    Raises:
        ValueError: as `check_stamp`.
    """
    from safetensors import safe_open

    file = os.path.join(directory, "adapter_model.safetensors")
    if not os.path.isfile(file):
        return
    try:
        with safe_open(file, framework="pt") as handle:
            key = next((k for k in handle.keys() if k.endswith(f"number_modules.{STAMP}")), None)
            tensor = None if key is None else handle.get_tensor(key)
    except Exception:  # noqa: BLE001 - a damaged file is named by the loading checks
        return
    check_stamp(config, tensor, file, os.path.join(directory, "adapter_config.json"))


def _is_number_key(key: str) -> bool:
    return any(marker in key for marker in NUMBER_KEY_MARKERS)


def expected_number_tensors(model: torch.nn.Module, adapter_name: str) -> dict[str, torch.Tensor]:
    """Checkpoint key -> model tensor for every number-module and [NUM]-row tensor that saving `adapter_name` now
    would write (PEFT's own selection, so tied rows saved once, as T5's, are expected once)."""
    from peft.utils.save_and_load import get_peft_model_state_dict

    state = get_peft_model_state_dict(model, adapter_name=adapter_name, save_embedding_layers=False)
    return {key: tensor for key, tensor in state.items() if _is_number_key(key)}


def _listing(keys: list[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" (and {len(keys) - limit} more)" if len(keys) > limit else "")


def check_adapter_state(
    model: torch.nn.Module, config: Any, state_dict: dict[str, torch.Tensor], adapter_name: str, source: str
) -> dict[str, torch.Tensor]:
    """Verifies an adapter state dict (checkpoint keys) against the model PEFT built from `config`.

    Args:
        model: the PeftModel the weights are about to be loaded into.
        config: the adapter's config (a `NumberAdapterConfig`, or another PEFT config for the peft_type check).
        state_dict: the checkpoint tensors (keys without the adapter name, as saved).
        adapter_name: the adapter being loaded.
        source: the file the tensors come from (named in errors).

    Returns:
        The state dict to load: `state_dict`, with the stamp's digests removed (the modules hold the settings only).

    Raises:
        ValueError: the file holds numadapter tensors but the config is not a numadapter config; the stamped settings
            differ from `config`; a tensor the config implies is missing or has another shape; the file holds number
            tensors the config does not build; a tensor differs from the digest saved with it.
    """
    from numadapter.config import NumberAdapterConfig
    from numadapter.integrations.peft_type import PEFT_TYPE_VALUE

    from_file = source.endswith((".safetensors", ".bin"))
    config_file = os.path.join(os.path.dirname(source), "adapter_config.json") if from_file else "the adapter config"
    if not isinstance(config, NumberAdapterConfig):
        numbers = [key for key in state_dict if "number_modules." in key]
        if numbers:
            raise ValueError(
                f"{source} holds numadapter number modules ({_listing(numbers, 3)}), but {config_file} has "
                f"peft_type={getattr(config.peft_type, 'value', config.peft_type)!r}: PEFT would load it as a plain "
                f'adapter without them. Restore "peft_type": "{PEFT_TYPE_VALUE}" in {config_file} and '
                "`import numadapter` before loading."
            )
        return state_dict
    expected = expected_number_tensors(model, adapter_name)
    stamp_key = next((key for key in expected if key.endswith(f"number_modules.{STAMP}")), None)
    if stamp_key is not None and stamp_key in state_dict:
        check_stamp(config, state_dict[stamp_key], source, config_file)
    elif stamp_key is not None:
        others = [key for key in expected if "number_modules." in key and key != stamp_key]
        if all(key in state_dict for key in others):  # saved before stamps existed
            warnings.warn(
                f"{source} was saved by a numadapter without settings stamps: its config cannot be compared with the "
                "settings it was trained with (key and shape checks still run). Re-save the adapter to add the stamp.",
                stacklevel=3,
            )
            expected.pop(stamp_key)
    missing = [key for key in expected if key not in state_dict]
    if missing:
        raise ValueError(
            f"{source} lacks {len(missing)} number tensor(s) that {config_file} implies: {_listing(missing)}. "
            "Loading would leave them randomly initialised. Load the complete adapter file written by "
            f"save_pretrained (or a complete checkpoint); if {config_file} was edited (encoding, fone_projection, "
            "fone_head_input, sign_policy, ...), restore it."
        )
    unexpected = [key for key in state_dict if _is_number_key(key) and key not in expected]
    if unexpected:
        raise ValueError(
            f"{source} holds number tensors that {config_file} does not build: {_listing(unexpected)}. The settings "
            f"in {config_file} (encoding, fone_projection, fone_head_input, sign_policy, ...) differ from those the "
            f"adapter was trained with: restore them."
        )
    wrong = [
        f"{key}: {tuple(state_dict[key].shape)} in the file, {tuple(tensor.shape)} expected"
        for key, tensor in expected.items()
        if key != stamp_key and tuple(state_dict[key].shape) != tuple(tensor.shape)
    ]
    if wrong:
        raise ValueError(
            f"{source} has number tensors of the wrong shape for {config_file}: {_listing(wrong)}. Restore the "
            f"settings in {config_file} that size them (int_digits, frac_digits, fone_context_numbers, "
            "xval_head_hidden, base_hidden_size)."
        )
    stamp = state_dict.get(stamp_key) if stamp_key is not None else None
    problems = digest_problems(state_dict, stamp, source)
    if problems:
        raise digest_error(
            problems,
            source,
            "Restore the adapter directory from a complete copy, or save it again from the trained model.",
        )
    if stamp is None or stamp.device.type == "meta":
        return state_dict
    return {**state_dict, stamp_key: without_digests(stamp, source)}


def check_vocab_growth(rows: int, resized: int, ids: list[int], config: Any) -> None:
    """Refuses a resize derived from token ids alone that would add more than `MAX_NEW_ROWS` rows.

    Args:
        rows: the embedding rows of the base model.
        resized: the rows the ids would need (``max(rows, max(ids) + 1)``).
        ids: the number / digit token ids of the config.
        config: the adapter config (for the field names in the message).
    """
    if resized - rows <= MAX_NEW_ROWS:
        return
    fields = {
        name: getattr(config, name)
        for name in ("num_token_id", "agg_token_id")
        if getattr(config, name) is not None and getattr(config, name) >= rows + MAX_NEW_ROWS
    }
    named = ", ".join(f"{name}={value}" for name, value in fields.items()) or f"token ids {sorted(ids)}"
    raise ValueError(
        f"{named} would grow the input embedding from {rows} to {resized} rows: a new number token takes the next "
        f"free id of the tokenizer, a few rows past the embedding at most ({MAX_NEW_ROWS} are allowed). Take the id "
        "from the tokenizer (numadapter.get_peft_model(model, config, tokenizer=tokenizer) sets it), or set "
        "`resized_vocab_size` explicitly if the embedding really must grow that much."
    )
