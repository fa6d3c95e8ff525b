"""numadapter.app.commands: ``numadapter validate`` refuses what ``train`` refuses on this machine (both run
`check_runnable`), and a recipe loads a GGUF file (``model.gguf_file``, or a ``.gguf`` path as ``model.name_or_path``).

The GGUF is the real checkpoint's (`numadapter.checkpoints.smollm2_gguf`), linked into a directory of its own: a
directory that holds only a GGUF, as a user downloads one. Its conversion is the one `numadapter.smollm2_path` made, so
nothing is converted again here.
"""

from __future__ import annotations

import json
import os

import pytest
from helpers.paths import ROOT
from helpers.real import real_dir

from numadapter.app import cli
from numadapter.app.recipe import ModelSettings, RecipeError
from numadapter.checkpoints import SMOLLM2_FILE, smollm2_gguf

RECIPE = os.path.join(ROOT, "recipes", "llama", "fone_lora.yaml")
ONE_STEP = [
    "training.bf16=false", "training.use_cpu=true", "training.max_steps=1", "training.per_device_train_batch_size=2",
    "training.max_length=32", "training.save_strategy=no", "training.report_to=none", "training.disable_tqdm=true",
    "training.gradient_checkpointing=false", "data.synthetic_examples=2", "data.eval=null", "export.out_dir=null",
    "adapter.r=2", "adapter.target_modules=[q_proj]", "adapter.int_digits=4", "adapter.frac_digits=0",
]  # fmt: skip


@pytest.fixture
def gguf_dir(tmp_path) -> str:
    """A directory that holds only the real checkpoint's GGUF file (a link)."""
    folder = tmp_path / "gguf-only"
    folder.mkdir()
    os.symlink(smollm2_gguf(), folder / SMOLLM2_FILE)
    return str(folder)


def run(command: str, overrides: list[str], capsys) -> tuple[int, str]:
    """Exit status and the error line (after ``error: ``) of ``numadapter COMMAND --config RECIPE overrides``."""
    code = cli.main([command, "--config", RECIPE, *overrides])
    err = capsys.readouterr().err
    return code, err.split("error: ", 1)[1].strip() if "error: " in err else ""


REFUSED = {
    "bf16-on-cpu": (["training.bf16=true", "training.use_cpu=false"], "`training.bf16=true` needs a GPU with bf16"),
    "gguf-only-directory": (["model.name_or_path={gguf}"], f"set model.gguf_file={SMOLLM2_FILE}"),
    "gguf-file-missing": (["model.name_or_path={tmp}/missing.gguf"], "model.gguf_file='missing.gguf' is not a file"),
    "gguf-file-misnamed": (["model.name_or_path={gguf}", "model.gguf_file=other.gguf"], f"={SMOLLM2_FILE}"),
    "data-file-missing": (["data.train=missing.jsonl"], "data file 'missing.jsonl' does not exist"),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_validate_refuses_what_train_refuses(case, gguf_dir, tmp_path, capsys, monkeypatch):
    import transformers.training_args
    import transformers.utils

    for module in (transformers.utils, transformers.training_args):  # a CPU-only machine, also on a GPU runner
        monkeypatch.setattr(module, "is_torch_bf16_gpu_available", lambda: False)
    changes, expected = REFUSED[case]
    overrides = [f"model.name_or_path={real_dir()}", f"training.output_dir={tmp_path / 'out'}", *ONE_STEP]
    overrides += [item.format(gguf=gguf_dir, tmp=tmp_path) for item in changes]
    validated, validate_error = run("validate", overrides, capsys)
    trained, train_error = run("train", overrides, capsys)
    assert (validated, trained) == (2, 2)
    assert expected in validate_error
    assert validate_error == train_error  # one check, one message
    assert not (tmp_path / "out").exists()  # refused before anything was loaded or written
    assert cli.main(["validate", "--portable", "--config", RECIPE, *overrides]) == 0  # the recipe itself is fine


def test_gguf_file_as_name_or_path_validates_and_trains(gguf_dir, tmp_path, capsys):
    out = tmp_path / "out"
    overrides = [f"model.name_or_path={os.path.join(gguf_dir, SMOLLM2_FILE)}", f"training.output_dir={out}", *ONE_STEP]
    assert run("validate", overrides, capsys) == (0, "")
    assert cli.main(["train", "--config", RECIPE, *overrides]) == 0
    saved = json.loads((out / "adapter_config.json").read_text())
    assert saved["base_model_name_or_path"] == real_dir()  # trained on the cached float32 conversion
    assert (out / "adapter_model.safetensors").is_file() and (out / "number_tokenizer_config.json").is_file()


def test_gguf_file_key_and_gguf_path_are_one_setting(tmp_path):
    by_key = ModelSettings(name_or_path="/models/smol", gguf_file="smol.Q4.gguf")
    assert ModelSettings(name_or_path="/models/smol/smol.Q4.gguf") == by_key
    assert ModelSettings(name_or_path="smol.Q4.GGUF").name_or_path == "."
    with pytest.raises(RecipeError, match=r"`model.gguf_file` is set too \('b.gguf'\): set model.name_or_path to the"):
        ModelSettings(name_or_path="/models/a.gguf", gguf_file="b.gguf")
    with pytest.raises(RecipeError, match=r"`model.gguf_file` must be the name of a .gguf file, got 'model.bin'"):
        ModelSettings(name_or_path="/models", gguf_file="model.bin")


def test_resolve_model_loads_from_the_cached_conversion(gguf_dir):
    from numadapter.app.commands import resolve_model

    plain = ModelSettings(name_or_path=real_dir(), dtype="float32")
    assert resolve_model(plain) is plain
    resolved = resolve_model(ModelSettings(name_or_path=gguf_dir, gguf_file=SMOLLM2_FILE, dtype="float32"))
    assert resolved == plain  # the same directory smollm2_path converted to: not converted again
