"""An encoding registered from outside the package goes the whole product path: save and load (PEFT and
`AutoPeftModelForCausalLM`), `numadapter.generate` and ``model.generate``, merged export and reload, recipes and the
CLI; on T5 one `NumberSeq2SeqTrainer` step, save and load, both generate paths and export. The toy
method is `helpers.toy_method.SignedDigitsMethod` ("signed_digits"); nothing here changes numadapter.

Every loader needs the method registered first; without it the error names the encoding and the fix.
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
import torch
import yaml
from helpers.adapter_cases import Store
from helpers.generation_cases import PROMPTS, encourage_numbers, fed_back
from helpers.toy_method import TOY, SignedDigitsMethod
from helpers.training_cases import arithmetic
from peft import AutoPeftModelForCausalLM, AutoPeftModelForSeq2SeqLM, PeftModel

from numadapter.app.cli import main
from numadapter.app.recipe import RecipeError, load_recipe
from numadapter.config import NumberAdapterConfig
from numadapter.export import export_merged, load_exported
from numadapter.generation import generate
from numadapter.generation.hf import numbers_of
from numadapter.mapping import get_peft_model
from numadapter.methods import known_methods, register_method, unregister_method
from numadapter.tokenization import NumberTokenizer

SETTINGS = dict(encoding=TOY, int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
                target_modules=["q_proj", "v_proj"], init_lora_weights=False)  # fmt: skip
TEXTS = ["It is 12.5 and 7.", "Add 3 to 40 =", "no numbers here"]
HEAD_VALUE = 12.5  # the toy head is set to a constant output: it reads back as this number


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("outside")))


@pytest.fixture
def toy():
    method = register_method(TOY, SignedDigitsMethod(), replace=True)
    yield method
    if TOY in known_methods():
        unregister_method(TOY)


def unregistered():
    """Unregisters the toy method; the caller re-registers it (the `toy` fixture tolerates both)."""
    unregister_method(TOY)
    assert TOY not in known_methods()


def build(store: Store, constant_head: bool = False):
    """A toy-method model (random LoRA, number modules moved off their init) and its `NumberTokenizer`."""
    torch.manual_seed(0)
    tokenizer = store.tokenizer("digits")
    model = get_peft_model(store.base("llama", tie=False, hidden=32), NumberAdapterConfig(**SETTINGS),
                           tokenizer=tokenizer).eval()  # fmt: skip
    modules = model.base_model.number_modules["default"]
    with torch.no_grad():
        for param in modules.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    if constant_head:
        set_constant_head(model)
    return model, NumberTokenizer(tokenizer, model.peft_config["default"])


def outputs(model, ntok) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits ``[B, T, V]`` and the toy head's values ``[B, T]`` on `TEXTS`."""
    batch = ntok(TEXTS, padding=True, return_tensors="pt")
    batch.pop("number_texts", None)
    with torch.no_grad():
        out = model(**batch)
    return out.logits, out.number_values


def test_save_and_load_give_the_same_outputs(toy, store, tmp_path):
    model, ntok = build(store)
    logits, values = outputs(model, ntok)
    assert values.abs().sum() > 0 and values.dtype == torch.float64  # the toy head's report reached the output
    model.save_pretrained(tmp_path / "adapter")
    ntok.save_pretrained(tmp_path / "adapter")

    loaded = PeftModel.from_pretrained(store.base("llama", tie=False, hidden=32), tmp_path / "adapter").eval()
    assert loaded.peft_config["default"].encoding == TOY
    assert type(loaded.base_model.number_modules["default"].head).__name__ == "SignedDigitsHead"
    for got, want in zip(outputs(loaded, NumberTokenizer.from_pretrained(tmp_path / "adapter")), (logits, values)):
        assert torch.equal(got, want)
    auto = AutoPeftModelForCausalLM.from_pretrained(tmp_path / "adapter").eval()
    for got, want in zip(outputs(auto, ntok), (logits, values)):
        assert torch.equal(got, want)


def test_loading_without_the_registration_names_the_method_and_the_fix(toy, store, tmp_path):
    model, ntok = build(store)
    model.save_pretrained(tmp_path / "adapter")
    ntok.save_pretrained(tmp_path / "adapter")
    unregistered()
    fix = rf"got '{TOY}'.*register_method\(name, method\).*before"
    with pytest.raises(ValueError, match=fix):
        PeftModel.from_pretrained(store.base("llama", tie=False, hidden=32), tmp_path / "adapter")
    with pytest.raises(ValueError, match=fix):
        NumberTokenizer.from_pretrained(tmp_path / "adapter")


def test_generate_reads_numbers_out_with_the_toy_method(toy, store):
    model, ntok = build(store, constant_head=True)
    encourage_numbers(model, ntok)
    ref = generate(model, ntok, PROMPTS[:6], max_new_tokens=8, return_dict=True)
    numbers = [number for row in ref.numbers for number in row]
    assert numbers and fed_back(ref, ntok.num_token_id) >= 1  # generated, and fed back as input
    assert set(numbers) == {HEAD_VALUE}  # the toy read-out's value ...
    for completion, row in zip(ref.completions, ref.numbers):
        assert completion.count("12.5") >= len(row)  # ... and its text, "12.5" (not 12.50 or 0012.50)

    batch = ntok(PROMPTS[:6], padding=True, padding_side="left", return_tensors="pt")  # the Hugging Face habit
    out = model.generate(**batch, max_new_tokens=8)
    start = batch["input_ids"].shape[1]
    for row, ids in enumerate(ref.token_ids):
        assert out[row, start : start + len(ids)].tolist() == ids
    assert numbers_of(out).numbers == ref.numbers
    assert ntok.batch_decode(out) == [prompt + completion for prompt, completion in zip(PROMPTS[:6], ref.completions)]


def test_export_and_load_exported_give_the_same_outputs(toy, store, tmp_path):
    model, ntok = build(store, constant_head=True)
    encourage_numbers(model, ntok)
    logits, values = outputs(model, ntok)
    ref = generate(model, ntok, PROMPTS[:6], max_new_tokens=8, return_dict=True)
    export_merged(model, ntok, tmp_path / "export")

    loaded, loaded_ntok = load_exported(tmp_path / "export")
    assert loaded.peft_config["default"].encoding == TOY
    got_logits, got_values = outputs(loaded, loaded_ntok)
    assert torch.allclose(got_logits, logits, atol=1e-5, rtol=0)  # LoRA merged into the weights: rounding only
    assert torch.allclose(got_values, values, atol=1e-6, rtol=0)
    again = generate(loaded, loaded_ntok, PROMPTS[:6], max_new_tokens=8, return_dict=True)
    assert again.numbers == ref.numbers and again.completions == ref.completions

    unregistered()
    with pytest.raises(ValueError, match=rf"got '{TOY}'.*register_method\(name, method\).*before"):
        load_exported(tmp_path / "export")


def recipe_file(tmp_path, store, encoding: str = TOY) -> str:
    base, tokenizer = store.base_path("llama", False, hidden=32), store.tokenizer("digits").name_or_path
    data = {
        "model": {"name_or_path": base, "tokenizer": tokenizer, "dtype": "float32"},
        "data": {"train": "synthetic:addition", "synthetic_examples": 16},
        "adapter": {"encoding": encoding, "int_digits": 4, "frac_digits": 2, "r": 4, "target_modules": ["q_proj"]},
        "training": {"output_dir": str(tmp_path / "out"), "max_steps": 1, "per_device_train_batch_size": 4,
                     "use_cpu": True, "bf16": False, "report_to": "none"},
    }  # fmt: skip
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_recipe_names_a_registered_encoding(toy, store, tmp_path):
    recipe = load_recipe(recipe_file(tmp_path, store))
    assert recipe.adapter.encoding == TOY and recipe.adapter.int_digits == 4
    with pytest.raises(RecipeError, match=rf"one of \['fone', 'xval', 'digits', '{TOY}'\], got 'words'"):
        load_recipe(recipe_file(tmp_path, store, encoding="words"))  # the registered name is listed too
    with pytest.raises(ValueError, match=rf"one of \['fone', 'xval', 'digits', '{TOY}'\], got 'words'"):
        NumberAdapterConfig(encoding="words")
    unregistered()
    known = r"\['fone', 'xval', 'digits'\]"
    message = rf"toy.yaml: `adapter.encoding` must be one of {known}, got '{TOY}'.*register_method.*--import MODULE"
    with pytest.raises(RecipeError, match=message):
        load_recipe(recipe_file(tmp_path, store))
    with pytest.raises(RecipeError, match=rf"must be one of {known}, got 'words'.*register_method"):
        load_recipe(recipe_file(tmp_path, store, encoding="words"))


def write_registering_module(tmp_path, module: str, monkeypatch) -> None:
    """Writes `module` (it registers the toy method on import) under `tmp_path`, importable and not yet imported."""
    (tmp_path / f"{module}.py").write_text(
        "from numadapter.methods import register_method\n"
        "from helpers.toy_method import TOY, SignedDigitsMethod\n\n"
        "register_method(TOY, SignedDigitsMethod())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)


def test_the_cli_imports_the_module_that_registers_the_method(toy, store, tmp_path, monkeypatch, capsys):
    unregistered()
    path = recipe_file(tmp_path, store)
    assert main(["validate", "--config", path]) == 2
    assert "--import MODULE" in capsys.readouterr().err  # the CLI's own fix is named
    module = "outside_method_for_cli"
    write_registering_module(tmp_path, module, monkeypatch)
    assert main(["validate", "--import", module, "--config", path]) == 0
    assert f"{os.path.basename(path)}: valid" in capsys.readouterr().out
    assert TOY in known_methods()
    assert main(["train", "--import", module, "--config", path]) == 0  # one step, the adapter saved
    saved = json.loads((tmp_path / "out" / "adapter_config.json").read_text())
    assert saved["encoding"] == TOY and (tmp_path / "out" / "adapter_model.safetensors").is_file()
    sys.modules.pop(module, None)
    assert main(["validate", "--import", "no_such_module_xyz", "--config", path]) == 2
    assert "--import no_such_module_xyz" in capsys.readouterr().err


T5_SETTINGS = {**SETTINGS, "target_modules": ["q", "v"]}


def build_t5(store: Store):
    """A toy-method T5 (random LoRA, number modules moved off their init) and its `NumberTokenizer`."""
    torch.manual_seed(0)
    tokenizer = store.tokenizer("t5")
    model = get_peft_model(store.base("t5", tie=False, hidden=32), NumberAdapterConfig(**T5_SETTINGS),
                           tokenizer=tokenizer)  # fmt: skip
    with torch.no_grad():
        for param in model.base_model.number_modules["default"].parameters():
            param.add_(torch.randn_like(param) * 0.1)
    return model, NumberTokenizer(tokenizer, model.peft_config["default"])


def set_constant_head(model) -> None:
    """Sets the toy head's output to HEAD_VALUE / 10^int_digits whatever the hidden state."""
    head = model.base_model.number_modules["default"].head
    with torch.no_grad():
        head.linear.weight.zero_()
        head.linear.bias.fill_(HEAD_VALUE / 10 ** SETTINGS["int_digits"])


def same_generation(model, ntok, ref) -> None:
    """``model.generate`` on a T5 (the decoder starts at position 1) gives `ref`'s ids, numbers and texts."""
    batch = ntok(PROMPTS[:6], padding=True, return_tensors="pt")
    out = model.generate(**batch, max_new_tokens=8)
    for row, ids in enumerate(ref.token_ids):
        assert out[row, 1 : 1 + len(ids)].tolist() == ids
    assert numbers_of(out).numbers == ref.numbers
    assert ntok.batch_decode(out) == ref.completions


def test_t5_trains_saves_loads_generates_and_exports_with_the_toy_method(toy, store, tmp_path):
    from transformers import Seq2SeqTrainingArguments

    from numadapter import NumberSeq2SeqTrainer

    model, ntok = build_t5(store)
    head = {name: p.detach().clone() for name, p in model.base_model.number_modules["default"].named_parameters()}
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=4,
                                    learning_rate=1e-2, logging_steps=1, report_to=[], save_strategy="no",
                                    disable_tqdm=True, use_cpu=True, seed=0)  # fmt: skip
    trainer = NumberSeq2SeqTrainer(model=model, args=args, train_dataset=arithmetic(8), processing_class=ntok)
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == 1 and logged[0]["number_loss"] > 0  # the toy head loss reached the T5 training loss
    for name, param in model.base_model.number_modules["default"].named_parameters():
        assert not torch.equal(param, head[name]), name  # one step moved every toy module weight

    model.eval()
    set_constant_head(model)
    encourage_numbers(model, ntok)
    ref = generate(model, ntok, PROMPTS[:6], max_new_tokens=8, return_dict=True)
    numbers = [number for row in ref.numbers for number in row]
    assert numbers and fed_back(ref, ntok.num_token_id) >= 1  # generated, and fed back into the decoder
    assert set(numbers) == {HEAD_VALUE}
    for completion, row in zip(ref.completions, ref.numbers):
        assert completion.count("12.5") >= len(row)
    same_generation(model, ntok, ref)

    model.save_pretrained(tmp_path / "adapter")
    ntok.save_pretrained(tmp_path / "adapter")
    loaded = PeftModel.from_pretrained(store.base("t5", tie=False, hidden=32), tmp_path / "adapter").eval()
    with pytest.raises(ValueError, match=r"resized from \d+ to \d+ rows.*AutoPeftModelForSeq2SeqLM.*PeftModel\."):
        AutoPeftModelForSeq2SeqLM.from_pretrained(tmp_path / "adapter")  # its resize would tie T5 v1.1's own LM head
    loaded_ntok = NumberTokenizer.from_pretrained(tmp_path / "adapter")
    export_merged(model, ntok, tmp_path / "export")
    exported, exported_ntok = load_exported(tmp_path / "export")
    for candidate, tok in ((loaded, loaded_ntok), (exported, exported_ntok)):
        assert candidate.peft_config["default"].encoding == TOY
        again = generate(candidate, tok, PROMPTS[:6], max_new_tokens=8, return_dict=True)
        assert again.numbers == ref.numbers and again.completions == ref.completions
        same_generation(candidate, tok, ref)


def test_cli_eval_scores_an_adapter_trained_with_the_toy_method(toy, store, tmp_path, monkeypatch, capsys):
    """``numadapter train`` then ``numadapter eval`` (both with ``--import``); the adapter's head is set to read 12.5
    between the two, so the eval's answers hold the toy read-out and its exact match is checkable by hand."""
    path, module = recipe_file(tmp_path, store), "outside_method_for_eval"
    write_registering_module(tmp_path, module, monkeypatch)
    unregistered()  # the imported module registers it
    assert main(["train", "--import", module, "--config", path]) == 0
    run = tmp_path / "out"
    model = PeftModel.from_pretrained(store.base("llama", tie=False, hidden=32), run).eval()
    ntok = NumberTokenizer.from_pretrained(run)
    set_constant_head(model)
    encourage_numbers(model, ntok)
    model.save_pretrained(run)
    ref = generate(model, ntok, PROMPTS[:6], max_new_tokens=8, return_dict=True)
    assert sum(map(len, ref.numbers)) >= 1 and {n for row in ref.numbers for n in row} == {HEAD_VALUE}

    data = tmp_path / "eval.jsonl"
    data.write_text("".join(json.dumps({"prompt": p, "completion": " It is 12.5."}) + "\n" for p in PROMPTS[:6]))
    unregistered()
    sys.modules.pop(module, None)
    results = tmp_path / "eval.json"
    settings = [f"data.eval={data}", "eval.max_new_tokens=8", "eval.batch_size=6", f"eval.output_file={results}"]
    assert main(["eval", "--import", module, "--config", path, *settings]) == 0
    assert TOY in known_methods()  # registered by the imported module
    saved = json.loads(results.read_text())
    assert [sample["prediction"] for sample in saved["samples"]] == ref.completions
    last = [re.findall(r"-?\d+(?:\.\d+)?", text)[-1:] for text in ref.completions]  # the last number, by hand
    right = sum(found == ["12.5"] for found in last)
    assert right >= 1 and saved["metrics"]["exact_match"] == right / 6
    assert saved["metrics"]["answered"] == sum(bool(found) for found in last)
    assert "eval: 6 examples" in capsys.readouterr().out
