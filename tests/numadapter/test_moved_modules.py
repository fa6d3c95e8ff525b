"""The modules that moved into `numadapter.app`, `numadapter.training`, `numadapter.integrations`,
`numadapter.tokenization`, `numadapter.data` (and `numadapter.evaluation`) still import from their old paths.

Each old module is a thin file whose docstring says where the code lives now; importing it gives the moved module
itself (``numadapter.train`` and ``numadapter.trainer``, which were split, re-export the public names of their parts).
``python -m numadapter.cli`` and the console script entry point of ``pyproject.toml`` run the moved `main`.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.moved_modules import MOVED, SPLIT
from helpers.paths import ROOT

# modules that became packages of the same name: package -> (the module that holds the code now, the names the old
# module exported, written out here so that a name dropped from the package's __all__ fails)
BECAME_PACKAGES = {
    "numadapter.tokenization": (
        "numadapter.tokenization.tokenizer",
        {"CONFIG_NAME", "SAVED_FIELDS", "NumberTokenizer", "render_number"},
    ),
    "numadapter.data": (
        "numadapter.data.prepare",
        {"TOKEN_COLUMNS", "detect_format", "drop_markers", "number_groups", "prepare_dataset", "prepared_features"},
    ),
}


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


@pytest.mark.parametrize("package", sorted(BECAME_PACKAGES))
def test_module_that_became_a_package_exports_the_same_names(package):
    home_name, names = BECAME_PACKAGES[package]
    module, home = importlib.import_module(package), importlib.import_module(home_name)
    assert Path(module.__file__).name == "__init__.py" and Path(module.__file__).parent.name == package.split(".")[-1]
    assert set(module.__all__) == names
    for name in names:
        assert getattr(module, name) is getattr(home, name), name
    assert not (ROOT / Path(*package.split("."))).with_suffix(".py").exists()  # no module shadowing the package


def test_every_subpackage_goes_into_the_wheel():
    """pyproject's ``[tool.setuptools.packages.find]`` finds only folders with an ``__init__.py``: every folder of
    numadapter that holds modules (``tokenization/``, ``data/``, ...) must be one it finds."""
    from setuptools import find_packages

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    include = re.search(r"^\[tool\.setuptools\.packages\.find\]\ninclude = \[([^\]]*)\]", pyproject, re.MULTILINE)
    assert include is not None, "pyproject.toml lists its packages some other way; update this test"
    found = set(find_packages(str(ROOT), include=re.findall(r'"([^"]+)"', include.group(1))))
    folders = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "numadapter").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert {"numadapter.tokenization", "numadapter.data"} <= folders
    assert folders <= found, f"folders left out of the wheel: {sorted(folders - found)}"


def test_class_paths_recorded_in_committed_results_still_resolve():
    """eval_harness results record the collator as ``module.Class`` (``numadapter.collator.NumberDataCollator``
    before it moved); every recorded path must still import to today's class."""
    import numadapter

    recorded = {
        found for path in (ROOT / "eval_harness" / "results").rglob("*.json")
        for found in re.findall(r'"collator": "([\w.]+)"', path.read_text(encoding="utf-8"))
    }  # fmt: skip
    assert "numadapter.collator.NumberDataCollator" in recorded  # the committed results were read
    for dotted in recorded:
        module, _, name = dotted.rpartition(".")
        assert getattr(importlib.import_module(module), name) is numadapter.NumberDataCollator, dotted


def test_monkeypatching_the_old_path_reaches_the_moved_module(monkeypatch):
    from numadapter.app import quickstart

    monkeypatch.setattr("numadapter.quickstart.addition_examples", "patched")
    assert quickstart.addition_examples == "patched"
    from numadapter.training import safe_checkpoint

    monkeypatch.setattr("numadapter.safe_checkpoint.save_state", "patched")
    assert safe_checkpoint.save_state == "patched"
    from numadapter.data import collator

    monkeypatch.setattr("numadapter.collator.safe_slice", "patched")
    assert collator.safe_slice == "patched"


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


def test_split_trainer_module_reexports_the_trainers_and_packing():
    import numadapter
    import numadapter.trainer as old

    docstring = ast.get_docstring(ast.parse(source_of("numadapter.trainer")))
    for new in SPLIT["numadapter.trainer"]:
        assert f"`{new}`" in docstring
    assert set(old.__all__) == {
        "NumberSFTTrainer", "NumberSeq2SeqTrainer", "NumberEvalPrediction", "NumberPredictionOutput",
        "GENERATION_OPTIONS", "PACK_COLUMN", "PackedCollator", "pack_examples",
    }  # fmt: skip
    homes = [importlib.import_module(name) for name in SPLIT["numadapter.trainer"]]
    for name in old.__all__:
        defined = [module for module in homes if name in vars(module)]
        assert defined and getattr(old, name) is getattr(defined[0], name), name
    # the lazy public names resolve to the same classes
    assert numadapter.NumberSFTTrainer is old.NumberSFTTrainer is homes[0].NumberSFTTrainer
    assert numadapter.NumberSeq2SeqTrainer is old.NumberSeq2SeqTrainer is homes[1].NumberSeq2SeqTrainer
    assert numadapter.NumberLossCallback is importlib.import_module("numadapter.callbacks").NumberLossCallback


def test_console_script_and_old_module_run_the_moved_main():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # tomllib is Python >= 3.11 only
    entry = re.search(r'^\[project\.scripts\]\nnumadapter = "([\w.]+):(\w+)"$', pyproject, re.MULTILINE)
    assert entry is not None, "no numadapter console script in pyproject.toml"
    module, function = entry.groups()
    assert (module, function) == ("numadapter.app.cli", "main")
    assert callable(getattr(importlib.import_module(module), function))
    done = subprocess.run(
        [sys.executable, "-m", "numadapter.cli", "validate", "--portable", "--config", "recipes/llama/fone_lora.yaml"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "recipes/llama/fone_lora.yaml: valid (SFTConfig)."
