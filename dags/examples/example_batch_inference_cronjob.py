"""``BatchInferenceCronJobOperator``: a nightly scoring CronJob, applied idempotently, plus a run now.

Re-running the task updates the CronJob in place (``created`` / ``configured`` / ``unchanged`` in the
XCom); ``run_now=True`` also creates a Job from it, as ``kubectl create job --from=cronjob/...`` does, and
waits for that Job like a training operator waits (deadlines, logs). Killing the task deletes the run-now
Job, never the CronJob.
"""

from __future__ import annotations

from datetime import timedelta

from _scripts import SCORE
from airflow.sdk import DAG, Param

from airflow_k8s_ml.operators import BatchInferenceCronJobOperator

with DAG(
    "example_batch_inference_cronjob",
    schedule=None,
    tags=["example"],
    params={"model_uri": Param("s3://examples/models/step-1/", type="string", description="the model")},
):
    BatchInferenceCronJobOperator(
        task_id="nightly_scoring",
        name="example-scoring",
        schedule="0 3 * * *",  # the API server's cron grammar, checked at parse time
        time_zone="Europe/Amsterdam",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", SCORE],
        env_from=["s3-credentials"],
        model_uri="{{ params.model_uri }}",
        input_uri="s3://examples/batches/",
        output_uri="s3://examples/predictions/nightly/",
        run_now=True,
        run_timeout=timedelta(minutes=5),  # the run-now Job's budget
    )
