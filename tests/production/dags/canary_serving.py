"""Serving DAGs for the production tier's canary tests: the reference model server
(``airflow_k8s_ml.workloads.serve``) behind one Service, a new model tried as a canary first.

``canary_serving`` deploys the model the run's conf names (``model_uri``; ``error_rate`` > 0 makes a bad
model: that share of predictions answers 500) with a canary of ``canary_percent`` (0: none) judged over a
short window; ``canary_rollback`` deploys the previous recorded revision again (``rollback_to="previous"``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param

from airflow_k8s_ml.operators import InferenceDeploymentOperator

#: The pods run on the host's Python: this checkout's package (the DAG file is a symlink into it).
REPO = Path(__file__).resolve().parents[3]
NAME = "canary-digits"
WINDOW = {"analysis_seconds": 30, "max_error_rate": 0.05, "min_requests": 3}
SERVER: dict[str, Any] = {
    "name": NAME,
    "namespace": "ml",
    "image": "ghcr.io/airflow-k8s-ml/workloads:0.1.0",
    "command": ["python", "-m", "airflow_k8s_ml.workloads.serve"],
    "env": {"PYTHONPATH": str(REPO), "ERROR_RATE": "{{ params.error_rate }}"},
    "env_from": ["s3-credentials"],
    "port": 8281,
    "replicas": 2,
    "readiness_path": "/readyz",
    "liveness_path": "/healthz",
    "deployment_options": {"probe_period_seconds": 1},
    "pod_options": {"termination_grace_period_seconds": 5},  # serve drains 2 s after SIGTERM
    "smoke_path": "/predict",
    "smoke_request": {"instances": [[0.0] * 64]},
    "expected_response": ["$.predictions"],
    "rollout_timeout": 120,
    # one retry for the machine, not the model: a starved API server can fail a task before it starts
    # (the supervisor's first call unanswered); a retry adopts whatever the first try left
    "retries": 1,
    "retry_delay": timedelta(seconds=1),
}
PARAMS = {
    "model_uri": Param("s3://ml-models/base-model/step-1/", type="string"),
    "error_rate": Param(0.0, type="number", minimum=0, maximum=1),
    "canary_percent": Param(0, type="integer", minimum=0, maximum=99),
}

with DAG("canary_serving", schedule=None, max_active_runs=1, params=PARAMS, tags=["test"]):
    InferenceDeploymentOperator(
        task_id="deploy",
        model_uri="{{ params.model_uri }}",
        canary={"percent": "{{ params.canary_percent }}", **WINDOW},
        **SERVER,
    )

with DAG("canary_rollback", schedule=None, max_active_runs=1, params=PARAMS, tags=["test"]):
    InferenceDeploymentOperator(
        task_id="deploy",
        model_uri="{{ params.model_uri }}",
        rollback_to="previous",
        **SERVER,
    )
