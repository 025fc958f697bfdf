"""``BatchInferenceJobOperator``: score a batch once, in a Job.

The operator injects ``MODEL_URI``, ``INPUT_URI`` and ``OUTPUT_URI`` into the pod; its XCom adds the
``output_uri``. For a schedule kept by Kubernetes rather than Airflow, see
``example_batch_inference_cronjob.py``.
"""

from __future__ import annotations

from datetime import timedelta

from _scripts import SCORE
from airflow.sdk import DAG, Param

from airflow_k8s_ml.checkpoints import run_folder
from airflow_k8s_ml.operators import BatchInferenceJobOperator

with DAG(
    "example_batch_inference_job",
    schedule=None,
    tags=["example"],
    user_defined_filters={"run_folder": run_folder},
    params={"model_uri": Param("s3://examples/models/step-1/", type="string", description="the model")},
):
    BatchInferenceJobOperator(
        task_id="score",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", SCORE],
        env_from=["s3-credentials"],
        model_uri="{{ params.model_uri }}",  # or the gate's XCom: "{{ ti.xcom_pull(task_ids='gate') }}"
        input_uri="s3://examples/batches/",
        output_uri="s3://examples/predictions/{{ run_id | run_folder }}/",  # never the input prefix
        run_timeout=timedelta(minutes=5),
    )
