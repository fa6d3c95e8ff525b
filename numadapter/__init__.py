"""numadapter: teach pretrained language models to read and write numbers as numbers.

Public API (everything else lives in submodules):

- `NumberAdapterConfig`: LoRA plus the number settings.
- `find_numbers`, `ExactNumber`, `NumberSpan`, `NumberOutOfRangeError`: exact numbers in text.
- `NumberTokenizer`: text <-> ids with one [NUM] token per number and aligned side tensors.
- `fone_features`, `fone_decode`, `aggregation_weights`: the encodings' formulas.
- `FoNEEmbedding`, `XValEmbedding`, `AggregateEmbedding`, `FoNEDigitHead`, `RegressionHead`: the number modules.
- `get_peft_model`: LoRA + number adapter on a Llama / Granite / T5 model, a genuine `peft.PeftModel`.
  Importing numadapter registers the adapter with PEFT, so `peft.get_peft_model`, `peft.PeftModel.from_pretrained`
  and `AutoPeftModelForCausalLM` work too.
- `export_merged`, `load_exported`: LoRA merged into one self-contained checkpoint with the number modules.
- `generate`: the decode loop (KV cache) that renders generated [NUM] tokens from the number head. ``model.generate``
  and ``pipeline("text-generation")`` on a numadapter model run the same loop (`numadapter.generation.hf`).
- `NumberSFTTrainer`, `NumberSeq2SeqTrainer`, `NumberDataCollator`, `prepare_dataset`: training with TRL/transformers.
- `NTLoss`, `ntl_loss_func`, `NumberLossCallback`: the Number Token Loss, also for a plain `trl.SFTTrainer`.
"""

from numadapter.callbacks import NumberLossCallback, ntl_loss_func
from numadapter.collator import NumberDataCollator
from numadapter.config import NumberAdapterConfig
from numadapter.data import prepare_dataset
from numadapter.encodings import (
    AggregateEmbedding,
    FoNEEmbedding,
    XValEmbedding,
    aggregation_weights,
    fone_decode,
    fone_features,
)
from numadapter.export import export_merged, load_exported
from numadapter.generation import NumberGenerationOutput, generate
from numadapter.heads import FoNEDigitHead, RegressionHead
from numadapter.mapping import get_peft_model
from numadapter.ntl import NTLoss
from numadapter.numbers import ExactNumber, NumberOutOfRangeError, NumberSpan, find_numbers
from numadapter.tokenization import NumberTokenizer
from numadapter.train import AnswerMetrics
from numadapter.trainer import NumberSeq2SeqTrainer, NumberSFTTrainer

__version__ = "0.1.0"

__all__ = [
    "AggregateEmbedding",
    "AnswerMetrics",
    "ExactNumber",
    "FoNEDigitHead",
    "FoNEEmbedding",
    "NTLoss",
    "NumberAdapterConfig",
    "NumberDataCollator",
    "NumberGenerationOutput",
    "NumberLossCallback",
    "NumberOutOfRangeError",
    "NumberSFTTrainer",
    "NumberSeq2SeqTrainer",
    "NumberSpan",
    "NumberTokenizer",
    "RegressionHead",
    "XValEmbedding",
    "aggregation_weights",
    "find_numbers",
    "fone_decode",
    "fone_features",
    "export_merged",
    "generate",
    "get_peft_model",
    "load_exported",
    "ntl_loss_func",
    "prepare_dataset",
]
