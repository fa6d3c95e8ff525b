"""Moved to `numadapter.methods.xval.embedding`; this old path stays importable and is the same module object."""

import sys

from numadapter.methods.xval import embedding as _moved

sys.modules[__name__] = _moved
