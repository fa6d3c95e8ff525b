"""Moved to `numadapter.methods.fone.embedding`; this old path stays importable and is the same module object."""

import sys

from numadapter.methods.fone import embedding as _moved

sys.modules[__name__] = _moved
