"""`HeadMode`: how FoNE's digit head turns a hidden state into its digit 2-vectors.

`numadapter.methods.fone.head.FoNEDigitHead` is the shell: it asks the config's mode (``fone_head_input``, looked up
in `numadapter.methods.fone.modes.registry`) to build its parameters and to read the 2-vectors, then scores them
against the digits (the paper's digit target or the feature target) and adds the sign. A mode that reads the numbers
before the position (``reads_context``, the built-in ``"context"``) also tells the tokenizer and the coverage count
which answers it writes exactly (`forms`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["HeadMode", "complex_product", "shifted_digit_logits"]


def complex_product(a: Tensor, b: Tensor) -> Tensor:
    """``a * b`` of 2-vectors read as complex numbers ``(re, im)``: ``[..., 2]`` x ``[..., 2]`` -> ``[..., 2]`` (the
    angles add: how the modes combine digit features)."""
    return torch.stack(
        (a[..., 0] * b[..., 0] - a[..., 1] * b[..., 1], a[..., 0] * b[..., 1] + a[..., 1] * b[..., 0]), -1
    )


def shifted_digit_logits(pairs: Tensor, lower: Tensor) -> Tensor:
    """Scores of the ten candidates ``phi((j + lower) / 10, 1)`` for every pair (``fone_head_target="feature"``).

    Args:
        pairs: float32 ``[..., 2]`` digit 2-vectors.
        lower: float ``[...]`` the lower digits' value as a fraction in [0, 1) (0: the paper's ``phi(j, 10)``).

    Returns:
        float32 ``[..., 10]``: ``pairs . (cos, sin)(2*pi*(j + lower)/10)`` for ``j = 0 ... 9``.
    """
    steps = torch.arange(10, dtype=torch.float32, device=pairs.device)
    angle = (steps + lower.float()[..., None]) * (2 * math.pi / 10)  # (..., 10)
    return (pairs[..., None, :] * torch.stack((torch.cos(angle), torch.sin(angle)), dim=-1)).sum(-1)


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

    def combine(self, head: nn.Module, h: Tensor, pairs: Tensor, context: Any) -> tuple[Tensor, dict[str, Any]]:
        """The 2-vectors the head scores, from the read-out `pairs` (``[N, P, 2]``, low place first) and, for a mode
        that reads them, the numbers before each position (`context`); with the `DigitHeadOutput` fields the mode
        fills (its loss and `choice` read them). The read-outs return `pairs` as they are and no field."""
        return pairs, {}

    def number_loss(self, head: nn.Module, out: Any, target_digits: Tensor) -> Tensor | None:
        """The mode's own loss per number, float32 ``[N]``, or None for the digit cross-entropy the head computes."""
        return None

    def choice(self, head: nn.Module, out: Any) -> tuple[Tensor | None, Tensor | None]:
        """The combination the mode chose (int64 ``[N, K]`` of -1, 0, +1) and its log-probability (float32 ``[N]``),
        which multiplies the head's confidence; None, None for a mode that combines nothing."""
        return None, None

    def number_keys(self, head: nn.Module, hidden: Tensor) -> Tensor | None:
        """The key of every position (``[..., D]``) for a mode that chooses numbers by their keys; None here."""
        return None

    def forms(self, context: Sequence[int], value: int, config: Any) -> bool:
        """Whether the head writes `value` exactly from the numbers before it, `context` (fixed-point integers in units
        of the lowest place, most recent first; `numadapter.numbers.fixed_point`). The tokenizer writes such answers
        as [NUM] in answers mode, and the trainer's coverage count reads the same. A mode that reads only the hidden
        state forms none."""
        return False
