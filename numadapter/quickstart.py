"""Moved to `numadapter.app.quickstart` (the offline quick start is application code, apart from the library).

This module keeps the old import path ``numadapter.quickstart`` working: importing it gives the module
``numadapter.app.quickstart`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.app import quickstart as moved

sys.modules[__name__] = moved
