"""The package's import graph (read with ``ast``, `tests/helpers/import_graph.py`): no cycle, and no library module
imports the application (`numadapter.app`). The checker itself is tried on small synthetic packages first, so that a
cycle or a library -> app import would really make these tests fail."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from helpers.import_graph import find_cycles, import_graph, importers_of
from helpers.paths import ROOT

PACKAGE = ROOT / "numadapter"

# cycles that cannot be broken yet, each as find_cycles reports it (sorted members); none today
KNOWN_CYCLES: list[list[str]] = []


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
