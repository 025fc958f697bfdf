"""Layer rule, sensors half: ``sensors/`` imports no private operator module (``operators._*``), directly
or through the package modules it imports - what the sensors share with the operators lives in public
modules (``operators.wait_settings``, ``operators.record``, ``operators.templating``, ``operators.outcome``)
or in ``status/``; they wait through the same public module as the operators (``triggers.sync_wait``).
Read from the source (imports inside functions count too), so it holds whatever runs first."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_k8s_ml"


def _module_file(name: str) -> Path | None:
    parts = name.split(".")[1:]
    for candidate in (PACKAGE.joinpath(*parts).with_suffix(".py"), PACKAGE.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("airflow_k8s_ml.") and _module_file(name)}


def _reachable(start: list[str]) -> dict[str, str]:
    """Package modules imported from ``start``, each with the module that imports it."""
    seen: dict[str, str] = {name: "" for name in start}
    todo = list(start)
    while todo:
        name = todo.pop()
        path = _module_file(name)
        for imported in _imports(path) if path else set():
            if imported not in seen:
                seen[imported] = name
                todo.append(imported)
    return seen


def _is_private_operator_module(name: str) -> bool:
    parts = name.split(".")
    return len(parts) >= 3 and parts[1] == "operators" and parts[2].startswith("_")


def test_sensors_import_no_private_operator_module() -> None:
    sensors = [f"airflow_k8s_ml.sensors.{p.stem}" for p in (PACKAGE / "sensors").glob("*.py")]
    reached = _reachable(sensors)
    private = {name: via for name, via in reached.items() if _is_private_operator_module(name)}
    assert not private, f"private operator modules reached from sensors/ (module: imported by): {private}"


def test_sensors_wait_through_the_same_public_module_as_the_operators() -> None:
    sensors = set().union(*(_imports(path) for path in (PACKAGE / "sensors").glob("*.py")))
    operators = set().union(*(_imports(path) for path in (PACKAGE / "operators").glob("*.py")))
    assert "airflow_k8s_ml.triggers.sync_wait" in sensors & operators
