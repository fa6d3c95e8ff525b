"""The modules that moved into `numadapter.app` (and `numadapter.evaluation`) still import from their old paths.

Each old module is a thin file whose docstring says where the code lives now; importing it gives the moved module
itself (``numadapter.train``, which was split, re-exports the public names of both halves). ``python -m
numadapter.cli`` and the console script entry point of ``pyproject.toml`` run the moved `main`.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# old module -> the module it now hands out
MOVED = {
    "numadapter.cli": "numadapter.app.cli",
    "numadapter.recipe": "numadapter.app.recipe",
    "numadapter.quickstart": "numadapter.app.quickstart",
    "numadapter.toy": "numadapter.app.toy",
    "numadapter.hub": "numadapter.app.hub",
}
SPLIT = {"numadapter.train": ("numadapter.app.commands", "numadapter.evaluation")}


def source_of(module: str) -> str:
    return (ROOT / Path(*module.split("."))).with_suffix(".py").read_text(encoding="utf-8")


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_is_the_moved_module(old):
    new = importlib.import_module(MOVED[old])
    assert importlib.import_module(old) is new
    package, _, name = old.rpartition(".")
    assert getattr(importlib.import_module(package), name) is new  # ``from numadapter import toy`` too
    docstring = ast.get_docstring(ast.parse(source_of(old)))
    assert docstring.startswith(f"Moved to `{MOVED[old]}`"), docstring


def test_monkeypatching_the_old_path_reaches_the_moved_module(monkeypatch):
    from numadapter.app import quickstart

    monkeypatch.setattr("numadapter.quickstart.addition_examples", "patched")
    assert quickstart.addition_examples == "patched"


def test_split_train_module_reexports_both_halves():
    import numadapter.train as old

    docstring = ast.get_docstring(ast.parse(source_of("numadapter.train")))
    for new in SPLIT["numadapter.train"]:
        assert f"`{new}`" in docstring
    commands, evaluation = (importlib.import_module(name) for name in SPLIT["numadapter.train"])
    assert set(old.__all__) == {
        "train", "evaluate", "export", "load_base_model", "load_data", "load_tokenizer",
        "AnswerMetrics", "answer_metrics", "generate_answers", "last_number",
    }  # fmt: skip
    for name in old.__all__:
        assert getattr(old, name) is getattr(commands, name, None) or getattr(old, name) is getattr(evaluation, name)


def test_console_script_and_old_module_run_the_moved_main():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # tomllib is Python >= 3.11 only
    entry = re.search(r'^\[project\.scripts\]\nnumadapter = "([\w.]+):(\w+)"$', pyproject, re.MULTILINE)
    assert entry is not None, "no numadapter console script in pyproject.toml"
    module, function = entry.groups()
    assert (module, function) == ("numadapter.app.cli", "main")
    assert callable(getattr(importlib.import_module(module), function))
    done = subprocess.run(
        [sys.executable, "-m", "numadapter.cli", "validate", "--config", "recipes/llama/fone_lora.yaml"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "recipes/llama/fone_lora.yaml: valid (SFTConfig)."
