"""Run the training operators the way Airflow does, without a scheduler: execute -> (TaskDeferred) -> the
trigger re-created from its serialised form, run to its event on an event loop -> ``resume_execution``.

The task-instance context is minimal but real where it matters: ``task_state_store`` is a dict-backed object
with the SDK accessor's interface (``get``/``set``/``delete``/``clear``; values JSON round-tripped like the
API server does), optionally persisted to a file so a killed worker process and its retry share it.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest


class DictTaskStateStore:
    """``TaskStateStoreAccessor``'s interface over a dict (or a JSON file shared across processes)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._data: dict[str, Any] = {}

    def _load(self) -> dict[str, Any]:
        if self.path is not None and self.path.exists():
            return dict(json.loads(self.path.read_text()))
        return self._data

    def _save(self, data: dict[str, Any]) -> None:
        self._data = data
        if self.path is not None:
            self.path.write_text(json.dumps(data))

    def get(self, key: str, default: Any = None) -> Any:
        return copy.deepcopy(self._load().get(key, default))

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        if value is None:
            raise ValueError("Cannot set value as None")
        self._save({**self._load(), key: json.loads(json.dumps(value))})

    def delete(self, key: str) -> None:
        data = self._load()
        data.pop(key, None)
        self._save(data)

    def clear(self) -> None:
        self._save({})


def make_context(
    task_id: str,
    *,
    dag_id: str = "training",
    run_id: str = "manual__2024-05-01T00:00:00+00:00",
    map_index: int = -1,
    try_number: int = 1,
    store: DictTaskStateStore | None = None,
) -> dict[str, Any]:
    ti = SimpleNamespace(
        dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index, try_number=try_number
    )
    return {
        "ti": ti,
        "task_instance": ti,
        "run_id": run_id,
        "dag_run": SimpleNamespace(run_id=run_id, dag_id=dag_id),
        "task_state_store": store if store is not None else DictTaskStateStore(),
    }


def task_deferred() -> type[BaseException]:
    from airflow.sdk.exceptions import TaskDeferred

    return TaskDeferred


def revive(trigger: Any) -> Any:
    """The trigger as the triggerer builds it: from its serialised classpath and kwargs."""
    import importlib

    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**json.loads(json.dumps(kwargs)))


async def first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("trigger ended without an event")


def run_async(coroutine: Any) -> Any:
    """``asyncio.run`` that closes the loop's shared Kubernetes clients before the loop goes away."""
    from airflow_k8s_ml.kube.async_client import close_all

    async def main() -> Any:
        try:
            return await coroutine
        finally:
            await close_all()

    return asyncio.run(main())


def resume(op: Any, deferred: Any, context: dict[str, Any]) -> Any:
    """Run the deferral's trigger to its event and hand it to the operator, as the task runner would."""
    payload = run_async(first_event(revive(deferred.trigger)))
    return op.resume_execution(deferred.method_name, {**(deferred.kwargs or {}), "event": payload}, context)


def run_task(op: Any, context: dict[str, Any]) -> Any:
    """execute, and if it defers, trigger + resume (the whole life of a deferrable task)."""
    try:
        return op.execute(context)
    except task_deferred() as deferred:
        return resume(op, deferred, context)


def execute_until_deferred(op: Any, context: dict[str, Any]) -> Any:
    with pytest.raises(task_deferred()) as info:
        op.execute(context)
    return info.value


def task_log(capsys: Any) -> str:
    """What the operator logged (Airflow's task logger writes to the console outside the task runner)."""
    captured = capsys.readouterr()
    return str(captured.out + captured.err)


def jobs(batch: Any, namespace: str) -> list[Any]:
    return list(batch.list_namespaced_job(namespace).items)


def pods(core: Any, namespace: str) -> list[Any]:
    return list(core.list_namespaced_pod(namespace).items)


def py(code: str) -> list[str]:
    return ["python", "-c", code]


def finetune(task_id: str, namespace: str, code: str, **kwargs: Any) -> Any:
    """A FineTuneJobOperator running ``code`` with the test image and a short grace period."""
    from airflow_k8s_ml.operators import FineTuneJobOperator

    return FineTuneJobOperator(
        task_id=task_id,
        namespace=namespace,
        image="python:3.11",
        command=py(code),
        pod_options={"termination_grace_period_seconds": 2},
        **kwargs,
    )
