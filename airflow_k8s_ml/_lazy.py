"""Lazy public names for packages that DAG files import at parse time.

A package lists ``name -> submodule`` and gets a module ``__getattr__``/``__dir__`` (PEP 562): a name is
imported from its submodule on first access only, so ``from airflow_k8s_ml.operators import X`` never pays
for the other operators, and nothing heavy (kubernetes, boto3, torch) loads before ``execute``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``; resolved names are cached in its ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
