"""Carry an operator's state across a deferral in a way every Airflow execution path honours.

``self.defer(..., kwargs=...)`` normally comes back as ``execute_complete(context, event, **kwargs)``, but
``airflow dags test`` (Airflow 3.3, ``sdk/definitions/dag.py`` ``_run_task``) replaces the stored
``next_kwargs`` with ``{"event": ...}`` when it runs the trigger inline, dropping them. So the state is
also written to a private XCom before deferring, and read back from there when the kwargs are missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_PREFIX = "_deferred_state_"


def stash(context: Mapping[str, Any], method_name: str, state: Mapping[str, Any]) -> None:
    ti = context.get("ti")
    if ti is not None and hasattr(ti, "xcom_push"):
        ti.xcom_push(key=_PREFIX + method_name, value=dict(state))


def restore(context: Mapping[str, Any], method_name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The kwargs as given, or (when Airflow dropped them) what :func:`stash` saved."""
    if given:
        return dict(given)
    ti = context.get("ti")
    if ti is None or not hasattr(ti, "xcom_pull"):
        return {}
    value = ti.xcom_pull(task_ids=ti.task_id, key=_PREFIX + method_name,
                         map_indexes=getattr(ti, "map_index", None))
    return dict(value or {})
