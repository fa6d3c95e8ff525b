"""Moved to `numadapter.methods.aggregate.embedding`; this old path stays importable and is the same module object."""

import sys

from numadapter.methods.aggregate import embedding as _moved

sys.modules[__name__] = _moved
