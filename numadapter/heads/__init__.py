"""Number heads: the FoNE digit head and the xVal regression head."""

from numadapter.heads.digit import DigitHeadOutput, FoNEDigitHead
from numadapter.heads.regression import RegressionHead

__all__ = ["DigitHeadOutput", "FoNEDigitHead", "RegressionHead"]
