"""Small pieces every benchmark's command line shares."""

from __future__ import annotations

import json
from typing import Any


def write_json(result: Any, path: str | None) -> None:
    """Writes `result` to `path` as indented JSON (UTF-8); nothing when `path` is None (no ``--json`` given)."""
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
