"""A small TFJob DAG for the production tier: two Workers and a parameter server run the reference workload
(``airflow_k8s_ml.workloads.tf_topology``), which proves the cluster spec of ``TF_CONFIG`` over sockets.
Worker 0 coordinates (no Chief) and the TFJob succeeds when every Worker has (``success_policy``
``"AllWorkers"``), so the clean pod policy (``Running``) stops only the parameter server. With a Chief, the
job succeeds when the Chief does and a Worker still running then is stopped with it: on a loaded machine
that raced the Worker's last line, which the relay then names as not relayed (tests/integration covers the
Chief)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from airflow.sdk import DAG

from airflow_k8s_ml.operators import TFJobOperator

#: The pods run on the host's Python: this checkout's package (the DAG file is a symlink into it).
REPO = Path(__file__).resolve().parents[3]

with DAG("tf_training", schedule=None, max_active_runs=2, tags=["test"]):
    TFJobOperator(
        task_id="train",
        namespace="ml",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-m", "airflow_k8s_ml.workloads.tf_topology", "--timeout", "120"],
        env={"PYTHONPATH": str(REPO)},
        workers=2,
        ps=1,
        chief=False,
        success_policy="AllWorkers",
        run_timeout=timedelta(minutes=5),
        pod_options={"termination_grace_period_seconds": 2},
    )
