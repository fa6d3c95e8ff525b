"""Number-aware generation: an own decode loop with KV cache that feeds the number head's output back as input.

``generate(model, number_tokenizer, prompts, ...)`` is the entry point (`numadapter.generation.api`); the loop is
in `numadapter.generation.loop`, the number head readout in `numadapter.generation.readout`.
"""

from numadapter.generation.api import NumberGenerationOutput, generate

__all__ = ["NumberGenerationOutput", "generate"]
