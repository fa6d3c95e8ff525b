"""Moved to `numadapter.training.safe_checkpoint` (pickle-free trainer checkpoints belong to training).

This module keeps the old import path ``numadapter.safe_checkpoint`` working: importing it gives the module
``numadapter.training.safe_checkpoint`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.training import safe_checkpoint as moved

sys.modules[__name__] = moved
