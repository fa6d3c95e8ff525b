"""Number heads: the FoNE digit head and the xVal regression head.

Moved to `numadapter.methods.fone.head` and `numadapter.methods.xval.head`; the old names and submodule paths work.
"""

from numadapter.heads import digit, regression  # noqa: F401  (the old submodule paths, aliases of the moved ones)
from numadapter.methods.fone.head import DigitHeadOutput, FoNEDigitHead
from numadapter.methods.xval.head import RegressionHead

__all__ = ["DigitHeadOutput", "FoNEDigitHead", "RegressionHead"]
