"""DAGs whose pod never starts, for the production tier's stuck-pod test: one asks for a GPU the node does
not have (Unschedulable), one for an image the registry refuses (the tier's cluster denies
``unpullable.example/*``). Short budgets, no retries: the test reads the stuck line in the task log, then
the failure naming the cause. The budget outlasts the 30 s within which the stuck line is promised, with
a margin for a loaded machine (the budgets count from the workload's creation, before the deferral)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG

from airflow_k8s_ml.operators import FineTuneJobOperator

UNPULLABLE = "unpullable.example/trainer:1"
BUDGET = 40
COMMON: dict[str, Any] = {"namespace": "ml", "command": ["python", "-c", "print('never runs')"], "retries": 0}

with DAG("stuck_unschedulable", schedule=None, catchup=False, tags=["test"]):
    FineTuneJobOperator(
        task_id="train",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        gpus=1,
        admission_timeout=BUDGET,
        **COMMON,
    )

with DAG("stuck_image_pull", schedule=None, catchup=False, tags=["test"]):
    FineTuneJobOperator(task_id="train", image=UNPULLABLE, startup_timeout=BUDGET, **COMMON)
