"""Generation runs the model in eval mode and gives the caller's train / eval modes back afterwards.

Why generation cannot run in train mode: after ``Trainer.train()`` the model is left in train mode, and TRL's
`SFTConfig` turns gradient checkpointing on by default. transformers' decoder layers, when gradient checkpointing is
on *and* the module is training (``GradientCheckpointingLayer``), set ``use_cache=False`` and ``past_key_values=None``
before running, so the KV cache of the prefill stays empty and each cached step of the decode loop attends to its
own token only. With a padded batch the attention mask (prompt + generated length) no longer matches the keys (one
position) and sdpa raises "output with shape [B, H, 1, 1] doesn't match the broadcast shape [B, H, 1, T]"; without
padding there is no mask and the tokens are silently wrong. Dropout would also make the answers random. Eval mode
turns off both, so `numadapter.generate` and ``model.generate`` give the answers of ``model.eval()`` whatever mode
they were called in.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """Puts `model` (every submodule) in eval mode for the block and gives each submodule its own mode back after,
    also when the block raises, so a caller's mix (e.g. one frozen dropout inside a training model) is kept."""
    before = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        model.train(before[0][1])  # through the model's own train(), as the caller's model.train() / eval() went
        for module, training in before:
            module.training = training
