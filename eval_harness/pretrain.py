"""``python -m eval_harness pretrain-base``: a small base LM pretrained locally, for the adapter tables.

The adapter regime (`eval_harness.arms.models`, ``regime="adapter"``) fine-tunes LoRA (+ numadapter's number
modules) on a frozen pretrained base. Offline, with no checkpoint at hand, the harness makes its own: numadapter's
quick-start base (`numadapter.testing.tiny_base.build_tiny_base`): numadapter's digit-wise toy tokenizer (byte-level
BPE, one token per digit), and a small Llama (or Granite) pretrained from scratch with AdamW (learning rate 3e-3,
linear decay) on generated text with numbers (`numadapter.testing.tiny_base.pretraining_text`: the toy corpus,
counting, copying and comparing numbers; no arithmetic task), so it knows the digits and text with numbers but none of
the harness's tasks. Model and tokenizer are saved with ``save_pretrained`` into one directory, which is what
``python -m eval_harness run --experiments adapter --base DIR`` loads (``AutoModelForCausalLM`` /
``AutoTokenizer``). Next to them, ``eval_harness_base.json`` records the settings, the parameter count, the loss
on held-out generated text, how often the base completes fresh copy / count / compare probes (`skills`: what it
learned about numbers) and the time taken.

Defaults (`DEFAULT`): width 192, 3 layers (6 heads), 1,500 steps of 32 lines: 1.37M parameters. Measured with
``--threads 1`` on the 2-core machine while other jobs kept it busy (load 3-6): 4.5 min of process CPU time
(``time``: user + sys, imports and probes included; wall 5.7 min), held-out loss 1.90, probes answered: copy 65%,
count 72%, larger 10% (a width-128, 2-layer base with the same steps: 2 min CPU, loss 1.98, copy 20-30%, count
~50%, larger 3-8%; 3,000 steps of that one did not help). The cpu-small adapter table on it (5 methods, 3,200 examples,
15 epochs) took 9.5 min with ``--threads 1`` (3 epochs: 2 min). Since the quick start's base is pretrained with EOS
(`numadapter.testing.tiny_base.build_tiny_base`), the same defaults and seed measured: 279 s of process CPU time (wall
9.6 min at load 3-7), held-out loss 2.036, probes answered: copy 12%, count 22%, larger 2%.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

FAMILIES = ("llama", "granite")
INFO_FILE = "eval_harness_base.json"
HELDOUT_LINES = 256
SKILL_PROBES = 40


@dataclass(frozen=True)
class BaseSettings:
    """Sizes and budget of a pretrained base.

    Attributes:
        family: ``"llama"`` or ``"granite"``.
        hidden: hidden size (the MLP is twice as wide).
        layers: decoder layers.
        heads: attention heads (None: ``hidden // 32``, at least 2); must divide `hidden`.
        steps: optimizer steps.
        batch_size: generated lines per step.
    """

    family: str = "llama"
    hidden: int = 192
    layers: int = 3
    heads: int | None = None
    steps: int = 1500
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"`family` must be one of {list(FAMILIES)}, got {self.family!r} (CLI: --family).")
        for name in ("hidden", "layers", "steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"`{name}` must be a positive integer, got {value!r} (CLI: {flag}).")
        heads = self.num_heads
        if heads < 1 or self.hidden % heads:
            raise ValueError(
                f"`heads` must be a positive divisor of hidden={self.hidden}, got {heads!r}: pass --heads with a "
                "divisor of --hidden."
            )

    @property
    def num_heads(self) -> int:
        """The attention heads (`heads`, or ``hidden // 32`` at least 2 when None)."""
        if self.heads is not None:
            return self.heads
        heads = max(2, self.hidden // 32)
        while self.hidden % heads:  # e.g. hidden 100: 3 does not divide it, 2 does
            heads -= 1
        return heads


DEFAULT = BaseSettings()


def heldout_loss(model: Any, tokenizer: Any, seed: int, lines: int = HELDOUT_LINES) -> float:
    """Mean token cross-entropy of `model` on `lines` freshly generated pretraining lines (seeded apart).

    Args:
        model: a causal LM.
        tokenizer: its tokenizer (with a pad token).
        seed: the pretraining seed; the held-out text uses other seeds.
        lines: how many lines.

    Returns:
        The loss averaged over tokens (float).
    """
    import torch

    from numadapter.testing.tiny_base import pretraining_text
    from numadapter.testing.toy import corpus

    rng = random.Random(f"heldout|{seed}")
    source = corpus(500, seed=seed + 10_000)
    texts = [pretraining_text(rng, source) for _ in range(lines)]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)  # (N, T)
    model.eval()
    with torch.no_grad():
        logits = model(**batch).logits[:, :-1].float()  # (N, T-1, V)
    targets = labels[:, 1:]  # (N, T-1)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return float(loss)


def skills(model: Any, tokenizer: Any, seed: int, n: int = SKILL_PROBES) -> dict[str, float]:
    """Share of `n` fresh 1-4 digit probes the base completes exactly (greedy) per pretraining skill.

    Skills, as in `numadapter.testing.tiny_base.pretraining_text`: ``copy`` ("Copy 4821 =" -> " 4821"), ``count``
    ("Count: 17 18 19" -> " 20") and ``larger`` ("The larger of 512 and 96 is" -> " 512"). A completion counts when
    it starts with the expected number and no further digit follows it. A random-init model scores about 0.

    Args:
        model: the causal LM.
        tokenizer: its tokenizer.
        seed: the pretraining seed (the probes use another stream).
        n: probes per skill.

    Returns:
        ``{"copy": share, "count": share, "larger": share}``.
    """
    import torch

    rng = random.Random(f"skills|{seed}")
    hits = {"copy": 0, "count": 0, "larger": 0}
    model.eval()
    for _ in range(n):
        a, b = rng.randrange(1, 10000), rng.randrange(1, 10000)
        probes = {
            "copy": (f"Copy {a} =", f" {a}"),
            "count": (f"Count: {a} {a + 1} {a + 2}", f" {a + 3}"),
            "larger": (f"The larger of {a} and {b} is", f" {max(a, b)}"),
        }
        for skill, (prompt, expected) in probes.items():
            ids = tokenizer(prompt, return_tensors="pt")
            with torch.no_grad():
                out = model.generate(**ids, max_new_tokens=7, do_sample=False, pad_token_id=tokenizer.pad_token_id)
            text = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
            hits[skill] += text.startswith(expected) and not text[len(expected) : len(expected) + 1].isdigit()
    return {skill: count / n for skill, count in hits.items()}


def pretrain_base(
    out: str | os.PathLike,
    settings: BaseSettings = DEFAULT,
    *,
    seed: int = 0,
    threads: int | None = None,
    print_fn: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Pretrains a small base on generated text with numbers and saves it (model + tokenizer) to `out`.

    Args:
        out: the directory (created; an existing model there is overwritten).
        settings: sizes and budget.
        seed: seed of the text, the init and the batches.
        threads: torch CPU threads during pretraining (None: torch's default).
        print_fn: where progress lines go.

    Returns:
        What ``<out>/eval_harness_base.json`` holds: the settings, ``params``, ``vocab_size``, ``heldout_loss``,
        ``skills`` (`skills`), ``seconds`` (pretraining only), ``torch_threads``, ``path``.

    Raises:
        ValueError: a negative seed or a bad thread count.
    """
    import torch

    from numadapter.testing.tiny_base import FULL, build_tiny_base

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative int, got {seed!r} (CLI: --seed).")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"`threads` must be a positive integer or None, got {threads!r} (CLI: --threads).")
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    # the quick start's spec with our sizes; its fine-tuning fields are unused here
    spec = replace(
        FULL, hidden=settings.hidden, layers=settings.layers, heads=settings.num_heads,
        pretrain_steps=settings.steps, batch_size=settings.batch_size,
    )  # fmt: skip
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        start = time.perf_counter()
        model, tokenizer = build_tiny_base(str(path), spec, seed, print_fn, family=settings.family)
        seconds = time.perf_counter() - start
        loss = heldout_loss(model, tokenizer, seed)
        probes = skills(model, tokenizer, seed)
    finally:
        torch.set_num_threads(before)
    info = {
        **asdict(settings),
        "heads": settings.num_heads,
        "seed": seed,
        "params": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "heldout_loss": loss,
        "skills": probes,
        "seconds": seconds,
        "torch_threads": threads or before,
        "path": str(path),
    }
    (path / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


__all__ = ["DEFAULT", "BaseSettings", "heldout_loss", "pretrain_base"]
