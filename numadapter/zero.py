"""Moved to `numadapter.integrations.deepspeed_zero` (named for what it serves: DeepSpeed ZeRO-3 partitioned
parameters).

This module keeps the old import path ``numadapter.zero`` working: importing it gives the module
``numadapter.integrations.deepspeed_zero`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.integrations import deepspeed_zero as moved

sys.modules[__name__] = moved
