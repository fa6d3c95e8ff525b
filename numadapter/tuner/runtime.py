"""`NumberRuntime`: the handle the decode loop drives the transformers model with, step by step.

`NumberAdapterModel.forward` validates the number tensors, arms the side buffer, installs the hooks, runs the
model and then the head, once per call. The decode loop (`numadapter.generation.loop`) with a KV cache wants the
middle part only, many times: install the hooks once, and per step hand the buffer the number inputs of the new
positions and read back the LM-head input. `NumberAdapterModel.number_runtime()` returns this object for the active
adapter, so the loop never reaches into the tuner's private state.

The LM-head input it captures carries none of the numbers before the step: a context head
(``fone_head_input="context"``) also needs those, which the loop keeps in a `ContextMemory`
(`numadapter.generation.readout`). Code outside the package runs cached steps through the model's own forward with
``past_key_values``, which keeps them (docs/guide.md, "Which forwards are number-aware").

Usage (one cached step; ``inputs`` is a `NumberInputs` for the new positions, or None when they hold no number)::

    runtime = peft_model.base_model.number_runtime()
    with runtime.hooks(capture_hidden=True):
        with runtime.step({"input": inputs}, current="input") as buffer:
            out = runtime.inner(input_ids=ids, past_key_values=cache, use_cache=True)
            hidden = buffer.hidden      # [B, T, H] input of the LM head (None without capture_hidden)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import nn

from numadapter.tuner.forward_hooks import number_hooks
from numadapter.tuner.number_modules import NumberModules
from numadapter.tuner.patches import Architecture
from numadapter.tuner.side_buffer import NumberInputs, SideBuffer

if TYPE_CHECKING:
    from numadapter.config import NumberAdapterConfig


@dataclass(frozen=True)
class NumberRuntime:
    """The active number adapter's parts, for step-by-step execution.

    Attributes:
        adapter_name: the active number adapter, or None when the adapters are disabled (``disable_adapter()``).
        config: that adapter's `NumberAdapterConfig` (of the active adapter when disabled).
        modules: its `NumberModules` (input module + head), or None when the adapters are disabled.
        inner: the transformers model (LoRA layers injected); call it directly inside `hooks` + `step`.
        arch: the architecture (causal or encoder-decoder; its embedding call sites and scaling).
        buffer: the side buffer the hooks read the number inputs from.
    """

    adapter_name: str | None
    config: NumberAdapterConfig
    modules: NumberModules | None
    inner: nn.Module
    arch: Architecture
    buffer: SideBuffer

    @property
    def has_head(self) -> bool:
        """Whether the active adapter has a number head (FoNE / xVal): its input is worth capturing."""
        return self.modules is not None and self.modules.head is not None

    def hooks(self, capture_hidden: bool):
        """Installs the number hooks on `inner` for the duration of the ``with`` block (nothing when disabled).

        Args:
            capture_hidden: store the LM-head input of every call in ``buffer.hidden``.
        """
        if self.modules is None:
            return nullcontext()
        return number_hooks(self.inner, self.arch, self.buffer, self.modules, capture_hidden, None, False)

    @contextmanager
    def step(self, sides: Mapping[str, NumberInputs], current: str | None) -> Iterator[SideBuffer]:
        """Arms the side buffer for one call of `inner`.

        Args:
            sides: number inputs per side (``"input"`` for a causal model, ``"encoder"`` / ``"decoder"`` for T5),
                each aligned with the ids of that call; leave a side out when its ids hold no number.
            current: the side that starts active (``"input"`` for causal models; None for T5, whose encoder and
                decoder scopes switch it).

        Yields:
            The armed buffer; read ``buffer.hidden`` before leaving the block.
        """
        with self.buffer.arm(dict(sides), current) as buffer:
            yield buffer
