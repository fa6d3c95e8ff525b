"""numadapter: teach pretrained language models to read and write numbers as numbers.

Public API (everything else lives in submodules):

- `NumberAdapterConfig`: LoRA plus the number settings.
- `find_numbers`, `ExactNumber`, `NumberSpan`, `NumberOutOfRangeError`: exact numbers in text.
- `NumberTokenizer`: text <-> ids with one [NUM] token per number and aligned side tensors.
- `fone_features`, `fone_decode`, `aggregation_weights`: the encodings' formulas.
- `FoNEEmbedding`, `XValEmbedding`, `AggregateEmbedding`, `FoNEDigitHead`, `RegressionHead`: the number modules.
"""

from numadapter.config import NumberAdapterConfig
from numadapter.encodings import (
    AggregateEmbedding,
    FoNEEmbedding,
    XValEmbedding,
    aggregation_weights,
    fone_decode,
    fone_features,
)
from numadapter.heads import FoNEDigitHead, RegressionHead
from numadapter.numbers import ExactNumber, NumberOutOfRangeError, NumberSpan, find_numbers
from numadapter.tokenization import NumberTokenizer

__version__ = "0.1.0"

__all__ = [
    "AggregateEmbedding",
    "ExactNumber",
    "FoNEDigitHead",
    "FoNEEmbedding",
    "NumberAdapterConfig",
    "NumberOutOfRangeError",
    "NumberSpan",
    "NumberTokenizer",
    "RegressionHead",
    "XValEmbedding",
    "aggregation_weights",
    "find_numbers",
    "fone_decode",
    "fone_features",
]
