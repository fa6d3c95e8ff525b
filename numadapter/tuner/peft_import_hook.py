"""Registers numadapter with PEFT as soon as PEFT is imported, so that ``import numadapter`` need not import it.

``import numadapter`` is lazy (PEP 562, `numadapter.__init__`): it imports no torch, transformers, PEFT, TRL,
DeepSpeed or bitsandbytes (``import peft`` alone imports bitsandbytes when it is installed). Yet a user who only wrote
``import numadapter`` must be able to call ``peft.PeftModel.from_pretrained`` on a numadapter adapter, which needs
``PeftType.NUMADAPTER`` in PEFT's mappings (`numadapter.tuner.registration`). So `install` (run by
``import numadapter``) registers at once when PEFT is already imported, and otherwise puts a finder at the head of
``sys.meta_path`` that runs the registration right after PEFT's own module has executed, whoever imports it.

The registration imports `numadapter.config` and `numadapter.tuner.model`. When PEFT is first imported by one of
numadapter's own modules (``from numadapter import NumberTokenizer`` imports `numadapter.config`, which imports
PEFT), those modules are still half-executed at that moment, so the finder also counts the numadapter modules being
executed and registers when the outermost one has finished. Once registered, the finder removes itself.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any

_TRIGGER = "peft"
_PACKAGE = "numadapter."


class _RegisterAfterPeft(importlib.abc.MetaPathFinder):
    """A meta path finder that finds nothing itself: it wraps the loaders of ``peft`` and ``numadapter.*``."""

    def __init__(self) -> None:
        self.depth = 0  # numadapter modules being executed right now (nested imports)
        self.pending = False  # PEFT is loaded but registration waits for those modules to finish

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TRIGGER and not fullname.startswith(_PACKAGE):
            return None
        spec = _spec_from_other_finders(self, fullname, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return spec  # namespace packages, built-in / frozen importers (classes shared by every module)
        execute = loader.exec_module
        if fullname == _TRIGGER:

            def exec_peft(module: Any) -> None:
                execute(module)
                self.pending = True
                self.settle()

            loader.exec_module = exec_peft  # this loader instance belongs to this one spec
        else:

            def exec_numadapter(module: Any) -> None:
                self.depth += 1
                try:
                    execute(module)
                finally:
                    self.depth -= 1
                self.settle()

            loader.exec_module = exec_numadapter
        return spec

    def settle(self) -> None:
        """Registers once PEFT is loaded and no numadapter module is half-executed; then leaves ``sys.meta_path``."""
        if not self.pending or self.depth:
            return
        self.pending = False
        _uninstall(self)
        _register()


def _spec_from_other_finders(
    hook: _RegisterAfterPeft, fullname: str, path: Any, target: Any
) -> importlib.machinery.ModuleSpec | None:
    """The spec the rest of ``sys.meta_path`` finds for `fullname` (this hook skipped)."""
    for finder in list(sys.meta_path):
        if finder is hook or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _register() -> None:
    from numadapter.tuner.registration import register

    register()  # idempotent; warns and leaves PEFT alone outside the tested peft range


def _uninstall(hook: _RegisterAfterPeft) -> None:
    if hook in sys.meta_path:
        sys.meta_path.remove(hook)


def install() -> None:
    """Registers now if PEFT is already imported, else arranges registration for when it is (idempotent)."""
    if any(isinstance(finder, _RegisterAfterPeft) for finder in sys.meta_path):
        return
    peft = sys.modules.get(_TRIGGER)
    if peft is not None and not getattr(getattr(peft, "__spec__", None), "_initializing", False):
        _register()
        return
    sys.meta_path.insert(0, _RegisterAfterPeft())
