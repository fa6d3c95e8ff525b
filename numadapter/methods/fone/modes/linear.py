"""``fone_head_input="linear"``: a learned projection ``H -> 2P`` of the hidden state (FoNE's digit head)."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from numadapter.methods.fone.modes.base import HeadMode

__all__ = ["MODE", "LinearReadout"]


class LinearReadout(HeadMode):
    """Pair ``k`` of ``W h + b`` (``head.proj``, ``Linear(H, 2P)``) is the 2-vector of place ``10^(k - n)``."""

    def build(self, head: nn.Module, hidden_size: int, config: Any) -> None:
        head.proj = nn.Linear(hidden_size, 2 * head.num_places)

    def readout(self, head: nn.Module, h: Tensor) -> Tensor:
        vectors = F.linear(h, head.proj.weight.float(), head.proj.bias.float())  # (..., 2P)
        return vectors.unflatten(-1, (head.num_places, 2))  # (..., P, 2), low place first


MODE = LinearReadout()
