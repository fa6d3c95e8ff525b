"""A tiny NumberSFTTrainer run with checkpoints, shared by the torn-checkpoint tests and run by them as a script.

As a script (``python torn_run.py TOKENIZER BASE OUT POINT``) it trains with checkpoints every 2 steps and kills
itself with SIGKILL while writing checkpoint-4, at POINT:

- ``optimizer``: when the optimizer state starts being written (the adapter weights are already written);
- ``rename``: when the finished checkpoint is about to be moved into place.
"""

from __future__ import annotations

import os
import random
import signal
import sys

import datasets
import torch
from transformers import AutoTokenizer, LlamaForCausalLM
from trl import SFTConfig

from numadapter import NumberAdapterConfig, NumberSFTTrainer, get_peft_model

MAX_STEPS, SAVE_STEPS, KILL_STEP = 4, 2, 4


def data() -> datasets.Dataset:
    rng = random.Random(0)
    rows = []
    for _ in range(16):
        a, b = rng.randrange(100), rng.randrange(100)
        rows.append({"prompt": f"What is {a} plus {b}?", "completion": f" It is {a + b}."})
    return datasets.Dataset.from_list(rows)


def trainer(tokenizer_dir: str, base_dir: str, out_dir: str) -> NumberSFTTrainer:
    """A fresh seeded trainer: llama + FoNE adapter, checkpoints every `SAVE_STEPS` steps into `out_dir`."""
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    base = LlamaForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    config = NumberAdapterConfig(int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
                                 target_modules=["q_proj", "v_proj"])  # fmt: skip
    model = get_peft_model(base, config, tokenizer=tokenizer)
    args = SFTConfig(output_dir=out_dir, max_steps=MAX_STEPS, save_steps=SAVE_STEPS, save_strategy="steps",
                     per_device_train_batch_size=4, logging_steps=1, report_to=[], bf16=False, disable_tqdm=True,
                     seed=0, learning_rate=1e-2, max_grad_norm=0.0)  # fmt: skip
    return NumberSFTTrainer(model=model, args=args, train_dataset=data(), processing_class=tokenizer)


def losses(run: NumberSFTTrainer) -> dict[int, float]:
    return {entry["step"]: entry["loss"] for entry in run.state.log_history if "loss" in entry}


def _kill() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(tokenizer_dir: str, base_dir: str, out_dir: str, point: str) -> None:
    torch.set_num_threads(1)
    run = trainer(tokenizer_dir, base_dir, out_dir)
    if point == "optimizer":
        import numadapter.training.safe_checkpoint as safe

        save_state = safe.save_state

        def dying_save_state(state, directory, name):
            if name == "optimizer" and run.state.global_step == KILL_STEP:
                _kill()
            return save_state(state, directory, name)

        safe.save_state = dying_save_state
    elif point == "rename":
        rename = os.rename

        def dying_rename(source, target):
            if os.path.basename(os.fspath(target)) == f"checkpoint-{KILL_STEP}":
                _kill()
            return rename(source, target)

        os.rename = dying_rename
    else:
        raise ValueError(f"unknown kill point {point!r}: use 'optimizer' or 'rename'.")
    run.train()
    print("NOT KILLED")


if __name__ == "__main__":
    main(*sys.argv[1:5])
