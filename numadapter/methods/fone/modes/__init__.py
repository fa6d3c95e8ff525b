"""FoNE head modes: how the digit head reads its 2-vectors, one file per mode, found by name in a registry.

Built in: ``"linear"`` (a learned projection), ``"slice"`` (the first hidden dims, the paper's), ``"rotation"`` (two
read-outs whose angles add) and ``"context"`` (the read-out combined with the numbers before the position). An outside
package adds a mode with `register_head_mode` (docs/guide.md, "Your own head mode").
"""

from numadapter.methods.fone.modes.base import HeadMode, complex_product
from numadapter.methods.fone.modes.registry import (
    get_head_mode,
    known_head_modes,
    register_head_mode,
    unknown_head_mode_message,
    unregister_head_mode,
)

__all__ = [
    "HeadMode", "complex_product", "get_head_mode", "known_head_modes", "register_head_mode",
    "unknown_head_mode_message", "unregister_head_mode",
]  # fmt: skip
