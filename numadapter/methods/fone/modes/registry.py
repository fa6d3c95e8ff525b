"""Head-mode name -> `HeadMode`: the one place that knows how FoNE's digit head may read its 2-vectors.

``NumberAdapterConfig(fone_head_input=name)`` picks a mode; `numadapter.methods.fone.head.FoNEDigitHead` runs it. The
built-in modes are imported on first use (``"linear"`` -> `numadapter.methods.fone.modes.linear.MODE`, ...). An
outside package adds one with `register_head_mode`, as `numadapter.methods.register_method` adds an encoding::

    from numadapter.methods import HeadMode, register_head_mode

    class MyReadout(HeadMode): ...

    register_head_mode("mine", MyReadout())
    config = NumberAdapterConfig(encoding="fone", fone_head_input="mine", fone_numbers="all")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numadapter.methods.names import Registry

if TYPE_CHECKING:
    from numadapter.methods.fone.modes.base import HeadMode

__all__ = [
    "BUILTIN", "get_head_mode", "known_head_modes", "register_head_mode", "unknown_head_mode_message",
    "unregister_head_mode",
]  # fmt: skip

# The built-in modes: name -> "module:attribute" of the mode instance, imported on first use.
BUILTIN = {
    "linear": "numadapter.methods.fone.modes.linear:MODE",
    "slice": "numadapter.methods.fone.modes.slice:MODE",
    "rotation": "numadapter.methods.fone.modes.rotation:MODE",
    "context": "numadapter.methods.fone.modes.context:MODE",
}


def unknown_head_mode_message(name: object) -> str:
    """The error text for a ``fone_head_input`` no mode is registered under (building a config, loading an adapter)."""
    return (
        f"`fone_head_input` must be one of {list(known_head_modes())}, got {name!r}: use one of them, or register a "
        "head mode under that name (numadapter.methods.fone.modes.register_head_mode(name, mode)) before building or "
        "loading anything that uses it."
    )


MODES = Registry(
    "head mode", "mode", "register_head_mode", "numadapter.methods.fone.modes.base:HeadMode",
    "numadapter.methods.fone.modes.HeadMode", BUILTIN, unknown_head_mode_message,
)  # fmt: skip


def known_head_modes() -> tuple[str, ...]:
    """The registered head modes: the built-in ones first, then the others in registration order."""
    return MODES.known()


def register_head_mode(name: str, mode: HeadMode, *, replace: bool = False) -> HeadMode:
    """Makes `mode` the head mode `name` (``NumberAdapterConfig(fone_head_input=name)``); returns it.

    Raises:
        TypeError: `mode` is not a `HeadMode` instance.
        ValueError: `name` is empty, a built-in mode, or already registered (without `replace`).
    """
    return MODES.register(name, mode, replace)


def unregister_head_mode(name: str) -> None:
    """Removes a mode added with `register_head_mode` (built-in ones stay); `KeyError` if it is not there."""
    MODES.unregister(name)


def get_head_mode(name_or_config: object) -> HeadMode:
    """The `HeadMode` of a mode name or of a config (its ``fone_head_input``).

    Raises:
        ValueError: no mode is registered under that name (the message lists the known ones).
    """
    return MODES.get(getattr(name_or_config, "fone_head_input", name_or_config))
