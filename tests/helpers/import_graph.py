"""The import graph of a Python package, read with ``ast`` (nothing is imported), and its cycles.

`import_graph` lists, for every module of a package, the modules of the same package it imports: module-level and
function-level imports alike, absolute and relative, and those under ``if TYPE_CHECKING:`` too (a type checker
follows them, and a module that needs another's types only for annotations still depends on it).
``from pkg.sub import name`` counts as an import of ``pkg.sub.name`` when that is a module of the package, else of
``pkg.sub``. Parent packages that Python initialises on the way (``pkg`` for ``import pkg.sub``) are not edges:
they are always run first, so they cannot make a cycle that fails.

Imports by name count as well: in a module that calls ``import_module`` (``importlib.import_module``), every string
constant that names a module of the package (``"pkg.sub"``, or ``"pkg.sub:attribute"`` as a registry writes it) is an
edge, so a registry of lazily imported modules (``{"name": "pkg.sub:thing"}``) shows up in the graph.

`find_cycles` returns the strongly connected components of more than one module (and modules importing
themselves), each as a sorted list of module names: an empty result means the graph has no cycle.
Used by ``tests/numadapter/test_import_graph.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package in directory `root` (named `package`): dotted name -> file.

    ``pkg/__init__.py`` is ``pkg``; ``pkg/sub/mod.py`` is ``pkg.sub.mod``.
    """
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in `tree` at any depth (``if TYPE_CHECKING:`` blocks included)."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def _calls_import_module(tree: ast.AST) -> bool:
    """Whether `tree` calls ``import_module`` (``importlib.import_module(...)`` or a bare imported name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
                isinstance(func, ast.Name) and func.id == "import_module"
            ):
                return True
    return False


def _named_modules(tree: ast.AST, package: str) -> list[str]:
    """The string constants of `tree` that look like a dotted module of `package` (``"pkg.a.b"``, ``"pkg.a:b"``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = re.fullmatch(r"([\w.]+)(?::\w+)?", node.value)
            if match and match.group(1).split(".")[0] == package:
                found.append(match.group(1))
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of dotted `name` that is a module of the package, or None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `module` (its source at `path`) imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")
                if node.level - 1 > len(base_parts) - 1:
                    raise ValueError(f"{path}:{node.lineno}: relative import beyond the top-level package")
                base = ".".join(base_parts[: len(base_parts) - (node.level - 1)])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            names = [f"{source}.{alias.name}" for alias in node.names if alias.name != "*"] or [source]
            names = [name if name in modules else source for name in names]
        for name in names:
            target = _resolve(name, modules)
            if target is not None:
                targets.add(target)
    if _calls_import_module(tree):
        top = module.split(".")[0]
        for name in _named_modules(tree, top):
            if name in modules:  # only whole module names: a string that names an attribute is no import
                targets.add(name)
    return targets


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, for the package in directory `root` named `package`."""
    modules = module_names(root, package)
    return {module: imports_of(module, path, modules) for module, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: strongly connected components with a cycle, each sorted, in sorted order.

    Tarjan's algorithm, iterative (no recursion limit on deep packages).
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop(0)
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    cycles.append(sorted(component))
    return sorted(cycles)


def importers_of(graph: dict[str, set[str]], target: str) -> dict[str, set[str]]:
    """The modules importing `target` or one of its submodules: module -> the imported modules."""
    found: dict[str, set[str]] = {}
    for module, targets in graph.items():
        hits = {t for t in targets if t == target or t.startswith(target + ".")}
        if hits:
            found[module] = hits
    return found


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The index of the layer that holds `module`: the layer of the longest name in `layers` that is the module or
    a package above it (the package's root only by its exact name), or None when no name covers it."""
    best, found = -1, None
    for rank, names in enumerate(layers):
        for name in names:
            covers = module == name or ("." in name and module.startswith(name + "."))
            if covers and len(name) > best:
                best, found = len(name), rank
    return found


def upward_imports(graph: dict[str, set[str]], layers: list[list[str]]) -> list[tuple[str, str]]:
    """``(module, imported)`` for every import of a module in a higher layer than the importer's, and
    ``(module, "")`` for every module no layer covers; sorted."""
    found = []
    for module, targets in graph.items():
        own = layer_of(module, layers)
        if own is None:
            found.append((module, ""))
            continue
        found += [(module, target) for target in targets if (layer_of(target, layers) or 0) > own]
    return sorted(found)
