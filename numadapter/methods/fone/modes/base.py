"""`HeadMode`: how FoNE's digit head turns a hidden state into its digit 2-vectors.

`numadapter.methods.fone.head.FoNEDigitHead` is the shell: it asks the config's mode (``fone_head_input``, looked up
in `numadapter.methods.fone.modes.registry`) to build its parameters and to read the 2-vectors, then scores them
against the digits (the paper's digit target or the feature target) and adds the sign. A mode that reads the numbers
before the position (``reads_context``, the built-in ``"context"``) also tells the tokenizer and the coverage count
which answers it writes exactly (`forms`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["HeadMode", "complex_product"]


def complex_product(a: Tensor, b: Tensor) -> Tensor:
    """``a * b`` of 2-vectors read as complex numbers ``(re, im)``: ``[..., 2]`` x ``[..., 2]`` -> ``[..., 2]`` (the
    angles add: how the modes combine digit features)."""
    return torch.stack(
        (a[..., 0] * b[..., 0] - a[..., 1] * b[..., 1], a[..., 0] * b[..., 1] + a[..., 1] * b[..., 0]), -1
    )


class HeadMode:
    """One way to read the digit 2-vectors; subclass it and register an instance (`register_head_mode`).

    Attributes:
        name: the ``fone_head_input`` it is registered under (set by the registry).
        reads_context: whether the head combines the numbers before the position with the read-out (then the model
            passes them: `numadapter.methods.context.ContextNumbers`); the modes that only read the hidden state say
            False.
    """

    name: str = ""
    reads_context: bool = False

    def check(self, config: Any, hidden_size: int) -> None:
        """Raises `ValueError` (naming the setting and the fix) when this mode cannot run with `config` on a model of
        width `hidden_size`; the default accepts every config."""

    def build(self, head: nn.Module, hidden_size: int, config: Any) -> None:
        """Adds this mode's parameters to `head` (`head.num_places` = P is set). A saved adapter holds them under the
        attribute names given here, so a mode keeps its names once adapters were saved with it."""
        raise NotImplementedError(f"{type(self).__name__}.build: add this mode's parameters to the head.")

    def readout(self, head: nn.Module, h: Tensor) -> Tensor:
        """The digit 2-vectors from float32 hidden states ``h [..., H]``: float32 ``[..., P, 2]``, pair ``k`` the
        place ``10^(k - frac_digits)`` (least significant first, as FoNE's input features)."""
        raise NotImplementedError(f"{type(self).__name__}.readout: return the [..., P, 2] digit 2-vectors.")

    def forms(self, context: Sequence[int], value: int, config: Any) -> bool:
        """Whether the head writes `value` exactly from the numbers before it, `context` (fixed-point integers in units
        of the lowest place, most recent first; `numadapter.numbers.fixed_point`). The tokenizer writes such answers
        as [NUM] in answers mode, and the trainer's coverage count reads the same. A mode that reads only the hidden
        state forms none."""
        return False
