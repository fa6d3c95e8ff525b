"""Tiny pretrained bases built offline: the toy tokenizer and a small Llama (or Granite) pretrained in seconds.

``numadapter quickstart --tiny``, eval_harness's probes and the tests build them (`build_tiny_base`); `TinySpec`
holds a base's sizes with the fine-tuning schedule that goes with it (`FULL`: the probes' 2-layer width-64 base,
`TINY`: a smoke run's).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["FULL", "TINY", "TinySpec", "build_tiny_base", "pretraining_text"]

PrintFn = Callable[[str], None]


def pretraining_text(rng: random.Random, corpus: list[str]) -> str:
    """One line of the tiny base model's pretraining text: corpus, counting, copying or comparing (no addition)."""
    kind = rng.randrange(5)
    a = rng.randrange(1, 10000)
    if kind <= 1:
        return rng.choice(corpus)
    if kind == 2:
        return "Count: " + " ".join(str(a + i) for i in range(rng.randrange(3, 7)))
    if kind == 3:
        return f"Copy {a} = {a}"
    b = rng.randrange(1, 10000)
    return f"The larger of {a} and {b} is {max(a, b)}."


@dataclass(frozen=True)
class TinySpec:
    """Sizes and schedule of one quick start mode (the toy base's sizes matter to ``--tiny`` and eval_harness only;
    `numadapter.app.quickstart.REAL` is the real checkpoint's schedule)."""

    hidden: int
    layers: int
    heads: int
    pretrain_steps: int
    finetune_steps: int
    batch_size: int
    train_examples: int
    eval_examples: int
    learning_rate: float
    rank: int
    intermediate: int | None = None  # the MLP width; None: 2 * hidden
    budget_seconds: float | None = None  # per adapter: train for this much wall time (finetune_steps caps it)
    number_lr_ratio: float = 1.0  # NumberAdapterConfig.number_lr_ratio of the FoNE adapter


# The toy base's sizes (2 layers, width 64), which eval_harness's probes build with `build_tiny_base`.
FULL = TinySpec(hidden=64, layers=2, heads=4, pretrain_steps=600, finetune_steps=2000, batch_size=32,
                train_examples=8000, eval_examples=200, learning_rate=3e-3, rank=16)  # fmt: skip
TINY = TinySpec(hidden=32, layers=1, heads=2, pretrain_steps=4, finetune_steps=4, batch_size=8,
                train_examples=32, eval_examples=8, learning_rate=3e-3, rank=4)  # fmt: skip


def _pretraining_batch(tokenizer: Any, texts: list[str], eos: bool, max_length: int = 48) -> dict:
    """Right-padded ``input_ids`` / ``attention_mask`` ``[B, T]`` of `texts`, each ending with EOS when `eos`."""
    rows = [tokenizer(text)["input_ids"][: max_length - int(eos)] for text in texts]
    if eos:
        rows = [row + [tokenizer.eos_token_id] for row in rows]
    return tokenizer.pad({"input_ids": rows}, padding=True, padding_side="right", return_tensors="pt")


def build_tiny_base(
    path: str, spec: TinySpec, seed: int, print_fn: PrintFn, family: str = "llama", eos: bool = True
) -> tuple[Any, Any]:
    """Trains the toy tokenizer, pretrains a tiny Llama (or Granite) on `pretraining_text`, saves both to `path`.

    Args:
        path: the output directory (model and tokenizer, ``save_pretrained``).
        spec: sizes and steps (``hidden``, ``layers``, ``heads``, ``pretrain_steps``, ``batch_size`` are used).
        seed: seed of the init and the text.
        print_fn: where the progress line goes.
        family: ``"llama"`` or ``"granite"`` (Granite with its default multipliers of 1).
        eos: end every pretraining text with EOS, as real checkpoints are trained, so the base knows how to stop.
            False leaves the EOS rows untrained (the tests use it to show what `train_eos_row` is for).

    Returns:
        ``(model, tokenizer)`` reloaded from `path` with ``from_pretrained``.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoTokenizer, GraniteConfig, GraniteForCausalLM, LlamaConfig, LlamaForCausalLM

    from numadapter.testing.toy import build_tokenizer, corpus

    families = {
        "llama": ("Llama", LlamaConfig, LlamaForCausalLM),
        "granite": ("Granite", GraniteConfig, GraniteForCausalLM),
    }
    if family not in families:
        raise ValueError(f"`family` must be one of {list(families)}, got {family!r}.")
    label, config_class, model_class = families[family]
    tokenizer = build_tokenizer("digits", path)
    torch.manual_seed(seed)
    config = config_class(
        vocab_size=len(tokenizer), hidden_size=spec.hidden, intermediate_size=spec.intermediate or 2 * spec.hidden,
        num_hidden_layers=spec.layers, num_attention_heads=spec.heads, num_key_value_heads=spec.heads,
        max_position_embeddings=128, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
    )  # fmt: skip
    model = model_class(config)
    params = sum(p.numel() for p in model.parameters())
    print_fn(
        f"Pretraining a tiny {label} ({params / 1e6:.2f}M parameters, {spec.layers} layers, width {spec.hidden}) for "
        f"{spec.pretrain_steps} steps on generated text with numbers (no addition):"
    )
    rng = random.Random(seed)
    lines = corpus(2000, seed=seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / max(1, spec.pretrain_steps))
    model.train()
    bar = tqdm(range(spec.pretrain_steps), desc="pretraining", unit="step")
    for _ in bar:
        texts = [pretraining_text(rng, lines) for _ in range(spec.batch_size)]
        batch = _pretraining_batch(tokenizer, texts, eos)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.save_pretrained(path)
    return model_class.from_pretrained(path, dtype=torch.float32), AutoTokenizer.from_pretrained(path)
