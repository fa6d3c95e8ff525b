"""``fone_head_input="rotation"``: two learned read-outs multiplied as complex numbers, so their angles add.

The FoNE feature of ``a + b`` at a period is the rotation of ``a``'s feature by ``b``'s; a single linear read-out of
one hidden state would have to compute that product inside the model. Here ``u = W_u h + b_u`` (``head.proj``) and
``v = W_v h + b_v`` (``head.rotation``), each ``[P, 2]``, and pair ``k`` is ``u_k * v_k``. ``v`` starts at the
constant ``1 + 0i``, so the head starts as the ``"linear"`` one.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from numadapter.methods.fone.modes.base import complex_product
from numadapter.methods.fone.modes.linear import LinearReadout

__all__ = ["MODE", "RotationReadout"]


class RotationReadout(LinearReadout):
    """The linear read-out ``u`` rotated by a second read-out ``v`` (``head.rotation``, starting at ``1 + 0i``)."""

    def build(self, head: nn.Module, hidden_size: int, config: Any) -> None:
        super().build(head, hidden_size, config)
        head.rotation = nn.Linear(hidden_size, 2 * head.num_places)
        with torch.no_grad():
            head.rotation.weight.zero_()
            head.rotation.bias.copy_(torch.tensor([1.0, 0.0]).repeat(head.num_places))

    def readout(self, head: nn.Module, h: Tensor) -> Tensor:
        v = F.linear(h, head.rotation.weight.float(), head.rotation.bias.float()).unflatten(-1, (-1, 2))
        return complex_product(super().readout(head, h), v)  # (..., P, 2)


MODE = RotationReadout()
