"""``encoding="xval"``: the value on the [NUM] embedding, a regression head out (`XValMethod`)."""

from numadapter.methods.xval.embedding import XValEmbedding, fit_normalization, resolve_xval_form, xval_in_range
from numadapter.methods.xval.head import RegressionHead
from numadapter.methods.xval.method import XVAL_FIELDS, XValMethod

METHOD = XValMethod()

__all__ = [
    "METHOD",
    "XVAL_FIELDS",
    "RegressionHead",
    "XValEmbedding",
    "XValMethod",
    "fit_normalization",
    "resolve_xval_form",
    "xval_in_range",
]
