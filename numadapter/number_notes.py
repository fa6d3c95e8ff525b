"""Moved to `numadapter.tokenization.notes` (the tokenization room, docs/DESIGN.md, "Tokenization").

This module keeps the old import path ``numadapter.number_notes`` working: importing it gives the module
``numadapter.tokenization.notes`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.tokenization import notes as moved

sys.modules[__name__] = moved
