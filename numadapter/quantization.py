"""Moved to `numadapter.integrations.qlora` (QLoRA on a 4-bit base).

This module keeps the old import path ``numadapter.quantization`` working: importing it gives the module
``numadapter.integrations.qlora`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.integrations import qlora as moved

sys.modules[__name__] = moved
