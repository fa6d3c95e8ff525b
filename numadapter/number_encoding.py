"""Moved to `numadapter.tokenization.encoding` (the tokenization room, docs/DESIGN.md, "Tokenization").

This module keeps the old import path ``numadapter.number_encoding`` working: importing it gives the module
``numadapter.tokenization.encoding`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.tokenization import encoding as moved

sys.modules[__name__] = moved
