"""Moved: ``numadapter.trainer`` was split into `numadapter.training.sft` (`NumberSFTTrainer`),
`numadapter.training.seq2seq` (`NumberSeq2SeqTrainer`), `numadapter.training.base` (what both share, with
`NumberEvalPrediction` and `NumberPredictionOutput`) and `numadapter.training.packing` (`pack_examples`,
`PackedCollator`).

This module keeps the old import path working by re-exporting their public names.
"""

from numadapter.training.base import GENERATION_OPTIONS, NumberEvalPrediction, NumberPredictionOutput
from numadapter.training.packing import PACK_COLUMN, PackedCollator, pack_examples
from numadapter.training.seq2seq import NumberSeq2SeqTrainer
from numadapter.training.sft import NumberSFTTrainer

__all__ = [
    "GENERATION_OPTIONS",
    "PACK_COLUMN",
    "NumberEvalPrediction",
    "NumberPredictionOutput",
    "NumberSFTTrainer",
    "NumberSeq2SeqTrainer",
    "PackedCollator",
    "pack_examples",
]
