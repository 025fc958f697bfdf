"""Layer rules for the local cluster and the shared core, read from the source (every import, also the
lazy ones inside functions), so a wrong-way import fails here before review.

- ``airflow_k8s_ml.testbed.local_cluster`` imports from ``airflow_k8s_ml`` only the shared core
  (``airflow_k8s_ml.k8s``) and itself, and nothing of Airflow: it is a Kubernetes API server, usable
  without the provider.
- ``airflow_k8s_ml.k8s`` imports the standard library, croniter and itself only: no I/O library, no
  Airflow, no other module of the package.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "airflow_k8s_ml"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative ones resolved."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return _imports_in(path.read_text(), package)


def _imports_in(source: str, package: str) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # "from . import errors" imports the module package.errors
            names = [f"{target}.{a.name}" for a in node.names] if node.module is None else [target]
            for name in names:
                yield node.lineno, name


def _sources(package: str) -> list[Path]:
    return sorted((PACKAGE_ROOT / package).rglob("*.py"))


def _allowed_for_local_cluster(name: str) -> bool:
    top = name.split(".")[0]
    if top == "airflow":
        return False
    if top != "airflow_k8s_ml":
        return True
    return name.startswith(("airflow_k8s_ml.k8s", "airflow_k8s_ml.testbed.local_cluster"))


def _allowed_for_core(name: str) -> bool:
    top = name.split(".")[0]
    return top in sys.stdlib_module_names or top == "croniter" or name.startswith("airflow_k8s_ml.k8s")


@pytest.mark.parametrize(
    "path", _sources("testbed/local_cluster"), ids=lambda p: str(p.relative_to(PACKAGE_ROOT))
)
def test_local_cluster_imports_only_the_core_and_itself(path: Path) -> None:
    wrong = [f"line {line}: {name}" for line, name in _imports(path) if not _allowed_for_local_cluster(name)]
    assert not wrong, f"{path.relative_to(PACKAGE_ROOT)} imports outside its layer: {wrong}"


@pytest.mark.parametrize("path", _sources("k8s"), ids=lambda p: str(p.relative_to(PACKAGE_ROOT)))
def test_core_imports_only_stdlib_and_croniter(path: Path) -> None:
    wrong = [f"line {line}: {name}" for line, name in _imports(path) if not _allowed_for_core(name)]
    assert not wrong, f"{path.relative_to(PACKAGE_ROOT)} imports outside the core's layer: {wrong}"


def test_the_rules_see_relative_and_lazy_imports() -> None:
    """The walker itself: a lazy relative import reaching out of local_cluster is seen and resolved."""
    source = "def f():\n    from .... import errors\n    from ....operators import training\n"
    names = [name for _, name in _imports_in(source, "airflow_k8s_ml.testbed.local_cluster.controllers")]
    assert names == ["airflow_k8s_ml.errors", "airflow_k8s_ml.operators"]
    assert not any(_allowed_for_local_cluster(n) for n in names)
