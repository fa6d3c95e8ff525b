"""Moved to `numadapter.training.checkpoint_integrity` (atomic checkpoints and resume checks belong to training).

This module keeps the old import path ``numadapter.checkpoint_integrity`` working: importing it gives the module
``numadapter.training.checkpoint_integrity`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.training import checkpoint_integrity as moved

sys.modules[__name__] = moved
