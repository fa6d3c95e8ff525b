"""Encoding name -> `NumberMethod`: the one place that knows which encodings exist.

The built-in methods are loaded on first use (``"fone"`` -> `numadapter.methods.fone.FoNEMethod`, ...), so importing
the config does not import the modules. An outside package adds an encoding with `register_method`::

    from numadapter.methods import NumberMethod, register_method

    class MyMethod(NumberMethod): ...

    register_method("mine", MyMethod())
    config = NumberAdapterConfig(encoding="mine")

The name table itself is `numadapter.methods.names.Registry`, shared with FoNE's head modes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numadapter.methods.names import Registry

if TYPE_CHECKING:
    from numadapter.methods.base import NumberMethod

__all__ = [
    "BUILTIN", "get_method", "known_methods", "register_method", "unknown_encoding_message",
    "unregister_method",
]  # fmt: skip


# The built-in methods: name -> "module:attribute" of the method instance, imported on first use.
BUILTIN = {
    "fone": "numadapter.methods.fone:METHOD",
    "xval": "numadapter.methods.xval:METHOD",
    "digits": "numadapter.methods.digits:METHOD",
}


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


METHODS = Registry(
    "encoding", "method", "register_method", "numadapter.methods.base:NumberMethod", "numadapter.methods.NumberMethod",
    BUILTIN, unknown_encoding_message,
)  # fmt: skip


def known_methods() -> tuple[str, ...]:
    """The registered encoding names: the built-in ones first, then the others in registration order."""
    return METHODS.known()


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
    return METHODS.register(name, method, replace)


def unregister_method(name: str) -> None:
    """Removes an encoding registered with `register_method` (built-in ones stay); `KeyError` if it is not there."""
    METHODS.unregister(name)


def get_method(name_or_config: object) -> NumberMethod:
    """The `NumberMethod` of an encoding name or of a config (its ``encoding``).

    Raises:
        ValueError: no method is registered under that name (the message lists the known ones).
    """
    return METHODS.get(getattr(name_or_config, "encoding", name_or_config))
