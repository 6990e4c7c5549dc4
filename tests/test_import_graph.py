"""The package's modules import each other without cycles, counting imports inside functions too: the
registries find their parts through entry points, so no module needs a lazy import to break a cycle
(imports under ``if TYPE_CHECKING:`` count as well: a type names a dependency too). And
the stages' packages depend one way (docs/architecture.md): none imports a later stage, not even
through a top-level module."""

from __future__ import annotations

import ast
from collections import deque
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


# The stages' packages, each free to import those before it only (docs/architecture.md).
PACKAGE_ORDER = ("parallel", "data", "models", "evaluate", "train", "stats", "report", "plan")


def package_of(module: str, order: tuple[str, ...]) -> str | None:
    """The ordered package ``module`` belongs to (None: a top-level module or an unordered package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in order else None


def order_violations(graph: dict[str, set[str]], order: tuple[str, ...] = PACKAGE_ORDER) -> list[str]:
    """Every way a module of an ordered package reaches a later package, as the import path ("a <- b"
    read: a is imported by b), following imports through its own package and top-level modules and
    stopping at another ordered package's modules."""
    found = []
    for start in sorted(graph):
        home = package_of(start, order)
        if home is None:
            continue
        came_from: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            module = queue.popleft()
            for target in sorted(graph[module] - came_from.keys()):
                came_from[target] = module
                there = package_of(target, order)
                if there is None or there == home:
                    queue.append(target)
                elif order.index(there) > order.index(home):
                    path, step = [target], module
                    while step is not None:
                        path.append(step)
                        step = came_from[step]
                    found.append(" <- ".join(path))
    return found


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
    graph = {
        name: set().union(*[imported(node, "", modules) for node in ast.walk(ast.parse(text))]) - {name}
        for name, text in source.items()
    }
    assert graph == {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b"]]


def test_the_stages_packages_depend_one_way():
    graph = import_graph()
    assert {package_of(name, PACKAGE_ORDER) for name in graph} >= set(PACKAGE_ORDER)
    assert order_violations(graph) == []


def test_the_order_check_finds_a_later_stage_reached_through_a_top_level_module():
    # data.kinds -> ganstudy.shared (top-level) -> evaluate.metrics: data would depend on evaluate.
    graph = {
        "ganstudy.data.kinds": {"ganstudy.shared"},
        "ganstudy.shared": {"ganstudy.evaluate.metrics"},
        "ganstudy.evaluate.metrics": {"ganstudy.data.kinds"},
        "ganstudy.train.run": {"ganstudy.evaluate.metrics"},
    }
    assert order_violations(graph, ("data", "evaluate", "train")) == [
        "ganstudy.evaluate.metrics <- ganstudy.shared <- ganstudy.data.kinds"
    ]
