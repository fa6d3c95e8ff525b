"""head_loss_trains_lm=False: the head learns from the LM's hidden states, and its loss never reaches LoRA or the
trained rows (only the LM's cross-entropy trains the LM)."""

from __future__ import annotations

import pytest
from helpers.adapter_cases import Case, Store, build
from helpers.answers_cases import SUMS_ONLY


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(tmp_path_factory.mktemp("head-detach"))


def head_loss_gradients(store: Store, trains_lm: bool, **settings) -> tuple[float, float, float]:
    """The largest gradient of the head loss alone on (LoRA, the number head, the token rows)."""
    model, ntok, _ = build(
        store, Case("llama", "fone", tie=True), init_lora_weights=False, head_loss_trains_lm=trains_lm, **settings
    )
    model.train()
    texts = ["a 12 + 30 = 42", "b 7 - 5 = 2"]
    start = {"answer_start": [t.index("=") + 1 for t in texts]} if settings else {}  # answers mode: the sums
    enc = ntok(texts, return_tensors="pt", padding=True, **start)
    batch = {k: v for k, v in enc.items() if k != "number_texts"}
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    out = model(**batch, labels=labels)
    assert out.number_loss is not None and out.number_loss.item() > 0
    out.number_loss.backward()

    def largest(mark: str) -> float:
        grads = [p.grad.abs().max().item() for n, p in model.named_parameters() if mark in n and p.grad is not None]
        return max(grads, default=0.0)

    return largest("lora_"), largest("number_modules.default.head"), largest("trainable_tokens_delta")


def test_detached_head_loss_trains_the_head_only(store):
    lora, head, rows = head_loss_gradients(store, trains_lm=False)
    assert head > 0  # the head still learns
    assert lora == 0.0 and rows == 0.0  # nothing of the LM moves with the head loss


def test_head_loss_reaches_lora_by_default(store):
    lora, head, _ = head_loss_gradients(store, trains_lm=True)  # fone_numbers="all"
    assert head > 0 and lora > 0
    lora, head, _ = head_loss_gradients(store, True, **SUMS_ONLY)  # answers mode
    assert head > 0 and lora > 0


def test_answers_mode_detached_when_asked(store):
    lora, head, rows = head_loss_gradients(store, False, **SUMS_ONLY)
    assert head > 0 and lora == 0.0 and rows == 0.0
