"""A small PyTorchJob DAG for the production tier's eviction run: a master and one worker, each saying it
waits, then waiting for a release file (the ``release`` Param) before it finishes. The test evicts the
worker while both wait; ``retries=0``, so the run succeeds in its one try or not at all. Ranks that do not
talk to each other are what a PyTorchJob (training-operator v1, ``restart_policy="OnFailure"``) can carry
through an eviction: the controller recreates the worker under its name (docs/operators.md, "What each kind
can do")."""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param

from airflow_k8s_ml.operators import PyTorchJobOperator

CODE = (
    "import os, pathlib, sys, time\n"
    "print('rank', os.environ['RANK'], 'waiting', flush=True)\n"
    "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.2)\n"
    "print('rank', os.environ['RANK'], 'done', flush=True)\n"
)

with DAG(
    "pytorch_eviction",
    schedule=None,
    max_active_runs=1,
    tags=["test"],
    params={"release": Param("/nonexistent", type="string", description="The file that ends the wait.")},
):
    PyTorchJobOperator(
        task_id="train",
        namespace="ml",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", CODE, "{{ params.release }}"],
        workers=1,
        retries=0,
        run_timeout=timedelta(minutes=10),
        pod_options={"termination_grace_period_seconds": 2},
    )
