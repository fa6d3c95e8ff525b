"""The side buffer: how number tensors reach the embedding module during one forward call.

Why a buffer: docs/DESIGN.md, "Side tensors travel with input_ids".

Hugging Face models call ``embed_tokens(input_ids)`` with ids only. `NumberAdapterModel.forward` therefore validates
the number tensors against the ids, stores them here per *side* (``"input"`` for a causal LM, ``"encoder"`` and
``"decoder"`` for T5), arms the buffer for the duration of the model call, and clears it afterwards, also when the
call raises. The embedding hook reads the tensors of the side that is current; the LM-head pre-hook stores the
hidden state the number head reads.

One buffer belongs to one tuner; calls are not re-entrant (`torch.nn.DataParallel`, which runs replicas in threads
over shared Python objects, is not supported; DDP / FSDP / DeepSpeed run one process per device and are fine).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from numadapter.schema import NumberInputs  # the container is declared with the schema; imported here as before


class SideBuffer:
    """Number tensors for the model call in progress.

    Attributes:
        sides: side name -> `NumberInputs` (a side without numbers may be absent).
        current: the side whose embedding call is in progress (set by the patched forward for causal LMs, by the
            encoder / decoder pre-hooks for T5), None outside.
        hidden: the input of the LM head captured during the call (``[B, T, H]``), or None.
        digit_embeddings: ``[10, H]`` raw digit-token embeddings read inside the embedding call (for [AGG] and the
            aggregate loss), or None.
    """

    def __init__(self) -> None:
        self.sides: dict[str, NumberInputs] = {}
        self.current: str | None = None
        self.hidden: torch.Tensor | None = None
        self.digit_embeddings: torch.Tensor | None = None
        self.armed = False

    @contextmanager
    def arm(self, sides: dict[str, NumberInputs], current: str | None = None) -> Iterator[SideBuffer]:
        """Fills the buffer for one model call and clears it on exit (normal or exceptional).

        Args:
            sides: the validated number tensors per side.
            current: the side to make current at once (causal LMs: ``"input"``); T5 leaves it None.
        """
        if self.armed:
            raise RuntimeError(
                "numadapter's side buffer is already in use: a forward call started inside another one (re-entrant "
                "calls and torch.nn.DataParallel are not supported; use DDP)."
            )
        self.clear()
        self.sides = dict(sides)
        self.current = current
        self.armed = True
        try:
            yield self
        finally:
            self.clear()

    def clear(self) -> None:
        """Drops every tensor and disarms the buffer."""
        self.sides = {}
        self.current = None
        self.hidden = None
        self.digit_embeddings = None
        self.armed = False

    def inputs_for_current(self) -> NumberInputs | None:
        """The `NumberInputs` of the current side, or None when disarmed / outside a side / the side has none."""
        if not self.armed or self.current is None:
            return None
        return self.sides.get(self.current)
