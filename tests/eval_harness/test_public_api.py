"""eval_harness imports only numadapter's public API (issue 15): the names of ``numadapter.__all__`` and the
``__all__`` of each module the README lists under "What is public". Every eval_harness module is read with ``ast``;
the checker is tried on synthetic bad imports first, so that an import of an internal module really fails here."""

from __future__ import annotations

import ast
import importlib
import re
import textwrap

import pytest
from helpers.paths import ROOT

README = ROOT / "README.md"
HARNESS = ROOT / "eval_harness"
ROOT_PACKAGE = "numadapter"


def public_modules() -> tuple[str, ...]:
    """The modules between the README's ``public-modules`` markers, in order (one ``- `module`: ...`` line each)."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- public-modules:.*?-->\n(.*?)<!-- /public-modules -->", text, re.S)
    assert match, "README.md has no <!-- public-modules ... --> list (section 'What is public')"
    return tuple(re.findall(r"^- `([\w.]+)`: ", match.group(1), re.M))


def public_names() -> dict[str, frozenset[str]]:
    """``{public module: the names of its __all__}``."""
    out = {}
    for name in public_modules():
        module = importlib.import_module(name)
        out[name] = frozenset(module.__all__)
    return out


def violations(source: str, public: dict[str, frozenset[str]], where: str = "<source>") -> list[str]:
    """Every import of a numadapter module or name in `source` outside `public`, as ``"where:line: what"``.

    Checked: ``import numadapter.x`` (x must be a public module), ``from numadapter.x import n`` (n must be in
    ``numadapter.x.__all__`` or be a public submodule) and attribute chains on a name bound to a public module by
    either import (``numadapter.x.n``, ``na.n``, ``ntl.n``: the same rule, applied along the chain).
    """

    def allowed(module: str, name: str) -> bool:
        return f"{module}.{name}" in public or (module in public and name in public[module])

    found: list[tuple[int, str]] = []
    roots: dict[str, str] = {}  # local name -> the public numadapter module an import bound it to
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != ROOT_PACKAGE:
                    continue
                if alias.name not in public:
                    found.append((node.lineno, f"import {alias.name}"))
                else:  # ``import a.b`` binds ``a``; ``import a.b as c`` binds ``c`` to ``a.b``
                    roots[alias.asname or ROOT_PACKAGE] = alias.name if alias.asname else ROOT_PACKAGE
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != ROOT_PACKAGE:
                continue
            for alias in node.names:
                if not allowed(node.module, alias.name):
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
                elif f"{node.module}.{alias.name}" in public:
                    roots[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    inner_attributes = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner_attributes:  # whole chains only
            continue
        chain: list[str] = []
        inner: ast.expr = node
        while isinstance(inner, ast.Attribute):
            chain.insert(0, inner.attr)
            inner = inner.value
        if not (isinstance(inner, ast.Name) and inner.id in roots):
            continue
        module = roots[inner.id]
        for attr in chain:
            if f"{module}.{attr}" in public:
                module = f"{module}.{attr}"
                continue
            if attr not in public.get(module, frozenset()):
                found.append((node.lineno, f"{inner.id}.{'.'.join(chain)}"))
            break
    return [f"{where}:{line}: {what}" for line, what in sorted(set(found))]


@pytest.fixture(scope="module")
def public() -> dict[str, frozenset[str]]:
    return public_names()


def test_the_readme_lists_the_public_modules_each_with_its_names(public):
    modules = public_modules()
    assert modules[0] == ROOT_PACKAGE and len(modules) == len(set(modules))
    assert {
        "numadapter.methods.fone.embedding",
        "numadapter.ntl",
        "numadapter.schema",
        "numadapter.testing.toy",
    } <= set(modules)
    assert not [m for m in modules if m.startswith("numadapter.app")]  # the CLI app is no API: eval_harness uses none
    for name, names in public.items():
        module = importlib.import_module(name)
        assert module.__doc__, f"{name} has no module docstring"
        missing = [n for n in names if not hasattr(module, n)]
        assert not missing, f"{name}.__all__ names {missing}, which {name} does not define"


def test_checker_flags_internal_modules_and_names(public):
    source = textwrap.dedent(
        """
        import numadapter
        import numadapter.tuner.patches
        import numadapter as na
        from numadapter import NumberTokenizer, ntl, not_public
        from numadapter.tuner.patches import resize_embeddings
        from numadapter.ntl import NTLoss, cross_entropy_and_ntl
        from numadapter.numbers import find_numbers
        from numadapter.schema import IGNORE_INDEX, group_spans
        from eval_harness.arms import encode

        def later():
            from numadapter.app.recipe import parse_overrides

        numadapter.generate
        numadapter.ntl.NTLoss
        numadapter.config.NumberAdapterConfig
        na.tuner.patches.resize_embeddings(None, 1)
        import numadapter.ntl as loss
        loss.fused.cross_entropy_and_ntl
        ntl.digit_ntl, ntl.module
        """
    )
    assert violations(source, public) == [
        "<source>:3: import numadapter.tuner.patches",
        "<source>:5: from numadapter import not_public",
        "<source>:6: from numadapter.tuner.patches import resize_embeddings",
        "<source>:8: from numadapter.numbers import find_numbers",
        "<source>:9: from numadapter.schema import group_spans",
        "<source>:13: from numadapter.app.recipe import parse_overrides",
        "<source>:17: numadapter.config.NumberAdapterConfig",
        "<source>:18: na.tuner.patches.resize_embeddings",
        "<source>:20: loss.fused.cross_entropy_and_ntl",
        "<source>:21: ntl.module",
    ]


def test_checker_accepts_public_imports(public):
    source = textwrap.dedent(
        """
        import numadapter
        from numadapter import NumberAdapterConfig, generate, ntl
        from numadapter.ntl import cross_entropy_and_ntl
        from numadapter.testing.toy import build_tokenizer
        numadapter.NumberSFTTrainer
        numadapter.schema.IGNORE_INDEX
        import numadapter.ntl as loss
        from numadapter import schema as w
        loss.NTLoss, ntl.digit_ntl, w.dense_rows
        """
    )
    assert violations(source, public) == []


def test_eval_harness_imports_only_the_public_api(public):
    files = sorted(HARNESS.rglob("*.py"))
    assert len(files) > 20  # the whole harness, not an empty glob
    found = [
        v for path in files for v in violations(path.read_text(encoding="utf-8"), public, str(path.relative_to(ROOT)))
    ]
    assert not found, "eval_harness imports numadapter internals (use the public API, README 'What is public'):\n" + (
        "\n".join(found)
    )
