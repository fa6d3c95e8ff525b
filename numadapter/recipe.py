"""Moved to `numadapter.app.recipe` (the recipe system is application code, apart from the library).

This module keeps the old import path ``numadapter.recipe`` working: importing it gives the module
``numadapter.app.recipe`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.app import recipe as moved

sys.modules[__name__] = moved
