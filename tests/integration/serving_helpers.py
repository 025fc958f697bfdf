"""Run a deferrable serving operator the way Airflow does, against the local cluster.

``execute`` raises ``TaskDeferred``; the trigger is revived from its serialized form (what the triggerer
does), run to its first event on a fresh event loop, and the deferred method is called with that event. A
rollback defers a second time, so :func:`run_task` keeps going until a result or an exception.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from airflow.sdk.exceptions import TaskDeferred

__all__ = ["context", "first_event", "run_task"]


def context(
    task_id: str, run_id: str = "manual__2024-06-01T00:00:00+00:00", try_number: int = 1
) -> dict[str, Any]:
    """The part of an Airflow context the operators read: the task instance (and its xcom_push)."""
    pushed: dict[str, Any] = {}
    ti = SimpleNamespace(
        dag_id="nightly", task_id=task_id, run_id=run_id, map_index=-1, try_number=try_number
    )
    ti.xcom_push = lambda key, value: pushed.__setitem__(key, value)
    return {"ti": ti, "pushed": pushed}


async def first_event(trigger: Any, timeout: float) -> dict[str, Any]:
    from airflow_k8s_ml.kube.async_client import close_all

    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("trigger ended without an event")

    try:
        return await asyncio.wait_for(first(), timeout)
    finally:
        await close_all()


def run_task(op: Any, ctx: dict[str, Any], timeout: float = 60, kind: str | None = None) -> Any:
    """``execute``, then every deferral in turn, until the operator returns or raises."""
    try:
        return op.execute(ctx)
    except TaskDeferred as first:
        deferred = first
    while True:
        classpath, kwargs = deferred.trigger.serialize()
        assert classpath.endswith(("WorkloadTrigger", "CanaryTrigger")), classpath
        if kind is not None and classpath.endswith("WorkloadTrigger"):
            assert kwargs["kind"] == kind
        revived = type(deferred.trigger)(**kwargs)
        payload = asyncio.run(first_event(revived, timeout))
        try:
            return getattr(op, deferred.method_name)(ctx, event=payload, **(deferred.kwargs or {}))
        except TaskDeferred as again:
            deferred = again
