"""``InferenceDeploymentOperator``: serve a model behind a Service, with a smoke test and rollback.

Applies a Deployment and a Service (re-runs update them in place), waits for the rollout, sends one request
through the API server's service proxy and checks the answer; a rollout or smoke test that fails rolls the
Deployment back to the revision that served before, and the task fails saying why.
"""

from __future__ import annotations

from datetime import timedelta

from _scripts import SERVE
from airflow.sdk import DAG, Param

from airflow_k8s_ml.operators import InferenceDeploymentOperator

with DAG(
    "example_inference_deployment",
    schedule=None,
    tags=["example"],
    params={"model_uri": Param("s3://examples/models/step-1/", type="string", description="the model")},
):
    InferenceDeploymentOperator(
        task_id="deploy",
        name="example-model",
        model_uri="{{ params.model_uri }}",  # a new URI is what rolls the pods
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", SERVE],
        replicas=1,
        requests={"cpu": "250m", "memory": "256Mi"},
        smoke_path="/predict",
        smoke_request={"inputs": [[0.0, 1.0]]},
        expected_response={"prediction": 1},
        rollout_timeout=timedelta(minutes=5),
    )
