"""Moved to `numadapter.tokenization.decoding` (the tokenization room, docs/DESIGN.md, "Tokenization").

This module keeps the old import path ``numadapter.number_decoding`` working: importing it gives the module
``numadapter.tokenization.decoding`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.tokenization import decoding as moved

sys.modules[__name__] = moved
