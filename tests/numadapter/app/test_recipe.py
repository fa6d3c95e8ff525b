"""numadapter.app.recipe: every YAML under recipes/ validates; headers, overrides, wrong keys and types are handled."""

from __future__ import annotations

import glob
import os
import re
import shlex

import pytest
import torch
import yaml
from helpers.paths import ROOT
from transformers import Seq2SeqTrainingArguments
from trl import SFTConfig

from numadapter.app.recipe import (
    DataSettings,
    ModelSettings,
    build_recipe,
    load_recipe,
    parse_overrides,
    validate_recipe,
)
from numadapter.config import NumberAdapterConfig
from numadapter.methods.xval.embedding import XValEmbedding
from numadapter.methods.xval.head import RegressionHead
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer

ALL_YAML = sorted(glob.glob(os.path.join(ROOT, "recipes", "**", "*.yaml"), recursive=True))
ACCELERATE = [p for p in ALL_YAML if os.sep + "accelerate" + os.sep in p]
RECIPES = [p for p in ALL_YAML if p not in ACCELERATE]
IDS = [os.path.relpath(p, ROOT) for p in RECIPES]
LLAMA = os.path.join(ROOT, "recipes", "llama", "fone_lora.yaml")


@pytest.fixture(autouse=True)
def in_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # recipe paths (DeepSpeed JSON) are relative to the repository root


def header(path: str) -> str:
    lines = []
    for line in open(path, encoding="utf-8"):
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return "\n".join(lines)


def test_the_required_recipes_exist():
    names = {os.path.relpath(p, ROOT) for p in RECIPES}
    assert {"recipes/llama/fone_lora.yaml", "recipes/granite/xval_lora.yaml", "recipes/t5/digits_ntl.yaml",
            "recipes/llama/fone_qlora.yaml", "recipes/llama/fone_lora_zero3.yaml"} <= names  # fmt: skip


@pytest.mark.parametrize("path", RECIPES, ids=IDS)
def test_recipe_validates(path):
    recipe = validate_recipe(path)
    assert isinstance(recipe.adapter, NumberAdapterConfig)
    data = yaml.safe_load(open(path))
    expected = Seq2SeqTrainingArguments if data["adapter"].get("task_type") == "SEQ_2_SEQ_LM" else SFTConfig
    args = recipe.training_args(bf16=False, fp16=False, deepspeed=None, use_cpu=True)
    assert type(args) is expected
    for key, value in data["training"].items():  # every YAML value reaches the dataclass
        if key == "report_to" and value == "none":
            assert args.report_to == []  # TrainingArguments' spelling of "none"
        elif key not in ("bf16", "deepspeed"):
            got = getattr(args, key)
            assert got == value or str(got) == str(value) or getattr(got, "value", None) == value, key
    assert recipe.adapter.encoding == data["adapter"]["encoding"] and recipe.adapter.r == data["adapter"]["r"]


@pytest.mark.parametrize("path", RECIPES, ids=IDS)
def test_recipe_header_says_what_how_and_an_override(path):
    text = header(path)
    relative = os.path.relpath(path, ROOT)
    for heading in ("Trains:", "Needs:", "Command", "Override example"):
        assert heading in text, f"{relative}: header lacks {heading!r}"
    assert f"numadapter train --config {relative}" in text or f"train --config {relative}" in text
    launches = re.findall(r"accelerate launch --config_file (\S+)", text)
    assert launches, f"{relative}: no accelerate launch command"
    for config in launches:
        assert config in {os.path.relpath(p, ROOT) for p in ACCELERATE}, config
    assert f"-m numadapter.app.cli train --config {relative}" in text
    # the override example is a real command whose overrides validate
    example = text.split("Override example", 1)[1].split("\n", 2)[1]
    tokens = shlex.split(example)
    overrides = [t for t in tokens if re.fullmatch(r"\w+\.\w+=\S*", t)]
    assert overrides, f"{relative}: the override example has no section.key=value"
    recipe = validate_recipe(path, overrides)
    for item in overrides:
        section, rest = item.split(".", 1)
        key, value = rest.split("=", 1)
        got = getattr(recipe.adapter, key) if section == "adapter" else (
            recipe.training[key] if section == "training" else getattr(getattr(recipe, section), key))  # fmt: skip
        assert str(got) == value or got == yaml.safe_load(value), item
    inline = [line for line in open(path) if not line.startswith("#") and " # " in line]
    assert len(inline) >= 8, f"{relative}: knobs need inline comments on their trade-offs"


@pytest.mark.parametrize("path", ACCELERATE, ids=[os.path.relpath(p, ROOT) for p in ACCELERATE])
def test_accelerate_configs_load_as_accelerate_configs(path):
    from accelerate.commands.config.config_args import load_config_from_file

    from numadapter.integrations.launch import load_deepspeed_config

    config = load_config_from_file(path)
    assert config.num_processes >= 1
    deepspeed_file = (config.deepspeed_config or {}).get("deepspeed_config_file")
    if deepspeed_file:
        load_deepspeed_config(deepspeed_file)


def test_unknown_training_key_lists_the_valid_keys():
    with pytest.raises(ValueError) as info:
        load_recipe(LLAMA, ["training.learning_rat=1e-4"])
    message = str(info.value)
    assert "unknown key `training.learning_rat`" in message and "SFTConfig" in message
    assert "Did you mean 'learning_rate'" in message
    assert "Valid keys:" in message and "per_device_train_batch_size" in message and "max_steps" in message


def test_unknown_adapter_and_settings_keys_list_the_valid_keys():
    with pytest.raises(ValueError) as info:
        load_recipe(LLAMA, ["adapter.encodng=xval"])
    assert "NumberAdapterConfig" in str(info.value) and "'encoding'" in str(info.value)
    assert "lora_alpha" in str(info.value) and "int_digits" in str(info.value)
    with pytest.raises(ValueError) as info:
        load_recipe(LLAMA, ["model.path=/x"])
    assert "ModelSettings" in str(info.value) and "name_or_path" in str(info.value)
    with pytest.raises(ValueError, match=r"unknown section 'modle'.*'model', 'data', 'adapter'"):
        load_recipe(LLAMA, ["modle.name_or_path=/x"])


def test_unknown_section_in_the_file_is_refused(tmp_path):
    data = yaml.safe_load(open(LLAMA))
    data["trainer"] = {"max_steps": 1}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=r"unknown recipe section\(s\) \['trainer'\]"):
        load_recipe(path)


def test_types_are_checked_and_numeric_strings_become_floats():
    with pytest.raises(ValueError, match=r"`training.max_steps` must be of type int.*'ten'"):
        load_recipe(LLAMA, ["training.max_steps=ten"])
    with pytest.raises(ValueError, match=r"`model.load_in_4bit` must be of type bool"):
        load_recipe(LLAMA, ["model.load_in_4bit=4"])
    recipe = load_recipe(LLAMA, ["training.learning_rate=2e-4", "adapter.r=8"])  # YAML 1.1 reads 2e-4 as a string
    assert recipe.training["learning_rate"] == 0.0002 and recipe.adapter.r == 8


def test_values_are_validated_by_the_dataclasses():
    with pytest.raises(ValueError, match=r"`adapter.encoding` must be one of \['fone', 'xval', 'digits'\], got 'wor"):
        load_recipe(LLAMA, ["adapter.encoding=words"])
    with pytest.raises(ValueError, match=r"`data.train`.*\['addition'\].*'multiplication'"):
        load_recipe(LLAMA, ["data.train=synthetic:multiplication"])
    with pytest.raises(ValueError, match=r"synthetic_min_digits` \(5\) must be <="):
        load_recipe(LLAMA, ["data.synthetic_min_digits=5", "data.synthetic_max_digits=4"])
    with pytest.raises(ValueError, match=r"`model.dtype` must be one of"):
        load_recipe(LLAMA, ["model.dtype=int4"])
    with pytest.raises(ValueError, match=r"`adapter.task_type` must be one of"):
        load_recipe(LLAMA, ["adapter.task_type=TOKEN_CLS"])


def test_overrides_parse_as_yaml():
    parsed = parse_overrides(["training.max_steps=5", "adapter.target_modules=[q_proj, v_proj]", "export.out_dir="])
    assert parsed == {"training": {"max_steps": 5}, "adapter": {"target_modules": ["q_proj", "v_proj"]},
                      "export": {"out_dir": None}}  # fmt: skip
    for bad in ("training.max_steps", "max_steps=5", "training.lr_scheduler_kwargs.min_lr=0"):
        with pytest.raises(ValueError, match="override"):
            parse_overrides([bad])


def test_deepspeed_config_is_validated():
    zero3 = os.path.join(ROOT, "recipes", "llama", "fone_lora_zero3.yaml")
    recipe = validate_recipe(zero3)
    assert recipe.training["deepspeed"] == "recipes/accelerate/deepspeed/zero3.json"
    with pytest.raises(ValueError, match=r"training.deepspeed.*does not exist"):
        validate_recipe(zero3, ["training.deepspeed=missing.json"])


def test_build_recipe_from_a_dict_matches_the_python_api():
    recipe = build_recipe({
        "model": {"name_or_path": "some/model"},
        "data": {"train": "train.jsonl"},
        "adapter": {"encoding": "digits", "task_type": "SEQ_2_SEQ_LM", "ntl_weight": 0.3, "r": 4},
        "training": {"output_dir": "out", "max_steps": 3},
    })  # fmt: skip
    assert recipe.seq2seq and recipe.output_dir == "out"
    assert recipe.model == ModelSettings(name_or_path="some/model")
    assert recipe.data == DataSettings(train="train.jsonl")
    assert recipe.adapter == NumberAdapterConfig(encoding="digits", task_type="SEQ_2_SEQ_LM", ntl_weight=0.3, r=4)
    with pytest.raises(ValueError, match="has no `training` section"):
        build_recipe({"model": {"name_or_path": "m"}, "data": {"train": "t.jsonl"}, "adapter": {"r": 4}})


def test_xval_recipe_carries_the_sign_in_the_value(tmp_path):
    """xVal (paper): the sign is part of the value, so "-3.5" reaches the embedding and the head's target signed."""
    config = load_recipe(os.path.join(ROOT, "recipes", "granite", "xval_lora.yaml")).adapter
    assert config.encoding == "xval" and config.sign_policy == "feature"
    ntok = NumberTokenizer(toy.build_tokenizer("llama3", tmp_path / "tok"), config)
    enc = ntok("it is -3.5 now", add_special_tokens=False)
    t = enc["input_ids"].index(ntok.num_token_id)
    assert "-" not in ntok.decode(enc["input_ids"][:t])  # the minus sign is inside [NUM], not a text token
    value = enc["num_values"][t]
    assert value == -3.5
    # embedding: z = (x - center) / scale, written into the [NUM] row signed
    z = (-3.5 - config.xval_center) / config.xval_scale
    assert z < 0
    embeds = torch.ones(1, 1, 4)
    module = XValEmbedding(4, config, form="multiplicative")
    out = module(embeds, torch.ones(1, 1), num_values=torch.tensor([[value]]))
    torch.testing.assert_close(out, embeds * z)
    # head: the regression target is the signed normalised value
    head = RegressionHead(4, config)
    target = head.normalize_targets(torch.tensor([value]))
    assert target.item() == pytest.approx(z) and target.item() < 0
