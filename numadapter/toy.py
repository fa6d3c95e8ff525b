"""Moved to `numadapter.app.toy` (the local tokenizers of the demo, the benchmarks and the tests).

This module keeps the old import path ``numadapter.toy`` working: importing it gives the module
``numadapter.app.toy`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.app import toy as moved

sys.modules[__name__] = moved
