"""Number-aware generation: an own decode loop with KV cache that feeds the number head's output back as input.

``generate(model, number_tokenizer, prompts, ...)`` is the entry point (`numadapter.generation.api`); the loop is
in `numadapter.generation.loop`, the number head readout in `numadapter.generation.readout`. ``model.generate`` of a
numadapter model runs the same loop (`numadapter.generation.hf`); `numbers_of` gives the numbers of its output.
"""

from numadapter.generation.api import NumberGenerationOutput, generate
from numadapter.generation.hf import numbers_of

__all__ = ["NumberGenerationOutput", "generate", "numbers_of"]
