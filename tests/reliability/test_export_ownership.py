"""`export_merged` owns its directory, and `load_exported` names the damaged file (issue 16, item 3)."""

from __future__ import annotations

import hashlib
import json
import os

import peft
import pytest
import torch
from helpers.adapter_cases import Case, build, make_batch
from helpers.damage import flip_byte

from numadapter.export import NUMBER_CONFIG_NAME, export_merged, load_exported

CASE = Case("llama", "fone", tie=False)


def adapter(store, seed: int):
    """A FoNE adapter with random (non-zero) LoRA, different per seed."""
    model, ntok, config = build(store, CASE, init_lora_weights=False, lora_dropout=0.0)
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name or "number_modules" in name:
                param.add_(0.1 * torch.randn_like(param))
    return model.eval(), ntok


def logits(model, ntok) -> torch.Tensor:
    batch = make_batch(CASE, ntok)
    batch.pop("labels")
    with torch.no_grad():
        return model(**batch).logits


def digest(directory: str) -> dict[str, str]:
    return {
        name: hashlib.sha256(open(os.path.join(directory, name), "rb").read()).hexdigest()
        for name in sorted(os.listdir(directory))
    }


@pytest.fixture(scope="module")
def exported(store, tmp_path_factory):
    """``(path, logits)`` of one export, shared read-only (tests copy it before damaging)."""
    model, ntok = adapter(store, seed=1)
    path = str(tmp_path_factory.mktemp("export") / "merged")
    export_merged(model, ntok, path)
    return path, logits(model, ntok)


def test_sharded_export_over_an_unsharded_one_leaves_no_stale_weights(store, tmp_path):
    out = str(tmp_path / "merged")
    first, ntok = adapter(store, seed=1)
    export_merged(first, ntok, out)
    assert os.path.isfile(os.path.join(out, "model.safetensors"))
    second, ntok = adapter(store, seed=2)
    export_merged(second, ntok, out, max_shard_size="60KB")
    names = os.listdir(out)
    assert "model.safetensors" not in names and "model.safetensors.index.json" in names
    assert len([n for n in names if n.startswith("model-")]) > 1
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no staging directory left behind
    loaded, loaded_ntok = load_exported(out)
    torch.testing.assert_close(logits(loaded, loaded_ntok), logits(second, ntok), atol=1e-5, rtol=0)


def test_export_into_the_base_model_directory_is_refused(store, tmp_path):
    model, ntok = adapter(store, seed=1)
    base_dir = store.base_path("llama", False)
    before = digest(base_dir)
    with pytest.raises(ValueError, match=rf"refusing to export into '{base_dir}': it is the base model's directory"):
        export_merged(model, ntok, base_dir)
    assert digest(base_dir) == before
    # the adapter still loads onto the untouched base and gives the adapter's logits (LoRA applied once)
    model.save_pretrained(str(tmp_path / "adapter"))
    reloaded = peft.PeftModel.from_pretrained(store.base("llama", False), str(tmp_path / "adapter")).eval()
    torch.testing.assert_close(logits(reloaded, ntok), logits(model, ntok), atol=1e-5, rtol=0)


def test_export_into_a_foreign_non_empty_directory_is_refused(store, tmp_path):
    model, ntok = adapter(store, seed=1)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"holds files that are not a numadapter export \(\['notes.txt'\]\)"):
        export_merged(model, ntok, str(tmp_path))
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_a_failed_export_keeps_the_earlier_export_whole(store, exported, tmp_path, monkeypatch):
    import shutil

    out = str(tmp_path / "merged")
    shutil.copytree(exported[0], out)
    before = digest(out)
    model, ntok = adapter(store, seed=2)

    def crash(*args, **kwargs):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(type(ntok), "save_pretrained", crash)
    with pytest.raises(OSError, match="simulated"):
        export_merged(model, ntok, out)
    assert digest(out) == before and os.listdir(tmp_path) == ["merged"]


def damaged_copy(exported, tmp_path, damage) -> str:
    import shutil

    out = str(tmp_path / "merged")
    shutil.copytree(exported[0], out)
    damage(out)
    return out


def truncate(path: str) -> None:
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])


@pytest.mark.parametrize(
    "damage,error,match",
    [
        (lambda d: os.remove(os.path.join(d, "config.json")), FileNotFoundError, r"incomplete: \['config.json'\]"),
        (lambda d: os.remove(os.path.join(d, "tokenizer.json")), FileNotFoundError, r"\['tokenizer.json'\] missing"),
        (lambda d: truncate(os.path.join(d, "model.safetensors")), ValueError, r"model.safetensors is damaged: it is"),
        (lambda d: truncate(os.path.join(d, "tokenizer.json")), ValueError, r"tokenizer.json is not valid JSON"),
        (lambda d: truncate(os.path.join(d, NUMBER_CONFIG_NAME)), ValueError, r"number_config.json is not valid JSON"),
        (
            lambda d: open(os.path.join(d, "pytorch_model.bin"), "wb").write(b"old"),
            ValueError,
            r"weight files that this export did not write: \['pytorch_model.bin'\]",
        ),
    ],
    ids=["no-config", "no-tokenizer", "truncated-weights", "truncated-tokenizer", "truncated-number-config", "stale"],
)
def test_load_exported_names_the_damaged_file(exported, tmp_path, damage, error, match):
    out = damaged_copy(exported, tmp_path, damage)
    with pytest.raises(error, match=match) as info:
        load_exported(out)
    assert out in str(info.value) and "export again" in str(info.value)


def test_load_exported_checks_the_settings_stamp(exported, tmp_path):
    def edit(directory):
        file = os.path.join(directory, NUMBER_CONFIG_NAME)
        info = json.load(open(file))
        info["number_config"]["fone_head_target"] = "digit"  # saved: the default, 'feature'
        info["number_config"]["fone_head_input"] = "linear"  # which the paper's head needs (saved: 'context')
        json.dump(info, open(file, "w"))

    out = damaged_copy(exported, tmp_path, edit)
    with pytest.raises(ValueError, match=r"fone_head_target: the config says 'digit', the saved tensors .* 'feature'"):
        load_exported(out)


def test_a_flipped_byte_in_the_number_modules_is_refused(exported, tmp_path):
    key = "head.proj.weight"
    out = damaged_copy(exported, tmp_path, lambda d: flip_byte(os.path.join(d, "number_modules.safetensors"), key, 3))
    with pytest.raises(ValueError) as info:
        load_exported(out)
    message = str(info.value)
    assert f"{os.path.join(out, 'number_modules.safetensors')} (with the rows of the model weights)" in message
    assert f"{key}: its bytes changed since it was saved" in message and message.count("bytes changed") == 1


def test_a_flipped_byte_in_a_written_row_is_refused(exported, tmp_path):
    """The [NUM] row numadapter wrote into the merged embedding (model.safetensors) is digested too."""
    info = json.load(open(os.path.join(exported[0], NUMBER_CONFIG_NAME)))
    num_id, eos_id = info["number_config"]["num_token_id"], info["number_config"]["eos_token_id"]
    hidden = info["number_config"]["base_hidden_size"]
    key = "model.embed_tokens.weight"
    out = damaged_copy(
        exported, tmp_path, lambda d: flip_byte(os.path.join(d, "model.safetensors"), key, num_id * hidden)
    )
    with pytest.raises(ValueError, match=rf"{key}\[{num_id}, {eos_id}\]: its bytes changed since it was saved"):
        load_exported(out)
    model, _ = load_exported(out, dtype="bfloat16")  # another dtype: the rows cannot be compared, the modules are
    assert model.get_base_model().dtype == torch.bfloat16


def test_untouched_export_loads(exported):
    path, expected = exported
    model, ntok = load_exported(path)
    torch.testing.assert_close(logits(model, ntok), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("target", ["adapter", "base"])
def test_export_checkpoint_refuses_the_adapter_and_base_directories(store, fone_adapter, target):
    from numadapter.export import export_checkpoint

    _, adapter_dir, _ = fone_adapter
    base_dir = store.base_path("llama", False)
    out = adapter_dir if target == "adapter" else base_dir
    before = digest(out)
    what = "the adapter's directory" if target == "adapter" else "the base model's directory"
    with pytest.raises(ValueError, match=rf"refusing to export into '{out}': it is {what}"):
        export_checkpoint(adapter_dir, out, base=base_dir)
    assert digest(out) == before


# -- a config.json that parses but is wrong ------------------------------------------------------------------------
def edit_config(change):
    """A damage: `change(config dict)` applied to the export's config.json (a list it returns replaces it)."""

    def damage(directory):
        file = os.path.join(directory, "config.json")
        config = json.load(open(file))
        result = change(config)
        config = result if isinstance(result, list) else config
        json.dump(config, open(file, "w"))

    return damage


def bigger(field: str, by: int = 1):
    return edit_config(lambda c: c.update({field: c[field] + by}))


CONFIG_EDITS = {
    "model-type-gpt2": (edit_config(lambda c: c.update(model_type="gpt2")),
                        r"config.json has model_type='gpt2', but the export wrote 'numadapter-llama' \(the weights "
                        r"are those of a 'llama' model"),
    "model-type-mistral": (edit_config(lambda c: c.update(model_type="mistral")),
                           r"model_type='mistral', but the export wrote 'numadapter-llama'"),
    "model-type-unknown": (edit_config(lambda c: c.update(model_type="llama9")),
                           r"model_type='llama9', which transformers .* does not know \(the export wrote "
                           r"'numadapter-llama'\)"),
    "no-model-type": (edit_config(lambda c: c.pop("model_type")), r"has no `model_type` field"),
    "not-an-object": (edit_config(lambda c: [c]), r"config.json holds a JSON list, not a model config"),
    "hidden-size": (bigger("hidden_size", 64),
                    r"does not describe the saved weights: \d+ tensors have other shapes \(lm_head.weight is "
                    r"\[\d+, 64\] in the weights but \[\d+, 128\] for config.json.*hidden_size=128 \(exported 64\)"),
    "vocab-size": (bigger("vocab_size", 5),
                   r"2 tensors have other shapes \(lm_head.weight .*, model.embed_tokens.weight .*\)\. "
                   r".*vocab_size=\d+ \(exported \d+\)"),
    "no-hidden-size": (edit_config(lambda c: c.pop("hidden_size")),
                       r"\[\d+, 64\] in the weights but \[\d+, 4096\] .*hidden_size is missing \(exported 64\)"),
    "intermediate-size": (bigger("intermediate_size"),
                          r"tensors have other shapes \(model.layers.0.mlp.down_proj.weight is \[64, (\d+)\] in the "
                          r"weights but \[64, (?!\1)\d+\]"),
    "more-layers": (bigger("num_hidden_layers"),
                    r"tensors of that model are not in the weights and would stay random \(model.layers.2.input_lay"),
    "fewer-layers": (bigger("num_hidden_layers", -1),
                     r"saved tensors have no place in that model and would be ignored \(model.layers.1.input_lay"),
}  # fmt: skip


@pytest.mark.parametrize("edit", list(CONFIG_EDITS))
def test_load_exported_names_a_wrong_config_json(exported, tmp_path, edit):
    damage, match = CONFIG_EDITS[edit]
    out = damaged_copy(exported, tmp_path, damage)
    with pytest.raises(ValueError, match=match) as info:
        load_exported(out)
    message = str(info.value)
    assert message.startswith(os.path.join(out, "config.json")), message
    assert "restore config.json from a copy of the export, or export again with numadapter.export_merged" in message


def forget_the_recorded_config(directory):
    """As an export written before numadapter recorded its config.json in number_config.json."""
    file = os.path.join(directory, NUMBER_CONFIG_NAME)
    info = json.load(open(file))
    del info["model_config"]
    json.dump(info, open(file, "w"))


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda c: c.update(model_type="gpt2"), r"tensors of that model are not in the weights .*\("
         r"transformer.h.0.*saved tensors have no place in that model .*\(model.embed_tokens.weight"),
        (lambda c: c.update(hidden_size=128), r"\[\d+, 64\] in the weights but \[\d+, 128\] for config.json"),
    ],
    ids=["model-type", "hidden-size"],
)  # fmt: skip
def test_an_older_export_without_a_recorded_config_is_checked_against_its_weights(exported, tmp_path, change, match):
    def damage(directory):
        forget_the_recorded_config(directory)
        edit_config(change)(directory)

    out = damaged_copy(exported, tmp_path, damage)
    with pytest.raises(ValueError, match=match) as info:
        load_exported(out)
    assert "differs from the config the export wrote" not in str(info.value)  # nothing recorded to compare with
    untouched = damaged_copy(exported, tmp_path / "untouched", forget_the_recorded_config)
    model, ntok = load_exported(untouched)
    torch.testing.assert_close(logits(model, ntok), exported[1], atol=1e-5, rtol=0)


def test_a_harmless_config_edit_loads_with_a_warning_naming_it(exported, tmp_path):
    out = damaged_copy(exported, tmp_path, edit_config(lambda c: c.update(use_cache=False)))
    with pytest.warns(UserWarning, match=r"config.json differs from the config the export wrote \(use_cache=False"):
        model, ntok = load_exported(out)
    torch.testing.assert_close(logits(model, ntok), exported[1], atol=1e-5, rtol=0)
