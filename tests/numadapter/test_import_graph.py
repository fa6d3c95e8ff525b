"""The package's import graph (read with ``ast``, `tests/helpers/import_graph.py`): no cycle, no import of a module in
a higher layer (`LAYERS`), no library module imports the application (`numadapter.app`), and no test of an encoding's
name outside the methods and the config. The checkers are tried on small synthetic packages first, so that each of
these would really make the tests fail."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from helpers.import_graph import find_cycles, import_graph, importers_of, layer_of, upward_imports
from helpers.paths import ROOT

PACKAGE = ROOT / "numadapter"

# cycles that cannot be broken yet, each as find_cycles reports it (sorted members); none today
KNOWN_CYCLES: list[list[str]] = []

# numadapter's layers, lowest first: a module imports only modules of its own layer or lower ones. A name covers the
# module of that name and the modules under it; the longest name covering a module decides (so the PEFT tuner class,
# `numadapter.tuner.model`, sits above generation, which runs on the tuner's parts, as a transformers model sits above
# the generation mixin it calls). docs/DESIGN.md, "Conventions", says the same in words.
LAYERS: list[list[str]] = [
    # plain numbers and files, checkpoints, the integrations with other libraries (PEFT's type name among them)
    ["numadapter.numbers", "numadapter.schema", "numadapter.json_file", "numadapter.checkpoints",
     "numadapter.integrations"],
    ["numadapter.ntl", "numadapter.methods"],  # the losses and the number methods (encodings, modules, heads)
    ["numadapter.config"],
    ["numadapter.data"],  # data checks, preparation, what the head forms in a data set
    ["numadapter.tokenization"],
    ["numadapter.tuner"],  # the tuner's parts: side tensors, hooks, patches, loss, number modules, runtime
    ["numadapter.generation"],  # the decode loop, on the tuner's parts
    ["numadapter.tuner.model", "numadapter.tuner.registration", "numadapter.tuner.peft_load_hooks",
     "numadapter.mapping"],  # the PEFT tuner class (its generate runs the loop) and its registration
    ["numadapter.evaluation", "numadapter.export_files", "numadapter.export",
     "numadapter.serving.marking"],  # the export, and the marking of its config.json that it writes
    ["numadapter.serving"],  # transformers' Auto classes and pipeline on an export
    ["numadapter.training", "numadapter.testing"],
    # the CLI; the package and its import-time hooks (they register the tuner with PEFT, the exports with transformers)
    ["numadapter.app", "numadapter.integrations.import_hooks", "numadapter"],
]  # fmt: skip
# the encodings the library ships; their names are tested in the methods and the config only
ENCODINGS = ("fone", "xval", "digits")
# where a test of an encoding's name belongs; the app builds configs by name as a user does
NAME_TESTS_ALLOWED = ("numadapter.methods", "numadapter.config", "numadapter.app")


def write_package(root: Path, files: dict[str, str]) -> Path:
    """Writes a package ``pkg`` under `root` from ``{relative path: source}``; returns its directory."""
    for relative, source in files.items():
        path = root / "pkg" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return root / "pkg"


def test_checker_finds_a_cycle_closed_inside_a_function_by_a_relative_import(tmp_path):
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg.b import thing\n",
            "b.py": "thing = 1\n\ndef later():\n    from .sub import c\n",
            "sub/__init__.py": "",
            "sub/c.py": "import pkg.a\n",
            "d.py": "from pkg import b\n",  # imports into the cycle but is not part of it
        },
    )
    graph = import_graph(package, "pkg")
    assert graph["pkg.b"] == {"pkg.sub.c"} and graph["pkg.sub.c"] == {"pkg.a"} and graph["pkg.d"] == {"pkg.b"}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


def test_checker_reads_relative_imports_from_a_package_init_and_parent_levels(tmp_path):
    package = write_package(
        tmp_path,
        {
            "__init__.py": "from .sub import c\n",
            "sub/__init__.py": "from . import c\n",
            "sub/c.py": "from .. import e\nfrom ..e import value\n",
            "e.py": "value = 2\n",
        },
    )
    graph = import_graph(package, "pkg")
    assert graph == {"pkg": {"pkg.sub.c"}, "pkg.sub": {"pkg.sub.c"}, "pkg.sub.c": {"pkg.e"}, "pkg.e": set()}
    assert find_cycles(graph) == []


def test_checker_counts_type_checking_imports_and_finds_self_imports(tmp_path):
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "b.py": "import pkg.a\n",
            "selfish.py": "def f():\n    from pkg import selfish\n",
        },
    )
    graph = import_graph(package, "pkg")
    assert graph["pkg.a"] == {"pkg.b"}
    assert find_cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.selfish"]]


def test_checker_counts_modules_a_registry_imports_by_name(tmp_path):
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "registry.py": (
                "import importlib\nBUILTIN = {'x': 'pkg.plugins.x:THING'}\nLAZY = 'pkg.lazy'\n"
                "NOT_A_MODULE = 'pkg.registry.BUILTIN'\n"
                "def get(name):\n    module, _, attr = BUILTIN[name].partition(':')\n"
                "    return getattr(importlib.import_module(module), attr)\n"
            ),
            "lazy.py": "",
            "plugins/__init__.py": "",
            "plugins/x.py": "from pkg.registry import get\nTHING = 1\n",
            "words.py": "TEXT = 'pkg.lazy'\n",  # no import_module call: a string alone is no import
        },
    )
    graph = import_graph(package, "pkg")
    assert graph["pkg.registry"] == {"pkg.plugins.x", "pkg.lazy"} and graph["pkg.words"] == set()
    assert find_cycles(graph) == [["pkg.plugins.x", "pkg.registry"]]


def test_checker_lists_who_imports_a_subpackage(tmp_path):
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "app/__init__.py": "",
            "app/cli.py": "from pkg.lib import f\n",
            "lib.py": "def f():\n    from pkg.app.cli import main\n",
        },
    )
    graph = import_graph(package, "pkg")
    assert importers_of(graph, "pkg.app") == {"pkg.lib": {"pkg.app.cli"}}
    assert find_cycles(graph) == [["pkg.app.cli", "pkg.lib"]]


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE, "numadapter")


def test_numadapter_has_no_import_cycle(graph):
    assert len(graph) > 50 and graph["numadapter.tuner.registration"]  # the real package was read
    unexpected = [cycle for cycle in find_cycles(graph) if cycle not in KNOWN_CYCLES]
    assert unexpected == [], f"import cycles among numadapter modules: {unexpected}"


def test_no_library_module_imports_the_app(graph):
    app = {module for module in graph if module == "numadapter.app" or module.startswith("numadapter.app.")}
    assert {"numadapter.app.cli", "numadapter.app.recipe", "numadapter.app.commands"} <= app  # the app was found
    library_importers = {m: t for m, t in importers_of(graph, "numadapter.app").items() if m not in app}
    assert library_importers == {}, f"library modules that import numadapter.app: {library_importers}"


def test_checker_finds_an_import_of_a_higher_layer_and_modules_no_layer_covers(tmp_path):
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "def later():\n    from pkg.high import thing\n",
            "mid/__init__.py": "",
            "mid/parts.py": "from pkg import low\n",
            "mid/top.py": "from pkg.high import thing\n",  # covered by a longer name, in a higher layer
            "high.py": "from pkg.mid import parts\nthing = 1\n",
            "stray.py": "",
        },
    )
    graph = import_graph(package, "pkg")
    layers = [["pkg.low"], ["pkg.mid"], ["pkg.high"], ["pkg.mid.top", "pkg"]]
    assert layer_of("pkg.mid.top", layers) == 3 and layer_of("pkg.mid.parts", layers) == 1
    assert layer_of("pkg.stray", layers) is None  # the root's name covers the root only
    assert upward_imports(graph, layers) == [("pkg.low", "pkg.high"), ("pkg.stray", "")]


def test_numadapter_imports_no_module_of_a_higher_layer(graph):
    assert upward_imports(graph, LAYERS) == []


def encoding_name_tests(path: Path) -> list[int]:
    """Lines of `path` that compare an ``encoding`` (an attribute, a ``getattr(..., "encoding")`` or a variable of
    that name) with a shipped encoding's name."""

    def names_encoding(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute):
            return node.attr == "encoding"
        if isinstance(node, ast.Name):
            return node.id == "encoding"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            return len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "encoding"
        return False

    def names_a_method(node: ast.AST) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_a_method(item) for item in node.elts)
        return isinstance(node, ast.Constant) and node.value in ENCODINGS

    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(names_encoding(side) for side in sides) and any(names_a_method(side) for side in sides):
                lines.append(node.lineno)
    return lines


def test_the_name_test_finds_comparisons_of_an_encoding_with_a_method_name(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "a = config.encoding == 'fone'\n"
        "b = getattr(config, 'encoding', None) != 'xval'\n"
        "c = encoding in ('digits', 'other')\n"
        "d = config.encoding == other\n"  # no method named: not counted
        "e = config.sign_policy == 'fone'\n",
        encoding="utf-8",
    )
    assert encoding_name_tests(source) == [1, 2, 3]


def test_no_module_outside_the_methods_and_the_config_tests_an_encoding_name():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("numadapter", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        if any(module == allowed or module.startswith(allowed + ".") for allowed in NAME_TESTS_ALLOWED):
            continue
        if lines := encoding_name_tests(path):
            found[module] = lines
    assert found == {}, (
        f"tests of an encoding's name outside methods/ and the config (use a NumberMethod hook): {found}"
    )
