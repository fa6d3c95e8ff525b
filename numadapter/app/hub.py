"""Before loading a model by hub id: is it local, cached, or reachable? One clear error instead of hub retries.

``from_pretrained("meta-llama/Llama-3.2-1B")`` on a machine without network retries the hub for about a minute and
then raises a long traceback that never mentions the recipe. `check_model_sources` runs first (``numadapter train``
and ``numadapter eval``): a name that is an existing directory, or a hub id already in the local Hugging Face cache,
passes; a hub id that is not cached fails at once with a `RecipeError` naming the recipe key to change when
``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set, or when the hub's host cannot be resolved or connected to
within `PROBE_SECONDS`. With a proxy configured the probe is skipped (the proxy may reach what this machine cannot
resolve), and transformers reports what happens.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from urllib.parse import urlparse

from numadapter.app.recipe import RecipeError
from numadapter.checkpoints import gguf_only_directory

PROBE_SECONDS = 5.0
DEFAULT_ENDPOINT = "https://huggingface.co"
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
CACHE_FILES = {"model": "config.json", "tokenizer": "tokenizer_config.json"}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


def offline_flag() -> str | None:
    """The environment variable that forces offline mode (``HF_HUB_OFFLINE=1``, ...), or None."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE"):
            return name
    return None


def _connect(host: str, port: int, result: list[BaseException | None]) -> None:
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
        result.append(None)
    except OSError as exc:
        result.append(exc)


def hub_unreachable() -> str | None:
    """Why the Hugging Face hub cannot be reached from here (one short phrase), or None when it may be.

    The host is ``HF_ENDPOINT`` (default huggingface.co); name resolution and the TCP connection together get
    `PROBE_SECONDS` (resolution runs in a thread, so a hanging resolver cannot block longer).
    """
    flag = offline_flag()
    if flag is not None:
        return f"{flag}={os.environ[flag]} is set"
    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return None
    url = urlparse(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    result: list[BaseException | None] = []
    probe = threading.Thread(target=_connect, args=(host, port, result), daemon=True)
    probe.start()
    probe.join(PROBE_SECONDS + 1.0)
    if not result:
        return f"no network: no answer from {host} within {PROBE_SECONDS:g} s"
    if result[0] is not None:
        return f"no network: {host} cannot be reached ({type(result[0]).__name__}: {result[0]})"
    return None


def _cached(repo_id: str, kind: str, revision: str | None) -> bool:
    """Whether the hub id has its config file in the local Hugging Face cache (so offline loading works)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, CACHE_FILES[kind], revision=revision), str)
    except Exception:  # not a valid repo id: not cached
        return False


def model_sources(settings) -> list[tuple[str, str | None, str]]:
    """The `check_model_sources` entries of a recipe's `model` section (`numadapter.app.recipe.ModelSettings`): the
    model first (its GGUF file when ``gguf_file`` is set), then the tokenizer."""
    if settings.gguf_file is not None:
        model = ("model.gguf_file", os.path.join(settings.name_or_path, settings.gguf_file), "gguf")
    else:
        model = ("model.name_or_path", settings.name_or_path, "model")
    return [model, ("model.tokenizer", settings.tokenizer, "tokenizer")]


def _gguf_hint(files: Sequence[str]) -> str:
    other = " (or another of them)" if len(files) > 1 else ""
    return f"set model.gguf_file={files[0]}{other}: it is converted once to float32 (numadapter.convert_gguf)"


def _check_gguf(key: str, path: str) -> None:
    """A ``model.gguf_file`` entry: the file must exist in a local directory."""
    if os.path.isfile(path):
        return
    folder, name = os.path.split(path)
    if not os.path.isdir(folder or "."):
        raise RecipeError(
            f"{key}={name!r} needs model.name_or_path to be the local directory that holds it, and {folder!r} is not "
            "a directory: download the GGUF file first and set model.name_or_path to its directory."
        )
    found = sorted(entry for entry in os.listdir(folder or ".") if entry.lower().endswith(".gguf"))
    hint = _gguf_hint(found) if found else "that directory holds no .gguf file"
    raise RecipeError(f"{key}={name!r} is not a file in {folder!r}: {hint}.")


def _check_directory(key: str, path: str, kind: str) -> None:
    """A local model directory needs config.json; a GGUF-only one is named with the setting that loads it."""
    files = gguf_only_directory(path)
    if kind == "model" and files:
        raise RecipeError(
            f"{key}={path!r} holds no config.json, only GGUF ({', '.join(files)}), which transformers does not load "
            f"as a directory: {_gguf_hint(files)}."
        )
    if kind == "model" and not os.path.isfile(os.path.join(path, "config.json")):
        raise RecipeError(f"{key}={path!r} has no config.json: set {key} to the directory that holds the model.")
    if kind == "tokenizer" and files and not any(os.path.isfile(os.path.join(path, n)) for n in TOKENIZER_FILES):
        raise RecipeError(
            f"{key}={path!r} holds only GGUF ({', '.join(files)}): leave {key} unset and {_gguf_hint(files)}; the "
            "converted directory holds the tokenizer."
        )


def check_model_sources(sources: Sequence[tuple[str, str | None, str]], revision: str | None = None) -> None:
    """Refuses hub ids that cannot be loaded from here, before transformers spends a minute retrying.

    Args:
        sources: ``(recipe key, name or path, kind)`` with kind ``"model"``, ``"tokenizer"`` or ``"gguf"`` (a
            GGUF file's path, `model_sources`); a None name is skipped (e.g. ``model.tokenizer`` unset).
        revision: the hub revision (``model.revision``), for the cache lookup.

    Raises:
        RecipeError: a missing local path, a directory without config.json (GGUF-only: the message names
            ``model.gguf_file``), a missing GGUF file, or a hub id that is not cached while the hub cannot be reached;
            the message names the recipe key and the fix in one line.
    """
    reason: str | None = None
    probed = False
    for key, name, kind in sources:
        if name is None:
            continue
        if kind == "gguf":
            _check_gguf(key, name)
            continue
        if os.path.isdir(name):
            _check_directory(key, name, kind)
            continue
        if os.path.isabs(name) or name.startswith((".", "~")):
            raise RecipeError(f"{key}={name!r} is not a directory: set {key} to the directory that holds the {kind}.")
        if _cached(name, kind, revision):
            continue
        if not probed:
            reason, probed = hub_unreachable(), True
        if reason is not None:
            raise RecipeError(
                f"{key}={name!r} is a hub id that is not in the local cache, and the Hugging Face hub cannot be "
                f"reached ({reason}): set {key} to a local directory with the {kind} (e.g. {key}=/models/my-model), "
                "or download it once with network access."
            )
