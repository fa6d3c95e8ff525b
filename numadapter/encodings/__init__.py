"""Number encodings: features computed from exact numbers (FoNE, xVal, digit aggregation)."""

from numadapter.encodings.aggregate import AggregateEmbedding, aggregate_loss, aggregation_weights
from numadapter.encodings.fone import (
    FoNEEmbedding,
    digits_to_strings,
    fone_decode,
    fone_features,
    fone_features_from_digits,
)
from numadapter.encodings.xval import XValEmbedding, fit_normalization, resolve_xval_form

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
