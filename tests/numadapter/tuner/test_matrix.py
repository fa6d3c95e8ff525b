"""The adapter on every cell of {llama, granite, t5} x {fone, xval, digits} x {tied, untied}.

Each test is a one-line parametrised call to a shared check: the fresh adapter (no-op, trainable parameters), a
training step (gradients, frozen weights) with saved keys and a bit-exact save/load round trip, half precision.
"""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stdout

import peft
import pytest
import torch
from helpers.adapter_cases import (
    CASE_IDS,
    CASES,
    HIDDEN,
    LAYERS,
    RANK,
    TARGETS,
    TOKENIZER_OF,
    Case,
    Store,
    build,
    is_adapter_param,
    make_batch,
    plain_batch,
    trainable_names,
)
from safetensors.torch import load_file

EMBEDDING_PATH = {"llama": "model.embed_tokens", "granite": "model.embed_tokens", "t5": "shared"}
EMBEDDING_PATH.update(mistral="model.embed_tokens", qwen2="model.embed_tokens")
# Mistral and Qwen2 share Llama's layout; they are claimed as supported on the strength of these cells
OTHER_CASES = [Case("mistral", "fone", True), Case("mistral", "digits", False), Case("qwen2", "xval", False)]
OTHER_CASES.append(Case("qwen2", "fone", True))
# Hand-counted number-module parameters at H = 64, int_digits + frac_digits = P = 6:
# fone (sign feature): input projection (2P + 1) x H = 13 * 64; head H -> 2P with bias (64 * 12 + 12) and the
# sign head H -> 2 with bias (64 * 2 + 2); the context head's coefficients H -> 3K with bias, K = 4 numbers
# (64 * 12 + 12). xval (affine): direction H; head H -> 32 -> 1 with biases
# (xval_head_hidden=32).
NUMBER_PARAMS = {
    "fone": 13 * 64 + (64 * 12 + 12) + (64 * 2 + 2) + (64 * 12 + 12),
    "xval": 64 + (64 * 32 + 32) + (32 + 1) + (64 * 4 + 4),  # direction, MLP 64 -> 32 -> 1, 4 context weights
    "digits": 0,
}
NUMBER_KEYS = {
    "fone": ["embedding.proj.weight", "head.proj.weight", "head.proj.bias", "head.sign_proj.weight",
             "head.sign_proj.bias", "head.coefficients.weight", "head.coefficients.bias"],
    "xval": ["embedding.direction", "head.fc1.weight", "head.fc1.bias", "head.fc2.weight", "head.fc2.bias",
             "head.weights.weight", "head.weights.bias"],
    "digits": [],
}  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("adapter")))


def lora_params(family: str) -> int:
    """LoRA parameters, hand-counted: r * (in + out) per adapted projection."""
    if family == "t5":  # q, v: 64 -> 4 heads * 16; attention blocks: 2 encoder + 2 decoder self + 2 cross
        return 6 * 2 * RANK * (HIDDEN + HIDDEN)
    # q: 64 -> 64, v: 64 -> 2 kv heads * 16 = 32, per layer
    return LAYERS * RANK * ((HIDDEN + HIDDEN) + (HIDDEN + HIDDEN // 2))


def untied(case) -> bool:
    return not case.tie


def targeted_paths(base, family: str) -> list[str]:
    return [n for n, _ in base.named_modules() if n.split(".")[-1] in TARGETS[family]]


def check_fresh(store, case):
    """No-op at init (logits equal the base model's) and exactly the adapter parameters trainable."""
    model, ntok, _ = build(store, case)
    check_trainable_count(model, case)
    reference = store.base(case.family, case.tie).eval()
    model.eval()
    batch = plain_batch(case, store.tokenizer(TOKENIZER_OF[case.family]))
    with torch.no_grad():
        got = model(**batch).logits
        want = reference(**batch).logits
    vocab = want.shape[-1]
    assert got.shape[-1] == vocab + 1  # one new row: [NUM] or [AGG]
    assert torch.equal(got[..., :vocab], want)


def check_gradients_and_step(model, case, config, batch):
    out = model(**batch)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    trainable = trainable_names(model)
    assert with_grad == trainable
    assert trainable and all(is_adapter_param(n) for n in trainable)
    deltas = [n for n in trainable if "trainable_tokens_delta" in n]
    assert len(deltas) == (2 if untied(case) else 1)
    assert any(f".number_modules.default.{k}" in n for n in trainable for k in ["embedding", "head"]) == (
        case.encoding != "digits"
    )
    frozen_before = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    trained_before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    embedding = model.get_input_embeddings()
    merged_before = embedding.weight.detach().clone()  # effective rows (base with the [NUM] row replaced)
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= 0.5 * p.grad
    for name, before in frozen_before.items():
        assert torch.equal(dict(model.named_parameters())[name], before), name
    changed = [n for n, p in model.named_parameters() if p.requires_grad and not torch.equal(p, trained_before[n])]
    assert any("lora_B" in n for n in changed) and any("trainable_tokens_delta" in n for n in changed)
    merged_after = embedding.weight.detach()
    marker = config.num_token_id if case.encoding != "digits" else config.agg_token_id
    others = torch.ones(merged_after.shape[0], dtype=torch.bool)
    others[marker] = False
    if config.train_eos_row and config.eos_token_id is not None:  # the EOS row trains with [NUM] (train_eos_row)
        others[config.eos_token_id] = False
    assert torch.equal(merged_after[others], merged_before[others])
    assert not torch.equal(merged_after[marker], merged_before[marker])
    model.zero_grad()


def check_trainable_count(model, case):
    config = model.peft_config["default"]
    assert config.train_eos_row and config.eos_token_id is not None  # get_peft_model records the tokenizer's EOS
    rows = HIDDEN * (2 if untied(case) else 1) * 2  # the marker row and the EOS row
    expected = lora_params(case.family) + rows + NUMBER_PARAMS[case.encoding]
    assert model.get_nb_trainable_parameters()[0] == expected
    printed = io.StringIO()
    with redirect_stdout(printed):
        model.print_trainable_parameters()
    assert f"trainable params: {expected:,}" in printed.getvalue()


def check_train_save_load(store, case, tmp_path):
    model, ntok, config = build(store, case)
    batch = make_batch(case, ntok)
    check_gradients_and_step(model, case, config, batch)
    model.save_pretrained(tmp_path)
    written = sorted(os.listdir(tmp_path))
    assert written == ["README.md", "adapter_config.json", "adapter_model.safetensors"]
    keys = set(load_file(os.path.join(tmp_path, "adapter_model.safetensors")))
    base = store.base(case.family, case.tie)
    expected = {
        f"base_model.model.{p}.{ab}.weight" for p in targeted_paths(base, case.family) for ab in ("lora_A", "lora_B")
    }
    expected.add(f"base_model.model.{EMBEDDING_PATH[case.family]}.token_adapter.trainable_tokens_delta")
    if untied(case):
        expected.add("base_model.model.lm_head.token_adapter.trainable_tokens_delta")
    expected |= {f"base_model.number_modules.{k}" for k in NUMBER_KEYS[case.encoding] + ["settings_stamp"]}
    assert keys == expected
    saved = json.load(open(os.path.join(tmp_path, "adapter_config.json")))
    assert saved["original_vocab_size"] == base.get_input_embeddings().weight.shape[0]
    assert saved["resized_vocab_size"] == saved["original_vocab_size"] + 1

    loaded = peft.PeftModel.from_pretrained(store.base(case.family, case.tie), tmp_path)
    assert type(loaded) is type(model)
    for field in (
        "encoding",
        "int_digits",
        "frac_digits",
        "num_token_id",
        "agg_token_id",
        "digit_token_ids",
        "resized_vocab_size",
        "sign_policy",
        "aggregate_loss_lambda",
        "ntl_weight",
        "r",
        "lora_alpha",
    ):
        assert getattr(loaded.peft_config["default"], field) == getattr(config, field), field
    model.eval()
    loaded.eval()
    with torch.no_grad():
        want, got = model(**batch), loaded(**batch)
    assert torch.equal(want.logits, got.logits)
    assert torch.equal(want.loss, got.loss)
    for name in ("number_logits", "number_sign_logits", "number_values"):
        if getattr(want, name) is not None:
            assert torch.equal(getattr(want, name), getattr(got, name)), name


def check_half(store, case, dtype):
    model, ntok, _ = build(store, case, dtype=dtype)
    out = model(**make_batch(case, ntok))
    assert out.logits.dtype == dtype
    assert torch.isfinite(out.loss)
    out.loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_fresh_adapter(store, case):
    check_fresh(store, case)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_train_save_load(store, case, tmp_path):
    check_train_save_load(store, case, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_half_precision_is_finite(store, case):
    for dtype in (torch.bfloat16, torch.float16):
        check_half(store, case, dtype)


@pytest.mark.parametrize("case", OTHER_CASES, ids=[c.id for c in OTHER_CASES])
def test_mistral_and_qwen2(store, case, tmp_path):
    check_fresh(store, case)
    check_train_save_load(store, case, tmp_path)
