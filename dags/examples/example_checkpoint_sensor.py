"""``CheckpointSensor``: wait until a newer complete checkpoint appears.

Useful when training runs outside this DAG (another team's pipeline, a notebook): the sensor polls the
checkpoint folder from the triggerer and succeeds with the first complete checkpoint newer than a step (or a
time); a half-written one (no ``MANIFEST.json`` yet, or a checksum mismatch) never counts.
"""

from __future__ import annotations

from datetime import timedelta

from _scripts import TRAIN
from airflow.sdk import DAG

from airflow_k8s_ml.checkpoints import run_folder
from airflow_k8s_ml.operators import FineTuneJobOperator
from airflow_k8s_ml.sensors import CheckpointSensor

CHECKPOINTS = "s3://examples/sensor/{{ run_id | run_folder }}"

with DAG(
    "example_checkpoint_sensor",
    schedule=None,
    tags=["example"],
    user_defined_filters={"run_folder": run_folder},
):
    wait = CheckpointSensor(
        task_id="wait_for_step_2",
        base_uri=CHECKPOINTS,
        newer_than_step=1,  # only step 2 or later counts
        deadline=timedelta(minutes=5),  # then the sensor fails (soft_fail=True would skip instead)
        poke_interval=2,
    )
    train = FineTuneJobOperator(  # stands for the training that runs elsewhere
        task_id="training_elsewhere",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", TRAIN],
        args=["2"],
        env_from=["s3-credentials"],
        checkpoint_uri=CHECKPOINTS,
        run_timeout=timedelta(minutes=2),
    )
    # In your DAG the training runs elsewhere and the sensor alone waits; here it runs first, so that
    # `airflow dags test`, which runs one task at a time, has a checkpoint to find.
    train >> wait
