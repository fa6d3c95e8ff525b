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

PROBE_SECONDS = 5.0
DEFAULT_ENDPOINT = "https://huggingface.co"
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
CACHE_FILES = {"model": "config.json", "tokenizer": "tokenizer_config.json"}


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
    """The `check_model_sources` entries of a recipe's `model` section (`numadapter.app.recipe.ModelSettings`)."""
    return [
        ("model.name_or_path", settings.name_or_path, "model"),
        ("model.tokenizer", settings.tokenizer, "tokenizer"),
    ]


def check_model_sources(sources: Sequence[tuple[str, str | None, str]], revision: str | None = None) -> None:
    """Refuses hub ids that cannot be loaded from here, before transformers spends a minute retrying.

    Args:
        sources: ``(recipe key, name or path, kind)`` with kind ``"model"`` or ``"tokenizer"``; a None name is
            skipped (e.g. ``model.tokenizer`` unset).
        revision: the hub revision (``model.revision``), for the cache lookup.

    Raises:
        RecipeError: a missing local path, or a hub id that is not cached while the hub cannot be reached; the
            message names the recipe key and the fix in one line.
    """
    reason: str | None = None
    probed = False
    for key, name, kind in sources:
        if name is None or os.path.isdir(name):
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
