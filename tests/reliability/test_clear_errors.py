"""Unclear errors of the outside tester's list that the other reliability files do not cover: each names the file."""

from __future__ import annotations

import os

import pytest
from helpers.adapter_cases import Case, build

from numadapter import NumberTokenizer
from numadapter.tokenization import CONFIG_NAME


def test_truncated_number_tokenizer_config_names_the_file(store, tmp_path):
    _, ntok, _ = build(store, Case("llama", "fone", tie=False))
    ntok.save_pretrained(str(tmp_path))
    file = os.path.join(str(tmp_path), CONFIG_NAME)
    text = open(file).read()
    open(file, "w").write(text[: len(text) // 2])
    with pytest.raises(ValueError, match=rf"{file} is not valid JSON .* NumberTokenizer.save_pretrained"):
        NumberTokenizer.from_pretrained(str(tmp_path))


def test_edited_num_token_id_is_refused_at_load_not_at_forward(store, adapter_copy):
    """The tester's forward error 'about padding' came from an edited num_token_id: loading now refuses it."""
    import json

    import peft

    file = os.path.join(adapter_copy, "adapter_config.json")
    data = json.load(open(file))
    data["num_token_id"] = data["num_token_id"] - 1
    json.dump(data, open(file, "w"))
    with pytest.raises(ValueError, match=r"num_token_id: the config says \d+, the saved tensors were trained with"):
        peft.PeftModel.from_pretrained(store.base("llama", False), adapter_copy)
