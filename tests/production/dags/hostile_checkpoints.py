"""A training task whose checkpoint folder the test fills with hostile manifests (``params.checkpoint_uri``,
a ``file://`` folder on this machine), so the real API server's Training tab reads them
(``tests/production/test_hostile_checkpoints.py``). The task itself only has to run: the tab reads the
rendered ``checkpoint_uri`` of a task instance that has run."""

from __future__ import annotations

from airflow.sdk import DAG, Param

from airflow_k8s_ml.operators import FineTuneJobOperator

with DAG(
    "hostile_checkpoints",
    schedule=None,
    tags=["test"],
    params={"checkpoint_uri": Param("file:///tmp/none", type="string")},
):
    FineTuneJobOperator(
        task_id="train",
        namespace="ml",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", "print('trained', flush=True)"],
        checkpoint_uri="{{ params.checkpoint_uri }}",
        retries=0,
    )
