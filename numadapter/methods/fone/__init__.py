"""``encoding="fone"``: Fourier number embeddings in, a per-digit head out (`FoNEMethod`)."""

from numadapter.methods.fone.embedding import FoNEEmbedding, fone_decode, fone_features, fone_features_from_digits
from numadapter.methods.fone.head import DigitHeadOutput, FoNEDigitHead
from numadapter.methods.fone.method import FoNEMethod, fone_ntl

METHOD = FoNEMethod()

__all__ = [
    "METHOD",
    "DigitHeadOutput",
    "FoNEDigitHead",
    "FoNEEmbedding",
    "FoNEMethod",
    "fone_decode",
    "fone_features",
    "fone_features_from_digits",
    "fone_ntl",
]
