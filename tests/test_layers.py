"""The import rules `lint-imports` (.importlinter) does not see, read from the source with ``ast``: ARCHITECTURE.md's
"The layers" states them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("judging", "metrics")
# Where no module may import another's private names: the app, the measures, and their tests and benchmarks.
PRIVATE_CHECKED = (*PACKAGES, "tests", "bench")

# Where an import inside a function is what the framework asks for: module -> functions allowed to.
FUNCTION_IMPORTS_ALLOWED = {
    "judging.apps": {"ready"},  # AppConfig.ready: the models load once Django's app registry is ready
}


def _modules(packages: tuple[str, ...] = PACKAGES) -> Iterator[tuple[str, Path, ast.Module]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield name, path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _ours(module: str | None, packages: tuple[str, ...] = PACKAGES) -> bool:
    return module is not None and module.split(".")[0] in packages


def _where(path: Path, node: ast.stmt) -> str:
    return f"{path.relative_to(ROOT)}:{node.lineno}"


def _function_imports(tree: ast.Module) -> Iterator[tuple[str, ast.stmt]]:
    """(enclosing function's name, import) for every import inside a function (ours, a library's or Python's)."""

    def walk(node: ast.AST, function: str | None) -> Iterator[tuple[str, ast.stmt]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(child, child.name)
                continue
            if function is not None and isinstance(child, ast.Import | ast.ImportFrom):
                yield function, child
            yield from walk(child, function)

    yield from walk(tree, None)


def test_modules_import_at_module_level_only():
    """An import inside a function hides a dependency from a reader and usually a cycle from the contract (or, for a
    library, a start-up cost that belongs in one measured place): every import of judging and metrics is at module
    level, except where the framework needs it (AppConfig.ready)."""
    found = [
        f"{_where(path, node)}: {ast.unparse(node)} (in {function})"
        for name, path, tree in _modules()
        for function, node in _function_imports(tree)
        if function not in FUNCTION_IMPORTS_ALLOWED.get(name, set())
    ]
    assert not found, "imports inside functions:\n" + "\n".join(found)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore is its module's own: what another module (a test or bench included) needs
    is public, in the module that owns it or in a shared one (metrics.ranking's argument checks and intermediates,
    judging.imports.parse.trec's parsing helpers). A test reaches a module's cache through the registry
    (``runtime.kept(name).store``)."""
    found = [
        f"{_where(path, node)}: from {'.' * node.level}{node.module or ''} import {alias.name}"
        for _name, path, tree in _modules(PRIVATE_CHECKED)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or _ours(node.module, PRIVATE_CHECKED))
        for alias in node.names
        if _private(alias.name)
    ]
    assert not found, "private names imported from another module:\n" + "\n".join(found)


# Issue 43: a production function longer than this (its docstring left out) mixes concerns, unless its docstring
# says why it is one function, in a paragraph that starts with ONE_FUNCTION.
LONGEST = 80
ONE_FUNCTION = "One function:"


def test_no_long_function_without_a_reason():
    long = []
    for _name, path, tree in _modules(PACKAGES):
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            doc = ast.get_docstring(node) or ""
            first = node.body[0]
            doc_lines = first.end_lineno - first.lineno + 1 if doc and first.end_lineno is not None else 0
            length = (node.end_lineno or node.lineno) - node.lineno + 1 - doc_lines
            if length > LONGEST and ONE_FUNCTION not in doc:
                long.append(f"{_where(path, node)} {node.name}: {length} lines")
    assert not long, "functions over 80 lines whose docstring does not say why:\n" + "\n".join(long)
