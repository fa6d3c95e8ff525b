"""Shared cases and builders for the adapter tests (`tests/numadapter/tuner/`).

The matrix is {llama, granite, t5} x {fone, xval, digits (+ [AGG], aggregate loss, NTL)} x {tied, untied}.
Tokenizers and base models are built once per session with `tests/helpers/tiny.py` (saved and reloaded with
``from_pretrained``); every test gets a fresh tokenizer and a fresh copy of the base from disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from helpers import tiny
from numadapter.config import NumberAdapterConfig
from numadapter.mapping import get_peft_model
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer

TOKENIZER_OF = {"llama": "digits", "granite": "digits", "t5": "t5", "mistral": "digits", "qwen2": "digits"}
TARGETS = {"llama": ["q_proj", "v_proj"], "granite": ["q_proj", "v_proj"], "t5": ["q", "v"]}
TARGETS.update(mistral=TARGETS["llama"], qwen2=TARGETS["llama"])
HIDDEN, LAYERS, RANK = 64, 2, 4
SOURCES = ["The price is 12.5 dollars and 7 apples, -3 degrees.", "No numbers here at all."]
TARGET_TEXTS = ["It costs 19.5 now", "Answer 42"]
PLAIN = ["Hello there, how are you today?", "No numbers in this one either."]


@dataclass(frozen=True)
class Case:
    family: str
    encoding: str
    tie: bool

    @property
    def id(self) -> str:
        return f"{self.family}-{self.encoding}-{'tied' if self.tie else 'untied'}"


CASES = [Case(f, e, t) for f in ("llama", "granite", "t5") for e in ("fone", "xval", "digits") for t in (True, False)]
CASE_IDS = [c.id for c in CASES]


class Store:
    """Session store of saved tokenizers and base models (paths only; everything is reloaded per test)."""

    def __init__(self, root) -> None:
        self.root = root
        self._tokenizers: dict[str, str] = {}
        self._models: dict[tuple, str] = {}

    def tokenizer(self, kind: str):
        if kind not in self._tokenizers:
            path = os.path.join(self.root, f"tok-{kind}")
            toy.build_tokenizer(kind, path)
            self._tokenizers[kind] = path
        return AutoTokenizer.from_pretrained(self._tokenizers[kind])

    def base_path(self, family: str, tie: bool, extra_rows: int = 0, hidden: int = HIDDEN) -> str:
        key = (family, tie, extra_rows, hidden)
        if key not in self._models:
            kind = TOKENIZER_OF[family]
            vocab = len(self.tokenizer(kind)) + extra_rows
            path = os.path.join(self.root, f"model-{family}-{tie}-{extra_rows}-{hidden}")
            if family in OTHER_FAMILIES:
                build_other(family, path, vocab, tie, hidden)
            else:
                tiny.build_model(family, path, vocab, tie=tie, hidden_size=hidden, layers=LAYERS, tokenizer_kind=kind)
            self._models[key] = path
        return self._models[key]

    def base(self, family: str, tie: bool, extra_rows: int = 0, hidden: int = HIDDEN):
        path = self.base_path(family, tie, extra_rows, hidden)
        if family in OTHER_FAMILIES:
            return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        return tiny.reload_model(family, path)


OTHER_FAMILIES = ("mistral", "qwen2")


def build_other(family: str, path: str, vocab: int, tie: bool, hidden: int) -> None:
    """Tiny random Mistral / Qwen2 (Llama-shaped: 4 heads, 2 kv heads), saved to `path`."""
    from transformers import MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM

    spec = toy.CONFIGS["digits"]
    common = dict(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=LAYERS,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=tie,
        bos_token_id=spec.bos_token_id, eos_token_id=spec.eos_token_id, pad_token_id=spec.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    if family == "mistral":
        model = MistralForCausalLM(MistralConfig(**common))
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    model.save_pretrained(path)


def make_config(case: Case, **overrides) -> NumberAdapterConfig:
    settings = dict(
        encoding=case.encoding,
        int_digits=4,
        frac_digits=2,
        r=RANK,
        lora_alpha=2 * RANK,
        target_modules=TARGETS[case.family],
    )
    if case.encoding == "fone":
        settings.update(sign_policy="feature", fone_numbers="all")  # every number a [NUM]: the machinery under test
    if case.encoding == "xval":
        settings["xval_scale"] = 10.0  # every number of the test texts normalises into [-5, 5]
    if case.encoding == "digits":
        settings.update(aggregate=True, aggregate_loss_lambda=0.5, ntl_weight=0.3)
    settings.update(overrides)
    return NumberAdapterConfig(**settings)


def build(store: Store, case: Case, dtype: torch.dtype | None = None, **overrides):
    """A fresh (peft_model, number_tokenizer, config) for `case`.

    Seeded: the new adapter weights (LoRA, [NUM] rows, number modules) do not depend on which tests ran before.
    """
    torch.manual_seed(0)
    tokenizer = store.tokenizer(TOKENIZER_OF[case.family])
    base = store.base(case.family, case.tie)
    if dtype is not None:
        base = base.to(dtype)
    config = make_config(case, **overrides)
    model = get_peft_model(base, config, tokenizer=tokenizer)
    return model, NumberTokenizer(tokenizer, config), config


def make_batch(case: Case, ntok: NumberTokenizer, sources=SOURCES, targets=TARGET_TEXTS) -> dict:
    """Model inputs with labels (and, for T5, label-side number tensors)."""
    enc = ntok(list(sources), padding=True, return_tensors="pt")
    batch = {k: v for k, v in enc.items() if k != "number_texts"}
    if case.family != "t5":
        batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        return batch
    tgt = ntok(list(targets), padding=True, return_tensors="pt")
    batch["labels"] = tgt["input_ids"].masked_fill(tgt["attention_mask"] == 0, -100)
    for key in ("num_mask", "num_digits", "num_sign", "num_values"):
        batch["labels_" + key] = tgt[key]
    return batch


def plain_batch(case: Case, tokenizer) -> dict:
    """Inputs without any number (for the no-op test), labels omitted."""
    enc = tokenizer(PLAIN, padding=True, return_tensors="pt")
    batch = dict(enc)
    if case.family == "t5":
        batch["decoder_input_ids"] = tokenizer(["Fine thanks", "Good"], padding=True, return_tensors="pt")["input_ids"]
    return batch


def trainable_names(model) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


def is_adapter_param(name: str) -> bool:
    return ".lora_" in name or "trainable_tokens_delta" in name or ".number_modules." in name
