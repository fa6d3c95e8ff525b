"""Moved to `numadapter.methods.xval.head`; this old path stays importable and is the same module object."""

import sys

from numadapter.methods.xval import head as _moved

sys.modules[__name__] = _moved
