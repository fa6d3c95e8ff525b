"""The package's shape: at most ten modules at the top of ``numadapter/``, no module that is only another module
under an old name (a ``sys.modules`` alias or a file of re-exports), every folder in the wheel, the console script
on a real module, and the class paths that committed results record importing today's classes."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

from helpers.paths import ROOT

PACKAGE = ROOT / "numadapter"
MAX_TOP_LEVEL_MODULES = 10


def modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


def alias_or_reexport(source: str) -> str | None:
    """Why a module's `source` is only another module under a second name, or None when it holds code of its own.

    An alias assigns ``sys.modules[__name__]``; a re-export holds nothing but its docstring, imports and ``__all__``.
    """
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and ast.unparse(target.value) == "sys.modules"
                    and ast.unparse(target.slice) == "__name__"
                ):
                    return "assigns sys.modules[__name__]"
    body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    if body and all(
        isinstance(node, (ast.Import, ast.ImportFrom))
        or (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__")
        for node in body
    ):
        return "holds only imports (a re-export)"
    return None


def test_checker_recognises_aliases_and_reexports():
    assert alias_or_reexport('"""Moved."""\nimport sys\nfrom a import b as moved\nsys.modules[__name__] = moved\n')
    assert alias_or_reexport('"""Moved."""\nfrom a.b import f, g\n\n__all__ = ["f", "g"]\n')
    assert alias_or_reexport("from a import b\n\ndef f():\n    return b\n") is None
    assert alias_or_reexport('"""Only a docstring."""\n') is None


def test_top_level_holds_at_most_ten_modules():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules at the top of numadapter/: {top}"


def test_no_module_is_an_alias_of_another():
    found = {}
    for path in modules():
        if path.name == "__init__.py":  # a package's __init__ may gather its modules' names
            continue
        why = alias_or_reexport(path.read_text(encoding="utf-8"))
        if why:
            found[str(path.relative_to(ROOT))] = why
    assert found == {}, f"modules that only hand out other modules: {found}"


def test_every_subpackage_goes_into_the_wheel():
    """pyproject's ``[tool.setuptools.packages.find]`` finds only folders with an ``__init__.py``: every folder of
    numadapter that holds modules must be one it finds."""
    from setuptools import find_packages

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    include = re.search(r"^\[tool\.setuptools\.packages\.find\]\ninclude = \[([^\]]*)\]", pyproject, re.MULTILINE)
    assert include is not None, "pyproject.toml lists its packages some other way; update this test"
    found = set(find_packages(str(ROOT), include=re.findall(r'"([^"]+)"', include.group(1))))
    folders = {".".join(path.parent.relative_to(ROOT).parts) for path in modules()}
    assert {"numadapter.tokenization", "numadapter.data", "numadapter.methods.fone"} <= folders
    assert folders <= found, f"folders left out of the wheel: {sorted(folders - found)}"


def test_console_script_runs_a_real_module():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # tomllib is Python >= 3.11 only
    entry = re.search(r'^\[project\.scripts\]\nnumadapter = "([\w.]+):(\w+)"$', pyproject, re.MULTILINE)
    assert entry is not None, "no numadapter console script in pyproject.toml"
    module, function = entry.groups()
    path = (ROOT / Path(*module.split("."))).with_suffix(".py")
    assert path.is_file() and alias_or_reexport(path.read_text(encoding="utf-8")) is None, module
    assert callable(getattr(importlib.import_module(module), function))
    done = subprocess.run(
        [sys.executable, "-m", module, "validate", "--portable", "--config", "recipes/llama/fone_lora.yaml"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "recipes/llama/fone_lora.yaml: valid (SFTConfig)."


def test_class_paths_recorded_in_committed_results_resolve():
    """eval_harness results record the collator as ``module.Class``; every recorded path imports today's class."""
    import numadapter

    recorded = {
        found for path in (ROOT / "eval_harness" / "results").rglob("*.json")
        for found in re.findall(r'"collator": "([\w.]+)"', path.read_text(encoding="utf-8"))
    }  # fmt: skip
    assert recorded  # the committed results were read
    for dotted in recorded:
        module, _, name = dotted.rpartition(".")
        assert getattr(importlib.import_module(module), name) is numadapter.NumberDataCollator, dotted
