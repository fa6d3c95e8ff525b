"""`Registry`: a table of names -> registered instances, the built-in ones imported by name on first use.

The encodings (`numadapter.methods.registry`) and FoNE's head modes (`numadapter.methods.fone.modes.registry`) are
two such tables; the messages name the table's own function and class, so both refuse bad registrations alike.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["Registry"]


class Registry:
    """Names -> instances of one base class; the built-in ones imported by ``"module:attribute"`` on first use.

    Args:
        kind: what a name names, for the messages (``"encoding"``).
        item: what is registered, for the messages (``"method"``).
        register: the public function that registers one (``"register_method"``).
        base: ``"module:Class"`` of the class a registered instance must be, imported when one is registered.
        public_base: how the messages name that class (``"numadapter.methods.NumberMethod"``).
        builtin: the built-in names -> ``"module:attribute"`` of their instance.
        unknown: the error text for a name nothing is registered under.
    """

    def __init__(
        self, kind: str, item: str, register: str, base: str, public_base: str, builtin: dict[str, str],
        unknown: Callable[[object], str],
    ) -> None:  # fmt: skip
        self.kind, self.item, self.register_name = kind, item, register
        self.base, self.public_base, self.builtin, self.unknown = base, public_base, builtin, unknown
        self.registered: dict[str, Any] = {}

    def known(self) -> tuple[str, ...]:
        """The registered names: the built-in ones first, then the others in registration order."""
        return tuple(self.builtin) + tuple(name for name in self.registered if name not in self.builtin)

    def register(self, name: str, instance: Any, replace: bool = False) -> Any:
        """Makes `instance` the one named `name` (its ``name`` attribute set); returns it.

        Raises:
            TypeError: `instance` is not an instance of the base class.
            ValueError: `name` is empty, a built-in one, or already registered (without `replace`).
        """
        module, attribute = self.base.split(":")
        base = getattr(importlib.import_module(module), attribute)
        call = self.register_name
        if not isinstance(name, str) or not name:
            raise ValueError(f"{call}: the {self.kind} name must be a non-empty string, got {name!r}.")
        if not isinstance(instance, base):
            raise TypeError(
                f"{call}({name!r}, ...): the {self.item} must be a {self.public_base} instance, got "
                f"{type(instance).__name__}: subclass {base.__name__} and pass an instance."
            )
        if name in self.builtin:
            raise ValueError(
                f"{call}: {name!r} is a built-in {self.kind} and cannot be replaced: choose another name "
                f"(taken: {list(self.known())})."
            )
        if name in self.registered and not replace:
            raise ValueError(
                f"{call}: the {self.kind} {name!r} is already registered ({type(self.registered[name]).__name__}): "
                "choose another name, or pass replace=True to replace it."
            )
        instance.name = name
        self.registered[name] = instance
        return instance

    def unregister(self, name: str) -> None:
        """Removes one added with `register` (built-in ones stay); `KeyError` if it is not there."""
        if name in self.builtin or name not in self.registered:
            article = "an" if self.kind[0] in "aeiou" else "a"
            raise KeyError(
                f"un{self.register_name}: {name!r} is not {article} {self.kind} added with {self.register_name}."
            )
        del self.registered[name]

    def get(self, name: object) -> Any:
        """The instance registered under `name`, a built-in one imported on first use.

        Raises:
            ValueError: nothing is registered under that name (the message lists the known ones).
        """
        found = self.registered.get(name) if isinstance(name, str) else None
        if found is not None:
            return found
        if isinstance(name, str) and name in self.builtin:
            module, attribute = self.builtin[name].split(":")
            instance = getattr(importlib.import_module(module), attribute)
            instance.name = name
            self.registered[name] = instance
            return instance
        raise ValueError(self.unknown(name))
