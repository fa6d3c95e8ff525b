"""NTL with the FoNE context head at the scale of the CI test
(`tests/numadapter/methods/fone/test_context_head_real.py`): 8 `NumberSFTTrainer` steps of 16 additions on
SmolLM2-135M, LoRA r=8 on q/v at 1e-3, 40 held-out sums.

    python scripts/experiments/ntl_context_sweep.py WEIGHT SEED LABEL

Run it from a checkout: the code of that checkout is what is measured (LABEL names it in the output line, which
``eval_harness/results/pretrained_study/ntl_context/sweep.jsonl`` collects).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import datasets
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig

import numadapter
from numadapter import NumberAdapterConfig, NumberSFTTrainer, NumberTokenizer, get_peft_model
from numadapter.data.arithmetic import addition_examples
from numadapter.evaluation import answer_metrics, generate_answers

RECORDS = Path(__file__).resolve().parents[2] / "eval_harness" / "results" / "pretrained_study" / "ntl_context"


def main(weight: float, seed: int, label: str) -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    base = numadapter.smollm2_path()
    tokenizer = AutoTokenizer.from_pretrained(base)
    config = NumberAdapterConfig(
        encoding="fone", int_digits=5, frac_digits=0, r=8, lora_alpha=16, lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"], ntl_weight=weight, fone_numbers="all",
    )  # fmt: skip
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), config, tokenizer=tokenizer
    )
    ntok = NumberTokenizer(tokenizer, config)
    train = addition_examples(128, 3, 4, seed=seed)
    held = addition_examples(40, 3, 4, seed=seed + 100, exclude={row["prompt"] for row in train})
    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(
            output_dir=out, max_steps=8, per_device_train_batch_size=16, learning_rate=1e-3,
            lr_scheduler_type="constant", max_grad_norm=1.0, report_to=[], save_strategy="no", seed=seed,
            gradient_checkpointing=False, disable_tqdm=True, logging_steps=8, bf16=False, use_cpu=True,
        )  # fmt: skip
        NumberSFTTrainer(
            model=model, args=args, train_dataset=datasets.Dataset.from_list(train), processing_class=ntok
        ).train()
    answers = generate_answers(model, ntok, [row["prompt"] for row in held], 8, 40, progress=False)
    metrics = answer_metrics(answers, [row["completion"] for row in held])
    return {
        "code": label,
        "ntl_weight": weight,
        "seed": seed,
        "exact_match": metrics["exact_match"],
        "mae": metrics["mae"],
    }


if __name__ == "__main__":
    record = main(float(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
    with open(RECORDS / "sweep.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    print(record)
