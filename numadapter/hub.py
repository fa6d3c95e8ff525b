"""Moved to `numadapter.app.hub` (it checks the models a recipe names, and its errors name recipe keys).

This module keeps the old import path ``numadapter.hub`` working: importing it gives the module
``numadapter.app.hub`` itself, so every name (and a monkeypatch of one) is the same object.
"""

import sys

from numadapter.app import hub as moved

sys.modules[__name__] = moved
