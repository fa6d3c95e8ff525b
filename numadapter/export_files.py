"""The files of an export directory: who owns the directory, atomic writing, and checks before loading.

`numadapter.export.export_merged` owns its output directory:

- it refuses the base model's own directory and the adapter's directory (exporting there overwrites the base's
  weights, and loading the adapter onto that "base" later applies LoRA twice), and any non-empty directory that is
  not an earlier numadapter export (`check_export_target`);
- it writes everything into a staging directory next to the target and moves it into place when complete
  (`staged_directory`): a crash leaves the earlier export (or nothing) and a hidden ``.<name>.partial-*`` directory,
  never a half-written export, and an earlier export is replaced whole, so none of its files (an unsharded
  ``model.safetensors`` under a new sharded export) survive to shadow the new ones;
- it lists every file it wrote, with the byte size of each safetensors file, in ``number_config.json``
  (``"files"``).

`check_export_files` runs in `numadapter.export.load_exported` before anything is loaded: every listed file must be
present, each JSON file must parse, each safetensors file must be whole (its header's data offsets must match the
file size), and weight files the export did not write are refused. ``config.json`` is checked against the copy the
export recorded (`read_model_config`: a JSON object, a ``model_type`` transformers knows, or numadapter's marking of
one, and the one exported) and, once transformers has loaded the weights, against them (`check_loaded_weights`: no
tensor re-initialised for another shape, left random or ignored). The base model is loaded with the config inside a
marked file (`base_model_config`). Errors name the file, the problem and the fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from typing import Any

from numadapter.json_file import read_json

MARKER = "number_config.json"  # present in every numadapter export
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
REEXPORT = "export again with numadapter.export_merged (or `numadapter export`) into a new directory"


def _same_path(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    return os.path.realpath(os.fspath(a)) == os.path.realpath(os.fspath(b))


def check_export_target(out_dir: str | os.PathLike, protected: dict[str, Any]) -> None:
    """Raises `ValueError` when `out_dir` may not receive an export.

    Args:
        out_dir: the export directory.
        protected: what must not be overwritten, ``{description: path or None}`` (e.g. the base model's directory).
    """
    out = os.fspath(out_dir)
    for what, path in protected.items():
        if isinstance(path, (str, os.PathLike)) and os.path.isdir(path) and _same_path(out, path):
            raise ValueError(
                f"refusing to export into {out!r}: it is {what}. Exporting there would overwrite its weights, and "
                "loading the adapter onto that directory later would apply LoRA twice. Pass a new directory."
            )
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"the export directory {out!r} is a file: pass a directory path.")
    if os.path.isdir(out) and os.listdir(out) and not os.path.isfile(os.path.join(out, MARKER)):
        shown = sorted(os.listdir(out))[:5]
        raise ValueError(
            f"refusing to export into {out!r}: it holds files that are not a numadapter export ({shown}), which "
            f"would be mixed with the export. Pass a new or empty directory (an earlier numadapter export, with its "
            f"{MARKER}, is replaced whole)."
        )


@contextlib.contextmanager
def staged_directory(out_dir: str | os.PathLike) -> Iterator[str]:
    """Yields an empty staging directory beside `out_dir`; on success it replaces `out_dir`, on error it is removed.

    The replacement is two renames on one filesystem (the earlier directory aside, the staging one in place) and
    then the removal of the earlier one; only a crash between the two renames leaves no `out_dir` (both
    directories remain, hidden, beside it).
    """
    out = os.path.abspath(os.fspath(out_dir))
    parent, name = os.path.split(out)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=parent)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    replace_directory(staging, out)


def replace_directory(staging: str, final: str) -> None:
    """Moves `staging` to `final`, replacing a directory already there (two renames, then the removal)."""
    old = None
    if os.path.isdir(final):
        parent, name = os.path.split(os.path.abspath(final))
        old = tempfile.mkdtemp(prefix=f".{name}.old-", dir=parent)
        os.rename(final, os.path.join(old, name))
    os.rename(staging, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def file_listing(directory: str, *, every_size: bool = False) -> dict[str, int | None]:
    """Relative path -> byte size (safetensors files, or every file with `every_size`) or None, for every file under
    `directory`."""
    listing: dict[str, int | None] = {}
    for root, _, names in os.walk(directory):
        for name in names:
            full = os.path.join(root, name)
            relative = os.path.relpath(full, directory).replace(os.sep, "/")
            listing[relative] = os.path.getsize(full) if every_size or name.endswith(".safetensors") else None
    return dict(sorted(listing.items()))


WEIGHTS_NAME, WEIGHTS_INDEX_NAME = "model.safetensors", "model.safetensors.index.json"


def write_weight_index(directory: str) -> None:
    """Writes ``model.safetensors.index.json`` for a model saved as one ``model.safetensors`` (a sharded save has it).

    Serving engines that read a directory without an index load every ``*.safetensors`` in it as model weights, so
    ``number_modules.safetensors`` beside the weights made vLLM refuse even an export it could serve ("There is no
    module or parameter named 'settings_stamp'"); with an index they load the files it names. transformers loads the
    single file as before."""
    from safetensors import safe_open

    single = os.path.join(directory, WEIGHTS_NAME)
    if os.path.exists(os.path.join(directory, WEIGHTS_INDEX_NAME)) or not os.path.exists(single):
        return
    with safe_open(single, framework="pt") as handle:
        names = list(handle.keys())
    index = {"metadata": {"total_size": os.path.getsize(single)}, "weight_map": dict.fromkeys(names, WEIGHTS_NAME)}
    with open(os.path.join(directory, WEIGHTS_INDEX_NAME), "w", encoding="utf-8") as file:
        json.dump(index, file, indent=2, sort_keys=True)


def safetensors_problem(path: str) -> str | None:
    """Why `path` is not a whole safetensors file (None when its header and size agree)."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return f"it is {size} bytes long, shorter than a safetensors header"
        (length,) = struct.unpack("<Q", head)
        if length > size - 8:
            return f"its header claims {length} bytes but the file has {size}"
        try:
            header = json.loads(handle.read(length))
        except ValueError as exc:
            return f"its header is not valid JSON ({exc})"
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"]
    expected = 8 + length + max(ends, default=0)
    if size != expected:
        return f"it is {size} bytes long, its header describes {expected} bytes (truncated or appended to)"
    return None


def check_export_files(path: str, info: dict[str, Any]) -> None:
    """Checks an export directory against the file list in its ``number_config.json`` (see the module docstring).

    Exports written before the list existed get the essential checks only: ``config.json``,
    ``number_modules.safetensors`` and the NumberTokenizer's files present, safetensors files whole.

    Raises:
        FileNotFoundError: a listed file is missing.
        ValueError: a JSON file does not parse, a safetensors file is not whole, or a weight file is not the export's.
    """
    listed = info.get("files")
    present = file_listing(path)
    if isinstance(listed, dict):
        required = dict(listed)
    else:
        required = {
            name: None for name in ("config.json", "number_modules.safetensors", "number_tokenizer_config.json")
        }
        required.update({name: size for name, size in present.items() if name.endswith(".safetensors")})
    missing = [name for name in required if name not in present]
    if missing:
        raise FileNotFoundError(
            f"the export in {path!r} is incomplete: {missing} missing (written by export_merged, deleted or not "
            f"copied since). Copy the complete directory, or {REEXPORT}."
        )
    if isinstance(listed, dict):
        stale = [name for name in present if name.endswith(WEIGHT_SUFFIXES) and name not in listed]
        if stale:
            raise ValueError(
                f"{path!r} holds weight files that this export did not write: {stale} (left by an earlier export or "
                f"copied in). They could be loaded instead of the export's own: delete them, or {REEXPORT}."
            )
    for name, size in required.items():
        full = os.path.join(path, name)
        if name.endswith(".json"):
            read_json(full, f"copy the complete export directory, or {REEXPORT}")
        elif name.endswith(".safetensors"):
            problem = safetensors_problem(full)
            if problem is None and size is not None and os.path.getsize(full) != size:
                problem = f"it is {os.path.getsize(full)} bytes long, the export wrote {size}"
            if problem is not None:
                raise ValueError(f"{full} is damaged: {problem}. Copy the complete export directory, or {REEXPORT}.")


# -- config.json ---------------------------------------------------------------------------------------------------
CONFIG_NAME = "config.json"
_RESTORE = f"restore config.json from a copy of the export, or {REEXPORT}"


def read_model_config(path: str, info: dict[str, Any]) -> dict[str, Any]:
    """The export's ``config.json``, checked before transformers reads it: a JSON object with a ``model_type`` that
    transformers knows and, for exports that recorded their config (``number_config.json``, ``"model_config"``),
    the one exported.

    Raises:
        ValueError: naming the file, the problem and the fix.
    """
    import transformers
    from transformers import CONFIG_MAPPING

    file = os.path.join(path, CONFIG_NAME)
    config = read_json(file, _RESTORE)
    if not isinstance(config, dict):
        kind = type(config).__name__
        raise ValueError(f"{file} holds a JSON {kind}, not a model config (a JSON object): {_RESTORE}.")
    from numadapter.serving.marking import base_model_type

    recorded = info.get("model_config")
    exported = recorded.get("model_type") if isinstance(recorded, dict) else None
    wrote = f" (the export wrote {exported!r})" if exported else ""
    model_type = config.get("model_type")
    if model_type is None:
        raise ValueError(
            f"{file} has no `model_type` field, which transformers needs to pick the model class{wrote}: {_RESTORE}."
        )
    if not isinstance(model_type, str) or base_model_type(model_type) not in CONFIG_MAPPING:
        raise ValueError(
            f"{file} has model_type={model_type!r}, which transformers {transformers.__version__} does not "
            f"know{wrote}: {_RESTORE}."
        )
    if exported and model_type != exported:
        raise ValueError(
            f"{file} has model_type={model_type!r}, but the export wrote {exported!r} (the weights are those of a "
            f"{base_model_type(exported)!r} model and would give wrong outputs in another architecture): {_RESTORE}."
        )
    return config


def base_model_config(config: dict[str, Any]) -> Any:
    """The transformers config of the base model an export's ``config.json`` (`read_model_config`) describes: the
    file itself, or, when it is marked for numadapter (`numadapter.serving.marking`), the base's config inside it."""
    from transformers import CONFIG_MAPPING

    from numadapter.serving.marking import base_config

    base = base_config(config)
    return CONFIG_MAPPING[base["model_type"]].from_dict(base)


def config_changes(config: dict[str, Any], recorded: Any) -> list[str]:
    """The fields of `config` (``config.json`` now) that differ from the config the export wrote (`recorded`), as
    readable lines; empty when nothing was recorded (an export written before numadapter recorded it)."""
    if not isinstance(recorded, dict):
        return []
    changes = []
    for key in sorted(set(config) | set(recorded)):
        if key not in config:
            changes.append(f"{key} is missing (exported {recorded[key]!r})")
        elif key not in recorded:
            changes.append(f"{key}={config[key]!r} was added")
        elif config[key] != recorded[key]:
            changes.append(f"{key}={config[key]!r} (exported {recorded[key]!r})")
    return changes


def check_loaded_weights(path: str, loading_info: dict[str, Any], changes: list[str]) -> None:
    """Raises `ValueError` when the model ``config.json`` describes does not take the saved weights as they are.

    Args:
        path: the export directory.
        loading_info: ``from_pretrained(..., output_loading_info=True, ignore_mismatched_sizes=True)``'s report:
            ``missing_keys`` (left randomly initialised), ``unexpected_keys`` (ignored) and ``mismatched_keys``
            (``(name, saved shape, shape for config.json)``, re-initialised).
        changes: `config_changes` of ``config.json`` (named in the message as the likely cause).
    """
    missing = sorted(loading_info.get("missing_keys") or ())
    unexpected = sorted(loading_info.get("unexpected_keys") or ())
    mismatched = sorted(loading_info.get("mismatched_keys") or ())
    if not (missing or unexpected or mismatched):
        return

    def some(items: list[str]) -> str:
        return ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")

    problems = []
    if mismatched:
        shapes = [f"{name} is {list(saved)} in the weights but {list(wanted)} for config.json"
                  for name, saved, wanted in mismatched]  # fmt: skip
        problems.append(f"{len(mismatched)} tensors have other shapes ({some(shapes)})")
    if missing:
        problems.append(f"{len(missing)} tensors of that model are not in the weights and would stay random "
                        f"({some(missing)})")  # fmt: skip
    if unexpected:
        problems.append(f"{len(unexpected)} saved tensors have no place in that model and would be ignored "
                        f"({some(unexpected)})")  # fmt: skip
    cause = f" config.json differs from the config the export wrote: {'; '.join(changes)}." if changes else ""
    raise ValueError(
        f"{os.path.join(path, CONFIG_NAME)} does not describe the saved weights: {'; '.join(problems)}.{cause} "
        f"To fix it, {_RESTORE}."
    )
