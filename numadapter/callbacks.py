"""Moved to `numadapter.training.callbacks` (the number-loss callbacks belong to training).

This module keeps the old import path ``numadapter.callbacks`` working: importing it gives the module
``numadapter.training.callbacks`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.training import callbacks as moved

sys.modules[__name__] = moved
