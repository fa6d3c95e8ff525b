"""Training data and arguments shared by the trainer tests (`tests/numadapter/training/test_trainer.py`) and the
number-method registry test (`tests/numadapter/methods/test_registry.py`)."""

from __future__ import annotations

import random

import datasets
from trl import SFTConfig


def arithmetic(n: int, seed: int = 0) -> datasets.Dataset:
    """`n` seeded prompt-completion rows "What is a plus b?" -> " It is a+b." (a < 100, 1 <= b < 100)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randrange(100), rng.randrange(1, 100)
        rows.append({"prompt": f"What is {a} plus {b}?", "completion": f" It is {a + b}."})
    return datasets.Dataset.from_list(rows)


def sft_args(tmp_path, **overrides) -> SFTConfig:
    """A 12-step `SFTConfig` writing under ``tmp_path / "out"`` (no saving, no clipping, seed 0); `overrides` win."""
    settings = dict(output_dir=str(tmp_path / "out"), max_steps=12, per_device_train_batch_size=4,
                    logging_steps=1, report_to=[], bf16=False, gradient_checkpointing=False, save_strategy="no",
                    disable_tqdm=True, max_grad_norm=0.0, seed=0, learning_rate=2e-2)  # fmt: skip
    settings.update(overrides)
    return SFTConfig(**settings)
