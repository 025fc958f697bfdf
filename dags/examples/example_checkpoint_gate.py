"""``CheckpointCheckOperator``: gate the newest complete checkpoint on a metric.

A short training run commits two checkpoints; the gate finds the newest complete one, checks its files
against the checksums S3 stored (nothing is downloaded) and applies the rule. Its XCom is
``{"uri", "step", "metrics", "created_at"}``, what a deploy or a batch scoring takes as its model.
"""

from __future__ import annotations

from datetime import timedelta

from _scripts import TRAIN
from airflow.sdk import DAG

from airflow_k8s_ml.checkpoints import run_folder
from airflow_k8s_ml.operators import CheckpointCheckOperator, FineTuneJobOperator

CHECKPOINTS = "s3://examples/gate/{{ run_id | run_folder }}"

with DAG(
    "example_checkpoint_gate",
    schedule=None,
    tags=["example"],
    user_defined_filters={"run_folder": run_folder},
):
    train = FineTuneJobOperator(
        task_id="train",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", TRAIN],
        args=["2"],
        env_from=["s3-credentials"],
        checkpoint_uri=CHECKPOINTS,
        run_timeout=timedelta(minutes=2),
    )
    gate = CheckpointCheckOperator(
        task_id="gate",
        base_uri=CHECKPOINTS,
        metric_rules={"val_accuracy": ">= 0.6"},  # fails the task, listing each failed rule, when not met
    )
    train >> gate
