"""Carry an operator's state across a deferral in a way every Airflow execution path honours.

``self.defer(..., kwargs=...)`` normally comes back as ``execute_complete(context, event, **kwargs)``, but
``airflow dags test`` (Airflow 3.3, ``sdk/definitions/dag.py`` ``_run_task``) replaces the stored
``next_kwargs`` with ``{"event": ...}`` when it runs the trigger inline, dropping them. So the state is also
written to ``task_state_store`` before deferring - the store the training operators keep their workload
record in (``operators/_adopt.py``) - and read back from there when the kwargs are missing. One mechanism for
every operator, no private XComs in the UI. The values must be JSON (the store's contract).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_PREFIX = "deferred_state:"


def stash(context: Mapping[str, Any], method_name: str, state: Mapping[str, Any]) -> None:
    """Save the kwargs given to ``defer`` for ``method_name`` (no-op without a task state store)."""
    store = context.get("task_state_store")
    if store is not None:
        store.set(_PREFIX + method_name, dict(state))


def restore(context: Mapping[str, Any], method_name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The kwargs as given, or (when Airflow dropped them) what :func:`stash` saved."""
    if given:
        return dict(given)
    store = context.get("task_state_store")
    value = store.get(_PREFIX + method_name) if store is not None else None
    return dict(value or {})
