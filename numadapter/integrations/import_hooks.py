"""Registers numadapter with PEFT and transformers as soon as they are imported, so that ``import numadapter`` need
not import them.

``import numadapter`` is lazy (PEP 562, `numadapter.__init__`): it imports no torch, transformers, PEFT, TRL,
DeepSpeed or bitsandbytes (``import peft`` alone imports bitsandbytes when it is installed). Yet a user who only wrote
``import numadapter`` must be able to call ``peft.PeftModel.from_pretrained`` on a numadapter adapter, which needs
``PeftType.NUMADAPTER`` in PEFT's mappings (`numadapter.tuner.registration`), and ``AutoModelForCausalLM`` /
``pipeline("text-generation")`` on a numadapter export, which need numadapter's model types in transformers' Auto
classes (`numadapter.serving.auto`). So `install` (run by ``import numadapter``) registers at once for each trigger
module (`TRIGGERS`) already imported, and otherwise puts a finder at the head of ``sys.meta_path`` that runs the
registration right after the trigger module has executed, whoever imports it. Each trigger is the module that
defines what its registration changes (transformers' auto config, auto model and pipeline modules are triggers of
their own), so the registration finds that module whole and imports nothing heavier.

The registration imports numadapter modules. When a trigger is first imported by one of numadapter's own modules
(``from numadapter import NumberTokenizer`` imports `numadapter.config`, which imports PEFT), those modules are
still half-executed at that moment, so the finder also counts the numadapter modules being executed and registers
when the outermost one has finished. Once every trigger has registered, the finder removes itself.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from typing import Any

_PACKAGE = "numadapter."
# trigger module -> "module:function" run once it has executed
TRIGGERS: dict[str, str] = {
    "peft": "numadapter.tuner.registration:register",
    "transformers.models.auto.configuration_auto": "numadapter.serving.auto:register_configs",
    "transformers.models.auto.modeling_auto": "numadapter.serving.auto:register_models",
    "transformers.pipelines": "numadapter.serving.auto:register_text_generation",
}


class _RegisterAfterPeft(importlib.abc.MetaPathFinder):
    """A meta path finder that finds nothing itself: it wraps the loaders of the triggers and of ``numadapter.*``."""

    def __init__(self, waiting: list[str]) -> None:
        self.depth = 0  # numadapter modules being executed right now (nested imports)
        self.waiting = list(waiting)  # triggers not imported yet
        self.pending: list[str] = []  # triggers loaded whose registration waits for those modules to finish

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.waiting and not fullname.startswith(_PACKAGE):
            return None
        spec = _spec_from_other_finders(self, fullname, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return spec  # namespace packages, built-in / frozen importers (classes shared by every module)
        execute = loader.exec_module
        if fullname in self.waiting:

            def exec_trigger(module: Any) -> None:
                execute(module)
                if fullname in self.waiting:
                    self.waiting.remove(fullname)
                    self.pending.append(fullname)
                self.settle()

            loader.exec_module = exec_trigger  # this loader instance belongs to this one spec
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
        """Registers the loaded triggers once no numadapter module is half-executed; leaves ``sys.meta_path`` when
        every trigger has registered."""
        if not self.pending or self.depth:
            return
        done, self.pending = self.pending, []
        if not self.waiting:
            _uninstall(self)
        for trigger in done:
            _register(trigger)


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


def _register(trigger: str) -> None:
    """Runs the registration of `trigger` (PEFT's is idempotent and warns outside the tested peft range)."""
    module, function = TRIGGERS[trigger].split(":")
    getattr(importlib.import_module(module), function)()


def _uninstall(hook: _RegisterAfterPeft) -> None:
    if hook in sys.meta_path:
        sys.meta_path.remove(hook)


def _imported(name: str) -> bool:
    module = sys.modules.get(name)
    return module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False)


def install() -> None:
    """Registers now for each trigger already imported, and arranges registration for the others (idempotent)."""
    if any(isinstance(finder, _RegisterAfterPeft) for finder in sys.meta_path):
        return
    waiting = [trigger for trigger in TRIGGERS if not _imported(trigger)]
    if waiting:
        sys.meta_path.insert(0, _RegisterAfterPeft(waiting))
    for trigger in TRIGGERS:
        if trigger not in waiting:
            _register(trigger)
