"""``FineTuneJobOperator``: train in a batch/v1 Job that must finish within 2 minutes.

The pod commits a checkpoint per step under ``CHECKPOINT_URI`` (one folder per run: ``run_folder`` makes
the run id a path segment, one-to-one). A retry starts a new Job that resumes after the newest complete
checkpoint (``RESUME_FROM``), so a failure loses at most one step.
"""

from __future__ import annotations

from datetime import timedelta

from _scripts import TRAIN
from airflow.sdk import DAG

from airflow_k8s_ml.checkpoints import run_folder
from airflow_k8s_ml.operators import FineTuneJobOperator

with DAG(
    "example_finetune_job", schedule=None, tags=["example"], user_defined_filters={"run_folder": run_folder}
):
    FineTuneJobOperator(
        task_id="train",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",  # your training image (non-root USER, this package)
        command=["python", "-c", TRAIN],
        args=["3"],  # steps
        env_from=["s3-credentials"],  # the Secret with the S3 endpoint and keys, for the pod
        requests={"cpu": "1", "memory": "1Gi"},
        checkpoint_uri="s3://examples/finetune/{{ run_id | run_folder }}",
        resume_from="latest",  # each attempt starts after the newest complete checkpoint of this run
        run_timeout=timedelta(minutes=2),  # "fail after 2 minutes": deleted, and the task fails saying so
        retries=1,
    )
