"""Moved to `numadapter.tokenization.options` (the tokenization room, docs/DESIGN.md, "Tokenization").

This module keeps the old import path ``numadapter.tokenizer_options`` working: importing it gives the module
``numadapter.tokenization.options`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.tokenization import options as moved

sys.modules[__name__] = moved
