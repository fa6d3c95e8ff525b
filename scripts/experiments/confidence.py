"""What the FoNE context head's per-number confidence says (`numadapter.generate(..., return_dict=True).confidences`).

SmolLM2-135M, the library's FoNE defaults (context head, K = 4), LoRA r=16 on every linear layer at 1e-3, batch 32:
trained on a mix of sums ("a + b =", which the head can form from the numbers before it) and x1000 conversions
("a km in metres =", which it cannot), then greedy generation on 100 held-out prompts of each kind.

    python scripts/experiments/confidence.py [STEPS]

Writes ``eval_harness/results/pretrained_study/confidence/result.json``: per kind, exact match, and the confidences
of right and wrong answers.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import datasets
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig

import numadapter
from numadapter import NumberAdapterConfig, NumberSFTTrainer, NumberTokenizer, get_peft_model

RECORDS = Path(__file__).resolve().parents[2] / "eval_harness" / "results" / "pretrained_study" / "confidence"


def rows(kind: str, n: int, seed: int, exclude: set[str]) -> list[dict[str, str]]:
    rng, out = random.Random(f"{kind}-{seed}"), []
    while len(out) < n:
        a, b = rng.randrange(100, 10000), rng.randrange(100, 10000)
        prompt, answer = (f"{a} + {b} =", a + b) if kind == "sum" else (f"{a} km in metres =", a * 1000)
        if prompt not in exclude:
            exclude.add(prompt)
            out.append({"prompt": prompt, "completion": f" {answer}"})
    return out


def summary(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values)}


def main(steps: int) -> dict:
    torch.manual_seed(0)
    base = numadapter.smollm2_path()
    tokenizer = AutoTokenizer.from_pretrained(base)
    config = NumberAdapterConfig(
        encoding="fone",
        fone_numbers="all",  # as measured (round 4): every number a [NUM]
        int_digits=8,
        frac_digits=0,
        r=16,
        lora_alpha=32,
        lora_dropout=0.0,
        target_modules="all-linear",
    )
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), config, tokenizer=tokenizer
    )
    ntok = NumberTokenizer(tokenizer, config)
    seen: set[str] = set()
    train = rows("sum", 16 * steps, 0, seen) + rows("metres", 16 * steps, 0, seen)
    random.Random(0).shuffle(train)
    held = {kind: rows(kind, 100, 1, seen) for kind in ("sum", "metres")}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(
            output_dir=out, max_steps=steps, per_device_train_batch_size=32, learning_rate=1e-3,
            lr_scheduler_type="constant_with_warmup", warmup_steps=2, max_grad_norm=1.0, report_to=[],
            save_strategy="no", seed=0, disable_tqdm=True, logging_steps=steps, bf16=False, use_cpu=True,
        )  # fmt: skip
        NumberSFTTrainer(
            model=model, args=args, train_dataset=datasets.Dataset.from_list(train), processing_class=ntok
        ).train()
    seconds = time.perf_counter() - started
    model.eval()
    result = {"steps": steps, "batch": 32, "train_seconds": seconds, "kinds": {}}
    for kind, data in held.items():
        out = numadapter.generate(model, ntok, [r["prompt"] for r in data], max_new_tokens=8, return_dict=True,
                                  return_full_text=False, batch_size=25)  # fmt: skip
        right, wrong, combos, exact = [], [], {}, 0
        for row, numbers, confidences, combinations in zip(data, out.numbers, out.confidences, out.combinations):
            ok = bool(numbers) and str(numbers[0]) == row["completion"].strip()
            exact += ok
            if confidences and confidences[0] is not None:
                (right if ok else wrong).append(confidences[0])
                combos[str(combinations[0])] = combos.get(str(combinations[0]), 0) + 1
        result["kinds"][kind] = {
            "exact_match": exact / len(data), "confidence_right": summary(right), "confidence_wrong": summary(wrong),
            "combinations": dict(sorted(combos.items(), key=lambda kv: -kv[1])[:5]),
            "examples": [(r["prompt"], c) for r, c in zip(data[:5], out.completions[:5])],
        }  # fmt: skip
    return result


if __name__ == "__main__":
    record = main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
    (RECORDS / "result.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(record, indent=1))
