"""Moved to `numadapter.data.answer_format` (the data room, docs/DESIGN.md, "Data").

This module keeps the old import path ``numadapter.answer_format`` working: importing it gives the module
``numadapter.data.answer_format`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.data import answer_format as moved

sys.modules[__name__] = moved
