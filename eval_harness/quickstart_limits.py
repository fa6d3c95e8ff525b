"""What limits the quick start: FoNE addition through the product path, from a pretrained or a random base.

Trains a FoNE adapter with `numadapter.NumberSFTTrainer` (its data preparation, collator and the model's own loss) on
the quick start's task (3-4 digit addition, `numadapter.data.arithmetic.addition_examples`) and scores held-out answers
with `numadapter.generate` (exact match of the whole completion: the number, then EOS), at a few points of the run.
It also prints the attention entropy of every head at the answer position of the base (a pretrained tiny base looks
almost only at the previous or the start token there; a random one looks everywhere).

    python -m eval_harness.quickstart_limits --base DIR          # a quick start base (numadapter quickstart --out)
    python -m eval_harness.quickstart_limits --random 128,512,2   # a random Llama: hidden, intermediate, layers
    python -m eval_harness.quickstart_limits --pretrain 128,512,2,600   # ... pretrained 600 steps as the quick start
    ... --full --lr 1e-3 --set fone_projection=pad --set fone_head_input=slice

`--base` takes any local causal LM saved with its tokenizer (e.g. the real SmolLM2-135M-Instruct:
``--base "$(python -c "import numadapter; print(numadapter.smollm2_path())")"``); `--random` builds one with the
quick start's tokenizer.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
import time
from typing import Any


def parse_settings(items: list[str]) -> dict[str, Any]:
    """``["r=64", "fone_projection=pad", 'target_modules=["q_proj"]']`` -> ``{"r": 64, "fone_projection": "pad", ...}``

    A value is read as JSON (numbers such as ``1e-3``, ``true``, lists, objects); anything that is not JSON is kept
    as text (`numadapter.integrations.command_line.parse_settings`). Raises ValueError for an item without ``=`` or
    with an empty name.
    """
    from numadapter.integrations import command_line

    form = "name=value (a NumberAdapterConfig field)"
    return command_line.parse_settings(items, flag="--set", form=form, example="r=64")


def _random_base(spec: str, out: str) -> str:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from numadapter.testing.toy import build_tokenizer

    hidden, intermediate, layers = (int(x) for x in spec.split(","))
    tokenizer = build_tokenizer("digits", out)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(out)
    return out


def _pretrained_base(spec: str, out: str) -> str:
    from numadapter.testing.tiny_base import FULL, TinySpec, build_tiny_base

    hidden, intermediate, layers, steps = (int(x) for x in spec.split(","))
    sizes = dict(hidden=hidden, intermediate=intermediate, layers=layers, pretrain_steps=steps)
    build_tiny_base(out, TinySpec(**{**FULL.__dict__, **sizes}), seed=0, print_fn=print)
    return out


def scale_query_key(path: str, factor: float, out: str) -> str:
    """Saves a copy of the model at `path` (with its tokenizer) to `out`, its q_proj / k_proj weights times `factor`.

    Scaling both by f scales every attention logit by f^2, so f < 1 flattens the attention without changing which
    keys each head prefers.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if re.search(r"\.(q_proj|k_proj)\.weight$", name):
                parameter.mul_(factor)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(path).save_pretrained(out)
    return out


def answer_position(tokenizer, text: str, marker: str = "=") -> int:
    """The index, in ``tokenizer(text)["input_ids"]`` (special tokens included), of the token right after the one
    that holds the first `marker` character of `text`: the first answer position of ``"682 + 361 = 1043"``.

    Works for any tokenizer: a fast one through its character offsets (a byte-level BPE writes "Ġ=", a digit
    tokenizer "="), a slow one by counting the tokens of the text up to the marker.

    Raises:
        ValueError: `text` has no `marker`, or nothing after the token that holds it.
    """
    char = text.find(marker)
    if char < 0:
        raise ValueError(f"the probe text {text!r} has no {marker!r}; pass a text like '682 + 361 = 1043'.")
    ids = tokenizer(text)["input_ids"]
    if getattr(tokenizer, "is_fast", False):
        offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
        holder = next(i for i, (start, end) in enumerate(offsets) if start <= char < end)
    else:
        special = set(tokenizer.all_special_ids)
        leading = next((i for i, token in enumerate(ids) if token not in special), len(ids))
        holder = leading + len(tokenizer(text[: char + 1], add_special_tokens=False)["input_ids"]) - 1
    if holder + 1 >= len(ids):
        raise ValueError(f"the probe text {text!r} ends at its {marker!r}: add the answer after it.")
    return holder + 1


def attention_entropy(path: str, text: str = "682 + 361 = 1043") -> list[list[float]]:
    """Per layer, the attention entropy (nats) of each head at the token after '=' of `text` (`answer_position`).

    With the quick start's digit tokenizer that token is the 13th of the default text, so uniform attention has
    ln(13) = 2.56 nats (SmolLM2's BPE writes the text in fewer tokens: ln of `answer_position` + 1).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(path)
    batch = tokenizer([text], return_tensors="pt")
    position = answer_position(tokenizer, text)
    with torch.no_grad():
        attentions = model(**batch, output_attentions=True).attentions
    out = []
    for layer in attentions:
        weights = layer[0, :, position, : position + 1]  # (heads, keys)
        out.append((-(weights * weights.clamp_min(1e-12).log()).sum(-1)).tolist())
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--base", help="a local causal LM directory (with its tokenizer)")
    source.add_argument("--random", help="hidden,intermediate,layers of a random-init Llama")
    source.add_argument(
        "--pretrain", metavar="H,I,L,STEPS", help="a Llama of hidden,intermediate,layers pretrained for STEPS steps "
        "the quick start's way (numadapter.testing.tiny_base.build_tiny_base: its text, no addition, seed 0)"
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--full", action="store_true", help="train every base weight too, not only LoRA")
    parser.add_argument(
        "--train", metavar="REGEX", help="with --full: train only the base weights whose name matches, e.g. 'embed'"
    )
    parser.add_argument(
        "--scale-qk", type=float, metavar="F", help="multiply the base's q_proj and k_proj weights by F first "
        "(F < 1 flattens attention: tests whether peaked attention is what blocks learning)"
    )  # fmt: skip
    parser.add_argument(
        "--set", action="append", default=[], help="a NumberAdapterConfig field, e.g. r=64 (value: JSON, else text)"
    )
    parser.add_argument("--points", type=int, default=4, help="evaluations during the run")
    args = parser.parse_args(argv)

    import datasets
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig

    import numadapter
    from numadapter.data.arithmetic import addition_examples

    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    work = tempfile.mkdtemp()
    if args.pretrain:
        path = _pretrained_base(args.pretrain, os.path.join(work, "base"))
    else:
        path = args.base or _random_base(args.random, os.path.join(work, "base"))
    if args.scale_qk is not None:
        path = scale_query_key(path, args.scale_qk, os.path.join(work, "scaled"))
    entropy = attention_entropy(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    keys = answer_position(tokenizer, "682 + 361 = 1043") + 1
    print(f"attention entropy at the answer position (nats, per layer and head; uniform over the {keys} tokens: "
          f"{math.log(keys):.2f}):")  # fmt: skip
    for layer, heads in enumerate(entropy):
        print(f"  layer {layer}: {[round(h, 2) for h in heads]}")
    settings = dict(encoding="fone", int_digits=5, frac_digits=0, r=16, lora_alpha=32, lora_dropout=0.0,
                    target_modules="all-linear", fone_numbers="all")  # fmt: skip
    settings.update(parse_settings(args.set))
    config = numadapter.NumberAdapterConfig(**settings)
    torch.manual_seed(0)
    model = numadapter.get_peft_model(AutoModelForCausalLM.from_pretrained(path), config, tokenizer=tokenizer)
    if args.full:
        pattern = re.compile(args.train or "")
        for name, parameter in model.named_parameters():
            if "lora_" not in name and pattern.search(name):
                parameter.requires_grad_(True)
    ntok = numadapter.NumberTokenizer(tokenizer, config)
    train = addition_examples(8000, 3, 4, seed=0)
    held_out = addition_examples(200, 3, 4, seed=1, exclude={row["prompt"] for row in train})
    prompts = [row["prompt"] for row in held_out]

    class Score(TrainerCallback):
        def on_step_end(self, run_args, state, control, **kwargs):
            every = max(1, args.steps // args.points)
            if state.global_step % every and state.global_step != args.steps:
                return
            model.eval()
            out = numadapter.generate(model, ntok, prompts, max_new_tokens=8, return_dict=True)
            model.train()
            exact = sum(got == row["completion"] for got, row in zip(out.completions, held_out)) / len(held_out)
            print(f"step {state.global_step}: exact match {exact:.1%} ({time.perf_counter() - start:.0f} s); "
                  f"e.g. {prompts[0]}{out.completions[0]!r}")  # fmt: skip

    run = SFTConfig(
        output_dir=os.path.join(work, "run"), max_steps=args.steps, per_device_train_batch_size=args.batch,
        learning_rate=args.lr, lr_scheduler_type="cosine", warmup_steps=0.05, max_grad_norm=1.0, report_to=[],
        save_strategy="no", seed=0, bf16=False, use_cpu=True, disable_tqdm=True, logging_steps=10**9,
    )  # fmt: skip
    trainer = numadapter.NumberSFTTrainer(model=model, args=run, train_dataset=datasets.Dataset.from_list(train),
                                          processing_class=ntok, callbacks=[Score()])  # fmt: skip
    start = time.perf_counter()
    trainer.train()
    print(f"trainable parameters: {sum(p.numel() for p in model.parameters() if p.requires_grad):,}")


if __name__ == "__main__":
    main()
