"""``fone_head_input="slice"``: the first ``2P`` hidden dims are the digit 2-vectors (the FoNE paper's Figure 1(d))."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from numadapter.methods.fone.modes.base import HeadMode

__all__ = ["MODE", "SliceReadout"]


class SliceReadout(HeadMode):
    """``h[2k], h[2k+1]`` is the 2-vector of place ``10^(k - n)``; no parameters."""

    def check(self, config: Any, hidden_size: int) -> None:
        places = config.int_digits + config.frac_digits
        if hidden_size < 2 * places:
            raise ValueError(
                f"fone_head_input='slice' reads the first 2 * (int_digits + frac_digits) = {2 * places} hidden dims, "
                f"but the model width is H = {hidden_size}: set fone_head_input='linear', or reduce int_digits / "
                "frac_digits."
            )

    def build(self, head: nn.Module, hidden_size: int, config: Any) -> None:
        head.proj = None

    def readout(self, head: nn.Module, h: Tensor) -> Tensor:
        return h[..., : 2 * head.num_places].unflatten(-1, (head.num_places, 2))  # (..., P, 2): the paper's h[2i]


MODE = SliceReadout()
