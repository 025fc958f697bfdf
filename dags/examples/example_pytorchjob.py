"""``PyTorchJobOperator``: a Kubeflow PyTorchJob, one master and one worker.

Every replica gets the variables torchrun and ``torch.distributed`` read (``MASTER_ADDR``, ``MASTER_PORT``,
``WORLD_SIZE``, ``RANK``); the task log shows each replica's lines once, prefixed ``[master-0]``,
``[worker-0]``. The job succeeds when the master does. Needs the Kubeflow training operator on a real
cluster; the local cluster serves ``kubeflow.org/v1`` itself.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG

from airflow_k8s_ml.operators import PyTorchJobOperator

#: Stands for ``torchrun train.py``: say which rank this replica is in which world.
HELLO = "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], flush=True)"

with DAG("example_pytorchjob", schedule=None, tags=["example"]):
    PyTorchJobOperator(
        task_id="ddp",
        image="ghcr.io/airflow-k8s-ml/workloads:0.1.0",
        command=["python", "-c", HELLO],
        workers=1,  # worker replicas besides the master
        requests={"cpu": "1", "memory": "1Gi"},
        startup_timeout=timedelta(minutes=5),  # pods Pending (image pulls) for longer: deleted, task failed
        run_timeout=timedelta(minutes=10),
    )
