"""Encoding name -> `NumberMethod`: the one place that knows which encodings exist.

The built-in methods are loaded on first use (``"fone"`` -> `numadapter.methods.fone.FoNEMethod`, ...), so importing
the config does not import the modules. An outside package adds an encoding with `register_method`::

    from numadapter.methods import NumberMethod, register_method

    class MyMethod(NumberMethod): ...

    register_method("mine", MyMethod())
    config = NumberAdapterConfig(encoding="mine")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from numadapter.methods.base import NumberMethod

# The built-in methods: name -> "module:attribute" of the method instance, imported on first use.
BUILTIN = {
    "fone": "numadapter.methods.fone:METHOD",
    "xval": "numadapter.methods.xval:METHOD",
    "digits": "numadapter.methods.digits:METHOD",
}
_registered: dict[str, NumberMethod] = {}


def known_methods() -> tuple[str, ...]:
    """The registered encoding names: the built-in ones first, then the others in registration order."""
    return tuple(BUILTIN) + tuple(name for name in _registered if name not in BUILTIN)


def register_method(name: str, method: NumberMethod, *, replace: bool = False) -> NumberMethod:
    """Makes `method` the encoding `name` (``NumberAdapterConfig(encoding=name)``); returns it.

    Args:
        name: the encoding name, a non-empty string.
        method: a `NumberMethod` instance; its ``name`` is set to `name`.
        replace: allow replacing a method registered under `name` by an earlier call (never a built-in one).

    Raises:
        TypeError: `method` is not a `NumberMethod` instance.
        ValueError: `name` is empty, a built-in encoding, or already registered (without `replace`).
    """
    from numadapter.methods.base import NumberMethod

    if not isinstance(name, str) or not name:
        raise ValueError(f"register_method: the encoding name must be a non-empty string, got {name!r}.")
    if not isinstance(method, NumberMethod):
        raise TypeError(
            f"register_method({name!r}, ...): the method must be a numadapter.methods.NumberMethod instance, got "
            f"{type(method).__name__}: subclass NumberMethod and pass an instance."
        )
    if name in BUILTIN:
        raise ValueError(
            f"register_method: {name!r} is a built-in encoding and cannot be replaced: choose another name "
            f"(taken: {list(known_methods())})."
        )
    if name in _registered and not replace:
        raise ValueError(
            f"register_method: the encoding {name!r} is already registered ({type(_registered[name]).__name__}): "
            "choose another name, or pass replace=True to replace it."
        )
    method.name = name
    _registered[name] = method
    return method


def unregister_method(name: str) -> None:
    """Removes an encoding registered with `register_method` (built-in ones stay); `KeyError` if it is not there."""
    if name in BUILTIN or name not in _registered:
        raise KeyError(f"unregister_method: {name!r} is not an encoding added with register_method.")
    del _registered[name]


def unknown_encoding_message(name: object, field: str = "encoding") -> str:
    """The error text for an encoding no method is registered under (the config's `_choice` style); `field` is
    how the caller names the setting (``"adapter.encoding"`` in a recipe).

    The same text serves every place that meets the name: building a config, loading a saved adapter, tokenizer or
    export, and a recipe; so it says when the registration must happen and how the command line gets one.
    """
    return (
        f"`{field}` must be one of {list(known_methods())}, got {name!r}: use one of them, or register a number "
        "method under that name (numadapter.methods.register_method(name, method)) before building, loading or "
        "exporting anything that uses it; for the numadapter command line, pass --import MODULE with the module that "
        "registers it."
    )


def get_method(name_or_config: object) -> NumberMethod:
    """The `NumberMethod` of an encoding name or of a config (its ``encoding``).

    Raises:
        ValueError: no method is registered under that name (the message lists the known ones).
    """
    name = getattr(name_or_config, "encoding", name_or_config)
    found = _registered.get(name) if isinstance(name, str) else None
    if found is not None:
        return found
    if isinstance(name, str) and name in BUILTIN:
        module, attribute = BUILTIN[name].split(":")
        method = getattr(importlib.import_module(module), attribute)
        method.name = name
        _registered[name] = method
        return method
    raise ValueError(unknown_encoding_message(name))
