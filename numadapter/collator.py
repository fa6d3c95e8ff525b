"""Moved to `numadapter.data.collator` (the data room, docs/DESIGN.md, "Data").

This module keeps the old import path ``numadapter.collator`` working: importing it gives the module
``numadapter.data.collator`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.data import collator as moved

sys.modules[__name__] = moved
