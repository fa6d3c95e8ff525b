"""``name=value`` settings given on a command line: ``numadapter train ... training.max_steps=5`` (recipe
overrides), ``--set r=64`` and ``--gate-sweep`` of the evaluation harness.

`parse_setting` splits one item at its first ``=`` and reads the value: as JSON where it is JSON (``64``, ``1e-3``,
``true``, ``null``, ``["q_proj", "v_proj"]``, ``{"a": 1}``), else as the text given; or with a reader the caller
passes (the recipes read YAML); or with one reader per accepted name (``{"fone_head_digit_check": int}``). A bad item
raises an error that names it, the form expected and a correct example. `parse_settings` reads a list of items into
one dict (the harness's repeated ``--set``, the fields of one ``--gate-sweep`` setting). This module imports only the
standard library.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["parse_setting", "parse_settings"]


Reader = Callable[[str], Any] | Mapping[str, Callable[[str], Any]] | None


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_setting(
    item: str,
    read: Reader = None,
    *,
    flag: str = "setting",
    form: str = "name=value",
    example: str = "name=1",
    error: type[Exception] = ValueError,
) -> tuple[str, Any]:
    """``"r=64"`` -> ``("r", 64)``: one ``name=value`` item split at its first ``=``, the value read.

    Args:
        item: the item as typed.
        read: how to read the value: None: as JSON where it is JSON, else the text as given (``"pad"`` stays
            ``"pad"``); a function of the text (e.g. a YAML loader); or ``{name: function}``, which accepts those
            names only and reads each name's value with its own function (e.g. `int`, `float`).
        flag: what the item is, first in the error messages (``"--set"``, ``"override"``).
        form: the form expected, for the error messages (``"name=value (a NumberAdapterConfig field)"``).
        example: a correct item, for the error messages (``"r=64"``).
        error: the exception class to raise (`ValueError`, a subclass of it, ``argparse.ArgumentTypeError``).

    Returns:
        ``(name, value)``, the name without surrounding spaces.

    Raises:
        error: an item without ``=`` or with an empty name, a name `read` does not list, or a value its reader
            refuses with a `ValueError`. The message names the item, what was expected and a correct example.
    """
    name, sep, raw = item.partition("=")
    name = name.strip()
    if not sep or not name:
        raise error(f"{flag} {item!r} must look like {form}, e.g. {example}.")
    if isinstance(read, Mapping):
        if name not in read:
            raise error(f"{flag} {item!r}: unknown name {name!r}; use one of {list(read)}, e.g. {example}.")
        reader = read[name]
    else:
        reader = read or _json_or_text
    try:
        return name, reader(raw)
    except ValueError as exc:
        raise error(f"{flag} {item!r}: {raw!r} is not a valid value of {name} ({exc}); e.g. {example}.") from exc


def parse_settings(
    items: Iterable[str],
    read: Reader = None,
    *,
    flag: str = "setting",
    form: str = "name=value",
    example: str = "name=1",
    error: type[Exception] = ValueError,
) -> dict[str, Any]:
    """``["r=64", "fone_projection=pad"]`` -> ``{"r": 64, "fone_projection": "pad"}``: every item read by
    `parse_setting` with these arguments, in order, so a name given twice keeps its last value.

    Raises:
        error: at the first bad item, with `parse_setting`'s message.
    """
    return dict(parse_setting(item, read, flag=flag, form=form, example=example, error=error) for item in items)
