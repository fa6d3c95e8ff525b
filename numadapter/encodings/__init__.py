"""Number encodings: features computed from exact numbers (FoNE, xVal, digit aggregation).

The modules moved into their methods' folders (`numadapter.methods.fone.embedding`,
`numadapter.methods.xval.embedding`, `numadapter.methods.aggregate.embedding`); this package keeps the old names and
submodule paths working.
"""

from numadapter.encodings import aggregate, fone, xval  # noqa: F401  (the old submodule paths, aliases of the moved ones)
from numadapter.methods.aggregate.embedding import AggregateEmbedding, aggregate_loss, aggregation_weights
from numadapter.methods.fone.embedding import (
    FoNEEmbedding,
    digits_to_strings,
    fone_decode,
    fone_features,
    fone_features_from_digits,
)
from numadapter.methods.xval.embedding import XValEmbedding, fit_normalization, resolve_xval_form

__all__ = [
    "AggregateEmbedding",
    "FoNEEmbedding",
    "XValEmbedding",
    "aggregate_loss",
    "aggregation_weights",
    "digits_to_strings",
    "fit_normalization",
    "fone_decode",
    "fone_features",
    "fone_features_from_digits",
    "resolve_xval_form",
]
