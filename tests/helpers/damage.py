"""Damage to saved files, as an outside tester did it: one flipped byte inside a tensor of a safetensors file."""

from __future__ import annotations

import json
import struct


def flip_byte(file: str, key: str, element: int = 0) -> None:
    """Flips a high bit of float32 element `element` (flat index) of tensor `key` inside the safetensors `file`, in
    place; the header and every other byte stay as saved."""
    data = bytearray(open(file, "rb").read())
    (length,) = struct.unpack("<Q", data[:8])
    entry = json.loads(data[8 : 8 + length])[key]
    assert entry["dtype"] == "F32", entry
    start = entry["data_offsets"][0]
    data[8 + length + start + 4 * element + 3] ^= 0x40  # the exponent's high bits: a large change of the value
    open(file, "wb").write(bytes(data))
