"""What Airflow recorded about one task instance, read from the metadata DB by the api-server.

Everything the Training tab says comes from rows Airflow already keeps; nothing is pushed for the UI's sake:

* ``task_instance``  - state, try number, start/end, the operator's class, the trigger it waits on;
* ``task_state_store`` - the workload record the training operators write before deferring
  (:data:`~airflow_k8s_ml.task_state_keys.STATE_KEY`: kind, name, namespace, uid, attempt, submission time,
  resume point, and the result once succeeded) and the outcome of a failed attempt
  (:data:`~airflow_k8s_ml.task_state_keys.OUTCOME_KEY`);
* ``xcom`` ``return_value`` - the operator's result (a succeeded workload's final state);
* ``rendered_task_instance_fields`` - the rendered ``checkpoint_uri`` and ``aws_conn_id`` (so the tab reads
  the checkpoints through the same connection the task uses);
* ``trigger`` - while deferred, the :class:`~airflow_k8s_ml.triggers.workload.WorkloadTrigger` kwargs: the
  deadlines, when the attempt was submitted, and the Kubernetes connection.

Only imported in the api-server (it imports Airflow's ORM models).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.task_state_keys import OUTCOME_KEY, STATE_KEY

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["TaskFacts", "read_facts"]


@dataclass(frozen=True)
class TaskFacts:
    """One task instance's recorded facts (see the module docstring for where each comes from)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    operator: str | None
    state: str | None
    try_number: int
    start_date: datetime | None = None
    end_date: datetime | None = None
    record: dict[str, Any] | None = None
    outcome: dict[str, Any] | None = None
    result: Any = None
    rendered: dict[str, Any] = field(default_factory=dict)
    trigger: dict[str, Any] | None = None


def _json(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def read_facts(session: Session, dag_id: str, run_id: str, task_id: str, map_index: int) -> TaskFacts | None:
    """The task instance's facts, or None when there is no such task instance."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as RTIF
    from airflow.models.task_state_store import TaskStateStoreModel as Store
    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.models.trigger import Trigger
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    ti = session.scalar(
        select(TI).where(
            TI.dag_id == dag_id, TI.run_id == run_id, TI.task_id == task_id, TI.map_index == map_index
        )
    )
    if ti is None:
        return None
    scope = (
        Store.dag_id == dag_id,
        Store.run_id == run_id,
        Store.task_id == task_id,
        Store.map_index == map_index,
    )
    stored = dict(
        session.execute(select(Store.key, Store.value).where(*scope, Store.key.in_([STATE_KEY, OUTCOME_KEY])))
        .tuples()
        .all()
    )
    xcom = session.scalar(
        select(XComModel).where(
            XComModel.dag_id == dag_id,
            XComModel.run_id == run_id,
            XComModel.task_id == task_id,
            XComModel.map_index == map_index,
            XComModel.key == "return_value",
        )
    )
    rendered = session.scalar(
        select(RTIF.rendered_fields).where(
            RTIF.dag_id == dag_id, RTIF.run_id == run_id, RTIF.task_id == task_id, RTIF.map_index == map_index
        )
    )
    trigger = session.get(Trigger, ti.trigger_id) if ti.trigger_id is not None else None
    return TaskFacts(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=map_index,
        operator=ti.custom_operator_name or ti.operator,
        state=str(ti.state.value if hasattr(ti.state, "value") else ti.state) if ti.state else None,
        try_number=int(ti.try_number or 0),
        start_date=ti.start_date,
        end_date=ti.end_date,
        record=_mapping(_json(stored.get(STATE_KEY))),
        outcome=_mapping(_json(stored.get(OUTCOME_KEY))),
        result=XComModel.deserialize_value(xcom) if xcom is not None else None,
        rendered=dict(rendered or {}),
        trigger=_trigger_kwargs(trigger),
    )


def _mapping(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, dict) else None


def _trigger_kwargs(trigger: Any) -> dict[str, Any] | None:
    """Our trigger's kwargs (decrypted by the model); None for another trigger or undecryptable kwargs."""
    if trigger is None or not str(trigger.classpath).startswith("airflow_k8s_ml."):
        return None
    try:
        return dict(trigger.kwargs)
    except Exception:  # a rotated Fernet key must not break the page; the deadlines are then unknown
        return None
