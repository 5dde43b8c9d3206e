"""The package's modules import each other in one direction: the pipeline's layers form no
cycle (a subpackage counts as one unit; imports made only for type checking do not count)."""

from __future__ import annotations

import ast
from pathlib import Path

import numfuse

PACKAGE = Path(numfuse.__file__).parent


def _unit(module: str) -> str:
    """``numfuse.trace.tracer`` -> ``numfuse.trace``: a subpackage is one unit."""
    return ".".join(module.split(".")[:2])


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_blocks(tree: ast.Module) -> set[ast.AST]:
    inside: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                inside.update(ast.walk(statement))
    return inside


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports at run time (at the top or inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_blocks(tree)
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if node in skipped or not isinstance(node, ast.ImportFrom | ast.Import):
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif node.level == 0:
            targets = [node.module or ""]
        else:
            base = ".".join(package[:len(package) - node.level + 1])
            module = f"{base}.{node.module}" if node.module else base
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules
                       else module for alias in node.names]
        for target in targets:
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = list(PACKAGE.rglob("*.py"))
    modules = {_module_name(path) for path in paths}
    edges: dict[str, set[str]] = {}
    for path in paths:
        source = _unit(_module_name(path))
        edges.setdefault(source, set())
        edges[source] |= {_unit(target) for target in _imports(path, modules)
                          if _unit(target) != source}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Groups of units that reach each other (strongly connected, more than one unit)."""
    reach = {unit: set() for unit in edges}
    for unit in edges:
        stack = list(edges[unit])
        while stack:
            other = stack.pop()
            if other not in reach[unit]:
                reach[unit].add(other)
                stack.extend(edges.get(other, ()))
    groups = {frozenset({unit} | {other for other in reach[unit] if unit in reach[other]})
              for unit in edges}
    return sorted(sorted(group) for group in groups if len(group) > 1)


def test_the_cycle_finder_sees_a_cycle_and_a_chain():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_import_graph_sees_lazy_imports_and_subpackages_as_units():
    edges = import_graph()
    assert "numfuse.display" in edges["numfuse.api"]  # imported inside a method
    assert "numfuse.backend" in edges["numfuse.api"]
    assert "numfuse.trace.tracer" not in edges
    assert "numfuse.api" in edges["numfuse"]  # the package's own imports count too


def test_no_module_imports_a_module_that_imports_it_back():
    assert cycles(import_graph()) == []
