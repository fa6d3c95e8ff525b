"""Loading an adapter verifies its number tensors and the settings they were trained with (issue 16, item 3).

Each test damages a copy of a saved FoNE adapter the way the outside tester did, then loads it with
``peft.PeftModel.from_pretrained`` and expects an error naming the file, the tensors or fields, and the fix.
"""

from __future__ import annotations

import json
import os

import peft
import pytest
import torch
from helpers.damage import flip_byte
from safetensors.torch import load_file, save_file

WEIGHTS = "adapter_model.safetensors"


def edit_weights(path: str, edit) -> None:
    state = load_file(os.path.join(path, WEIGHTS))
    save_file(edit(dict(state)), os.path.join(path, WEIGHTS), metadata={"format": "pt"})


def edit_config(path: str, **changes) -> None:
    file = os.path.join(path, "adapter_config.json")
    data = json.load(open(file))
    data.update(changes)
    json.dump(data, open(file, "w"))


def load(store, path):
    return peft.PeftModel.from_pretrained(store.base("llama", False), path)


def test_untouched_adapter_loads_its_number_modules(store, adapter_copy):
    saved = load_file(os.path.join(adapter_copy, WEIGHTS))
    model = load(store, adapter_copy)
    loaded = model.base_model.number_modules["default"].state_dict()
    keys = [k for k in saved if ".number_modules." in k]
    assert len(keys) == 8  # FoNE: projection, digit head (+ sign head, + context coefficients), settings stamp
    for key in keys:
        if key.endswith("settings_stamp"):  # the saved one also holds the tensor digests, the model's the settings
            settings = json.loads(bytes(saved[key].tolist()))
            assert set(settings.pop("tensor_sha256")) == set(saved) - {key}
            assert json.loads(bytes(loaded["settings_stamp"].tolist())) == settings
        else:
            assert torch.equal(loaded[key.split("number_modules.", 1)[1]], saved[key]), key


@pytest.mark.parametrize("dropped", ["number_modules.", "number_modules.head.", "embed_tokens.token_adapter"])
def test_missing_number_tensors_are_refused(store, adapter_copy, dropped):
    edit_weights(adapter_copy, lambda state: {k: v for k, v in state.items() if dropped not in k})
    with pytest.raises(ValueError) as info:
        load(store, adapter_copy)
    message = str(info.value)
    assert f"{os.path.join(adapter_copy, WEIGHTS)} lacks" in message
    assert dropped in message and "randomly initialised" in message and "restore it" in message


def test_wrong_shape_is_refused(store, adapter_copy):
    key = "base_model.number_modules.head.proj.weight"
    edit_weights(adapter_copy, lambda state: {**state, key: state[key][:-1]})
    with pytest.raises(ValueError, match=rf"{key}: \(11, 64\) in the file, \(12, 64\) expected"):
        load(store, adapter_copy)


def test_edited_context_numbers_are_named(store, adapter_copy):
    """fone_context_numbers sizes the context head's coefficient read-out but is not stamped (adding a field to the
    stamp would change its length and break loading every adapter saved before): the shape error names it."""
    edit_config(adapter_copy, fone_context_numbers=2)  # saved with the default, 4
    with pytest.raises(ValueError) as info:
        load(store, adapter_copy)
    message = str(info.value)
    assert "number tensors of the wrong shape" in message and "head.coefficients" in message
    assert "fone_context_numbers" in message.split("Restore the settings")[1]


def test_extra_number_tensor_is_refused(store, adapter_copy):
    key = "base_model.number_modules.head.extra.weight"
    edit_weights(adapter_copy, lambda state: {**state, key: torch.zeros(2)})
    with pytest.raises(ValueError, match=rf"holds number tensors that .*adapter_config.json does not build: {key}"):
        load(store, adapter_copy)


@pytest.mark.parametrize(
    "field,value",
    [
        ("encoding", "xval"),
        ("fone_projection", "pad"),
        ("fone_head_target", "digit"),  # the default is "feature" (edited with fone_head_input="linear", which
        # the paper's head needs: alone, the config itself refuses 'digit' with the context head)
        ("fone_head_input", "slice"),
        ("resized_vocab_size", 999),
        ("num_token_id", 5),
        ("int_digits", 6),
        ("base_hidden_size", 32),  # before: blamed on the base model ("load it onto the base model it was trained
        ("original_vocab_size", 100),  # from"), which is the one in use
    ],
)
def test_edited_config_fields_are_checked_against_the_saved_tensors(store, fone_adapter, adapter_copy, field, value):
    _, _, config = fone_adapter
    also = {"fone_head_input": "linear"} if field == "fone_head_target" else {}
    edit_config(adapter_copy, **{field: value}, **also)
    with pytest.raises(ValueError) as info:
        load(store, adapter_copy)
    message = str(info.value)
    saved = getattr(config, field)
    assert f"{field}: the config says {value!r}, the saved tensors were trained with {saved!r}" in message
    assert os.path.join(adapter_copy, "adapter_config.json") in message and "Restore these values" in message


def test_peft_type_lora_is_refused(store, adapter_copy):
    edit_config(adapter_copy, peft_type="LORA")
    match = r"holds numadapter number modules .* peft_type='LORA'.*Restore \"peft_type\""
    with pytest.raises(ValueError, match=match):
        load(store, adapter_copy)


def test_deleted_weights_file_names_the_directory(store, adapter_copy):
    os.remove(os.path.join(adapter_copy, WEIGHTS))
    with pytest.raises(FileNotFoundError, match=rf"{adapter_copy}' holds adapter_config.json but no {WEIGHTS}"):
        load(store, adapter_copy)


def test_truncated_weights_file_is_named(store, adapter_copy):
    file = os.path.join(adapter_copy, WEIGHTS)
    data = open(file, "rb").read()
    open(file, "wb").write(data[: len(data) // 2])
    with pytest.raises(ValueError, match=rf"{file} cannot be read .* truncated or damaged"):
        load(store, adapter_copy)


def test_truncated_config_json_is_named(store, adapter_copy):
    file = os.path.join(adapter_copy, "adapter_config.json")
    text = open(file).read()
    open(file, "w").write(text[: len(text) // 2])
    with pytest.raises(ValueError, match=rf"{file} is not valid JSON .* truncated"):
        load(store, adapter_copy)


def test_adapter_saved_before_stamps_loads_with_a_warning(store, adapter_copy):
    edit_weights(adapter_copy, lambda state: {k: v for k, v in state.items() if "settings_stamp" not in k})
    with pytest.warns(UserWarning, match="without settings stamps"):
        model = load(store, adapter_copy)
    assert model.base_model.number_modules["default"].head is not None


@pytest.mark.parametrize(
    "key",
    [
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
        "base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight",
        "base_model.number_modules.head.proj.weight",
        "base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta",
    ],
)
def test_a_flipped_byte_is_refused_naming_the_file_and_tensor(store, adapter_copy, key):
    """Before: a flipped byte inside a lora_B tensor loaded without a word (safetensors has no checksum)."""
    file = os.path.join(adapter_copy, WEIGHTS)
    flip_byte(file, key, element=5)
    with pytest.raises(ValueError) as info:
        load(store, adapter_copy)
    message = str(info.value)
    assert f"{file} does not hold the tensors it was saved with" in message
    assert f"{key}: its bytes changed since it was saved" in message and message.count("bytes changed") == 1


def test_a_removed_or_added_lora_tensor_is_refused(store, adapter_copy):
    removed = "base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight"
    added = "base_model.model.model.layers.1.self_attn.k_proj.lora_A.weight"
    edit_weights(
        adapter_copy, lambda state: {**{k: v for k, v in state.items() if k != removed}, added: state[removed]}
    )
    with pytest.raises(ValueError) as info:
        load(store, adapter_copy)
    assert f"{removed}: missing (it was saved)" in str(info.value)
    assert f"{added}: not saved with the adapter" in str(info.value)


def test_resaved_adapter_gets_fresh_digests(store, adapter_copy, tmp_path):
    model = load(store, adapter_copy)
    with torch.no_grad():
        model.base_model.number_modules["default"].head.proj.weight.add_(1.0)
    model.save_pretrained(tmp_path / "again")
    again = load(store, str(tmp_path / "again"))
    assert torch.equal(
        again.base_model.number_modules["default"].head.proj.weight,
        model.base_model.number_modules["default"].head.proj.weight,
    )
