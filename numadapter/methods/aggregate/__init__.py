"""The digit-aggregation pieces of ``encoding="digits", aggregate=True``: the [AGG] embedding (eq. 1) and the
auxiliary loss (eq. 2). The method itself is `numadapter.methods.digits.DigitsMethod`."""

from numadapter.methods.aggregate.embedding import (
    AggregateEmbedding,
    aggregate_aux_loss,
    aggregate_loss,
    aggregation_weights,
)
from numadapter.methods.aggregate.loss import aggregate_term

__all__ = ["AggregateEmbedding", "aggregate_aux_loss", "aggregate_loss", "aggregate_term", "aggregation_weights"]
