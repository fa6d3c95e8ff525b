"""Reading the JSON files numadapter writes (a NumberTokenizer's settings, an export's ``number_config.json`` and
``config.json``) with errors that name the file and how to restore it.

Kept apart from `numadapter.export_files` so that the tokenizer, which sits below the export, can read its own
settings without importing the export's modules.
"""

from __future__ import annotations

import json
import os
from typing import Any


def read_json(path: str, fix: str) -> Any:
    """`json.load` of `path`; `FileNotFoundError` / `ValueError` naming the file and `fix`."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist: {fix}.")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}): the file is truncated or damaged; {fix}.") from exc
