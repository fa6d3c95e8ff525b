"""Checkpoints written by an earlier numadapter still load, and answer as they did: a regression record.

``tests/fixtures/fone_lora_llama/`` was written once by ``tests/fixtures/make_fixtures.py`` (see its docstring; run
it only when the saved format changes on purpose): a tiny Llama base, a trained FoNE + LoRA adapter saved with
``PeftModel.save_pretrained`` plus its `NumberTokenizer`, the `numadapter.export_merged` directory of that adapter,
and ``reference.json``, the losses, top logits and greedy answers the adapter gave when the files were written.

These tests load those committed files with today's code, through the README's paths (``import numadapter``, then
``peft.PeftModel.from_pretrained`` and `numadapter.load_exported`), and compare with the committed tensors and the
recorded values. A failure means today's code reads old checkpoints differently: either fix the code, or, when the
format change is intended, say so and regenerate the fixtures.
"""

from __future__ import annotations

import json
import subprocess
import sys

import peft
import pytest
import torch
from helpers.paths import FIXTURES, ROOT
from safetensors.torch import load_file
from transformers import LlamaForCausalLM

import numadapter
from numadapter import NumberTokenizer

FIXTURE = FIXTURES / "fone_lora_llama"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text(encoding="utf-8"))
MODULES_PREFIX = "base_model.number_modules."  # how PEFT names the number modules in adapter_model.safetensors


@pytest.fixture(scope="module")
def adapter():
    base = LlamaForCausalLM.from_pretrained(FIXTURE / "base")
    model = peft.PeftModel.from_pretrained(base, FIXTURE / "adapter").eval()
    return model, NumberTokenizer.from_pretrained(FIXTURE / "adapter")


@pytest.fixture(scope="module")
def exported():
    return numadapter.load_exported(FIXTURE / "export")


def number_state(model) -> dict[str, torch.Tensor]:
    return model.base_model.number_modules["default"].state_dict()


def row_tensors(model) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """The ids of the trainable rows and their input / output rows, as the loaded model serves them."""
    inner = model.base_model.model
    ids = inner.get_input_embeddings().token_adapter.token_indices["default"]
    rows_in = inner.get_input_embeddings().token_adapter.trainable_tokens_delta["default"]
    rows_out = inner.get_output_embeddings().token_adapter.trainable_tokens_delta["default"]
    return ids, rows_in.detach(), rows_out.detach()


def test_adapter_number_modules_and_rows_equal_the_committed_tensors(adapter):
    model, ntok = adapter
    saved = load_file(FIXTURE / "adapter" / "adapter_model.safetensors")
    modules = {k.removeprefix(MODULES_PREFIX): v for k, v in saved.items() if k.startswith(MODULES_PREFIX)}
    loaded = number_state(model)
    assert (
        set(modules)
        == set(loaded)
        == {
            "settings_stamp",
            "embedding.proj.weight",
            "head.proj.weight",
            "head.proj.bias",
        }
    )
    for name, tensor in modules.items():
        assert torch.equal(loaded[name], tensor), name
    ids, rows_in, rows_out = row_tensors(model)
    assert ids == [ntok.num_token_id, ntok.tokenizer.eos_token_id] == [684, 2]  # [NUM] and the EOS row
    assert torch.equal(rows_in, saved["base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta"])
    assert torch.equal(rows_out, saved["base_model.model.lm_head.token_adapter.trainable_tokens_delta"])


def test_export_number_modules_and_rows_equal_the_committed_tensors(exported, adapter):
    model, ntok = exported
    saved = load_file(FIXTURE / "export" / "number_modules.safetensors")
    loaded = number_state(model)
    assert set(saved) == set(loaded)
    for name, tensor in saved.items():
        assert torch.equal(loaded[name], tensor), name
    weights = load_file(FIXTURE / "export" / "model.safetensors")
    ids, rows_in, rows_out = row_tensors(model)
    assert ids[:1] == [ntok.num_token_id]
    assert torch.equal(rows_in[:1], weights["model.embed_tokens.weight"][ids[:1]])
    assert torch.equal(rows_out[:1], weights["lm_head.weight"][ids[:1]])
    # the export holds the adapter's trained [NUM] and EOS rows in its resized embedding and head
    _, adapter_in, adapter_out = row_tensors(adapter[0])
    assert torch.equal(weights["model.embed_tokens.weight"][[684, 2]], adapter_in)
    assert torch.equal(weights["lm_head.weight"][[684, 2]], adapter_out)


def answers(model, ntok) -> dict[str, list]:
    out = numadapter.generate(
        model, ntok, REFERENCE["prompts"], max_new_tokens=REFERENCE["max_new_tokens"], return_dict=True
    )
    return {"texts": out.texts, "numbers": [[str(n) for n in row] for row in out.numbers], "token_ids": out.token_ids}


def test_adapter_and_export_give_the_recorded_answers(adapter, exported):
    """The recorded tokens and numbers, exactly. The texts were recorded when adjacent generated numbers ran together
    ("2121.99" for 21 then 21.99, which reads back as other numbers); they are now written with a space between
    them (`numadapter.tokenization.decoding`), the only difference."""
    recorded = REFERENCE["answers"]
    prompts = REFERENCE["prompts"]
    assert recorded["texts"] == [p + "".join(n) for p, n in zip(prompts, recorded["numbers"])]  # only numbers
    spaced = {**recorded, "texts": [p + " ".join(n) for p, n in zip(prompts, recorded["numbers"])]}
    assert answers(*adapter) == spaced
    assert answers(*exported) == spaced
    assert any(recorded["numbers"]), "the record should contain generated numbers (read by the digit head)"


@pytest.mark.parametrize("which", ["adapter", "exported"])
def test_losses_and_top_logits_equal_the_record(which, request):
    model, ntok = request.getfixturevalue(which)
    batch = ntok(REFERENCE["batch_texts"], padding=True, return_tensors="pt")
    batch.pop("number_texts")
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    with torch.no_grad():
        out = model(**batch, labels=labels)
    got = {"loss": out.loss.item(), "lm_loss": out.lm_loss.item(), "number_loss": out.number_loss.item()}
    assert got == pytest.approx(REFERENCE["losses"], rel=1e-5, abs=1e-6)
    for prompt, record in zip(REFERENCE["prompts"], REFERENCE["top_logits"], strict=True):
        encoded = ntok([prompt], return_tensors="pt")
        encoded.pop("number_texts")
        with torch.no_grad():
            logits = model(**encoded).logits[0, -1]  # (V,)
        assert logits[record["ids"]].tolist() == pytest.approx(record["values"], abs=1e-4), prompt
        assert logits.argmax().item() == record["ids"][0]


def test_import_numadapter_is_enough_to_load_the_adapter_with_peft():
    """The README's claim, with the lazy package: PEFT registration happens without touching numadapter again."""
    code = (
        "import numadapter, peft\nfrom transformers import LlamaForCausalLM\n"
        f"base = LlamaForCausalLM.from_pretrained({str(FIXTURE / 'base')!r})\n"
        f"model = peft.PeftModel.from_pretrained(base, {str(FIXTURE / 'adapter')!r})\n"
        "print(type(model.base_model).__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "NumberAdapterModel"
