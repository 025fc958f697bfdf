"""No import cycle joins the provider's packages (issue 20): what ``lint-imports``' layers contract orders
must stay an order, whichever imports are added later.

Read by grimp, the graph import-linter checks: every import counts, at module level, inside functions and
under ``if TYPE_CHECKING:`` (a cycle only the type checker sees still ties two packages together; the
``deadlines`` <-> ``status`` one hid that way). The failure names each cycle, so it says what to cut.
"""

from __future__ import annotations

import grimp
import pytest

ROOT = "airflow_k8s_ml"
#: The provider's packages and top-level modules (the test bed and the CLI that loads it are not the
#: provider; the local cluster has its own cycle test).
PROVIDER = (
    "k8s",
    "errors",
    "_lazy",
    "deadlines",
    "manifests",
    "status",
    "kube",
    "checkpoints",
    "config",
    "triggers",
    "task_state_keys",
    "plugin_paths",
    "operators",
    "ui",
    "workloads",
    "sensors",
)
#: Module cycles inside one package, each listed with why it is still there. A cycle that goes away may be
#: dropped from here; a new one fails the test.
KNOWN_MODULE_CYCLES: set[frozenset[str]] = set()  # none: a cycle found fails the test

Graph = dict[str, set[str]]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(ROOT, cache_dir=None)


def _unit(module: str) -> str | None:
    """The provider package (or top-level module) ``module`` belongs to; None outside the provider."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PROVIDER else None


def cycles(edges: Graph) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _provider_modules(graph: grimp.ImportGraph) -> set[str]:
    return {module for module in graph.modules if _unit(module) is not None}


def package_graph(graph: grimp.ImportGraph) -> Graph:
    """provider package -> the provider packages its modules import."""
    edges: Graph = {}
    for module in _provider_modules(graph):
        source = _unit(module)
        assert source is not None
        targets = {_unit(imported) for imported in graph.find_modules_directly_imported_by(module)}
        edges.setdefault(source, set()).update(t for t in targets if t is not None and t != source)
    return edges


def module_graph(graph: grimp.ImportGraph) -> Graph:
    modules = _provider_modules(graph)
    return {module: graph.find_modules_directly_imported_by(module) & modules for module in modules}


def test_the_cycle_finder_finds_a_cycle_and_nothing_else() -> None:
    edges: Graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(edges) == [["a", "b", "c"]]


def test_every_provider_package_is_in_the_graph(graph: grimp.ImportGraph) -> None:
    assert set(package_graph(graph)) == set(PROVIDER)


def test_no_import_cycle_joins_two_provider_packages(graph: grimp.ImportGraph) -> None:
    assert cycles(package_graph(graph)) == []


def test_no_new_import_cycle_between_modules_of_the_provider(graph: grimp.ImportGraph) -> None:
    found = {frozenset(cycle) for cycle in cycles(module_graph(graph))}
    assert sorted(sorted(cycle) for cycle in found - KNOWN_MODULE_CYCLES) == []
