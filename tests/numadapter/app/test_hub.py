"""numadapter.app.hub.check_model_sources on local directories: config.json, GGUF-only directories, GGUF files."""

from __future__ import annotations

import pytest

from numadapter.app.hub import check_model_sources, model_sources
from numadapter.app.recipe import ModelSettings, RecipeError


def folder_with(tmp_path, name: str, files: list[str]) -> str:
    folder = tmp_path / name
    folder.mkdir()
    for file in files:
        (folder / file).write_bytes(b"GGUF" if file.endswith(".gguf") else b"{}")
    return str(folder)


def test_a_gguf_only_directory_names_model_gguf_file_and_every_file(tmp_path):
    folder = folder_with(tmp_path, "two", ["b.Q8_0.gguf", "a.Q4_1.gguf", "README.md"])
    with pytest.raises(RecipeError) as info:
        check_model_sources(model_sources(ModelSettings(name_or_path=folder)))
    message = str(info.value)
    assert "holds no config.json, only GGUF (a.Q4_1.gguf, b.Q8_0.gguf)" in message
    assert "set model.gguf_file=a.Q4_1.gguf (or another of them)" in message
    check_model_sources(model_sources(ModelSettings(name_or_path=folder, gguf_file="b.Q8_0.gguf")))  # accepted


def test_a_directory_without_config_json_is_refused(tmp_path):
    folder = folder_with(tmp_path, "empty", ["tokenizer.json"])
    with pytest.raises(RecipeError, match=r"model.name_or_path='.*empty' has no config.json"):
        check_model_sources(model_sources(ModelSettings(name_or_path=folder)))
    check_model_sources(model_sources(ModelSettings(name_or_path=folder_with(tmp_path, "model", ["config.json"]))))


def test_gguf_file_outside_a_local_directory_and_a_gguf_only_tokenizer(tmp_path):
    with pytest.raises(RecipeError, match=r"model.gguf_file='m.gguf' needs model.name_or_path to be the local dir"):
        check_model_sources(model_sources(ModelSettings(name_or_path="org/repo", gguf_file="m.gguf")))
    empty = folder_with(tmp_path, "none", [])
    with pytest.raises(RecipeError, match=r"is not a file in .*: that directory holds no .gguf file"):
        check_model_sources(model_sources(ModelSettings(name_or_path=empty, gguf_file="m.gguf")))
    model = folder_with(tmp_path, "model", ["config.json"])
    gguf = folder_with(tmp_path, "gguf", ["m.gguf"])
    with pytest.raises(RecipeError, match=r"model.tokenizer='.*gguf' holds only GGUF \(m.gguf\): leave model.token"):
        check_model_sources(model_sources(ModelSettings(name_or_path=model, tokenizer=gguf)))
