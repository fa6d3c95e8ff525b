"""Moved to `numadapter.integrations.launch` (the process state of a multi-process launch).

This module keeps the old import path ``numadapter.distributed`` working: importing it gives the module
``numadapter.integrations.launch`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.integrations import launch as moved

sys.modules[__name__] = moved
