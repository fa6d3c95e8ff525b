"""numadapter.export: merged export round trip (logits, generation), plain AutoModel loading, QLoRA, errors.

The matrix is {llama, granite, t5} x {fone, xval, digits}, each with a non-trivial adapter: random LoRA (``B != 0``),
perturbed [NUM] rows and number modules (as after training), and an [NUM] output row pushed up so that generation
emits numbers, which the number head decodes and feeds back. Ties alternate over the cells (llama-fone, granite-xval,
t5-fone, t5-digits tied; the rest untied), so tied and untied [NUM] rows are both merged and restored.
"""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch
from helpers.adapter_cases import PLAIN, SOURCES, TARGET_TEXTS, Case, Store, build
from peft import TaskType
from safetensors import safe_open
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from numadapter.export import (
    NUMBER_CONFIG_NAME,
    NUMBER_MODULES_NAME,
    export_checkpoint,
    export_merged,
    load_exported,
    read_number_config,
)
from numadapter.export_files import base_model_config
from numadapter.generation import generate

TIED = {("llama", "fone"), ("granite", "xval"), ("t5", "fone"), ("t5", "digits")}
CELLS = [Case(f, e, (f, e) in TIED) for f in ("llama", "granite", "t5") for e in ("fone", "xval", "digits")]
PROMPTS = ["The price is 12.5 dollars and", "What is 7 + 8 =", "hi"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("export")))


def lm_head_input(model, batch) -> torch.Tensor:
    """Mean hidden state entering the LM head over `batch` (``[H]``)."""
    captured = []
    head = model.base_model.model.get_output_embeddings()
    handle = head.register_forward_pre_hook(lambda module, args: captured.append(args[0].detach()))
    with torch.no_grad():
        model(**batch)
    handle.remove()
    hidden = torch.cat([c.reshape(-1, c.shape[-1]) for c in captured])  # (N, H)
    return hidden.mean(0)


def trained(store: Store, case: Case, **overrides):
    """A numadapter model that looks trained: random LoRA, perturbed number parameters, [NUM] emitted often."""
    model, ntok, config = build(store, case, init_lora_weights=False, lora_dropout=0.0, **overrides)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "number_modules" in name or "trainable_tokens_delta" in name:
                param.add_(0.05 * torch.randn_like(param))
    model.eval()
    if config.encoding != "digits":
        batch = prompt_batch(case, ntok)
        mean = lm_head_input(model, batch)
        head = model.base_model.model.get_output_embeddings().token_adapter.trainable_tokens_delta["default"]
        with torch.no_grad():
            head[0] = mean / mean.norm() ** 2 * 8.0  # [NUM] logit ~8 at the average hidden state
    return model, ntok, config


def prompt_batch(case: Case, ntok) -> dict:
    enc = ntok(SOURCES + PLAIN, padding=True, return_tensors="pt")
    batch = {k: v for k, v in enc.items() if k != "number_texts"}
    if case.family == "t5":
        tgt = ntok(TARGET_TEXTS + ["Fine thanks", "Good"], padding=True, return_tensors="pt")
        batch["decoder_input_ids"] = torch.cat(
            [torch.zeros_like(tgt["input_ids"][:, :1]), tgt["input_ids"][:, :-1]], dim=1
        )  # (B, L) shifted right, start token 0
        for key in ("num_mask", "num_digits", "num_sign", "num_values"):
            shifted = torch.zeros_like(tgt[key])
            shifted[:, 1:] = tgt[key][:, :-1]
            batch["decoder_" + key] = shifted
        batch["decoder_num_mask"] = batch["decoder_num_mask"] * (batch["decoder_input_ids"] == ntok.marker_token_id)
    return batch


@pytest.mark.parametrize("case", CELLS, ids=[c.id for c in CELLS])
def test_round_trip_matches_the_unmerged_adapter(store, tmp_path, case):
    model, ntok, config = trained(store, case)
    batch = prompt_batch(case, ntok)
    with torch.no_grad():
        want = model(**batch)
    want_text = generate(model, ntok, PROMPTS, max_new_tokens=6, return_dict=True)
    export_merged(model, ntok, tmp_path / "merged")
    with torch.no_grad():  # the model passed in still works unmerged (a deep copy was merged)
        torch.testing.assert_close(model(**batch).logits, want.logits, rtol=1e-5, atol=1e-5)
    loaded, loaded_ntok = load_exported(tmp_path / "merged")
    with torch.no_grad():
        got = loaded(**batch)
    torch.testing.assert_close(got.logits, want.logits, rtol=1e-5, atol=1e-5)
    if case.encoding == "fone":
        torch.testing.assert_close(got.number_logits, want.number_logits, rtol=1e-5, atol=1e-5)
    if case.encoding == "xval":
        # values are denormalised (x * xval_scale), so float32 noise scales with them
        torch.testing.assert_close(got.number_values, want.number_values, rtol=1e-5, atol=1e-5)
    got_text = generate(loaded, loaded_ntok, PROMPTS, max_new_tokens=6, return_dict=True)
    assert got_text.token_ids == want_text.token_ids
    assert got_text.texts == want_text.texts
    if case.encoding != "digits":  # the head really decoded generated numbers
        assert sum(len(n) for n in want_text.numbers) >= 2
        if case.encoding == "fone":  # exact digits
            assert got_text.numbers == want_text.numbers
        else:  # xVal floats: the rendered text above is identical, raw values within float32 noise
            for got_row, want_row in zip(got_text.numbers, want_text.numbers):
                assert got_row == pytest.approx(want_row, rel=1e-5, abs=1e-5)
    assert not any(p.requires_grad for p in loaded.parameters())
    assert not any(".lora_" in name for name, _ in loaded.named_parameters())


@pytest.mark.parametrize("case", [CELLS[0], CELLS[7]], ids=[CELLS[0].id, CELLS[7].id])
def test_plain_auto_model_loads_the_merged_weights(store, tmp_path, case):
    model, ntok, config = trained(store, case)
    out = tmp_path / "merged"
    export_merged(model, ntok, out)
    auto = AutoModelForSeq2SeqLM if case.family == "t5" else AutoModelForCausalLM
    written = json.load(open(out / "config.json"))
    assert written["model_type"] == f"numadapter-{case.family}"  # a number export: plain transformers refuses it
    # the weights are the base's own checkpoint under the base's config (numadapter.serving.marking)
    plain = auto.from_pretrained(out, config=base_model_config(written)).eval()
    assert type(plain).__name__ == written["numadapter"]["base_architectures"][0]
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert config.num_token in tokenizer.get_added_vocab()
    assert plain.get_input_embeddings().weight.shape[0] == config.resized_vocab_size
    enc = tokenizer(PLAIN, padding=True, return_tensors="pt")
    batch = dict(enc)
    if case.family == "t5":
        batch["decoder_input_ids"] = tokenizer(["Fine thanks", "Good"], padding=True, return_tensors="pt")["input_ids"]
    with torch.no_grad():  # on text without numbers the plain model is the merged adapter
        torch.testing.assert_close(plain(**batch).logits, model(**batch).logits, rtol=1e-5, atol=1e-5)
    # the merged [NUM] row is the adapter's trained row, not the base's zero row
    row = model.base_model.model.get_input_embeddings().token_adapter.trainable_tokens_delta["default"][0]
    torch.testing.assert_close(plain.get_input_embeddings().weight[config.num_token_id], row, rtol=0, atol=0)


def test_export_directory_is_safetensors_and_json_only(store, tmp_path):
    case = CELLS[1]  # llama xval, untied
    model, ntok, config = trained(store, case)
    out = tmp_path / "merged"
    config.task_type = TaskType.CAUSAL_LM  # the enum, as PEFT users often pass it
    export_merged(model, ntok, out, dtype="bfloat16")
    names = sorted(os.listdir(out))
    assert all(n.endswith((".safetensors", ".json", ".jinja")) for n in names), names
    assert {NUMBER_CONFIG_NAME, NUMBER_MODULES_NAME, "config.json", "model.safetensors"} <= set(names)
    info = json.load(open(out / NUMBER_CONFIG_NAME))
    assert info["task_type"] == "CAUSAL_LM" and info["format"] == "numadapter-merged"
    assert info["number_config"]["encoding"] == "xval" and info["number_config"]["num_token_id"] == config.num_token_id
    assert info["merged_adapter"]["dtype"] == "bfloat16" and info["merged_adapter"]["r"] == config.r
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}
    with safe_open(str(out / NUMBER_MODULES_NAME), "pt") as f:  # number modules stay float32 (the stamp is bytes)
        keys = list(f.keys())
        assert keys and {f.get_slice(k).get_dtype() for k in keys if k != "settings_stamp"} == {"F32"}
        assert f.get_slice("settings_stamp").get_dtype() == "U8"
    expected = {k for k in model.base_model.number_modules["default"].state_dict()}
    assert set(keys) == expected
    config_again, _ = read_number_config(out)
    assert config_again.xval_scale == config.xval_scale and config_again.inference_mode
    # one weights file still comes with an index naming it for every weight, and nothing else: engines that find no
    # index read every *.safetensors of the directory as weights, number_modules.safetensors included
    index = json.load(open(out / "model.safetensors.index.json"))
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert index["weight_map"] == dict.fromkeys(f.keys(), "model.safetensors")


def test_inplace_export_and_checkpoint_export_agree(store, tmp_path):
    case = CELLS[2]  # llama digits (+ [AGG])
    model, ntok, config = trained(store, case)
    model.save_pretrained(tmp_path / "adapter")
    ntok.save_pretrained(tmp_path / "adapter")
    batch = prompt_batch(case, ntok)
    with torch.no_grad():
        want = model(**batch).logits
    export_checkpoint(tmp_path / "adapter", tmp_path / "offline", base=store.base_path("llama", False))
    export_merged(model, ntok, tmp_path / "inplace", inplace=True)
    for name in ("offline", "inplace"):
        loaded, _ = load_exported(tmp_path / name)
        with torch.no_grad():
            torch.testing.assert_close(loaded(**batch).logits, want, rtol=1e-5, atol=1e-5)


def test_errors_name_the_problem(store, tmp_path):
    model, ntok, config = trained(store, CELLS[0])
    other = build(store, CELLS[1])[1]  # an xval NumberTokenizer
    with pytest.raises(ValueError, match="does not match the adapter config"):
        export_merged(model, other, tmp_path / "x")
    with pytest.raises(TypeError, match="numadapter adapter"):
        export_merged(model.get_base_model(), ntok, tmp_path / "x")
    with pytest.raises(ValueError, match="`dtype` must be one of"):
        export_merged(model, ntok, tmp_path / "x", dtype="int8")
    with pytest.raises(FileNotFoundError, match="not a numadapter export"):
        load_exported(tmp_path)
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        export_checkpoint(tmp_path, tmp_path / "y")
    param = next(model.parameters())
    param.ds_id = 0  # what DeepSpeed ZeRO-3 puts on partitioned parameters
    try:
        with pytest.raises(ValueError, match="numadapter export --adapter DIR"):
            export_merged(model, ntok, tmp_path / "x")
    finally:
        del param.ds_id


def test_qlora_export_dequantises_with_a_memory_warning(store, tmp_path):
    """The export equals PEFT's unmerged LoRA on transformers' own dequantisation of the same 4-bit base.

    (The 4-bit layers' CPU forward itself is not float32-exact against their dequantised weights, so the reference is
    built through ``PreTrainedModel.dequantize`` and PEFT's unmerged LoRA forward, an independent path.)
    """
    pytest.importorskip("bitsandbytes")
    from peft import get_peft_model_state_dict, set_peft_model_state_dict
    from transformers import LlamaForCausalLM

    from numadapter.config import NumberAdapterConfig
    from numadapter.integrations.qlora import qlora_config, quantized_weights
    from numadapter.mapping import get_peft_model
    from numadapter.tokenization import NumberTokenizer

    def load_4bit():
        return LlamaForCausalLM.from_pretrained(
            store.base_path("llama", False), dtype=torch.float32, quantization_config=qlora_config(torch.float32),
            device_map="cpu",
        )  # fmt: skip

    def make(base):
        config = NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=2, r=4, lora_dropout=0.0,
                                     target_modules=["q_proj", "v_proj"], init_lora_weights=False)  # fmt: skip
        tokenizer = store.tokenizer("digits")
        return get_peft_model(base, config, tokenizer=tokenizer).eval(), NumberTokenizer(tokenizer, config)

    base = load_4bit()
    assert quantized_weights(base)
    model, ntok = make(base)
    reference_base = load_4bit()
    reference_base.dequantize(dtype=torch.float32)
    reference, _ = make(reference_base)
    set_peft_model_state_dict(reference, get_peft_model_state_dict(model))
    batch = prompt_batch(Case("llama", "fone", False), ntok)
    with torch.no_grad():
        want = reference(**batch).logits
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export_merged(model, ntok, tmp_path / "merged", dtype="float32")
    message = " ".join(str(w.message) for w in caught)
    assert "dequantised" in message and "GiB" in message and "torch.float32" in message
    assert "quantization_config" not in json.load(open(tmp_path / "merged" / "config.json"))
    assert quantized_weights(model)  # the model passed in is still the 4-bit adapter
    loaded, _ = load_exported(tmp_path / "merged")
    assert not quantized_weights(loaded)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, want, rtol=1e-5, atol=1e-5)


def test_feature_head_target_survives_export(store, tmp_path):
    """fone_head_target="feature" is saved with the export; the reloaded head decodes carry-aware, like the adapter."""
    case = Case("llama", "fone", False)
    model, ntok, config = trained(store, case, fone_head_target="feature")
    batch = prompt_batch(case, ntok)
    with torch.no_grad():
        want = model(**batch)
    want_text = generate(model, ntok, PROMPTS, max_new_tokens=6, return_dict=True)
    export_merged(model, ntok, tmp_path / "merged")
    loaded, loaded_ntok = load_exported(tmp_path / "merged")
    assert read_number_config(tmp_path / "merged")[0].fone_head_target == "feature"
    with torch.no_grad():
        got = loaded(**batch)
    torch.testing.assert_close(got.number_logits, want.number_logits, rtol=1e-5, atol=1e-5)
    got_text = generate(loaded, loaded_ntok, PROMPTS, max_new_tokens=6, return_dict=True)
    assert sum(len(n) for n in want_text.numbers) >= 2 and got_text.numbers == want_text.numbers


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_merge_and_unload_never_drops_the_number_modules_silently(store, family):
    """PEFT's merge_and_unload returns a plain model without the number modules: refused, naming export_merged;
    drop_numbers=True gives that plain model on purpose; an adapter without number modules merges as in PEFT."""
    case = Case(family, "fone", tie=False)
    model, ntok, _ = trained(store, case)
    with pytest.raises(ValueError, match=r"numadapter\.export_merged\(model, number_tokenizer, out_dir\)"):
        model.merge_and_unload()
    assert "default" in model.base_model.number_modules  # the refused call changed nothing
    plain = model.merge_and_unload(drop_numbers=True)
    assert not isinstance(plain, type(model)) and not hasattr(plain, "number_modules")
    digits, dtok, _ = trained(store, Case(family, "digits", tie=False), aggregate=False, aggregate_loss_lambda=1.0)
    batch = {k: v for k, v in dtok(PLAIN, padding=True, return_tensors="pt").items() if k != "number_texts"}
    if family == "t5":
        batch["decoder_input_ids"] = batch["input_ids"][:, :3]
    with torch.no_grad():
        want = digits(**batch).logits
        got = digits.merge_and_unload()(**batch).logits
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
