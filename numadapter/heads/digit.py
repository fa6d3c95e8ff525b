"""Moved to `numadapter.methods.fone.head`; this old path stays importable and is the same module object."""

import sys

from numadapter.methods.fone import head as _moved

sys.modules[__name__] = _moved
