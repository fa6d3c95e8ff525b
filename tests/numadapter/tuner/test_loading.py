"""PEFT registration, loading paths, base-shape checks and the embedding resize policy."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import peft
import pytest
import torch
from helpers.adapter_cases import TOKENIZER_OF, Case, Store, build, make_batch, plain_batch
from peft import AutoPeftModelForCausalLM, AutoPeftModelForSeq2SeqLM, PeftConfig
from peft.utils.peft_types import PeftType

from numadapter.config import NumberAdapterConfig
from numadapter.integrations.peft_type import PEFT_TYPE_VALUE, peft_version_supported
from numadapter.mapping import get_peft_model
from numadapter.tuner.patches import base_weight


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("loading")))


@pytest.fixture(scope="module")
def saved(store, tmp_path_factory):
    """A trained-for-one-step llama fone adapter saved to disk, with its batch and logits."""
    case = Case("llama", "fone", tie=False)
    model, ntok, config = build(store, case)
    batch = make_batch(case, ntok)
    model(**batch).loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= 0.5 * p.grad
    model.eval()
    with torch.no_grad():
        logits = model(**batch).logits
    path = str(tmp_path_factory.mktemp("saved") / "adapter")
    model.save_pretrained(path)
    return case, path, batch, logits, config


def test_peft_type_member_is_a_real_enum_member():
    member = PeftType.NUMADAPTER
    assert PeftType(PEFT_TYPE_VALUE) is member and PeftType["NUMADAPTER"] is member
    assert member in list(PeftType) and member == PEFT_TYPE_VALUE
    assert pickle.loads(pickle.dumps(member)) is member
    assert "import numadapter" in member.value
    assert peft_version_supported("0.21.2") and not peft_version_supported("0.22.0")
    assert not peft_version_supported("0.20.9")


def test_configs_load_as_number_adapter_config(saved):
    _, path, _, _, config = saved
    assert json.load(open(os.path.join(path, "adapter_config.json")))["peft_type"] == PEFT_TYPE_VALUE
    for loader in (NumberAdapterConfig.from_pretrained, PeftConfig.from_pretrained, peft.LoraConfig.from_pretrained):
        loaded = loader(path)
        assert type(loaded) is NumberAdapterConfig and loaded.peft_type is PeftType.NUMADAPTER
        assert (loaded.encoding, loaded.num_token_id, loaded.sign_policy) == ("fone", config.num_token_id, "feature")


def test_loading_without_import_numadapter_says_to_import_it(saved, store):
    _, path, _, _, _ = saved
    base = store.base_path("llama", False)
    script = textwrap.dedent(f"""
        import sys
        import peft
        from transformers import LlamaForCausalLM
        assert not any(m.startswith("numadapter") for m in sys.modules)
        base = LlamaForCausalLM.from_pretrained({base!r})
        try:
            peft.PeftModel.from_pretrained(base, {path!r})
        except KeyError as exc:
            print("ERROR:", exc)
    """)
    env = dict(os.environ, PYTHONPATH="", HF_HUB_OFFLINE="1")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd="/")
    assert "ERROR:" in result.stdout, result.stderr[-2000:]
    assert "requires `import numadapter` before loading" in result.stdout


def test_wrong_vocab_size_names_both_shapes(saved, store):
    _, path, _, _, config = saved
    other = store.base("llama", False, extra_rows=5)
    rows = config.original_vocab_size
    with pytest.raises(ValueError) as info:
        peft.PeftModel.from_pretrained(other, path)
    assert f"[{rows}, 64]" in str(info.value) and f"[{rows + 5}, 64]" in str(info.value)


def test_wrong_hidden_size_names_both_shapes(saved, store):
    _, path, _, _, config = saved
    other = store.base("llama", False, hidden=32)
    rows = config.original_vocab_size
    with pytest.raises(ValueError) as info:
        peft.PeftModel.from_pretrained(other, path)
    assert f"[{rows}, 64]" in str(info.value) and f"[{rows}, 32]" in str(info.value)


def test_auto_peft_model_for_causal_lm(saved):
    _, path, batch, logits, _ = saved
    model = AutoPeftModelForCausalLM.from_pretrained(path)
    assert isinstance(model, peft.PeftModelForCausalLM)
    with torch.no_grad():
        assert torch.equal(model(**batch).logits, logits)


def test_auto_peft_model_with_saved_tokenizer_resizes_first(saved, store, tmp_path):
    """With a tokenizer next to the adapter, PEFT resizes the base itself (random rows): still bit-exact."""
    _, path, batch, logits, _ = saved
    target = tmp_path / "with-tokenizer"
    target.mkdir()
    for name in os.listdir(path):
        (target / name).write_bytes(open(os.path.join(path, name), "rb").read())
    tokenizer = store.tokenizer(TOKENIZER_OF["llama"])
    tokenizer.add_tokens(["[NUM]"], special_tokens=True)
    tokenizer.save_pretrained(target)
    model = AutoPeftModelForCausalLM.from_pretrained(str(target))
    with torch.no_grad():
        assert torch.equal(model(**batch).logits, logits)


def test_auto_peft_model_for_seq2seq(store, tmp_path):
    case = Case("t5", "xval", tie=False)
    model, ntok, _ = build(store, case)
    batch = make_batch(case, ntok)
    model.eval()
    model.save_pretrained(tmp_path)
    loaded = AutoPeftModelForSeq2SeqLM.from_pretrained(str(tmp_path))
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, model(**batch).logits)


def test_is_trainable_and_adapter_name(saved, store):
    _, path, batch, logits, _ = saved
    frozen = peft.PeftModel.from_pretrained(store.base("llama", False), path)
    assert frozen.get_nb_trainable_parameters()[0] == 0
    trainable = peft.PeftModel.from_pretrained(store.base("llama", False), path, is_trainable=True, adapter_name="n")
    names = {n for n, p in trainable.named_parameters() if p.requires_grad}
    assert any(".number_modules.n." in n for n in names) and any("trainable_tokens_delta.n" in n for n in names)
    trainable.eval()
    with torch.no_grad():
        assert torch.equal(trainable(**batch).logits, logits)


def test_padded_vocabulary_reuses_a_free_row(store, tmp_path):
    """Embedding rows > len(tokenizer): [NUM] takes the first free row, nothing is resized."""
    tokenizer = store.tokenizer("t5")
    base = store.base("t5", True, extra_rows=8)
    rows = base.get_input_embeddings().weight.shape[0]
    config = NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=2, r=4, target_modules=["q", "v"])
    model = get_peft_model(base, config, tokenizer=tokenizer)
    assert config.num_token_id == len(tokenizer) - 1 == rows - 8
    assert config.original_vocab_size == config.resized_vocab_size == rows
    assert base_weight(model.get_input_embeddings()).shape[0] == rows
    reference = store.base("t5", True, extra_rows=8)
    batch = plain_batch(Case("t5", "fone", True), tokenizer)
    model.eval()
    with torch.no_grad():
        got, want = model(**batch).logits, reference(**batch).logits
    keep = torch.ones(rows, dtype=torch.bool)
    keep[config.num_token_id] = False
    assert torch.equal(got[..., keep], want[..., keep])
    model.save_pretrained(tmp_path)
    loaded = peft.PeftModel.from_pretrained(store.base("t5", True, extra_rows=8), tmp_path)
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, got)


def test_tokenizer_longer_than_embedding_grows_it(store):
    tokenizer = store.tokenizer("digits")
    base = store.base("llama", False, extra_rows=-3)
    before_in = base.get_input_embeddings().weight.detach().clone()
    before_out = base.get_output_embeddings().weight.detach().clone()
    config = NumberAdapterConfig(encoding="xval", r=4, target_modules=["q_proj"])
    model = get_peft_model(base, config, tokenizer=tokenizer)
    assert config.resized_vocab_size == len(tokenizer) == before_in.shape[0] + 4
    after_in = base_weight(model.get_input_embeddings())
    after_out = base_weight(model.get_output_embeddings())
    assert after_in.shape[0] == after_out.shape[0] == len(tokenizer)
    assert torch.equal(after_in[: before_in.shape[0]], before_in)
    assert torch.equal(after_out[: before_out.shape[0]], before_out)
    assert model.get_base_model().config.vocab_size == len(tokenizer)


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_number_rows_start_as_the_mean_of_the_digit_rows(store, tie):
    base = store.base("llama", tie)
    digits = [store.tokenizer("digits").convert_tokens_to_ids(d) for d in "0123456789"]
    mean_in = base.get_input_embeddings().weight[digits].detach().mean(0)
    mean_out = base.get_output_embeddings().weight[digits].detach().mean(0)
    config = NumberAdapterConfig(encoding="fone", r=4, target_modules=["q_proj"])
    model = get_peft_model(base, config, tokenizer=store.tokenizer("digits"))
    num = config.num_token_id
    rows_in = model.get_input_embeddings().token_adapter.trainable_tokens_delta["default"]
    torch.testing.assert_close(rows_in[0], mean_in)
    assert torch.equal(base_weight(model.get_input_embeddings())[num], torch.zeros_like(mean_in))
    out = model.get_output_embeddings()
    if tie:
        assert out.token_adapter.tied_adapter is model.get_input_embeddings().token_adapter
    else:
        torch.testing.assert_close(out.token_adapter.trainable_tokens_delta["default"][0], mean_out)
        assert torch.equal(base_weight(out)[num], torch.zeros_like(mean_out))


def test_agg_row_starts_at_zero(store):
    case = Case("granite", "digits", tie=True)
    model, _, config = build(store, case)
    adapter = model.get_input_embeddings().token_adapter
    rows = adapter.trainable_tokens_delta["default"]
    assert adapter.token_indices["default"] == [config.agg_token_id, config.eos_token_id]
    assert torch.equal(rows[0], torch.zeros_like(rows[0]))
    # the EOS row (train_eos_row) starts from the base's own row: a no-op until trained
    base_rows = store.base("granite", True).get_input_embeddings().weight
    assert torch.equal(rows[1], base_rows[config.eos_token_id])


def test_disabled_adapter_is_the_base_model(store):
    case = Case("granite", "xval", tie=False)
    model, ntok, _ = build(store, case)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.1)  # a trained-looking LoRA
    reference = store.base("granite", False)
    batch = plain_batch(case, store.tokenizer("digits"))
    model.eval()
    with torch.no_grad():
        changed = model(**batch).logits
        with model.disable_adapter():
            disabled = model(**batch).logits
        want = reference(**batch).logits
    vocab = want.shape[-1]
    assert not torch.equal(changed[..., :vocab], want)
    assert torch.equal(disabled[..., :vocab], want)


def test_explicit_save_embedding_layers_still_saves_them(store, tmp_path):
    from safetensors.torch import load_file

    model, _, _ = build(store, Case("llama", "digits", tie=True))
    model.save_pretrained(tmp_path, save_embedding_layers=True)
    keys = load_file(os.path.join(tmp_path, "adapter_model.safetensors"))
    assert any(k.endswith("embed_tokens.token_adapter.base_layer.weight") for k in keys)


def test_low_cpu_mem_usage_loading(saved, store):
    """PEFT builds the adapter on the meta device, then assigns the saved tensors: also the number modules."""
    _, path, batch, logits, _ = saved
    loaded = peft.PeftModel.from_pretrained(store.base("llama", False), path, low_cpu_mem_usage=True)
    assert not any(p.is_meta for p in loaded.parameters())
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, logits)


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_user_trainable_tokens_join_the_number_rows(store, tie):
    """`trainable_token_indices=[ids]` (a LoRA option) still works: those rows train alongside [NUM], no-op at init."""
    tokenizer = store.tokenizer("digits")
    batch = plain_batch(Case("llama", "fone", tie), tokenizer)
    extra = int(batch["input_ids"][0, 2])  # a token of the test text
    config = NumberAdapterConfig(encoding="fone", r=4, target_modules=["q_proj"], trainable_token_indices=[extra])
    model = get_peft_model(store.base("llama", tie), config, tokenizer=tokenizer)
    rows = model.get_input_embeddings().token_adapter.trainable_tokens_delta["default"]
    indices = model.get_input_embeddings().token_adapter.token_indices["default"]
    assert rows.shape[0] == 3 and indices[1] == extra and indices[2] == config.eos_token_id  # [NUM], user, EOS
    reference = store.base("llama", tie)
    with torch.no_grad():
        got, want = model(**batch).logits, reference(**batch).logits
        assert torch.equal(got[..., : want.shape[-1]], want)
        rows[1] += 0.5  # a trained row: input (and, tied, output)
        if not tie:
            model.get_output_embeddings().token_adapter.trainable_tokens_delta["default"][1] -= 0.5
        adapted = model(**batch).logits
        merged = model.merge_and_unload(drop_numbers=True)(**batch).logits  # PEFT merges the rows into the weights
    assert not torch.equal(adapted[..., : want.shape[-1]], want)
    torch.testing.assert_close(adapted, merged)


def test_adapter_saved_before_a_default_changed_keeps_its_meaning(store, tmp_path):
    """An adapter_config.json without `fone_head_target` / `gce_form` (saved before they existed) loads with the
    paper's head and the additive GCE it was trained with, not today's defaults ("feature", "replace")."""
    from safetensors.torch import load_file, save_file

    case = Case("llama", "fone", tie=False)
    model, _, _ = build(
        store, case, fone_head_target="digit", fone_head_input="linear", gce_form="add"
    )  # what older adapters were
    model.save_pretrained(tmp_path)
    saved = json.load(open(tmp_path / "adapter_config.json"))
    del saved["fone_head_target"], saved["gce_form"]  # older adapter_config.json files do not have them
    json.dump(saved, open(tmp_path / "adapter_config.json", "w"))
    weights = tmp_path / "adapter_model.safetensors"
    tensors = {k: v for k, v in load_file(weights).items() if "settings_stamp" not in k}  # nor the settings stamp
    save_file(tensors, weights)
    assert NumberAdapterConfig().fone_head_target == "feature" and NumberAdapterConfig().gce_form == "replace"
    loaded = NumberAdapterConfig.from_pretrained(str(tmp_path))
    assert loaded.fone_head_target == "digit" and loaded.gce_form == "add"
    reloaded = peft.PeftModel.from_pretrained(store.base("llama", False), str(tmp_path))  # PEFT's loader too
    kept = reloaded.peft_config["default"]
    assert isinstance(kept, NumberAdapterConfig) and kept.fone_head_target == "digit" and kept.gce_form == "add"
    assert reloaded.base_model.number_modules["default"].head.target == "digit"
