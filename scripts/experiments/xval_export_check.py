"""xVal's defaults (the fitted scale, the head over the 4 latest numbers) on SmolLM2-135M, miles -> km, served three
ways: trained briefly through `NumberSFTTrainer`, exported with `export_merged`, then 40 held-out prompts answered by
`numadapter.generate` on the adapter, `numadapter.generate` on `load_exported(DIR)`, and transformers'
``pipeline("text-generation")`` on ``AutoModelForCausalLM.from_pretrained(DIR)`` after ``import numadapter``. Prints
the MAPE of each and how many texts agree. Usage: ``python scripts/experiments/xval_export_check.py [STEPS]``
(default 40; works under /tmp/xvx).
"""

from __future__ import annotations

import random
import sys
import time
import warnings
from decimal import ROUND_HALF_UP, Decimal

import datasets
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
from trl import SFTConfig

import numadapter
from numadapter import (
    NumberAdapterConfig,
    NumberSFTTrainer,
    NumberTokenizer,
    export_merged,
    generate,
    get_peft_model,
    load_exported,
)

WORK = "/tmp/xvx"
RNG = random.Random(0)


def row() -> dict[str, str]:
    miles = Decimal(RNG.randint(1, 9999)) / 10
    km = (miles * Decimal("1.609344")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return {"prompt": f"Convert {miles} miles to km:", "completion": f" {km}"}


def first_numbers(texts: list[str]) -> list[float | None]:
    found = [numadapter.find_numbers(text) for text in texts]
    return [float(numbers[0].value) if numbers else None for numbers in found]


def main(steps: int) -> None:
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    torch.set_num_threads(2)
    train = datasets.Dataset.from_list([row() for _ in range(2000)])
    held = [row() for _ in range(40)]
    base_dir = numadapter.smollm2_path()
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    config = NumberAdapterConfig(encoding="xval", int_digits=4, frac_digits=2, r=8, lora_alpha=16,
                                 target_modules="all-linear")  # fmt: skip
    model = get_peft_model(base, config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    args = SFTConfig(output_dir=f"{WORK}/out", max_steps=steps, per_device_train_batch_size=32, learning_rate=1e-3,
                     report_to=[], save_strategy="no", logging_steps=10, activation_checkpointing=False, bf16=False,
                     use_cpu=True)  # fmt: skip
    start = time.time()
    trainer = NumberSFTTrainer(model=model, args=args, train_dataset=train, processing_class=ntok)
    trainer.train()
    print("trained", round(time.time() - start), "s", flush=True)
    prompts = [r["prompt"] for r in held]
    adapter = generate(model, ntok, prompts, max_new_tokens=8, return_dict=True).completions
    export_merged(model, trainer.processing_class, f"{WORK}/export")
    exported, exported_ntok = load_exported(f"{WORK}/export")
    export = generate(exported, exported_ntok, prompts, max_new_tokens=8, return_dict=True).completions
    served = AutoModelForCausalLM.from_pretrained(f"{WORK}/export")
    pipe = pipeline("text-generation", model=served, tokenizer=f"{WORK}/export")
    outputs = pipe(prompts, max_new_tokens=8, do_sample=False)
    piped = [out[0]["generated_text"][len(prompt) :] for out, prompt in zip(outputs, prompts)]
    references = [float(r["completion"]) for r in held]
    for name, texts in (("adapter", adapter), ("export", export), ("pipeline", piped)):
        values = first_numbers(texts)
        errors = [abs(v - r) / abs(r) for v, r in zip(values, references) if v is not None]
        mape = round(100 * sum(errors) / max(len(errors), 1), 3)
        print(name, "numbers", sum(v is not None for v in values), "MAPE %", mape,
              "within 1%", sum(e <= 0.01 for e in errors))  # fmt: skip
    same_export = sum(x == y for x, y in zip(adapter, export))
    same_pipe = sum(x.strip() == y.strip() for x, y in zip(adapter, piped))
    print("export == adapter text:", same_export, "/ 40; pipeline == adapter:", same_pipe, "/ 40")
    for prompt, x, y, z in list(zip(prompts, adapter, export, piped))[:5]:
        print(repr(prompt), repr(x), repr(y), repr(z))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
