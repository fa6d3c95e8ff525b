"""Moved to `numadapter.data.checks` (the data room, docs/DESIGN.md, "Data").

This module keeps the old import path ``numadapter.data_checks`` working: importing it gives the module
``numadapter.data.checks`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.data import checks as moved

sys.modules[__name__] = moved
