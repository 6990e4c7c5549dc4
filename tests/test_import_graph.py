"""The package's modules import each other without cycles, counting imports inside functions too: the
registries find their parts through entry points, so no module needs a lazy import to break a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import ganstudy

SOURCE = Path(ganstudy.__file__).parent


def module_names() -> dict[str, Path]:
    names = {}
    for path in SOURCE.rglob("*.py"):
        parts = ("ganstudy", *path.relative_to(SOURCE).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported(node: ast.AST, package: str, modules: dict[str, Path]) -> set[str]:
    """The package's modules an import statement names: ``from a.b import c`` is the module a.b.c when
    there is one, else a.b (c is an attribute of it)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    found = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in modules:
            found.add(f"{base}.{alias.name}")
        elif base in modules:
            found.add(base)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            edges |= imported(node, package, modules)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each a cycle or several."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 50 and "ganstudy.train.grid.mode" in graph
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_lazy_import_cycle():
    # The check itself: a cycle closed by an import inside a function, as the registries once had.
    source = {"a": "import b\n", "b": "def f():\n    from a import x\n", "c": "import a\n"}
    modules = {name: Path(f"{name}.py") for name in source}
    graph = {name: set().union(*[imported(node, "", modules) for node in ast.walk(ast.parse(text))]) - {name}
             for name, text in source.items()}
    assert graph == {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b"]]
