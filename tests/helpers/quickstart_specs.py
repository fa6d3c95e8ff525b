"""Sizes of the quick start's tiny bases that tests build (`numadapter.testing.tiny_base.build_tiny_base`)."""

from __future__ import annotations

from numadapter.testing.tiny_base import TinySpec

# one layer, pretrained 150 steps: the EOS-less base of `tests/numadapter/tuner/test_token_rows.py` and the base of
# `tests/numadapter/data/test_answer_format.py`; test_token_rows fine-tunes 150 steps (measured at 150 / 300: EOS after
# the answer 0.84 / 0.98 with train_eos_row, 0.003 / 0.004 without; sampled answers " <number>" + EOS 71 / 71 of 72)
SMALL_SPEC = TinySpec(hidden=32, layers=1, heads=2, pretrain_steps=150, finetune_steps=150, batch_size=16,
                      train_examples=960, eval_examples=0, learning_rate=3e-3, rank=8)  # fmt: skip
