"""Tokenization: `NumberTokenizer`, text <-> token ids plus the numbers' side tensors, losslessly.

The room holds the tokenizer (`numadapter.tokenization.tokenizer`) and the mixins it is built from:
`numadapter.tokenization.encoding` (numbers -> marker tokens and side tensors), `numadapter.tokenization.decoding`
(ids -> text with the numbers spliced back), `numadapter.tokenization.notes` (the numbers that travel with id
tensors through ``model.generate`` and pipelines), `numadapter.tokenization.options` (transformers' tokenizer
options and chat templates) and `numadapter.tokenization.pipeline_task` (registers
``pipeline("number-text-generation")``). docs/DESIGN.md, "Tokenization", describes them.
"""

from numadapter.tokenization import pipeline_task  # noqa: F401  (registers pipeline("number-text-generation"))
from numadapter.tokenization.tokenizer import CONFIG_NAME, SAVED_FIELDS, NumberTokenizer, render_number

__all__ = ["CONFIG_NAME", "SAVED_FIELDS", "NumberTokenizer", "render_number"]
