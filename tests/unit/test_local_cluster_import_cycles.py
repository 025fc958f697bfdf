"""No import circle inside the local cluster, read from the source.

Every import counts: module-level ones, lazy ones inside functions and the ones under ``if TYPE_CHECKING:``
(a circle that only type checking sees is still two modules that cannot be understood apart, and it is how
the circles of issue 20 hid). The failure names each circle module by module, so it says what to cut.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "airflow_k8s_ml.testbed.local_cluster"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / PACKAGE.replace(".", "/")

Graph = dict[str, set[str]]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parents[2]).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_names(source: str, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """Absolute names of the modules the source imports, relative imports resolved; ``from a import b``
    imports ``a.b`` when that is a module, else ``a`` (a package's ``__init__`` run on the way to a
    submodule is not counted, as in grimp and import-linter)."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                names.add(submodule if submodule in modules else target)
    return names


def import_graph(sources: dict[str, tuple[str, bool]]) -> Graph:
    """module -> modules of the same set it imports; ``sources`` maps module -> (source, is_package)."""
    modules = set(sources)
    graph: Graph = {}
    for module, (source, is_package) in sources.items():
        imported = _imported_names(source, module, is_package, modules)
        graph[module] = {name for name in imported if name in modules and name != module}
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan), each written as a
    path that comes back to its start."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle_through(graph, component) for component in components]


def _circle_through(graph: Graph, component: set[str]) -> list[str]:
    """A shortest circle from the component's first module back to itself (breadth first)."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & component):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if succ not in previous:
                    previous[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no circle in component {sorted(component)}")


def _local_cluster_sources() -> dict[str, tuple[str, bool]]:
    return {
        _module_name(path): (path.read_text(), path.name == "__init__.py")
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
    }


def test_the_local_cluster_has_no_import_circle() -> None:
    found = cycles(import_graph(_local_cluster_sources()))
    short = [" -> ".join(m.removeprefix(PACKAGE + ".") or "(package)" for m in circle) for circle in found]
    assert not found, "import circles in the local cluster:\n" + "\n".join(short)


def test_the_walker_sees_type_checking_and_lazy_imports() -> None:
    """The walker itself: a circle closed only by a TYPE_CHECKING import and a lazy one is found."""
    sources = {
        "p": ("", True),
        "p.a": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n", False),
        "p.b": ("def f():\n    from . import c\n", False),
        "p.c": ("from .a import thing\n", False),
        "p.d": ("from .a import thing\n", False),
    }
    assert cycles(import_graph(sources)) == [["p.a", "p.b", "p.c", "p.a"]]
